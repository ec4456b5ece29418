// mkernel: a plan constructor's argument checks, collective. Each rank checks
// its own arguments, and the outcome travels in the plan check's exchange
// (the one allgather every plan makes: check_same_plan), so a rank whose
// arguments are bad fails, and every other rank with it, at once, naming
// that rank and its error. Before (session 35) a rank that failed alone
// threw before the exchange, and its peers sat in it until
// MK_BOOTSTRAP_TIMEOUT_MS (60 s): the natural case is an uneven split that
// leaves one rank an empty shard (m_local = 0). The decision is a plain
// function (plan_args_error), CPU-tested (tests/cpu/test_ag_gemm_plan.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include <exception>
#include <initializer_list>
#include <string>
#include <vector>

#include "mkernel/communicator.hpp"
#include "mkernel/error.hpp"
#include "mkernel/network.hpp"
#include "mkernel/signal_lease.hpp"
#include "mkernel/topology.hpp"
#include "src/ops/ag_gemm/tp_plan.hpp"
#include "src/runtime/step_status.hpp"

namespace mk::tp {

// The plan check's answers: tagged apart from the other steps' ("ok:",
// "failed:"), so that a rank in another collective step at this point (say
// free_symmetric) reads a plan's answer as out of step, not as its own.
inline constexpr step_status::Tags kPlanTags{"plan-ok:", "plan-failed:"};

// The error every rank throws when some rank's answer in the plan check's
// exchange says it failed ("plan-failed:" and why), or "" when every answer
// is a plan ("plan-ok:" and its signature). Names the first rank that
// failed, or one whose answer is neither (another collective call).
inline std::string plan_args_error(const std::vector<std::string>& all, int me, const char* op) {
  return step_status::step_error(all, me, cat(op, "'s plan check"), "could not make its plan", kPlanTags);
}

class PlanArgs {
 public:
  // Checks the topology (the same on every rank, so every rank throws alike
  // here), then makes the communicator's network when the ranks span nodes:
  // collective, and the same on every rank whatever the arguments, so that a
  // rank whose arguments fail below has taken every collective step that its
  // peers take before the exchange.
  PlanArgs(Communicator& comm, const char* op, int max_nodes) : comm_(comm), op_(op) {
    const Topology& t = comm.topology();
    check_topology(t, op, max_nodes);
    // The plan's memory goes to the current device and its calls launch there: the communicator's, or the
    // plan would hold memory on one GPU and launch on another's pointers. (Checked before the network is made,
    // whose setup runs on the communicator's device; run() keeps the error for the exchange, and every rank
    // still makes the network below.)
    run([&] {
      int cur = -1;
      MK_CUDA_CHECK(cudaGetDevice(&cur));
      if (cur != comm.device())
        fail(op, ": the calling thread's current CUDA device is ", cur, ", the communicator's is ", comm.device(),
             ": make it current (cudaSetDevice / torch.cuda.set_device) before making or running a plan");
    });
    if (t.num_nodes > 1) (void)comm.network();
  }

  // Runs f, this rank's checks and the steps that depend on them (local
  // only: no collective call), unless an earlier one failed; its error is
  // kept for the exchange. Plans run their checks and signal words in one,
  // then (inside tp::undo_on_throw) their local memory in another: a rank
  // that cannot allocate its device counters or split-tile scratch fails
  // every rank in the exchange, before anything collective is allocated.
  template <typename F>
  void run(F&& f) {
    if (!error_.empty()) return;
    try {
      f();
    } catch (const std::exception& e) {
      error_ = step_status::failed(e, kPlanTags);
    } catch (...) {
      error_ = std::string(kPlanTags.failed) + "an exception not derived from std::exception";
    }
  }
  bool ok() const { return error_.empty(); }

  // The plan check's exchange, carrying this rank's outcome. When some rank
  // failed, every rank gives back the signal words `lease` took for the plan
  // (no call ever used them: SignalLease::abandon), so that the ranks' pools
  // stay alike (the failed rank may have taken fewer), and throws the same
  // error. Else every rank compares the plans (check_same_plan on
  // `signature`: its shape, variant and signal indices), and gives its
  // words back too when they differ (every rank throws then).
  void exchange(SignalLease& lease, const std::string& signature, const char* dims) {
    exchange({&lease}, signature, dims);
  }
  // The same for a plan holding its words in several leases.
  void exchange(std::initializer_list<SignalLease*> leases, const std::string& signature, const char* dims) {
    auto abandon = [&] {
      for (SignalLease* l : leases) l->abandon();
    };
    const Topology& t = comm_.topology();
    std::vector<std::string> all =
        comm_.bootstrap().allgather(error_.empty() ? std::string(kPlanTags.ok) + signature : error_,
                                    cat(op_, "'s plan check").c_str());
    const std::string err = plan_args_error(all, t.rank, op_);
    if (!err.empty()) {
      abandon();
      fail(err);
    }
    try {  // (it throws on every rank alike when any two plans differ)
      check_same_plan(step_status::payloads(std::move(all), kPlanTags), t.rank, op_, dims);
    } catch (...) {
      abandon();
      throw;
    }
  }

 private:
  Communicator& comm_;
  const char* op_;
  std::string error_;  // step_status::failed(..., kPlanTags) of this rank's first failed check, or ""
};

}  // namespace mk::tp
