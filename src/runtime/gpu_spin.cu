#include "src/runtime/gpu_spin.hpp"

#include "device/ptx.cuh"
#include "mkernel/error.hpp"

namespace mk {

namespace {

__global__ void spin_kernel(uint64_t ns) {
  const uint64_t t0 = dev::globaltimer();
  while (dev::globaltimer() - t0 < ns) {
  }
}

}  // namespace

void gpu_spin(int64_t cycles, cudaStream_t stream, const char* caller) {
  if (cycles < 0 || cycles > kMaxSpinCycles)  // (before CUDA: a CPU-only caller hears it too)
    fail(caller, ": cycles must be in [0, ", kMaxSpinCycles, "] (got ", cycles, ")");
  if (cycles == 0) return;
  int device = 0, khz = 0;
  MK_CUDA_CHECK(cudaGetDevice(&device));
  MK_CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device));  // the top SM clock, kHz
  if (khz <= 0)  // (a spin of the cycles at 1 kHz would take hours)
    fail(caller, ": device ", device, " reports no SM clock rate (cudaDevAttrClockRate ", khz, ")");
  spin_kernel<<<1, 1, 0, stream>>>(static_cast<uint64_t>(static_cast<double>(cycles) * 1e6 / khz));
  MK_CUDA_CHECK(cudaGetLastError());
}

}  // namespace mk
