#include "mkernel/graph_uses.hpp"

#include <new>

namespace mk {

namespace {
using Count = std::shared_ptr<std::atomic<long>>;

// A user object's destructor (a CUDA-internal thread, no CUDA calls allowed): one graph reference fewer.
void release(void* p) {
  auto* count = static_cast<Count*>(p);
  (*count)->fetch_sub(1, std::memory_order_acq_rel);
  delete count;
}
}  // namespace

void GraphUses::note(cudaStream_t stream, unsigned long long capture_id) noexcept {
  if (!capture_id || capture_id == last_capture_) return;
  ever_.store(true, std::memory_order_relaxed);
  const bool clean = cudaPeekAtLastError() == cudaSuccess;
  // Relaxed mode for the calls below, as LaunchOrder's event creation: a capture in global mode
  // (torch.cuda.graph's default) is open on this thread.
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  cudaGraph_t graph = nullptr;
  bool held = false;
  if (cudaStreamGetCaptureInfo(stream, &st, &id, &graph) == cudaSuccess && st == cudaStreamCaptureStatusActive &&
      id == capture_id && graph) {
    auto* count = new (std::nothrow) Count(live_);
    cudaUserObject_t object = nullptr;
    if (count) {
      live_->fetch_add(1, std::memory_order_acq_rel);  // (before the destructor can run)
      if (cudaUserObjectCreate(&object, count, release, 1, cudaUserObjectNoDestructorSync) != cudaSuccess) {
        live_->fetch_sub(1, std::memory_order_acq_rel);
        delete count;
      } else if (cudaGraphRetainUserObject(graph, object, 1, cudaGraphUserObjectMove) == cudaSuccess) {
        held = true;  // (the graph owns the one reference now)
      } else {
        cudaUserObjectRelease(object, 1);  // (its destructor counts down)
      }
    }
  }
  cudaThreadExchangeStreamCaptureMode(&mode);
  last_capture_ = capture_id;  // (refused: not asked again in this capture)
  if (!held) {
    sticky_.store(true, std::memory_order_relaxed);
    if (clean) (void)cudaGetLastError();
  }
}

}  // namespace mk
