#include "mkernel/launch_order.hpp"

#include "mkernel/error.hpp"
#include "src/runtime/device_health.hpp"

namespace mk {

namespace {
// Whether `stream` is capturing. A query that fails (the legacy stream while
// another stream captures in global mode, where the launch itself fails and
// says so) counts as capturing, so that nothing is recorded or waited on; its
// error is cleared unless one was pending before (tp::note_capture's rule).
bool capturing(cudaStream_t stream) {
  const bool clean = cudaPeekAtLastError() == cudaSuccess;
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &st) != cudaSuccess) {
    if (clean) (void)cudaGetLastError();
    return true;
  }
  return st != cudaStreamCaptureStatusNone;
}
}  // namespace

LaunchOrder::~LaunchOrder() {
  if (event_) teardown_call(cudaEventDestroy(event_), who_);
}

void LaunchOrder::before(cudaStream_t stream) {
  if (!recorded_ || stream == stream_ || capturing(stream)) return;
  MK_CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0));
}

void LaunchOrder::after(cudaStream_t stream) {
  // A captured launch runs only when its graph is replayed, which the
  // graph's stream orders: the event keeps standing for the last launch that
  // ran eagerly (an event recorded in a capture cannot be waited on outside it).
  if (capturing(stream)) return;
  if (!event_) MK_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
  MK_CUDA_CHECK(cudaEventRecord(event_, stream));
  stream_ = stream;
  recorded_ = true;
}

}  // namespace mk
