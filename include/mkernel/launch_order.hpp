// mkernel: orders a plan's launches on the device whatever streams they come
// on. A plan's kernels take their epoch from a counter on the device that the
// previous launch advances as its last CTA ends (device/epoch.cuh), and reuse
// the plan's buffers and signal words, so two launches of one plan must never
// run at once. On one stream they cannot. A launch on another stream than the
// previous one first waits, on the device, for that launch: an event
// recorded after every call's work (cudaEventRecord, ~1 us of host time) and
// a cudaStreamWaitEvent when the stream changes. The host never waits.
// Streams are told apart by cudaStreamGetId, not by handle: the per-thread
// default stream's one handle names another stream on each thread, and a
// destroyed stream's handle may come back for a new one.
//
// The plans of one communicator share one order (a LaunchChain, the
// communicator's): their fused kernels hold every SM they are given and wait
// for their peers on the other ranks, so two plans' calls issued A then B on
// two streams could otherwise start B first on one rank and A first on
// another, each waiting for a kernel the other rank cannot start (no SM left):
// a hang until MK_TIMEOUT_MS. Like NCCL's operations on one communicator, its
// calls run in the order they were issued on the host; two communicators'
// calls may overlap.
//
// Stream captures: calls captured into one graph are ordered among themselves
// the same way (a call captured on another stream of the same capture waits
// for the previous captured call: a dependency edge in the graph; before
// 2026-12-06 two calls captured on forked streams were left unordered, and
// ran at once on replay). A graph's replays are ordered with eager calls, and
// with other graphs, by the stream the graph is launched on, as with any
// graph that uses a buffer: an event recorded in a capture cannot be waited
// on outside it. The chain remembers one capture at a time: two captures on
// two threads at once, each calling the communicator's plans, leave the first
// one's later calls on forked streams unordered (nothing waits across
// captures either way).
//
// Not thread-safe, as the plans are not: one host thread calls a plan at a time.
// A call that begins while another thread's call of the plan is still in its
// span is refused with an error saying so (an atomic flag: ~10 ns a call),
// not left to corrupt the plan's launch order, epochs and buffers. Calls of a
// communicator's plans from several host threads at once are ordered only as
// their begin/end steps interleave (their order across ranks would be racy
// anyway).
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <mutex>

namespace mk {

// The device-side order shared by the launches of several LaunchOrders (a communicator's plans); see above.
class LaunchChain {
 public:
  explicit LaunchChain(const char* who) : who_(who) {}
  ~LaunchChain();
  LaunchChain(const LaunchChain&) = delete;
  LaunchChain& operator=(const LaunchChain&) = delete;

 private:
  friend class LaunchOrder;
  const char* who_;
  std::mutex mu_;                // begin/end steps of calls on several host threads (another plan's)
  cudaEvent_t event_ = nullptr;  // recorded after the last call outside a capture (eager)
  unsigned long long stream_id_ = 0;  // that call's stream (cudaStreamGetId)
  bool recorded_ = false;             // event_ stands for the last eager call
  cudaEvent_t captured_event_ = nullptr;  // recorded after the last captured call, in capture captured_id_
  unsigned long long captured_id_ = 0;    // (cudaStreamGetCaptureInfo's id; 0: none)
};

class LaunchOrder {
 public:
  // One call's span: made by begin() before the call enqueues anything, it
  // records the call's end on its stream when it goes, however the call
  // leaves (work enqueued before a failure is covered too).
  class Call {
   public:
    Call(Call&& o) noexcept
        : order_(o.order_),
          busy_(o.busy_),
          stream_(o.stream_),
          id_(o.id_),
          captured_(o.captured_),
          capture_id_(o.capture_id_) {
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
    // The active capture this call goes into (cudaStreamGetCaptureInfo's id), 0 when none or not known
    // (GraphUses::note).
    unsigned long long capture_id() const noexcept { return captured_ ? capture_id_ : 0; }

   private:
    friend class LaunchOrder;
    Call(LaunchOrder* order, cudaStream_t stream) : order_(order), stream_(stream) {}
    LaunchOrder* order_;
    std::atomic<bool>* busy_ = nullptr;  // the plan's in-a-call flag, cleared when the span ends
    cudaStream_t stream_;
    // What begin() learnt of the stream, which a call cannot change: its
    // cudaStreamGetId (0: not asked), whether it is capturing, and the
    // capture's id (0: not active, or not known).
    unsigned long long id_ = 0;
    bool captured_ = true;
    unsigned long long capture_id_ = 0;
  };

  // Ordered on its own chain until share() joins it to another's.
  explicit LaunchOrder(const char* who) : own_(who), chain_(&own_), who_(who) {}
  LaunchOrder(const LaunchOrder&) = delete;
  LaunchOrder& operator=(const LaunchOrder&) = delete;
  // From now on this order's calls are ordered with every call on `chain` (a communicator's: its plans share
  // it); `chain` outlives this order. Before the first call (a plan's constructor).
  void share(LaunchChain& chain) noexcept { chain_ = &chain; }

  // Before a call enqueues work on `stream` (after its argument checks):
  // makes `stream` wait for the chain's previous call when that was on
  // another stream (eager), or in the same capture (captured). Keep the
  // result until the call's last work on `stream` is enqueued.
  [[nodiscard]] Call begin(cudaStream_t stream);
  // Whether a call's span is open now (a call on some host thread is enqueuing its work): a plan's destroy through
  // the C ABI refuses then (mk::capi::destroy_plan), as a second call does.
  bool busy() const noexcept { return busy_.load(std::memory_order_acquire); }

 private:
  void end(const Call& call) noexcept;

  LaunchChain own_;
  LaunchChain* chain_;
  const char* who_;
  std::atomic<bool> busy_{false};  // a call's span is open (begin() .. its Call's end)
};

}  // namespace mk
