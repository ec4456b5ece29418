// Session 62: does a kernel that traps on a GPU time-sliced between two processes end its process's
// cudaDeviceSynchronize? (The abort scenario with MK_SHARE_GPUS=1: rank 1's wait timed out and trapped, rank 0's
// wait then saw the abort and trapped; rank 0's synchronize returned the error, rank 1's never did, its thread
// spinning in cuCtxSynchronize.) No mkernel code: one process runs one kernel of 1 thread that spins <spin_ms>
// by %globaltimer, then traps (with or without a printf first) or returns. The host bounds its own wait (alarm).
// Build: nvcc -O2 -gencode=arch=compute_90a,code=sm_90a -o trap_share trap_share.cu
// Run:   trap_share <name> <spin_ms> <trap|printf-trap|return>
#include <cuda_runtime.h>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

__device__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin_then(unsigned long long ns, int how) {
  const unsigned long long t0 = now_ns();
  while (now_ns() - t0 < ns) {}
  if (how == 1) __trap();
  if (how == 2) {
    printf("device: trapping after %llu ms\n", ns / 1000000);
    __trap();
  }
}

static const char* g_name = "";
static std::chrono::steady_clock::time_point g_t0;
static void on_alarm(int) {
  char buf[160];
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - g_t0).count();
  const int n = std::snprintf(buf, sizeof buf, "%s: STILL in cudaDeviceSynchronize after %.1f s; exiting\n", g_name, s);
  (void)!write(1, buf, n);
  _exit(3);
}

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: trap_share <name> <spin_ms> <trap|printf-trap|return>\n");
    return 2;
  }
  g_name = argv[1];
  const unsigned long long ns = std::strtoull(argv[2], nullptr, 10) * 1000000ull;
  const int how = !std::strcmp(argv[3], "trap") ? 1 : !std::strcmp(argv[3], "printf-trap") ? 2 : 0;
  cudaFree(nullptr);  // context first, so that both processes' kernels start together
  std::signal(SIGALRM, on_alarm);
  usleep(300000);
  g_t0 = std::chrono::steady_clock::now();
  alarm(20);
  spin_then<<<1, 1>>>(ns, how);
  const cudaError_t e = cudaDeviceSynchronize();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - g_t0).count();
  std::printf("%s: spin %s ms then %s: synchronize returned after %.2f s: %s\n", g_name, argv[2], argv[3], s,
              cudaGetErrorString(e));
  return 0;
}
