// mkernel: SignalLease, the signal words a plan holds (Communicator::
// reserve_signals / release_signals), in a header of its own so that the
// plans' headers need not include the communicator's.
#pragma once

#include <utility>
#include <vector>

namespace mk {

class Communicator;

// The signal words a plan holds: take() reserves (Communicator::reserve_signals)
// and remembers; destruction or reset() gives them all back (release_signals,
// reverse order, then one barrier) unless they are kept: MK_SIGNAL_REUSE=0, or
// this rank's device failed (no barrier then: Communicator::fatal_device_error);
// a rank destroying it while an exception unwinds keeps them, and says so in the
// barrier's exchange, so every rank keeps them; keep() keeps them, and abandon()
// gives them back unused (a plan failing in its collective check). Move-only.
// "Unwinds" means more exceptions in flight than at the first take(), so that
// a plan made and closed inside a destructor during another exception's unwind
// is not taken for a failing one. The count is relative for a second reason:
// a library that carries its own libstdc++ (a toolchain linking it statically,
// as the GPU machine's /opt/gcc does) never counts down an error the caller
// caught, so an absolute count would mark every later plan as failing. Such a
// build still keeps the words of a plan during whose life the caller caught an
// mk::Error, and cannot see the caller's own exceptions (README, "Using it").
// Destroy it where every rank destroys its own, in the same order, after
// every kernel that used the words ended on every rank: plans hold it as a
// member (destroyed after the destructor's body, whose free_symmetric
// synchronised every rank's device and exchanged the outcome; when that
// failed, the plan calls keep()).
class SignalLease {
 public:
  SignalLease() = default;
  ~SignalLease() { reset(); }
  SignalLease(SignalLease&& o) noexcept
      : comm_(o.comm_), runs_(std::move(o.runs_)), uncaught_at_take_(o.uncaught_at_take_) {
    o.runs_.clear();
  }
  SignalLease& operator=(SignalLease&& o) noexcept {
    if (this != &o) {
      reset();
      comm_ = o.comm_;
      uncaught_at_take_ = o.uncaught_at_take_;
      runs_ = std::move(o.runs_);
      o.runs_.clear();
    }
    return *this;
  }
  SignalLease(const SignalLease&) = delete;
  SignalLease& operator=(const SignalLease&) = delete;

  // Communicator::reserve_signals(n), remembered; returns the first index.
  int take(Communicator& comm, int n);
  // Gives every run back (or keeps them, above); a run that cannot be zeroed
  // (a failed device) stays reserved, with a warning: never handed out again
  // with stale counts in it.
  void reset() noexcept;
  // Keeps every run reserved for the communicator's life, without a barrier:
  // for a plan whose teardown could not confirm that no kernel still uses
  // them (its free_symmetric failed, on every rank alike). Collective in
  // effect, as reset: every rank keeps the same runs.
  void keep() noexcept { runs_.clear(); }
  // Gives every run back at once, with no zeroing and no barrier
  // (Communicator::return_unused_signals): for a plan that failed in its
  // collective check, on every rank alike, before any call could use them.
  void abandon() noexcept;

 private:
  Communicator* comm_ = nullptr;
  std::vector<std::pair<int, int>> runs_;
  int uncaught_at_take_ = 0;  // std::uncaught_exceptions() at the first take() (reset() compares)
};

}  // namespace mk
