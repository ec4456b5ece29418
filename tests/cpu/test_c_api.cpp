// The C ABI without a GPU: version, config text, errors as return codes with
// messages, the unique id, and validation that fails before any CUDA call.
#include <gtest/gtest.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <tuple>

#include "mkernel/knobs.hpp"
#include "mkernel/launch_order.hpp"
#include "mkernel/mkernel.h"
#include "src/runtime/c_api_util.hpp"
#include "tests/test_env.hpp"

// mk_print_config gives the library's knob table: every declared knob with its current value (a value set in the
// environment marked "[set]"), cut to the buffer with the NUL kept; a NULL buffer or no room is an error.
TEST(CApi, VersionAndConfig) {
  EXPECT_EQ(mk_abi_version(), MK_ABI_VERSION);
  mk::test::EnvGuard timeout("MK_TIMEOUT_MS", "4321");
  const std::string full = mk::print_config();
  ASSERT_LT(full.size() + 1, size_t{1} << 20);
  std::string buf(full.size() + 1, 'x');
  ASSERT_EQ(mk_print_config(buf.data(), buf.size()), 0) << mk_last_error();
  ASSERT_EQ(buf.back(), '\0');
  buf.pop_back();
  EXPECT_EQ(buf, full);  // whole where it fits
  for (const auto& s : mk::knob_specs())
    EXPECT_NE(full.find(std::string("  ") + s.name + " ("), std::string::npos) << s.name << " missing from:\n" << full;
  EXPECT_NE(full.find("MK_TIMEOUT_MS (int in [1, 86400000], default '5000') = '4321' [set]"), std::string::npos)
      << full;
  char tiny[8];
  std::memset(tiny, 'x', sizeof(tiny));
  ASSERT_EQ(mk_print_config(tiny, sizeof(tiny)), 0);  // truncated, still terminated
  EXPECT_EQ(std::string(tiny), full.substr(0, 7));
  char one = 'x';
  ASSERT_EQ(mk_print_config(&one, 1), 0);
  EXPECT_EQ(one, '\0');
  EXPECT_NE(mk_print_config(tiny, 0), 0);
  EXPECT_NE(std::string(mk_last_error()).find("len is 0"), std::string::npos) << mk_last_error();
  EXPECT_NE(mk_print_config(nullptr, 8), 0);
  EXPECT_NE(std::string(mk_last_error()).find("buf"), std::string::npos) << mk_last_error();
}

// The build's commit (cmake/git_commit.cmake): 12 hex digits, "-dirty" after them when tracked files had
// changes, or "unknown" outside git.
TEST(CApi, BuildCommitNamesTheTreeTheLibraryWasBuiltFrom) {
  const char* c = mk_build_commit();
  ASSERT_NE(c, nullptr);
  const std::string s = c;
  if (s == "unknown") GTEST_SKIP() << "built outside a git checkout";
  ASSERT_TRUE(s.size() == 12 || (s.size() == 18 && s.substr(12) == "-dirty")) << s;
  for (size_t i = 0; i < 12; ++i) EXPECT_TRUE(std::isxdigit(static_cast<unsigned char>(s[i]))) << s;
}

// The backends the build has (CMakeLists.txt's MK_NET_BACKENDS gives this test the library's MK_NET_HAVE_*).
TEST(CApi, NetBackendsNameWhatTheBuildHas) {
  const char* b = mk_net_backends();
  ASSERT_NE(b, nullptr);
  std::string want = std::string(MK_NET_HAVE_VERBS ? "verbs " : "") + (MK_NET_HAVE_FABRIC ? "fabric " : "") + "emu";
  EXPECT_EQ(std::string(b), want);
}

// Bindings read the library's own knobs through the ABI, with its parser (a bool knob: 1/0/true/false/...).
TEST(CApi, KnobReadersUseTheLibrarysParserAndRefuseOtherTypes) {
  int b = -1;
  unsetenv("MK_SHARE_GPUS");
  ASSERT_EQ(mk_knob_bool("MK_SHARE_GPUS", &b), 0) << mk_last_error();
  EXPECT_EQ(b, 0);  // the declared default
  setenv("MK_SHARE_GPUS", "true", 1);
  ASSERT_EQ(mk_knob_bool("MK_SHARE_GPUS", &b), 0) << mk_last_error();
  EXPECT_EQ(b, 1);
  setenv("MK_SHARE_GPUS", "2", 1);
  EXPECT_NE(mk_knob_bool("MK_SHARE_GPUS", &b), 0);
  EXPECT_NE(std::string(mk_last_error()).find("MK_SHARE_GPUS"), std::string::npos) << mk_last_error();
  unsetenv("MK_SHARE_GPUS");
  EXPECT_NE(mk_knob_bool("MK_TIMEOUT_MS", &b), 0);  // an integer knob
  EXPECT_NE(std::string(mk_last_error()).find("not a bool"), std::string::npos) << mk_last_error();
  int64_t v = 0;
  {
    const mk::test::EnvGuard set("MK_TIMEOUT_MS", "250");
    ASSERT_EQ(mk_knob_int("MK_TIMEOUT_MS", &v), 0) << mk_last_error();
    EXPECT_EQ(v, 250);
  }
  {
    const mk::test::EnvGuard unset("MK_TIMEOUT_MS", nullptr);
    ASSERT_EQ(mk_knob_int("MK_TIMEOUT_MS", &v), 0) << mk_last_error();
    EXPECT_EQ(v, 5000);  // the declared default
  }
  EXPECT_NE(mk_knob_int("MK_SHARE_GPUS", &v), 0);
  EXPECT_NE(std::string(mk_last_error()).find("not an integer"), std::string::npos) << mk_last_error();
  EXPECT_NE(mk_knob_bool("MK_NO_SUCH_KNOB", &b), 0);
  EXPECT_NE(std::string(mk_last_error()).find("no knob named MK_NO_SUCH_KNOB"), std::string::npos);
  EXPECT_NE(mk_knob_bool(nullptr, &b), 0);
}

TEST(CApi, NullArgumentsAreErrorsWithMessages) {
  EXPECT_NE(mk_get_unique_id(nullptr), 0);
  EXPECT_NE(std::string(mk_last_error()).find("NULL"), std::string::npos);
  EXPECT_NE(mk_comm_info(nullptr, nullptr), 0);
  EXPECT_NE(mk_symm_alloc(nullptr, 16, nullptr), 0);
  EXPECT_NE(mk_comm_barrier(nullptr), 0);
  EXPECT_NE(mk_print_config(nullptr, 0), 0);
  // A NULL out with a communicator handle (here a stand-in with none inside: refused before it is read).
  auto* standin = new mk_comm_s;
  EXPECT_NE(mk_comm_info(standin, nullptr), 0);
  EXPECT_EQ(std::string(mk_last_error()), "mkernel: mk_comm_info: comm or out is NULL");
  EXPECT_NE(mk_symm_alloc(standin, 16, nullptr), 0);
  EXPECT_EQ(std::string(mk_last_error()), "mkernel: mk_symm_alloc: comm or out is NULL");
  EXPECT_EQ(mk_symm_free(standin, nullptr), 0) << "a NULL buffer is nothing to free, as free(NULL)";
  EXPECT_EQ(mk_symm_free(nullptr, nullptr), 0);
  EXPECT_EQ(mk_comm_destroy(standin), 0) << mk_last_error();
  char one[1];
  EXPECT_NE(mk_print_config(one, 0), 0);  // a buffer with no room: said so, not "NULL"
  EXPECT_NE(std::string(mk_last_error()).find("len is 0"), std::string::npos) << mk_last_error();
}

TEST(CApi, BadRankIsRejectedBeforeAnythingRuns) {
  mk_unique_id_t id;
  ASSERT_EQ(mk_get_unique_id(&id), 0) << mk_last_error();
  mk_comm_t comm = nullptr;
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_NE(mk_comm_init(&comm, 3, 2, &id, -1), 0);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
  EXPECT_EQ(comm, nullptr);
  std::string msg = mk_last_error();
  EXPECT_NE(msg.find("rank 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[0, 2)"), std::string::npos) << msg;
  // A bad world size is named as one (it read "rank 0 is outside [0, -5)"), and a NULL argument names the function.
  EXPECT_NE(mk_comm_init(&comm, 0, -5, &id, -1), 0);
  msg = mk_last_error();
  EXPECT_NE(msg.find("world size must be >= 1 (got -5)"), std::string::npos) << msg;
  EXPECT_NE(mk_comm_init(&comm, 0, 2, nullptr, -1), 0);
  EXPECT_EQ(std::string(mk_last_error()), "mkernel: mk_comm_init: out or id is NULL");
}

TEST(CApi, ForeignIdIsRejected) {
  mk_unique_id_t id{};
  mk_comm_t comm = nullptr;
  EXPECT_NE(mk_comm_init(&comm, 0, 2, &id, -1), 0);
  EXPECT_NE(std::string(mk_last_error()).find("unique id"), std::string::npos) << mk_last_error();
}

// A communicator handle counts the plan handles made on it and refuses to be destroyed while one is open (the
// plan would use it afterwards). Here without a GPU: a handle with no communicator inside, a stand-in plan.
TEST(CApi, ACommunicatorWithAnOpenPlanRefusesToBeDestroyed) {
  struct Idle {
    bool in_call() const noexcept { return false; }
  };
  struct StandInPlan {
    static constexpr mk::capi::HandleKind handle_kind() { return mk::capi::HandleKind::GemmRs; }
    mk::capi::HandleKind kind = handle_kind();
    std::unique_ptr<Idle> plan;
    mk_comm_s* owner = nullptr;
  };
  auto* comm = new mk_comm_s;
  auto* plan = new StandInPlan{StandInPlan::handle_kind(), std::make_unique<Idle>(), comm};
  ++comm->open_plans;  // (what mk::capi::create_plan does once the plan exists)
  ASSERT_NE(mk_comm_destroy(comm), 0);  // (else comm is gone: the rest would use freed memory)
  EXPECT_NE(std::string(mk_last_error()).find("mk_comm_destroy: 1 plan made on this communicator is still open"),
            std::string::npos) << mk_last_error();
  EXPECT_EQ(mk::capi::destroy_plan("mk_test_destroy", plan), 0);
  EXPECT_EQ(comm->open_plans.load(), 0);
  EXPECT_EQ(mk::capi::destroy_plan("mk_test_destroy", static_cast<StandInPlan*>(nullptr)), 0);
  const auto alive = comm->alive;  // (what its buffers' handles hold)
  EXPECT_EQ(mk_comm_destroy(comm), 0) << mk_last_error();
  EXPECT_FALSE(alive->load());
  EXPECT_EQ(mk_comm_destroy(nullptr), 0);
}

// A communicator whose destroy has begun (its count closed, as mk_comm_destroy does in the step that finds no plan
// open) refuses a plan made on another thread meanwhile, and a second destroy; the count is left as it was.
TEST(CApi, APlanBegunWhileItsCommunicatorIsDestroyedIsRefused) {
  struct Plan {
    explicit Plan(mk::Communicator&) {}
    bool captured() const { return false; }
  };
  struct Handle {
    static constexpr mk::capi::HandleKind handle_kind() { return mk::capi::HandleKind::GemmRs; }
    mk::capi::HandleKind kind = handle_kind();
    std::unique_ptr<Plan> plan;
    mk_comm_s* owner = nullptr;
  };
  mk_comm_s comm;
  comm.open_plans = mk_comm_s::kClosing;
  Handle* out = nullptr;
  EXPECT_NE((mk::capi::create_plan<Handle, Plan>("mk_test_create", &comm, &out)), 0);
  EXPECT_NE(std::string(mk_last_error()).find("mk_test_create: the communicator is being destroyed"), std::string::npos)
      << mk_last_error();
  EXPECT_EQ(out, nullptr);
  EXPECT_EQ(comm.open_plans.load(), mk_comm_s::kClosing);
  EXPECT_NE(mk_comm_destroy(&comm), 0);
  EXPECT_NE(std::string(mk_last_error()).find("another thread is destroying"), std::string::npos) << mk_last_error();
  comm.open_plans = 0;  // (a stack object: not for mk_comm_destroy's delete)
}

// mk_*_captured's value: 0 never captured, 1 captured with a graph that may still hold the plan, 2 captured with
// every such graph gone (Plan::captured(), Plan::graphs_alive()).
TEST(CApi, CapturedSaysWhetherAGraphStillHoldsThePlan) {
  struct Plan {
    bool ever = false, alive = false;
    bool captured() const { return ever; }
    bool graphs_alive() const { return alive; }
  };
  struct Handle {
    static constexpr mk::capi::HandleKind handle_kind() { return mk::capi::HandleKind::GemmRs; }
    mk::capi::HandleKind kind = handle_kind();
    std::unique_ptr<Plan> plan = std::make_unique<Plan>();
  };
  Handle h;
  int v = -1;
  for (const auto& [ever, alive, want] : {std::tuple{false, false, 0}, std::tuple{true, true, 1},
                                          std::tuple{true, false, 2}}) {
    h.plan->ever = ever;
    h.plan->alive = alive;
    ASSERT_EQ(mk::capi::plan_captured("mk_test_captured", &h, &v), 0) << mk_last_error();
    EXPECT_EQ(v, want) << "ever " << ever << ", alive " << alive;
  }
  EXPECT_NE(mk::capi::plan_captured("mk_test_captured", &h, nullptr), 0);
  EXPECT_NE(std::string(mk_last_error()).find("mk_test_captured"), std::string::npos) << mk_last_error();
}

// A communicator's destroy while one of its own calls (here a stand-in barrier) runs on another host thread is
// refused, naming the call, and leaves the communicator open and its counts as they were; once the call returned
// the destroy goes through. A call that throws is uncounted too.
TEST(CApi, ACommunicatorsDestroyDuringItsOwnCallOnAnotherThreadIsRefused) {
  auto* comm = new mk_comm_s;
  std::atomic<bool> inside{false}, release{false};
  int rc = -1;
  std::thread caller([&] {
    rc = mk::capi::comm_call(comm, "mk_comm_barrier", [&] {
      inside = true;
      while (!release) std::this_thread::yield();
    });
  });
  while (!inside) std::this_thread::yield();
  ASSERT_NE(mk_comm_destroy(comm), 0);  // (else comm is gone: the rest would use freed memory)
  EXPECT_NE(std::string(mk_last_error()).find("mk_comm_destroy: a call of this communicator (mk_comm_barrier) is in "
                                              "flight on another host thread"),
            std::string::npos) << mk_last_error();
  EXPECT_EQ(comm->open_plans.load(), 1);
  EXPECT_EQ(comm->calls.load(), 1);
  release = true;
  caller.join();
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(comm->open_plans.load(), 0);
  EXPECT_EQ(comm->calls.load(), 0);
  EXPECT_NE(mk::capi::comm_call(comm, "mk_comm_check", [] { mk::fail("the stand-in call failed"); }), 0);
  EXPECT_EQ(std::string(mk_last_error()), "mkernel: the stand-in call failed");
  EXPECT_EQ(comm->open_plans.load(), 0);
  EXPECT_EQ(comm->calls.load(), 0);
  EXPECT_EQ(mk_comm_destroy(comm), 0) << mk_last_error();
}

// Once a destroy has begun (the count closed), the communicator's own calls are refused without running.
TEST(CApi, ACommunicatorsOwnCallDuringItsDestroyIsRefused) {
  mk_comm_s comm;
  comm.open_plans = mk_comm_s::kClosing;
  bool ran = false;
  EXPECT_NE(mk::capi::comm_call(&comm, "mk_comm_barrier", [&] { ran = true; }), 0);
  EXPECT_FALSE(ran);
  EXPECT_NE(std::string(mk_last_error()).find("mk_comm_barrier: the communicator is being destroyed"),
            std::string::npos) << mk_last_error();
  EXPECT_EQ(comm.open_plans.load(), mk_comm_s::kClosing);
  EXPECT_EQ(comm.calls.load(), 0);
  comm.open_plans = 0;  // (a stack object: not for mk_comm_destroy's delete)
}

// A plan's destroy while one of its calls is enqueuing its work on another host thread (its launch-order span
// open) is refused and leaves the plan open and counted; once the call is done the destroy goes through.
TEST(CApi, APlansDestroyDuringItsCallOnAnotherThreadIsRefused) {
  struct Plan {
    mk::LaunchOrder order{"TestPlan's launch-order event"};
    bool in_call() const noexcept { return order.busy(); }
  };
  struct Handle {
    static constexpr mk::capi::HandleKind handle_kind() { return mk::capi::HandleKind::GemmRs; }
    mk::capi::HandleKind kind = handle_kind();
    std::unique_ptr<Plan> plan;
    mk_comm_s* owner = nullptr;
  };
  mk_comm_s comm;
  auto* h = new Handle{Handle::handle_kind(), std::make_unique<Plan>(), &comm};
  ++comm.open_plans;
  std::atomic<bool> inside{false}, release{false};
  std::thread caller([&] {
    auto call = h->plan->order.begin(nullptr);  // (no GPU: a stream that cannot be queried counts as capturing)
    inside = true;
    while (!release) std::this_thread::yield();
  });
  while (!inside) std::this_thread::yield();
  EXPECT_NE(mk::capi::destroy_plan("mk_test_destroy", h), 0);
  EXPECT_NE(std::string(mk_last_error()).find("mk_test_destroy: a plan's destroy came while one of its calls, on"),
            std::string::npos) << mk_last_error();
  EXPECT_EQ(comm.open_plans.load(), 1);  // still open
  release = true;
  caller.join();
  EXPECT_EQ(mk::capi::destroy_plan("mk_test_destroy", h), 0) << mk_last_error();
  EXPECT_EQ(comm.open_plans.load(), 0);
}

// A handle of another kind (C converts any pointer) or one whose destroy ran is refused by name: it was used as the
// kind the function takes (a communicator read as a plan), and a second destroy freed the same memory twice.
TEST(CApi, AHandleOfAnotherKindOrDestroyedIsRefusedByName) {
  mk_comm_s comm;  // (no Communicator inside: nothing here may get as far as using it)
  // A plan entry point given a communicator (the ops' entry points check as destroy_plan does; the CPU tier builds
  // without the ops, MK_OPS=none in tools/sanitize.sh, so a stand-in plan kind stands for them here).
  struct Idle {
    bool in_call() const noexcept { return false; }
  };
  struct StandInRs {
    static constexpr mk::capi::HandleKind handle_kind() { return mk::capi::HandleKind::GemmRs; }
    mk::capi::HandleKind kind = handle_kind();
    std::unique_ptr<Idle> plan;
    mk_comm_s* owner = nullptr;
  };
  auto other = std::make_unique<mk_comm_s>();  // (on the heap: the refused path's delete is never reached)
  EXPECT_NE(mk::capi::destroy_plan("mk_gemm_rs_destroy", reinterpret_cast<StandInRs*>(other.get())), 0);
  EXPECT_EQ(std::string(mk_last_error()), "mkernel: mk_gemm_rs_destroy: plan is not a GEMM+ReduceScatter plan "
                                           "(mk_gemm_rs_t) but a communicator (mk_comm_t)");
  mk_symm_info_t info;
  EXPECT_NE(mk_symm_info(reinterpret_cast<mk_symm_t>(&comm), &info), 0);
  EXPECT_NE(std::string(mk_last_error()).find("mk_symm_info: buf is not a symmetric buffer (mk_symm_t)"),
            std::string::npos) << mk_last_error();
  comm.kind = mk::capi::HandleKind::Destroyed;  // (as mk_comm_destroy leaves it, before the memory is freed)
  EXPECT_NE(mk_comm_barrier(&comm), 0);
  EXPECT_NE(std::string(mk_last_error()).find("mk_comm_barrier: comm was destroyed already"), std::string::npos)
      << mk_last_error();
  EXPECT_NE(mk_comm_destroy(&comm), 0);  // (a second destroy: refused, nothing freed)
  EXPECT_NE(std::string(mk_last_error()).find("mk_comm_destroy: comm was destroyed already"), std::string::npos)
      << mk_last_error();
  uint32_t stray[8] = {0x12345678};
  EXPECT_NE(mk_comm_barrier(reinterpret_cast<mk_comm_t>(stray)), 0);
  EXPECT_NE(std::string(mk_last_error()).find("not a live handle of this library"), std::string::npos)
      << mk_last_error();
}

// mk_gpu_spin's bounds are checked before CUDA (a CPU-only caller hears them): cycles in [0, 2^40]; 0 queues
// nothing (and needs no GPU).
TEST(CApi, GpuSpinRefusesCyclesOutsideItsRangeByName) {
  EXPECT_NE(mk_gpu_spin(-1, nullptr), 0);
  EXPECT_NE(std::string(mk_last_error()).find("mk_gpu_spin: cycles must be in [0, 1099511627776] (got -1)"),
            std::string::npos) << mk_last_error();
  EXPECT_NE(mk_gpu_spin((int64_t(1) << 40) + 1, nullptr), 0);
  EXPECT_EQ(mk_gpu_spin(0, nullptr), 0) << mk_last_error();
}
