#include "mkernel/launch_order.hpp"

#include "mkernel/error.hpp"
#include "mkernel/knobs.hpp"
#include "src/runtime/device_health.hpp"

namespace mk {

namespace {
// A query that fails counts as capturing: nothing is recorded or waited on
// (the launch itself fails and says so).
bool capturing(cudaStream_t stream) noexcept { return stream_capturing(stream).value_or(true); }
}  // namespace

LaunchOrder::~LaunchOrder() {
  if (event_) teardown_call(cudaEventDestroy(event_), who_);
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
  call.captured_ = capturing(stream);
  if (call.captured_) return call;
  // A failed query or wait disarms the span: recording this stream's (empty) point would let the next call
  // on a third stream skip the previous call's work, which the event stands for until a call is ordered.
  struct Disarm {
    Call& c;
    bool armed = true;
    ~Disarm() {
      if (armed) c.order_ = nullptr;
    }
  } disarm{call};
  MK_CUDA_CHECK(cudaStreamGetId(stream, &call.id_));
  if (recorded_ && call.id_ != stream_id_) MK_CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0));
  disarm.armed = false;
  return call;
}

void LaunchOrder::end(const Call& call) noexcept {
  // A captured call runs only when its graph is replayed, which the graph's
  // stream orders: the event keeps standing for the last eager call.
  if (call.captured_) return;
  cudaError_t e = cudaSuccess;
  if (!event_) e = cudaEventCreateWithFlags(&event_, cudaEventDisableTiming);
  if (e == cudaSuccess) e = cudaEventRecord(event_, call.stream_);
  if (e == cudaSuccess) {
    stream_id_ = call.id_;
    recorded_ = true;
    return;
  }
  // (the call itself failed or will: its error is the one to report, and
  // the library's runtime keeps none of this one's: device_health.hpp)
  if (!cuda_error_is_fatal(e)) (void)cudaGetLastError();
  recorded_ = false;
  warn_noexcept([&] {
    return cat(who_, ": not recorded (", cuda_error_string(e),
               "), so a later call of this plan on another stream does not wait for this one");
  });
}

}  // namespace mk
