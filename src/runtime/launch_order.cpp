#include "mkernel/launch_order.hpp"

#include "mkernel/error.hpp"
#include "mkernel/knobs.hpp"
#include "src/runtime/device_health.hpp"

namespace mk {

namespace {
// Whether `stream` is capturing, and the capture's id (0 when not active). A query that fails counts as
// capturing, with no id: nothing is recorded or waited on (the launch itself fails and says so).
bool capture_info(cudaStream_t stream, unsigned long long* id) noexcept {
  const bool clean = cudaPeekAtLastError() == cudaSuccess;
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  *id = 0;
  if (cudaStreamGetCaptureInfo(stream, &st, id) != cudaSuccess) {
    if (clean) (void)cudaGetLastError();
    *id = 0;
    return true;
  }
  if (st != cudaStreamCaptureStatusActive) *id = 0;  // (invalidated: nothing more may be captured)
  return st != cudaStreamCaptureStatusNone;
}

// Creates *event once, in relaxed capture mode: a capture in global mode (torch.cuda.graph's default) may be open
// on this thread or another while the chain's first call is captured.
cudaError_t make_event(cudaEvent_t* event) noexcept {
  if (*event) return cudaSuccess;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  const cudaError_t e = cudaEventCreateWithFlags(event, cudaEventDisableTiming);
  cudaThreadExchangeStreamCaptureMode(&mode);
  return e;
}
}  // namespace

LaunchChain::~LaunchChain() {
  if (event_) teardown_call(cudaEventDestroy(event_), who_);
  if (captured_event_) teardown_call(cudaEventDestroy(captured_event_), who_);
}

// NOTES: one capture query and one stream id a call (a plan's call costs
// ~1-2 us of host time more with this than without: session 38's
// python-overhead report); end() reuses what begin() learnt.
LaunchOrder::Call LaunchOrder::begin(cudaStream_t stream) {
  if (busy_.exchange(true, std::memory_order_acq_rel))
    fail("a plan's call began while another of its calls, on another host thread, was still enqueuing its work "
         "(the plan of ", who_, "): a plan takes one host thread at a time (its calls share its buffers, signal "
         "words and launch order); use a plan per thread, or a lock around its calls");
  Call call(this, stream);
  call.busy_ = &busy_;
  call.captured_ = capture_info(stream, &call.capture_id_);
  if (call.captured_ && !call.capture_id_) return call;
  // A failed query or wait disarms the span: recording this stream's (empty) point would let the next call
  // on a third stream skip the previous call's work, which the event stands for until a call is ordered.
  struct Disarm {
    Call& c;
    bool armed = true;
    ~Disarm() {
      if (armed) c.order_ = nullptr;
    }
  } disarm{call};
  LaunchChain& ch = *chain_;
  const std::lock_guard<std::mutex> g(ch.mu_);
  if (call.captured_) {
    // (the same stream too: a wait on an event recorded earlier on it in the capture adds no edge it lacks)
    if (ch.captured_id_ == call.capture_id_) MK_CUDA_CHECK(cudaStreamWaitEvent(stream, ch.captured_event_, 0));
  } else {
    MK_CUDA_CHECK(cudaStreamGetId(stream, &call.id_));
    if (ch.recorded_ && call.id_ != ch.stream_id_) MK_CUDA_CHECK(cudaStreamWaitEvent(stream, ch.event_, 0));
  }
  disarm.armed = false;
  return call;
}

void LaunchOrder::end(const Call& call) noexcept {
  if (call.captured_ && !call.capture_id_) return;  // (a capture not known, or no longer active)
  LaunchChain& ch = *chain_;
  const std::lock_guard<std::mutex> g(ch.mu_);
  // A captured call stands for the capture's later captured calls (its graph's replays are ordered by the
  // stream the graph is launched on); the eager event keeps standing for the last eager call.
  cudaEvent_t& event = call.captured_ ? ch.captured_event_ : ch.event_;
  cudaError_t e = make_event(&event);
  if (e == cudaSuccess) e = cudaEventRecord(event, call.stream_);
  if (e == cudaSuccess) {
    if (call.captured_) {
      ch.captured_id_ = call.capture_id_;
    } else {
      ch.stream_id_ = call.id_;
      ch.recorded_ = true;
    }
    return;
  }
  // (the call itself failed or will: its error is the one to report, and
  // the library's runtime keeps none of this one's: device_health.hpp)
  if (!cuda_error_is_fatal(e)) (void)cudaGetLastError();
  if (call.captured_) {
    ch.captured_id_ = 0;
  } else {
    ch.recorded_ = false;
  }
  warn_noexcept([&] {
    return cat(who_, ": not recorded (", cuda_error_string(e), "), so a later call ", call.captured_ ? "captured " : "",
               "on another stream does not wait for this one");
  });
}

}  // namespace mk
