#include "src/runtime/gpu_spin.hpp"

#include "device/ptx.cuh"
#include "mkernel/error.hpp"

#include <atomic>

namespace mk {

namespace {

// The top SM clock per device, kHz, read once: cudaDevAttrClockRate costs ~0.5 ms a query on an H100 with CUDA 13
// (session 57: mk_gpu_spin took 510 us of host time a call), where a bench queues a spin before every timed call.
// 0: not read yet. Devices past the table are read on every call.
constexpr int kCachedDevices = 64;
std::atomic<int> g_top_khz[kCachedDevices];

int top_clock_khz(int device) {
  if (device >= 0 && device < kCachedDevices) {
    const int khz = g_top_khz[device].load(std::memory_order_relaxed);
    if (khz > 0) return khz;
  }
  int khz = 0;
  MK_CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device));
  if (khz > 0 && device >= 0 && device < kCachedDevices) g_top_khz[device].store(khz, std::memory_order_relaxed);
  return khz;
}

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
  int device = 0;
  MK_CUDA_CHECK(cudaGetDevice(&device));
  const int khz = top_clock_khz(device);  // the top SM clock, kHz
  if (khz <= 0)  // (a spin of the cycles at 1 kHz would take hours)
    fail(caller, ": device ", device, " reports no SM clock rate (cudaDevAttrClockRate ", khz, ")");
  spin_kernel<<<1, 1, 0, stream>>>(static_cast<uint64_t>(static_cast<double>(cycles) * 1e6 / khz));
  MK_CUDA_CHECK(cudaGetLastError());
}

}  // namespace mk
