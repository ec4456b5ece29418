#include "src/runtime/gpu_spin.hpp"

#include "mkernel/error.hpp"

namespace mk {

namespace {

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin_kernel(uint64_t ns) {
  const uint64_t t0 = global_ns();
  while (global_ns() - t0 < ns) {
  }
}

}  // namespace

void gpu_spin(int64_t cycles, cudaStream_t stream) {
  if (cycles < 0 || cycles > kMaxSpinCycles)
    fail("gpu_spin: cycles must be in [0, ", kMaxSpinCycles, "] (got ", cycles, ")");
  if (cycles == 0) return;
  int dev = 0, khz = 0;
  MK_CUDA_CHECK(cudaGetDevice(&dev));
  MK_CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev));  // the top SM clock, kHz
  if (khz <= 0)  // (a spin of the cycles at 1 kHz would take hours)
    fail("gpu_spin: device ", dev, " reports no SM clock rate (cudaDevAttrClockRate ", khz, ")");
  spin_kernel<<<1, 1, 0, stream>>>(static_cast<uint64_t>(static_cast<double>(cycles) * 1e6 / khz));
  MK_CUDA_CHECK(cudaGetLastError());
}

}  // namespace mk
