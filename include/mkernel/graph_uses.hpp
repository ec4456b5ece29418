// mkernel: which CUDA graphs still hold a plan's launches. A launch captured
// in a stream capture goes into a graph that the caller instantiates,
// replays and destroys on its own; every replay uses the plan's buffers and
// signal words, so the plan must outlive the graph, and nothing in the CUDA
// API says when the graph is gone. A CUDA user object does (CUDA programming
// guide, "CUDA User Objects"): the first captured call of each capture gives
// the capture's graph a reference to one, the graph's copies take theirs
// (every executable graph instantiated from it, a clone, a child-graph node
// made from it), and its destructor runs, on a CUDA thread, once the last of
// them is destroyed and their launches have ended. The destructors only
// count down a shared counter (they may not call CUDA), so a plan destroyed
// first leaves them nothing to touch but that counter.
//
// ever() answers "was a launch ever captured" (deterministic: ranks that
// capture the same graphs agree); alive() answers "may a graph holding one
// still be replayed" (this process only, and it turns false a moment after
// the last destroy: the destructor runs asynchronously). Python's bounded
// plan cache, whose closes are collective, ORs alive() over the ranks.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <memory>

namespace mk {

class GraphUses {
 public:
  GraphUses() : live_(std::make_shared<std::atomic<long>>(0)) {}
  GraphUses(const GraphUses&) = delete;
  GraphUses& operator=(const GraphUses&) = delete;

  // After LaunchOrder::begin, with its Call's capture_id() (0: the call is
  // not being captured, or the capture is not known, or already
  // invalidated: no graph can come of it, so such a call counts as not
  // captured): the first call of a capture ties a user object to the
  // capture's graph (~2-5 us, once per capture; nothing for eager calls).
  // Where CUDA refuses that, the plan is taken as held by a live graph for
  // good (alive() stays true), and the refusal's error is cleared where no
  // error was pending before (where one was, CUDA now reports the refusal's
  // in its place: it keeps only the last).
  void note(cudaStream_t stream, unsigned long long capture_id) noexcept;

  // (Atomic: another thread may ask, e.g. Python's close_plans, while the plan's thread launches.)
  bool ever() const noexcept { return ever_.load(std::memory_order_relaxed); }
  bool alive() const noexcept {
    return sticky_.load(std::memory_order_relaxed) || live_->load(std::memory_order_acquire) > 0;
  }

 private:
  std::shared_ptr<std::atomic<long>> live_;  // user objects not yet destroyed (their destructors hold it too)
  unsigned long long last_capture_ = 0;      // the capture whose graph holds a reference already
  std::atomic<bool> ever_{false};
  std::atomic<bool> sticky_{false};  // a capture's graph could not be given a reference
};

}  // namespace mk
