// mkernel: per-call device scratch in stream order (stream_scratch.hpp).
#include "src/runtime/stream_scratch.hpp"

#include <mutex>
#include <string>
#include <vector>

#include "mkernel/error.hpp"
#include "src/runtime/device_health.hpp"

namespace mk {

namespace {

// A memory pool of the library's own per device (the process's default pool
// keeps its settings) that keeps what is freed (release threshold:
// everything), so that calls after the first take their block without the
// driver. Each call allocates on its stream and frees there after its
// kernel: calls on different streams never share a block, and no host
// synchronisation is needed. Pools live as long as the process (a
// cudaDeviceReset would leave the handle dangling, as it would the kernels'
// shared-memory opt-in). Its blocks are reused only where stream order or
// events already allow it, never by the driver adding a dependency on
// another stream's free (which could serialise, or deadlock against a kernel
// that waits on the other stream). Null when the pool cannot be made (then
// no scratch; not retried).
cudaMemPool_t scratch_pool(int device) {
  static std::mutex mu;
  static std::vector<cudaMemPool_t> pools;
  static std::vector<bool> tried;
  std::lock_guard<std::mutex> lock(mu);
  if (pools.size() <= size_t(device)) {
    pools.resize(size_t(device) + 1, nullptr);
    tried.resize(size_t(device) + 1, false);
  }
  if (!tried[device]) {
    tried[device] = true;
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    cudaMemPool_t pool = nullptr;
    // Relaxed: another thread may be capturing a graph in global mode.
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    cudaThreadExchangeStreamCaptureMode(&mode);
    const bool made = cudaMemPoolCreate(&pool, &props) == cudaSuccess;
    cudaThreadExchangeStreamCaptureMode(&mode);
    if (made) {
      uint64_t keep = UINT64_MAX;
      int no = 0;
      if (cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep) != cudaSuccess ||
          cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowInternalDependencies, &no) != cudaSuccess) {
        cudaGetLastError();
        teardown_call(cudaMemPoolDestroy(pool), "a scratch memory pool");
        pool = nullptr;
      }
      pools[device] = pool;
    }
    if (!pool) {
      cudaGetLastError();
      log(LogLevel::Info, "no memory pool for per-call scratch on device " + std::to_string(device) +
                              " (split GEMM tiles and claimed attention units are off)");
    }
  }
  return pools[device];
}

}  // namespace

StreamScratch::StreamScratch(size_t bytes, size_t zero_offset, size_t zero_bytes, cudaStream_t stream,
                             const char* what)
    : StreamScratch(bytes, zero_offset, zero_bytes, stream, what, nullptr, 0) {}

StreamScratch::StreamScratch(size_t bytes, size_t zero_offset, size_t zero_bytes, cudaStream_t stream,
                             const char* what, void* given, size_t given_bytes)
    : stream_(stream), what_(what) {
  if (zero_offset + zero_bytes > bytes) fail("internal: ", what, ": zeroed range past the scratch's end");
  if (given) {
    if (given_bytes < bytes)
      fail("workspace too small for ", what, ": ", given_bytes, " bytes given, ", bytes,
           " needed (the op's *_workspace_bytes() for these arguments)");
    if (reinterpret_cast<uintptr_t>(given) % 16)
      fail("workspace for ", what, " must be 16-byte aligned (got ", given, ")");
    ptr_ = given;
    zero(zero_offset, zero_bytes);
    return;
  }
  cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
  MK_CUDA_CHECK(cudaStreamIsCapturing(stream, &cap));
  if (cap != cudaStreamCaptureStatusNone) return;
  int dev = 0;
  MK_CUDA_CHECK(cudaGetDevice(&dev));
  cudaMemPool_t pool = scratch_pool(dev);
  if (!pool) return;
  if (cudaMallocFromPoolAsync(&ptr_, bytes, pool, stream) != cudaSuccess) {
    cudaGetLastError();  // no memory: none (clears only the allocation's own error)
    ptr_ = nullptr;
    return;
  }
  owned_ = true;
  zero(zero_offset, zero_bytes);
}

void StreamScratch::zero(size_t offset, size_t bytes) {
  if (!bytes || cudaMemsetAsync(static_cast<char*>(ptr_) + offset, 0, bytes, stream_) == cudaSuccess) return;
  const cudaError_t e = cudaGetLastError();
  if (owned_) teardown_call(cudaFreeAsync(ptr_, stream_), what_);
  ptr_ = nullptr;
  owned_ = false;
  fail("zeroing ", what_, " failed: ", cudaGetErrorString(e));
}

StreamScratch::~StreamScratch() {
  if (ptr_ && owned_) teardown_call(cudaFreeAsync(ptr_, stream_), what_);
}

void StreamScratch::release() {
  void* p = owned_ ? ptr_ : nullptr;
  ptr_ = nullptr;
  owned_ = false;
  if (p) MK_CUDA_CHECK(cudaFreeAsync(p, stream_));
}

}  // namespace mk
