// When does a process sharing one GPU by time-slicing (MK_SHARE_GPUS=1) hear
// that its kernel trapped? Session 33 (2026-12-04) saw rank 1 of a 2-rank job
// on one H200 stay in cudaStreamSynchronize for 45+ s after its kernel's
// bounded wait trapped, while rank 0 (trapped first, error seen) sat in a
// bootstrap barrier holding its context. This probe isolates that: a kernel
// of 131 x 384 threads whose block 0 thread 128 traps after `trap_ms` while
// the block's other warps wait at __syncthreads and the other blocks spin to
// a 30 s bound (as ag_gemm_kernel's block 0 did); the host prints when the
// sync returns, then keeps its context `hold_ms` before exiting.
//   nvcc -gencode=arch=compute_90a,code=sm_90a -o trap_share_probe tools/wip/trap_share_probe.cu
//   trap_share_probe <label> <trap_ms> <hold_ms>   (trap_ms 0: no trap)
#include <chrono>
#include <thread>

#include "probe_common.cuh"

__global__ void trap_kernel(unsigned long long trap_ns, unsigned long long bound_ns) {
  const unsigned long long t0 = gtime();
  if (blockIdx.x == 0) {
    if (threadIdx.x == 128) {
      while (gtime() - t0 < (trap_ns ? trap_ns : bound_ns)) {
      }
      if (trap_ns) __trap();
    }
    __syncthreads();
    return;
  }
  while (gtime() - t0 < bound_ns) {
  }
}

int main(int argc, char** argv) {
  if (argc != 4) {
    printf("usage: %s <label> <trap_ms> <hold_ms>\n", argv[0]);
    return 2;
  }
  const char* label = argv[1];
  const long trap_ms = atol(argv[2]), hold_ms = atol(argv[3]);
  const auto t0 = std::chrono::steady_clock::now();
  auto ms = [&] {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  CK(cudaFree(nullptr));
  printf("%s: context at %.0f ms\n", label, ms());
  fflush(stdout);
  trap_kernel<<<131, 384>>>(trap_ms * 1000000ull, 30000ull * 1000000ull);
  CK(cudaGetLastError());
  cudaError_t e = cudaDeviceSynchronize();
  printf("%s: sync returned at %.0f ms: %s\n", label, ms(), cudaGetErrorString(e));
  fflush(stdout);
  std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
  printf("%s: exit at %.0f ms\n", label, ms());
  return 0;
}
