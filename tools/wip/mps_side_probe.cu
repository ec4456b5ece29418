// Side-work probe (2026-12-03, session 22): while a grid of G CTAs (one per SM:
// all of the shared memory each) spins, can a small piece of work issued on
// another stream of the same process run? That is what emu's proxy needs
// (src/net/emu: copies, then signal adds as a one-CTA kernel or stream memory
// ops) while an op's persistent grid waits for it. Under MPS, two clients run
// this at once (tools/wip/mps_side_probe.sh).
// Per iteration: the grid starts; after PRE ms the host issues the side work,
// whose last step sets a flag the grid polls; the grid ends when it sees the
// flag or after 2 s (then "starved"). Printed: CTAs resident at once, the time
// from issuing the side work to the grid's end, whether it starved.
// Side work: kernel (1 CTA, 32 threads, sets the flag), kernel_hi (the same on
// a stream of the highest priority), memop (cuStreamWriteValue32), copy (256 KB
// aligned D2D copy, then memop), copy_hi (the same on a stream of the highest
// priority), ucopy (256 KB - 3 at odd offsets, then memop), kcopy (a 1-CTA
// kernel copies the 256 KB, then sets the flag: no copy engine).
// Environment: PROBE_QUEUED=copy|kernel|both|none (default none): work queued on
// the grid's stream behind it, as a user's next copy or kernel would be
// (it cannot start before the grid ends); PROBE_STREAMS=K: K streams created
// between the grid's stream and the side stream (moves the side stream to
// another hardware work queue when the driver assigns them in turn).
// Build: nvcc -O2 -gencode=arch=compute_90a,code=sm_90a mps_side_probe.cu -lcuda -o mps_side_probe
// Run: mps_side_probe <grid; 0: every reported SM, -n: all but n> <side> <iterations> <label> [pre_ms]
#include <cuda.h>
#include <cuda_runtime.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "probe_common.cuh"

__global__ void spin(volatile unsigned* flag, unsigned* arrived, unsigned* at_once, unsigned* starved,
                     unsigned long long limit_ns) {
  if (threadIdx.x != 0) return;
  const unsigned long long t0 = gtime();
  atomicAdd(arrived, 1u);
  for (;;) {
    atomicMax(at_once, *static_cast<volatile unsigned*>(arrived));
    if (*flag) break;
    if (gtime() - t0 > limit_ns) {
      atomicAdd(starved, 1u);
      break;
    }
    __nanosleep(500);
  }
}

__global__ void copy_then_flag(const int4* src, int4* dst, size_t n, unsigned* flag) {
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence_system();
    atomicExch_system(flag, 1u);
  }
}

__global__ void noop() {}

__global__ void set_flag(unsigned* flag) {
  if (threadIdx.x == 0) {
    __threadfence_system();
    atomicExch_system(flag, 1u);
  }
}

int main(int argc, char** argv) {
  if (argc < 5) {
    printf("usage: %s grid side iters label [pre_ms]\n", argv[0]);
    return 2;
  }
  int grid = atoi(argv[1]);
  const char* side = argv[2];
  const int iters = atoi(argv[3]);
  const char* label = argv[4];
  const int pre_ms = argc > 5 ? atoi(argv[5]) : 100;
  int sms = 0, optin = 0, mps = -1;
  CK(cudaSetDevice(0));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
  if (cudaDeviceGetAttribute(&mps, cudaDevAttrMpsEnabled, 0) != cudaSuccess) cudaGetLastError();
  if (grid <= 0) grid = sms + grid;  // 0: every reported SM, -n: all but n
  CK(cudaFuncSetAttribute(spin, cudaFuncAttributeMaxDynamicSharedMemorySize, optin));
  int lo = 0, hi = 0;
  CK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
  const char* queued = getenv("PROBE_QUEUED") ? getenv("PROBE_QUEUED") : "none";
  const int extra = getenv("PROBE_STREAMS") ? atoi(getenv("PROBE_STREAMS")) : 0;
  cudaStream_t big, s, dummy[64];
  CK(cudaStreamCreateWithFlags(&big, cudaStreamNonBlocking));
  for (int i = 0; i < extra && i < 64; ++i) CK(cudaStreamCreateWithFlags(&dummy[i], cudaStreamNonBlocking));
  const bool high = strstr(side, "_hi") != nullptr;
  CK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, high ? hi : lo));
  unsigned* w;  // flag, arrived, at_once, starved
  CK(cudaMalloc(&w, 64));
  char *a, *b;
  const size_t bytes = 256 << 10;
  CK(cudaMalloc(&a, bytes + 64));
  CK(cudaMalloc(&b, bytes + 64));
  CK(cudaMemset(a, 1, bytes + 64));
  // Warm everything up once with the GPU idle (lazy loading: no first load behind the grid).
  set_flag<<<1, 32, 0, s>>>(w);
  CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s));
  CK(cudaMemcpyAsync(b + 3, a + 1, bytes - 3, cudaMemcpyDeviceToDevice, s));
  copy_then_flag<<<1, 256, 0, s>>>(reinterpret_cast<int4*>(a), reinterpret_cast<int4*>(b), bytes / 16, w);
  noop<<<1, 32, 0, big>>>();
  CK(cudaMemcpyAsync(b, a, 4096, cudaMemcpyDeviceToDevice, big));
  CK(cudaDeviceSynchronize());
  printf("%s: reported SMs %d, MPS %d, grid %d, side %s, pre %d ms, queued %s, streams between %d\n", label, sms,
         mps, grid, side, pre_ms, queued, extra);
  for (int i = 0; i < iters; ++i) {
    CK(cudaMemset(w, 0, 64));
    CK(cudaDeviceSynchronize());
    spin<<<grid, 32, optin, big>>>(w, w + 1, w + 2, w + 3, 2000000000ull);
    CK(cudaGetLastError());
    if (!strcmp(queued, "copy")) CK(cudaMemcpyAsync(b + 8192, a + 8192, 4096, cudaMemcpyDeviceToDevice, big));
    if (!strcmp(queued, "kernel")) noop<<<1, 32, 0, big>>>();
    if (!strcmp(queued, "both")) {
      CK(cudaMemcpyAsync(b + 8192, a + 8192, 4096, cudaMemcpyDeviceToDevice, big));
      noop<<<1, 32, 0, big>>>();
    }
    usleep(pre_ms * 1000);
    const auto t0 = std::chrono::steady_clock::now();
    if (!strncmp(side, "kernel", 6)) {
      set_flag<<<1, 32, 0, s>>>(w);
      CK(cudaGetLastError());
    } else if (!strcmp(side, "kcopy")) {
      copy_then_flag<<<1, 256, 0, s>>>(reinterpret_cast<int4*>(a), reinterpret_cast<int4*>(b), bytes / 16, w);
      CK(cudaGetLastError());
    } else {
      if (!strncmp(side, "copy", 4)) CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s));
      if (!strcmp(side, "ucopy")) CK(cudaMemcpyAsync(b + 3, a + 1, bytes - 3, cudaMemcpyDeviceToDevice, s));
      CUresult r = cuStreamWriteValue32(reinterpret_cast<CUstream>(s), reinterpret_cast<CUdeviceptr>(w), 1, 0);
      if (r != CUDA_SUCCESS) {
        printf("cuStreamWriteValue32 failed: %d\n", int(r));
        return 1;
      }
    }
    CK(cudaStreamSynchronize(big));  // includes the queued work, which follows the grid
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    CK(cudaStreamSynchronize(s));
    unsigned h[4];
    CK(cudaMemcpy(h, w, 16, cudaMemcpyDeviceToHost));
    printf("%s grid %d side %s iter %d: at once %u of %d, side to end %.2f ms, starved CTAs %u%s\n", label, grid, side,
           i, h[2], grid, ms, h[3], h[3] ? "  STARVED" : "");
    fflush(stdout);
  }
  return 0;
}
