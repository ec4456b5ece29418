// mkernel: orders a plan's launches on the device whatever streams they come
// on. A plan's kernels take their epoch from a counter on the device that the
// previous launch advances as its last CTA ends (device/epoch.cuh), and reuse
// the plan's buffers and signal words, so two launches of one plan must never
// run at once. On one stream they cannot. A launch on another stream than the
// plan's previous one first waits, on the device, for that launch: an event
// recorded after every call's work (cudaEventRecord, ~1 us of host time) and
// a cudaStreamWaitEvent when the stream changes. The host never waits.
// Streams are told apart by cudaStreamGetId, not by handle: the per-thread
// default stream's one handle names another stream on each thread, and a
// destroyed stream's handle may come back for a new one.
//
// Stream captures are left to the user: a launch captured into a CUDA graph
// neither waits for the previous launch nor is waited for by the next one
// (an event recorded in a capture cannot be waited on outside it; the next
// eager launch waits for the last eager one), so a graph's replays must be
// ordered with the plan's other launches by the stream the graph is launched
// on, as with any graph that uses a buffer.
//
// Not thread-safe, as the plans are not: one host thread calls a plan at a time.
// A call that begins while another thread's call of the plan is still in its
// span is refused with an error saying so (an atomic flag: ~10 ns a call),
// not left to corrupt the plan's launch order, epochs and buffers.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>

namespace mk {

class LaunchOrder {
 public:
  // One call's span: made by begin() before the call enqueues anything, it
  // records the call's end on its stream when it goes, however the call
  // leaves (work enqueued before a failure is covered too).
  class Call {
   public:
    Call(Call&& o) noexcept
        : order_(o.order_), busy_(o.busy_), stream_(o.stream_), id_(o.id_), captured_(o.captured_) {
      o.order_ = nullptr;
      o.busy_ = nullptr;
    }
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;
    Call& operator=(Call&&) = delete;
    ~Call() {
      if (order_) order_->end(*this);
      if (busy_) busy_->store(false, std::memory_order_release);  // (also where begin() failed: disarmed)
    }

   private:
    friend class LaunchOrder;
    Call(LaunchOrder* order, cudaStream_t stream) : order_(order), stream_(stream) {}
    LaunchOrder* order_;
    std::atomic<bool>* busy_ = nullptr;  // the plan's in-a-call flag, cleared when the span ends
    cudaStream_t stream_;
    // What begin() learnt of the stream, which a call cannot change: its
    // cudaStreamGetId (0: not asked) and whether it is capturing.
    unsigned long long id_ = 0;
    bool captured_ = true;
  };

  explicit LaunchOrder(const char* who) : who_(who) {}
  ~LaunchOrder();
  LaunchOrder(const LaunchOrder&) = delete;
  LaunchOrder& operator=(const LaunchOrder&) = delete;

  // Before a call enqueues work on `stream` (after its argument checks):
  // makes `stream` wait for the previous call when that was on another
  // stream (and not captured). Keep the result until the call's last work
  // on `stream` is enqueued.
  [[nodiscard]] Call begin(cudaStream_t stream);
  // Whether a call's span is open now (a call on some host thread is enqueuing its work): a plan's destroy through
  // the C ABI refuses then (mk::capi::destroy_plan), as a second call does.
  bool busy() const noexcept { return busy_.load(std::memory_order_acquire); }

 private:
  void end(const Call& call) noexcept;

  const char* who_;
  cudaEvent_t event_ = nullptr;  // recorded after the last call outside a capture (eager)
  unsigned long long stream_id_ = 0;  // that call's stream (cudaStreamGetId)
  bool recorded_ = false;             // event_ stands for the plan's last eager call
  std::atomic<bool> busy_{false};     // a call's span is open (begin() .. its Call's end)
};

}  // namespace mk
