// Second-context probe (written 2026-12-03, session 22; not yet run): can a
// proxy's work on a stream of a SECOND context on the same GPU get past the
// two things that stall emu's proxy today (bench/results/emu-work-queue-
// 20261203.md): work queued behind a kernel in a hardware work queue it shares
// (CUDA_DEVICE_MAX_CONNECTIONS=1 makes that certain), and a kernel holding
// every SM? A second context has its own queues, but its kernels wait for a
// time slice (2.3 ms, bench/results/emu-pageable-20261201.md); its memory ops
// did not. Unknown: its large copies (copy engines).
//
// Per iteration: the primary context (runtime API) launches a grid of one
// CTA per SM that spins until a flag is set (or 2 s: "starved"), then queues
// a kernel and a copy behind it on the same stream (as a user's next step
// would). After 50 ms the side work is issued; its last step sets the flag.
// Printed: the time from issuing it to the grid's end.
// Side work (argv[1]):
//   p_memop / p_copy: on a stream of the primary context (the emu proxy today);
//   c2_memop / c2_copy: on a stream of a second context (cuCtxCreate).
// *_copy copies `bytes` (argv[2]) then sets the flag with a memory op. The
// buffers and the flag are VMM allocations (cuMemCreate/cuMemMap, as the
// symmetric heap's), mapped for the device: the question includes whether the
// second context can use them (an error says no).
// Build: nvcc -O2 -gencode=arch=compute_90a,code=sm_90a ctx2_probe.cu -lcuda -o ctx2_probe
// Run: ctx2_probe <side> <bytes> <iterations>   (also under CUDA_DEVICE_MAX_CONNECTIONS=1, and under MPS)
#include <cuda.h>
#include <cuda_runtime.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "probe_common.cuh"

#define DK(x)                                                                       \
  do {                                                                              \
    CUresult r_ = (x);                                                              \
    if (r_ != CUDA_SUCCESS) {                                                       \
      const char* s_ = nullptr;                                                     \
      cuGetErrorString(r_, &s_);                                                    \
      printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, s_ ? s_ : "?");              \
      exit(1);                                                                      \
    }                                                                               \
  } while (0)

__global__ void spin(volatile unsigned* flag, unsigned* starved, unsigned long long limit_ns) {
  if (threadIdx.x != 0) return;
  const unsigned long long t0 = gtime();
  while (!*flag) {
    if (gtime() - t0 > limit_ns) {
      atomicAdd(starved, 1u);
      return;
    }
    __nanosleep(500);
  }
}

__global__ void noop() {}

int main(int argc, char** argv) {
  if (argc < 4) {
    printf("usage: %s p_memop|p_copy|c2_memop|c2_copy bytes iterations\n", argv[0]);
    return 2;
  }
  const char* side = argv[1];
  const size_t bytes = strtoull(argv[2], nullptr, 10);
  const int iters = atoi(argv[3]);
  const bool second = !strncmp(side, "c2_", 3);
  const bool copy = strstr(side, "copy") != nullptr;
  CK(cudaSetDevice(0));
  CK(cudaFree(nullptr));  // the primary context, current on this thread
  CUcontext primary;
  DK(cuCtxGetCurrent(&primary));
  CUdevice dev;
  DK(cuDeviceGet(&dev, 0));
  int sms = 0, optin = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
  CK(cudaFuncSetAttribute(spin, cudaFuncAttributeMaxDynamicSharedMemorySize, optin));

  // One VMM allocation: [flag page | src | dst].
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  size_t gran = 0;
  DK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  const size_t total = ((4096 + 2 * bytes + gran - 1) / gran) * gran;
  CUmemGenericAllocationHandle h;
  DK(cuMemCreate(&h, total, &prop, 0));
  CUdeviceptr base;
  DK(cuMemAddressReserve(&base, total, 0, 0, 0));
  DK(cuMemMap(base, total, 0, h, 0));
  CUmemAccessDesc acc{};
  acc.location = prop.location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  DK(cuMemSetAccess(base, total, &acc, 1));
  unsigned* flag = reinterpret_cast<unsigned*>(base);
  unsigned* starved = flag + 1;
  const CUdeviceptr src = base + 4096, dst = base + 4096 + bytes;
  CK(cudaMemset(reinterpret_cast<void*>(base), 0, total));

  cudaStream_t s;  // the "user" stream: the grid, then queued work
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CUstream side_stream;
  CUcontext ctx2 = nullptr;
  if (second) {
    DK(cuCtxCreate(&ctx2, nullptr, 0, dev));  // pushed: current now
    DK(cuStreamCreate(&side_stream, CU_STREAM_NON_BLOCKING));
    // Warm up the path in the second context with the GPU idle.
    if (copy) DK(cuMemcpyDtoDAsync(dst, src, bytes, side_stream));
    DK(cuStreamWriteValue32(side_stream, base + 64, 0, 0));  // a scratch word of the flag page
    DK(cuStreamSynchronize(side_stream));
    DK(cuCtxPopCurrent(nullptr));
  } else {
    CK(cudaStreamCreateWithFlags(reinterpret_cast<cudaStream_t*>(&side_stream), cudaStreamNonBlocking));
    if (copy) DK(cuMemcpyDtoDAsync(dst, src, bytes, side_stream));
    DK(cuStreamSynchronize(side_stream));
  }
  noop<<<1, 32, 0, s>>>();
  CK(cudaDeviceSynchronize());
  const char* conn = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  printf("ctx2_probe side %s, %zu bytes, SMs %d, CUDA_DEVICE_MAX_CONNECTIONS=%s\n", side, bytes, sms,
         conn ? conn : "(unset)");
  for (int i = 0; i < iters; ++i) {
    CK(cudaMemset(flag, 0, 8));
    CK(cudaDeviceSynchronize());
    spin<<<sms, 32, optin, s>>>(flag, starved, 2000000000ull);
    CK(cudaGetLastError());
    noop<<<1, 32, 0, s>>>();  // the user's next step, queued behind the grid
    CK(cudaMemcpyAsync(reinterpret_cast<void*>(dst), reinterpret_cast<void*>(src), 4096, cudaMemcpyDeviceToDevice, s));
    usleep(50000);
    const auto t0 = std::chrono::steady_clock::now();
    if (second) DK(cuCtxPushCurrent(ctx2));
    if (copy) DK(cuMemcpyDtoDAsync(dst, src, bytes, side_stream));
    DK(cuStreamWriteValue32(side_stream, reinterpret_cast<CUdeviceptr>(flag), 1, 0));
    if (second) DK(cuCtxPopCurrent(nullptr));
    CK(cudaStreamSynchronize(s));
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (second) DK(cuCtxPushCurrent(ctx2));
    DK(cuStreamSynchronize(side_stream));
    if (second) DK(cuCtxPopCurrent(nullptr));
    unsigned st = 0;
    CK(cudaMemcpy(&st, starved, 4, cudaMemcpyDeviceToHost));
    printf("side %s iter %d: side to end %.3f ms, starved CTAs %u%s\n", side, i, ms, st, st ? "  STARVED" : "");
    fflush(stdout);
  }
  return 0;
}
