// mkernel: CommPlan, what a communicator knows of the plans made on it (AgGemm, GemmRs, GemmAr, RingAttention),
// in a header of its own so that the plans' headers need not include the communicator's.
#pragma once

namespace mk {

class Communicator;

// A plan registers with its communicator once made and leaves when destroyed. A communicator destroyed while
// plans are alive (a struct that declares its plans before its communicator destroys it first) releases them
// first, newest first, on every rank alike (their memory, network regions and signal words, collectively, as
// their destructors would), and says so; their destructors then do nothing more, and their calls fail naming
// the plan. Before 2026-12-06 such a plan's destructor used the destroyed communicator (a crash).
class CommPlan {
 public:
  CommPlan(const CommPlan&) = delete;
  CommPlan& operator=(const CommPlan&) = delete;

 protected:
  CommPlan() = default;
  ~CommPlan() = default;
  // Whether the communicator released this plan as it was destroyed (the plan must not touch it any more).
  bool communicator_gone() const noexcept { return gone_; }
  // For the plan's destructor: leaves `comm` and returns true (then release), or false where the communicator
  // released the plan already (nothing left to do).
  bool leave_communicator(Communicator& comm) noexcept;
  // The plan's destructor's collective work, for the communicator's destructor: release everything held through
  // the communicator, signal words included.
  virtual void release_with_communicator() noexcept = 0;

 private:
  friend class Communicator;
  bool gone_ = false;
};

}  // namespace mk
