// What keeps ranks in step when a plan or a symmetric allocation fails:
// tp::undo_on_throw (src/ops/ag_gemm/tp_plan.hpp) and the answers ranks
// exchange in alloc_symmetric (src/runtime/step_status.hpp), on the CPU.
#include <gtest/gtest.h>

#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "src/ops/ag_gemm/tp_plan.hpp"
#include "src/runtime/step_status.hpp"

using namespace mk;

namespace {

// Counts undo calls and whether each ran while an exception unwound (what
// SignalLease::reset checks to keep a failed plan's signal words): more
// exceptions in flight than when the log was made. (Not "more than 0": where
// this program and the library each link their own libstdc++, as the GPU
// machine's g++ does, this program's count goes below 0 once it has caught
// errors the library threw; session 69.)
struct UndoLog {
  const int before = std::uncaught_exceptions();
  int calls = 0, unwinding = 0;
  void operator()() {
    ++calls;
    if (std::uncaught_exceptions() > before) ++unwinding;
  }
};

}  // namespace

TEST(PlanUndo, NothingIsUndoneWhenTheStepsSucceed) {
  UndoLog log;
  int steps = 0;
  tp::undo_on_throw([&] { steps = 2; }, [&] { log(); });
  EXPECT_EQ(steps, 2);
  EXPECT_EQ(log.calls, 0);
}

TEST(PlanUndo, AThrowingStepIsUndoneOnceWhileTheExceptionUnwinds) {
  UndoLog log;
  const std::string what = [&] {
    try {
      tp::undo_on_throw([&] { fail("step 2 of 3 failed"); }, [&] { log(); });
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  }();
  EXPECT_EQ(what, "mkernel: step 2 of 3 failed") << "the step's own error reaches the caller";
  EXPECT_EQ(log.calls, 1);
  EXPECT_EQ(log.unwinding, 1) << "undo must run while the exception unwinds (signal words stay reserved)";
}

// A plan made in a destructor that runs while another exception unwinds: its
// undo runs only for its own failure.
TEST(PlanUndo, APlanMadeDuringAnotherUnwindingUndoesOnlyItsOwnFailure) {
  UndoLog ok_log, bad_log;
  struct MakesPlans {
    UndoLog &ok, &bad;
    ~MakesPlans() {
      tp::undo_on_throw([] {}, [&] { ok(); });
      try {
        tp::undo_on_throw([] { throw std::runtime_error("inner"); }, [&] { bad(); });
      } catch (const std::runtime_error&) {
      }
    }
  };
  try {
    MakesPlans m{ok_log, bad_log};
    throw std::runtime_error("outer");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(ok_log.calls, 0);
  EXPECT_EQ(bad_log.calls, 1);
}

TEST(AllocStatus, AllOkGoesOn) {
  const std::vector<std::string> got = {"ok:", std::string("ok:") + "handle-bytes", "ok:"};
  EXPECT_EQ(step_status::step_error(got, 1, "alloc_symmetric of 4096 bytes", "could not allocate its part"), "");
}

TEST(AllocStatus, EveryRankNamesTheFirstRankThatFailedAlike) {
  const std::vector<std::string> got = {"ok:", step_status::failed(Error("mkernel: out of memory")),
                                        step_status::failed(std::runtime_error("other"))};
  EXPECT_EQ(got[1], "failed:out of memory") << "the library's prefix is said once, by the final error";
  const std::string e0 = step_status::step_error(got, 0, "alloc_symmetric of 4096 bytes", "could not allocate its part");
  const std::string e2 = step_status::step_error(got, 2, "alloc_symmetric of 4096 bytes", "could not allocate its part");
  EXPECT_EQ(e0, "alloc_symmetric of 4096 bytes: rank 1 could not allocate its part: out of memory");
  EXPECT_EQ(e0, e2) << "every rank throws the same error";
}

TEST(AllocStatus, AnAnswerFromAnotherCollectiveCallIsNamed) {
  const std::vector<std::string> got = {"ok:", ""};  // rank 1 is in a barrier (an empty allgather)
  const std::string e = step_status::step_error(got, 0, "alloc_symmetric of 8192 bytes", "could not map its host's buffers");
  EXPECT_NE(e.find("rank 1 made another collective call at this point"), std::string::npos) << e;
  EXPECT_NE(e.find("out of step"), std::string::npos) << e;
}
