// mkernel: per-call device scratch in stream order, for the stateless ops
// (the standalone GEMM's split tiles, the one-GPU attention's unit counter),
// which have no plan to own memory across calls, or the caller's workspace.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace mk {

// `bytes` of device memory on the current device, with [zero_offset,
// zero_offset + zero_bytes) zeroed on `stream`: the caller's workspace when
// given (second constructor), else allocated on `stream` from the library's
// own memory pool (stream_scratch.cpp: why a pool of its own). The pool's is
// empty (get() == nullptr; the op then runs without it) while the stream is
// being captured into a graph (the graph would own pool memory), where no
// pool could be made, or when the pool has no memory left, and is freed on the
// stream after the work queued behind it: by release() (checked: throws
// mk::Error on failure) or by the destructor (on an error path: reported, not
// thrown). A caller's workspace is never freed here.
class StreamScratch {
 public:
  StreamScratch(size_t bytes, size_t zero_offset, size_t zero_bytes, cudaStream_t stream, const char* what);
  // The caller's workspace instead of the pool, when `given` is not null: used inside graph captures too (the
  // zeroing is then a memset node of the graph), never freed here. Fails (mk::Error naming `what`, before
  // anything is queued) when given_bytes < bytes or `given` is not 16-byte aligned.
  StreamScratch(size_t bytes, size_t zero_offset, size_t zero_bytes, cudaStream_t stream, const char* what,
                void* given, size_t given_bytes);
  ~StreamScratch();
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;

  void* get() const { return ptr_; }
  void release();

 private:
  void zero(size_t offset, size_t bytes);
  void* ptr_ = nullptr;
  bool owned_ = false;  // from the pool (freed here), not the caller's
  cudaStream_t stream_ = nullptr;
  const char* what_ = "";
};

}  // namespace mk
