// The tensor-parallel plans on a communicator of one rank (the GPU tier's):
// with MK_TP_SINGLE_RANK = plain run() is the standalone GEMM and the
// collectives copy; with fused, the fused kernels run as on several ranks;
// auto (the default) picks. Both against cuBLAS (every element, poisoned outputs, a ragged m),
// the gathered rows and the collectives byte for byte, CUDA-graph replay,
// bad input rejected before anything runs.
#include <cuda.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "mkernel/mkernel.hpp"
#include "mkernel/tp.hpp"
#include "src/ops/gemm/gemm_host.hpp"
#include "tests/dist/tp_test_util.hpp"  // host_gate
#include "tests/gpu/gemm_test_util.cuh"
#include "tests/gpu/half_mapped.hpp"
#include "tests/test_comm.hpp"
#include "tests/test_env.hpp"

namespace {

using namespace mkt;
using mk::test::comm;

// MK_TP_SINGLE_RANK for the scope (read when a plan is made; null: unset, i.e. the default).
struct Mode : mk::test::EnvGuard {
  explicit Mode(const char* v) : EnvGuard("MK_TP_SINGLE_RANK", v) {}
};

std::vector<uint8_t> bytes_of(const void* p, size_t n) {
  std::vector<uint8_t> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), p, n, cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

class SingleRankBase : public GemmFixture {
 protected:
  void SetUp() override {
    GemmFixture::SetUp();
    if (comm().world() != 1) GTEST_SKIP() << "one rank only (the GPU tier)";
  }
  // Captures `call` on s into a CUDA graph, then replays it `replays` times, each with fresh a (seed0 + i,
  // [m x k]) into poisoned out ([m x n]) against cuBLAS (b [n x k]).
  void replay_checked(cudaStream_t s, const std::function<void()>& call, const Buf& a, const Buf& b, const Buf& out,
                      int64_t m, int64_t n, int64_t k, uint64_t seed0, int replays, const std::string& what) {
    const Captured g(s, call);
    ASSERT_TRUE(g.ok()) << what;
    Buf ref(m * n * 4);
    for (int i = 0; i < replays; ++i) {
      random_bf16(a.p, m * k, seed0 + i);
      poison(out.p, m * n);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      ASSERT_EQ(g.launch(s), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
      reference(a.p, b.p, ref.as<float>(), m, n, k);
      expect_near(out.p, ref.as<float>(), m, n, what + " graph replay " + std::to_string(i));
    }
  }
};

class TpSingleRank : public SingleRankBase, public ::testing::WithParamInterface<const char*> {
 protected:
  bool plain() const { return std::string(GetParam()) == "plain"; }
};

// m = 200 (not a multiple of the 128-row tile), n = 320, k = 192.
constexpr int64_t kM = 200, kN = 320, kK = 192;

using TpSingleRankAuto = SingleRankBase;

TEST_P(TpSingleRank, AgGemmMatchesCublasAndReturnsTheRows) {
  const Mode mode(GetParam());
  mk::AgGemm plan(comm(), kM, kN, kK);
  EXPECT_EQ(plan.single_rank_plain(), plain());
  Buf a(kM * kK * 2), b(kN * kK * 2), out(kM * kN * 2), gathered(kM * kK * 2), ref(kM * kN * 4);
  for (int call = 0; call < 3; ++call) {  // fresh inputs every call
    random_bf16(a.p, kM * kK, 100 + call);
    random_bf16(b.p, kN * kK, 200 + call);
    poison(out.p, kM * kN);
    poison(gathered.p, kM * kK);
    plan.run(a.p, b.p, out.p, nullptr, gathered.p);
    reference(a.p, b.p, ref.as<float>(), kM, kN, kK);
    expect_near(out.p, ref.as<float>(), kM, kN, std::string("AgGemm ") + GetParam() + " call " + std::to_string(call));
    EXPECT_EQ(bytes_of(gathered.p, kM * kK * 2), bytes_of(a.p, kM * kK * 2)) << "gathered rows";
  }
  poison(gathered.p, kM * kK);
  plan.all_gather(a.p, gathered.p, nullptr);
  EXPECT_EQ(bytes_of(gathered.p, kM * kK * 2), bytes_of(a.p, kM * kK * 2)) << "all_gather";
  EXPECT_THROW(plan.run(a.p, b.p, nullptr, nullptr), std::exception) << "null out rejected";
  poison(out.p, kM * kN);
  EXPECT_THROW(plan.run(a.p, b.p, static_cast<char*>(out.p) + 2, nullptr), std::exception) << "misaligned out";
  EXPECT_THROW(plan.run(a.p, b.p, a.p, nullptr), std::exception) << "out overlapping a rejected";
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  Check untouched = check(out.p, kN, ref.as<float>(), kM, kN);
  EXPECT_EQ(untouched.nonfinite, static_cast<unsigned long long>(kM * kN)) << "a rejected call wrote out";
}

TEST_P(TpSingleRank, GemmRsMatchesCublasAndReduceScatterCopies) {
  const Mode mode(GetParam());
  mk::GemmRs plan(comm(), kM, kN, kK);
  EXPECT_EQ(plan.single_rank_plain(), plain());
  Buf a(kM * kK * 2), b(kN * kK * 2), out(kM * kN * 2), ref(kM * kN * 4), x(kM * kN * 2);
  random_bf16(a.p, kM * kK, 300);
  random_bf16(b.p, kN * kK, 301);
  poison(out.p, kM * kN);
  plan.run(a.p, b.p, out.p, nullptr);
  reference(a.p, b.p, ref.as<float>(), kM, kN, kK);
  expect_near(out.p, ref.as<float>(), kM, kN, std::string("GemmRs ") + GetParam());
  random_bf16(x.p, kM * kN, 302);
  poison(out.p, kM * kN);
  plan.reduce_scatter(x.p, out.p, nullptr);
  EXPECT_EQ(bytes_of(out.p, kM * kN * 2), bytes_of(x.p, kM * kN * 2)) << "reduce_scatter";
  EXPECT_THROW(plan.run(a.p, nullptr, out.p, nullptr), std::exception) << "null b rejected";
  EXPECT_THROW(plan.reduce_scatter(x.p, x.p, nullptr), std::exception) << "out overlapping x rejected";
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST_P(TpSingleRank, GemmArMatchesCublasInAGraphAndAllReduceCopies) {
  const Mode mode(GetParam());
  mk::GemmAr plan(comm(), kM, kN, kK);
  EXPECT_EQ(plan.single_rank_plain(), plain());
  Buf a(kM * kK * 2), b(kN * kK * 2), out(kM * kN * 2), x(kM * kN * 2);
  random_bf16(b.p, kN * kK, 401);
  const Stream s;
  replay_checked(s, [&] { plan.run(a.p, b.p, out.p, s); }, a, b, out, kM, kN, kK, 400, 3,
                 std::string("GemmAr ") + GetParam());
  random_bf16(x.p, kM * kN, 410);
  poison(out.p, kM * kN);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the fills ran on the legacy stream, s does not wait for it
  plan.all_reduce(x.p, out.p, s);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(bytes_of(out.p, kM * kN * 2), bytes_of(x.p, kM * kN * 2)) << "all_reduce";
  const std::vector<uint8_t> before = bytes_of(x.p, kM * kN * 2);
  plan.all_reduce(x.p, x.p, s);  // in place
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(bytes_of(x.p, kM * kN * 2), before) << "all_reduce in place";
}

// graphs_alive() while a graph holding a captured call exists (enable_trace refused then: the replays would write
// the buffer it frees), false a moment after the graph is destroyed (enable_trace accepted again); captured() stays.
TEST_P(TpSingleRank, GraphsAliveLastsAsLongAsTheCapturedGraph) {
  mk::GemmRs plan(comm(), kM, kN, kK);
  Buf a(kM * kK * 2), b(kN * kK * 2), out(kM * kN * 2);
  random_bf16(b.p, kN * kK, 431);
  const Stream s;
  EXPECT_FALSE(plan.captured());
  EXPECT_FALSE(plan.graphs_alive());
  {
    const Captured g(s, [&] { plan.run(a.p, b.p, out.p, s); });
    ASSERT_TRUE(g.ok());
    EXPECT_TRUE(plan.captured());
    EXPECT_TRUE(plan.graphs_alive());
    ASSERT_EQ(g.launch(s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    const std::string said = error_of([&] { plan.enable_trace(8); });
    EXPECT_NE(said.find("captured in a CUDA graph that still exists"), std::string::npos) << "enable_trace: " << said;
  }
  EXPECT_TRUE(graphs_released_within(plan, 5)) << GetParam();
  EXPECT_TRUE(plan.captured());
  EXPECT_NO_THROW(plan.enable_trace(8));
  EXPECT_NO_THROW(plan.enable_trace(0));
  plan.run(a.p, b.p, out.p, s);  // eager calls after it change nothing
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_FALSE(plan.graphs_alive());
}

// Whether every two kernel nodes of `g` are ordered (a path of edges leads from one to the other).
bool kernels_in_one_chain(cudaGraph_t g, size_t* kernels) {
  size_t n = 0, ne = 0;
  if (cudaGraphGetNodes(g, nullptr, &n) != cudaSuccess || cudaGraphGetEdges(g, nullptr, nullptr, nullptr, &ne))
    return false;
  std::vector<cudaGraphNode_t> nodes(n), from(ne), to(ne);
  if (cudaGraphGetNodes(g, nodes.data(), &n) != cudaSuccess ||
      cudaGraphGetEdges(g, from.data(), to.data(), nullptr, &ne) != cudaSuccess)
    return false;
  auto index = [&](cudaGraphNode_t x) { return std::find(nodes.begin(), nodes.end(), x) - nodes.begin(); };
  std::vector<std::vector<bool>> reach(n, std::vector<bool>(n, false));
  for (size_t e = 0; e < ne; ++e) reach[index(from[e])][index(to[e])] = true;
  for (size_t k = 0; k < n; ++k)  // (transitive closure: graphs of a few nodes)
    for (size_t i = 0; i < n; ++i)
      if (reach[i][k])
        for (size_t j = 0; j < n; ++j) reach[i][j] = reach[i][j] || reach[k][j];
  std::vector<size_t> ks;
  for (size_t i = 0; i < n; ++i) {
    cudaGraphNodeType t{};
    if (cudaGraphNodeGetType(nodes[i], &t) == cudaSuccess && t == cudaGraphNodeTypeKernel) ks.push_back(i);
  }
  *kernels = ks.size();
  for (size_t x = 0; x < ks.size(); ++x)
    for (size_t y = x + 1; y < ks.size(); ++y)
      if (!reach[ks[x]][ks[y]] && !reach[ks[y]][ks[x]]) return false;
  return true;
}

// Two calls of one plan captured into one graph on forked streams (s forks s2 through an event, s2 joins back):
// the second waits for the first in the graph, and a replay gives both results. Before 2026-12-06 nothing
// ordered them (LaunchOrder left captures alone): a replay ran them at once on the plan's epoch counter and
// buffers.
TEST_P(TpSingleRank, TwoCallsCapturedOnForkedStreamsAreOrderedInTheGraph) {
  const Mode mode(GetParam());
  mk::AgGemm plan(comm(), kM, kN, kK);
  Buf a1(kM * kK * 2), a2(kM * kK * 2), b(kN * kK * 2), out1(kM * kN * 2), out2(kM * kN * 2), ref(kM * kN * 4);
  random_bf16(b.p, kN * kK, 601);
  random_bf16(a1.p, kM * kK, 602);
  random_bf16(a2.p, kM * kK, 603);
  const Stream s, s2;
  cudaEvent_t fork = nullptr, join = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&join, cudaEventDisableTiming), cudaSuccess);
  {
    const Captured g(s, [&] {
      ASSERT_EQ(cudaEventRecord(fork, s), cudaSuccess);
      ASSERT_EQ(cudaStreamWaitEvent(s2, fork, 0), cudaSuccess);
      plan.run(a1.p, b.p, out1.p, s);
      plan.run(a2.p, b.p, out2.p, s2);
      ASSERT_EQ(cudaEventRecord(join, s2), cudaSuccess);
      ASSERT_EQ(cudaStreamWaitEvent(s, join, 0), cudaSuccess);
    });
    ASSERT_TRUE(g.ok());
    size_t kernels = 0;
    EXPECT_TRUE(kernels_in_one_chain(g.graph(), &kernels)) << "the two calls' kernels are not ordered in the graph";
    EXPECT_GE(kernels, 2u);
    poison(out1.p, kM * kN);
    poison(out2.p, kM * kN);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_EQ(g.launch(s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    reference(a1.p, b.p, ref.as<float>(), kM, kN, kK);
    expect_near(out1.p, ref.as<float>(), kM, kN, std::string("first captured call, ") + GetParam());
    reference(a2.p, b.p, ref.as<float>(), kM, kN, kK);
    expect_near(out2.p, ref.as<float>(), kM, kN, std::string("second captured call, ") + GetParam());
  }
  cudaEventDestroy(fork);
  cudaEventDestroy(join);
}

// Plans that outlive their communicator (declared before it in a struct): the communicator's destruction releases
// them, newest first, saying so; a later call fails naming why, and their destruction does nothing more. Before
// 2026-12-06 a plan's destructor used the destroyed communicator (a crash).
TEST(TpPlanLifetime, PlansOutlivingTheirCommunicatorAreReleasedWithIt) {
  auto c = mk::Communicator::from_env();
  ASSERT_EQ(c->world(), 1);
  auto ag = std::make_unique<mk::AgGemm>(*c, kM, kN, kK);
  auto ar = std::make_unique<mk::GemmAr>(*c, kM, kN, kK);
  Buf a(kM * kK * 2), b(kN * kK * 2), out(kM * kN * 2);
  random_bf16(a.p, kM * kK, 701);
  random_bf16(b.p, kN * kK, 702);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ar->run(a.p, b.p, out.p, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  testing::internal::CaptureStderr();
  c.reset();
  const std::string said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("destroying the communicator with 2 of its plans still alive: they are released now"),
            std::string::npos) << said;
  std::string error;
  try {
    ar->run(a.p, b.p, out.p, nullptr);
  } catch (const mk::Error& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("GemmAr: the plan's communicator was destroyed"), std::string::npos) << error;
  // AgGemm's calls with a gathered output checked it against the communicator's world and device first (a read of
  // the destroyed communicator before 2026-12-06, which only a memory checker shows reliably).
  Buf gathered(kM * kK * 2);
  for (const auto& [what, call] : std::vector<std::pair<std::string, std::function<void()>>>{
           {"AgGemm::run", [&] { ag->run(a.p, b.p, out.p, nullptr, gathered.p); }},
           {"AgGemm::all_gather", [&] { ag->all_gather(a.p, gathered.p, nullptr); }}}) {
    error.clear();
    try {
      call();
    } catch (const mk::Error& e) {
      error = e.what();
    }
    EXPECT_NE(error.find(what + ": the plan's communicator was destroyed"), std::string::npos) << error;
  }
  ar.reset();
  ag.reset();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// A CUDA call that the library makes and that fails without the device
// failing (here refused, while a stream capture in global mode is open on this
// thread) is reported once: the library's own static runtime keeps no error
// for its next launch check to report as that launch's (session 36: a plan
// destroyed inside such a capture failed the next plan's first run). Both
// paths: a checked call that throws (read_trace's device sync), and teardown's
// release calls (a plan destroyed in the capture: warned, kept, cleared).
TEST_P(TpSingleRank, ARefusedCudaCallLeavesNoErrorForTheNextRun) {
  const Mode mode(GetParam());
  mk::AgGemm plan(comm(), kM, kN, kK);
  plan.enable_trace(4);
  const size_t before = comm().symmetric_bytes();
  auto doomed = std::make_unique<mk::AgGemm>(comm(), kM, kN, kK);
  const size_t held = comm().symmetric_bytes();
  if (!plain()) EXPECT_GT(held, before) << "a fused plan's gathered buffer is symmetric";
  std::string said;
  testing::internal::CaptureStderr();
  mk::test::with_global_capture(true, [&] {
    said = error_of([&] { (void)plan.read_trace(); });
    doomed.reset();  // never throws: its refused frees are warned about
  });
  const std::string warned = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("cudaDeviceSynchronize() failed: cudaErrorStreamCaptureUnsupported"), std::string::npos) << said;
  EXPECT_NE(warned.find("teardown: AgGemm's device counters not released (cudaErrorStreamCaptureUnsupported"),
            std::string::npos)
      << "the plan's cudaFree was not refused inside the capture, so this test shows nothing: " << warned;
  EXPECT_EQ(mk::pending_cuda_error(), 0) << mk::cuda_error_string(mk::pending_cuda_error()) << " left pending";
  EXPECT_EQ(comm().symmetric_bytes(), held) << "the plan's buffer was freed although the sync was refused";
  Buf a(kM * kK * 2), b(kN * kK * 2), out(kM * kN * 2), ref(kM * kN * 4);
  random_bf16(a.p, kM * kK, 500);
  random_bf16(b.p, kN * kK, 501);
  poison(out.p, kM * kN);
  plan.run(a.p, b.p, out.p, nullptr);
  reference(a.p, b.p, ref.as<float>(), kM, kN, kK);
  expect_near(out.p, ref.as<float>(), kM, kN, std::string("AgGemm after the refused calls, ") + GetParam());
}

// Raw pointers that are not this GPU's memory are refused by name before anything is enqueued (the Python layer
// checks its tensors; a C++ or C ABI caller's host pointer faulted inside the kernel before 2026-12-06): pageable
// and page-locked host memory as any argument, and a buffer whose last byte lies past its mapping. The plans
// then still run right.
TEST_P(TpSingleRank, PointersThatAreNotThisGpusMemoryAreRefusedBeforeAnyLaunch) {
  const Mode mode(GetParam());
  mk::AgGemm ag(comm(), kM, kN, kK);
  mk::GemmRs rs(comm(), kM, kN, kK);
  mk::GemmAr ar(comm(), kM, kN, kK);
  Buf a(kM * kK * 2), b(kN * kK * 2), out(kM * kN * 2), ref(kM * kN * 4);
  std::vector<uint8_t> pageable_bytes(kM * kN * 2 + 64);
  void* pageable = pageable_bytes.data() + (16 - reinterpret_cast<uintptr_t>(pageable_bytes.data()) % 16) % 16;
  void* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned, kM * kN * 2), cudaSuccess);
  const HalfMapped half;
  void* short_out = half.end - 4096;  // mapped from here for 4 KiB; out needs kM * kN * 2 bytes
  const auto refused = [&](const std::function<void()>& call, const std::string& what, const std::string& why) {
    const std::string e = error_of(call);
    EXPECT_NE(e.find(what + " ("), std::string::npos) << e;
    EXPECT_NE(e.find("must be device memory of the call's GPU"), std::string::npos) << e;
    EXPECT_NE(e.find(why), std::string::npos) << e;
  };
  const std::string host = "it starts in host memory", locked = "it starts in host memory (page-locked)";
  const std::string past = "its last byte lies in host memory, or an address no CUDA allocation covers: the buffer "
                           "is shorter than the call's shape needs";
  refused([&] { ag.run(pageable, b.p, out.p, nullptr); }, "AgGemm: a_local", host);
  refused([&] { ag.run(a.p, pinned, out.p, nullptr); }, "AgGemm: b", locked);
  refused([&] { ag.run(a.p, b.p, short_out, nullptr); }, "AgGemm: out", past);
  refused([&] { ag.run(a.p, b.p, out.p, nullptr, pinned); }, "AgGemm::run: gathered", locked);
  refused([&] { ag.all_gather(a.p, pageable, nullptr); }, "AgGemm::all_gather: gathered", host);
  refused([&] { rs.run(a.p, b.p, pageable, nullptr); }, "GemmRs: out", host);
  refused([&] { rs.run(pinned, b.p, out.p, nullptr); }, "GemmRs: a", locked);
  refused([&] { rs.reduce_scatter(pageable, out.p, nullptr); }, "GemmRs::reduce_scatter: x", host);
  refused([&] { ar.run(a.p, pageable, out.p, nullptr); }, "GemmAr: b", host);
  refused([&] { ar.all_reduce(out.p, short_out, nullptr); }, "GemmAr::all_reduce: out", past);
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << "a refused call enqueued something that failed";
  random_bf16(a.p, kM * kK, 610);
  random_bf16(b.p, kN * kK, 611);
  reference(a.p, b.p, ref.as<float>(), kM, kN, kK);
  for (int i = 0; i < 3; ++i) {
    poison(out.p, kM * kN);
    if (i == 0) ag.run(a.p, b.p, out.p, nullptr);
    if (i == 1) rs.run(a.p, b.p, out.p, nullptr);
    if (i == 2) ar.run(a.p, b.p, out.p, nullptr);
    expect_near(out.p, ref.as<float>(), kM, kN, std::string("after the refusals, op ") + std::to_string(i));
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, TpSingleRank, ::testing::Values("plain", "fused"),
                         [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

// A plan's destructor frees its own device memory (counters, split-tile scratch) with cudaFree, which waits for the
// whole device, work that is not mkernel's too. It synchronises the device first, reported: with other work held
// on another stream (a gate kernel the host opens after 1 s), a warning names the plan being destroyed and what it
// waits for after 4 x MK_TIMEOUT_MS (0.4 s here), instead of cudaFree waiting without a word. The fused plans:
// each holds device counters of its own.
TEST_F(SingleRankBase, DestroyingAPlanBehindOtherWorkSaysWhatItWaitsFor) {
  const Mode mode("fused");
  int* open = nullptr;
  int* timed_out = nullptr;
  ASSERT_EQ(cudaHostAlloc(&open, sizeof(int), cudaHostAllocMapped), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&timed_out, sizeof(int)), cudaSuccess);
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  const char* names[] = {"an AgGemm plan", "a GemmRs plan", "a GemmAr plan"};
  for (int i = 0; i < 3; ++i) {
    std::unique_ptr<mk::AgGemm> ag;
    std::unique_ptr<mk::GemmRs> rs;
    std::unique_ptr<mk::GemmAr> ar;
    if (i == 0) ag = std::make_unique<mk::AgGemm>(comm(), kM, kN, kK);
    if (i == 1) rs = std::make_unique<mk::GemmRs>(comm(), kM, kN, kK);
    if (i == 2) ar = std::make_unique<mk::GemmAr>(comm(), kM, kN, kK);
    *static_cast<volatile int*>(open) = 0;
    ASSERT_EQ(cudaMemset(timed_out, 0, sizeof(int)), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    host_gate<<<1, 1, 0, s>>>(open, timed_out, 10'000'000'000ull);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    std::thread opener([open] {
      std::this_thread::sleep_for(std::chrono::milliseconds(1000));
      *static_cast<volatile int*>(open) = 1;
    });
    std::string said;
    {
      const mk::test::EnvGuard timeout("MK_TIMEOUT_MS", "100");
      testing::internal::CaptureStderr();
      ag.reset();
      rs.reset();
      ar.reset();
      said = testing::internal::GetCapturedStderr();
    }
    opener.join();
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    int gate_timed_out = 1;
    ASSERT_EQ(cudaMemcpy(&gate_timed_out, timed_out, sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(gate_timed_out, 0) << "the gate kernel ended by its own bound, not opened by the host";
    const std::string want = std::string("destroying ") + names[i] + " (its device memory): still waiting after 0.4 s";
    EXPECT_NE(said.find(want), std::string::npos) << "wanted '" << want << "' in: " << said;
    EXPECT_NE(said.find("queued work"), std::string::npos) << said;
  }
  cudaStreamDestroy(s);
  cudaFree(timed_out);
  cudaFreeHost(open);
}

// auto (the default): plain, not where the standalone GEMM leaves a short last wave whole (k < 4096) that the plan
// splits; eager and captured calls alike (AgGemmEagerAndInAGraphOnAShortLastWave).
TEST(TpSingleRankKnob, AutoByDefaultAndBadValuesAreRejected) {
  if (comm().world() != 1) GTEST_SKIP() << "one rank only (the GPU tier)";
  {
    const Mode unset(nullptr);
    EXPECT_TRUE(mk::GemmAr(comm(), 256, 256, 128).single_rank_plain()) << "no split tiles: plain";
    int dev = 0, sms = 0;
    ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
    ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), cudaSuccess);
    // m x n tiles of 128 x 256: a whole number of waves, then one tile more (k 4096: the standalone GEMM
    // splits it too; k 512: it does not, the plan does).
    const int64_t whole = 256 * sms, short_wave = 128 * (sms + 1);
    mk::AgGemm full(comm(), whole, 256, 512), ragged(comm(), short_wave, 256, 4096),
        ragged_short_k(comm(), short_wave, 256, 512);
    EXPECT_TRUE(full.single_rank_plain()) << "whole waves";
    EXPECT_GT(ragged.split_tiles(), 0) << "a last wave of one tile is split";
    EXPECT_TRUE(ragged.single_rank_plain()) << "the standalone GEMM splits it too";
    EXPECT_GT(ragged_short_k.split_tiles(), 0);
    EXPECT_FALSE(ragged_short_k.single_rank_plain()) << "k 512: only the fused kernel splits it";
  }
  const Mode bad("fast");
  for (int op = 0; op < 3; ++op) {
    try {
      if (op == 0) mk::GemmRs(comm(), 256, 256, 128);
      if (op == 1) mk::GemmAr(comm(), 256, 256, 128);
      if (op == 2) mk::AgGemm(comm(), 256, 256, 128);
      ADD_FAILURE() << "MK_TP_SINGLE_RANK=fast accepted by plan " << op;
    } catch (const std::exception& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("MK_TP_SINGLE_RANK"), std::string::npos) << msg;
      EXPECT_NE(msg.find("auto|plain|fused"), std::string::npos) << msg;
    }
  }
}

// MK_LOG=debug: each plan says what it chose when it is made. In a child process (the level is read once per
// process), which reads both variables before its communicator logs its first line.
TEST(TpSingleRankLog, DebugLevelSaysEachPlansChoices) {
  const mk::test::EnvGuard log("MK_LOG", "debug");
  const Mode fused("fused");
  if (comm().world() != 1) GTEST_SKIP() << "one rank only (the GPU tier)";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        { const mk::AgGemm p(comm(), 256, 256, 128); }
        { const mk::GemmRs p(comm(), 256, 256, 128); }
        { const mk::GemmAr p(comm(), 256, 256, 128); }
        std::exit(0);
      },
      ::testing::ExitedWithCode(0),
      "rank 0: AgGemm plan m_local x n x k = 256x256x128 on .*: fused, [0-9]+ CTAs \\([0-9]+ comm, [0-9]+ compute"
      ".*rank 0: GemmRs plan m x n x k_local = 256x256x128 on .*: fused, [0-9]+ CTAs, swizzle"
      ".*rank 0: GemmAr plan m x n x k_local = 256x256x128 on .*: fused two-shot, [0-9]+ CTAs \\([0-9]+ gather");
}

// A plan whose calls are all plain (one rank; auto where nothing is split, or plain) allocates none of its
// fused kernel's buffers: the gathered rows (AgGemm, m x k) and the staging (GemmRs, GemmAr: m x n), over
// 128 MB each here, and its gathered_buffer() is null; with fused they are there (the measure sees them).
TEST(TpSingleRankMemory, PlainPlansAllocateNoFusedBuffers) {
  if (comm().world() != 1) GTEST_SKIP() << "one rank only (the GPU tier)";
  int dev = 0, sms = 0;
  ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), cudaSuccess);
  const int64_t m_ag = 256 * int64_t(sms), k_ag = 2048;  // 2 x sms tiles of 128 x 256: whole waves, no split
  constexpr int64_t m = 8192, n = 8192, k = 1024;
  constexpr size_t kSlack = size_t(16) << 20;  // counters, signals, allocator granules
  for (const char* mode_name : {"auto", "plain", "fused"}) {
    const Mode mode(mode_name);
    const bool fused = std::string(mode_name) == "fused";
    size_t free0 = 0, total = 0;
    // Device memory the plan `what` holds (against free0, read before it was made); buffer: its fused
    // kernel's buffer's size.
    auto check_held = [&](const std::string& what, bool plain, size_t buffer) {
      size_t free1 = 0;
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      ASSERT_EQ(cudaMemGetInfo(&free1, &total), cudaSuccess);
      const size_t held = free0 > free1 ? free0 - free1 : 0;
      EXPECT_EQ(plain, !fused) << what;
      if (fused)
        EXPECT_GE(held, buffer) << what << ": the fused kernel's buffer is missing from the measure";
      else
        EXPECT_LT(held, kSlack) << what << ": a plain plan holds " << held << " bytes";
    };
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_EQ(cudaMemGetInfo(&free0, &total), cudaSuccess);
    {
      const mk::AgGemm ag(comm(), m_ag, 256, k_ag);
      ASSERT_EQ(ag.split_tiles(), 0);
      check_held(std::string("AgGemm ") + mode_name, ag.single_rank_plain(), size_t(m_ag * k_ag * 2));
      EXPECT_EQ(ag.gathered_buffer() == nullptr, !fused) << "gathered_buffer(), " << mode_name;
    }
    ASSERT_EQ(cudaMemGetInfo(&free0, &total), cudaSuccess);
    {
      const mk::GemmRs rs(comm(), m, n, k, mk::GemmRsOptions{.split_tail = false});
      check_held(std::string("GemmRs ") + mode_name, rs.single_rank_plain(), size_t(m * n * 2));
    }
    ASSERT_EQ(cudaMemGetInfo(&free0, &total), cudaSuccess);
    {
      const mk::GemmAr ar(comm(), m, n, k);
      check_held(std::string("GemmAr ") + mode_name, ar.single_rank_plain(), size_t(m * n * 2));
    }
  }
}

// auto on a shape with a one-tile last wave (the plan splits it, and so does the standalone GEMM at k 4096):
// eager calls and calls captured into a graph both take the standalone GEMM, split, the graph's in the plan's
// own workspace; the graph's replay gives the eager call's bits; both against cuBLAS.
TEST_F(TpSingleRankAuto, AgGemmEagerAndInAGraphOnAShortLastWave) {
  const Mode mode("auto");
  int dev = 0, sms = 0;
  ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), cudaSuccess);
  const int64_t m = 128 * (sms + 1), n = 256, k = 4096;
  mk::AgGemm plan(comm(), m, n, k);
  ASSERT_GT(plan.split_tiles(), 0);
  ASSERT_TRUE(plan.single_rank_plain());
  Buf a(m * k * 2), b(n * k * 2), out(m * n * 2), graphed(m * n * 2), ref(m * n * 4);
  random_bf16(b.p, n * k, 501);
  const Stream s;
  for (int call = 0; call < 2; ++call) {
    random_bf16(a.p, m * k, 500 + call);
    poison(out.p, m * n);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    mk::gemm::set_last_split_tiles(-1);
    plan.run(a.p, b.p, out.p, s);
    EXPECT_GT(mk::gemm::last_split_tiles(), 0) << "the eager call ran the standalone GEMM, split";
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    reference(a.p, b.p, ref.as<float>(), m, n, k);
    expect_near(out.p, ref.as<float>(), m, n, "AgGemm auto eager call " + std::to_string(call));
  }
  mk::gemm::set_last_split_tiles(-1);
  {
    const Captured g(s, [&] { plan.run(a.p, b.p, graphed.p, s); });
    ASSERT_TRUE(g.ok());
    EXPECT_GT(mk::gemm::last_split_tiles(), 0) << "the captured call ran the standalone GEMM, split";
    poison(graphed.p, m * n);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_EQ(g.launch(s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_EQ(count_diff(out.p, graphed.p, m * n), 0u) << "the graph's replay differs from the eager call";
  }
  replay_checked(s, [&] { plan.run(a.p, b.p, out.p, s); }, a, b, out, m, n, k, 510, 2, "AgGemm auto");
}

}  // namespace

// Plans give their signal words back when destroyed (Communicator::release_signals, zeroed), and later plans reuse
// them: a process that makes a plan for every new shape and closes the old ones stays within the pool. Before
// 2026-12-04 the words were never given back, and a 65536-word pool ran out after ~250 plans of this size.
using TpPlanSignals = SingleRankBase;

TEST_F(TpPlanSignals, PlansForManyShapesGiveTheirSignalsBack) {
  const int held0 = comm().signals_in_use();
  const int pool = comm().device_ctx().num_signals;
  int64_t reserved = 0;  // what the plans reserved in all
  for (int i = 0; i < 600 && reserved <= 2 * int64_t(pool); ++i) {
    const int64_t m = 16384 - 128 * (i % 16);  // a new shape every time (each a plain plan: cheap to make)
    int held = 0;
    switch (i % 3) {
      case 0: {
        const mk::GemmRs p(comm(), m, 64, 64);
        held = comm().signals_in_use();
        break;
      }
      case 1: {
        const mk::GemmAr p(comm(), m, 64, 64);
        held = comm().signals_in_use();
        break;
      }
      default: {
        const mk::AgGemm p(comm(), m, 64, 64);
        held = comm().signals_in_use();
        break;
      }
    }
    ASSERT_GT(held, held0) << "plan " << i << " reserved no signals";
    reserved += held - held0;
    ASSERT_EQ(comm().signals_in_use(), held0) << "plan " << i << " kept signals after it was destroyed";
  }
  EXPECT_GT(reserved, 2 * int64_t(pool)) << "the loop did not reserve more than the pool holds";
  // A fused plan on the reused words still computes (its waits start from zeroed counts).
  const Mode mode("fused");
  mk::GemmAr plan(comm(), kM, kN, kK);
  Buf a(kM * kK * 2), b(kN * kK * 2), out(kM * kN * 2), ref(kM * kN * 4);
  for (int call = 0; call < 3; ++call) {
    random_bf16(a.p, kM * kK, 500 + call);
    random_bf16(b.p, kN * kK, 510 + call);
    poison(out.p, kM * kN);
    plan.run(a.p, b.p, out.p, nullptr);
    reference(a.p, b.p, ref.as<float>(), kM, kN, kK);
    expect_near(out.p, ref.as<float>(), kM, kN, "GemmAr fused on reused signals, call " + std::to_string(call));
  }
}

// A plan made and closed while another exception unwinds (in a destructor) was not failing: it gives its words
// back. Before session 69 any exception in flight counted, and it kept them; where the library carries its own
// libstdc++ (the GPU machine's g++), every error the caller had caught counted so, and every later plan kept them.
TEST_F(TpPlanSignals, APlanClosedWhileAnotherExceptionUnwindsGivesItsSignalsBack) {
  const int held0 = comm().signals_in_use();
  int held = 0, after = 0;
  struct MakesAPlan {
    mk::Communicator& c;
    int &held, &after;
    ~MakesAPlan() {
      {
        const mk::GemmRs p(c, 4096, 64, 64);
        held = c.signals_in_use();
      }
      after = c.signals_in_use();
    }
  };
  try {
    const MakesAPlan m{comm(), held, after};
    throw std::runtime_error("the caller's own error");
  } catch (const std::runtime_error&) {
  }
  EXPECT_GT(held, held0) << "the plan reserved no signals";
  EXPECT_EQ(after, held0) << "the plan kept its signals, as if it had failed";
  EXPECT_EQ(comm().signals_in_use(), held0);
}

// Bad releases are refused with the reason and change nothing; a pool too small says what holds it.
TEST_F(TpPlanSignals, BadReleasesAndAFullPoolAreReported) {
  const int held0 = comm().signals_in_use();
  const int pool = comm().device_ctx().num_signals;
  const int base = comm().reserve_signals(8);
  EXPECT_NE(error_of([&] { comm().release_signals(pool - 4, 8); }).find("not a run held now"), std::string::npos);
  EXPECT_NE(error_of([&] { comm().reserve_signals(pool); }).find("no run of"), std::string::npos);
  EXPECT_NE(error_of([&] { comm().reserve_signals(0); }).find("at least 1"), std::string::npos);
  EXPECT_EQ(comm().signals_in_use(), held0 + 8);
  comm().release_signals(base, 8);
  EXPECT_NE(error_of([&] { comm().release_signals(base, 8); }).find("not a run held now"), std::string::npos) << "twice";
  EXPECT_EQ(comm().signals_in_use(), held0);
  EXPECT_EQ(comm().reserve_signals(8), base) << "first fit: the run just given back";
  comm().release_signals(base, 8);
  EXPECT_NE(error_of([&] { comm().release_signals(base, 4); }).find("not a run held now"), std::string::npos);
}

// MK_SIGNAL_REUSE=0: a destroyed plan keeps its words (the behaviour before 2026-12-04).
TEST_F(TpPlanSignals, ReuseOffKeepsTheWords) {
  const int held0 = comm().signals_in_use();
  int held = 0;
  {
    const mk::test::EnvGuard off("MK_SIGNAL_REUSE", "0");
    const mk::GemmRs p(comm(), 1024, 64, 64);
    held = comm().signals_in_use();
  }
  EXPECT_GT(held, held0);
  EXPECT_EQ(comm().signals_in_use(), held) << "MK_SIGNAL_REUSE=0, yet the plan gave its words back";
}

// A malformed MK_SIGNAL_REUSE set after init (init refuses one) keeps the words too, and says why.
TEST_F(TpPlanSignals, AMalformedReuseKeepsTheWordsSayingSo) {
  const int held0 = comm().signals_in_use();
  int held = 0;
  std::string said;
  {
    const mk::test::EnvGuard bad("MK_SIGNAL_REUSE", "maybe");
    testing::internal::CaptureStderr();
    {
      const mk::GemmRs p(comm(), 1024, 64, 64);
      held = comm().signals_in_use();
    }
    said = testing::internal::GetCapturedStderr();
  }
  EXPECT_GT(held, held0);
  EXPECT_EQ(comm().signals_in_use(), held) << "a malformed MK_SIGNAL_REUSE, yet the plan gave its words back";
  EXPECT_NE(said.find("MK_SIGNAL_REUSE='maybe' is not a boolean"), std::string::npos) << said;  // (the parser's)
  EXPECT_NE(said.find("stay reserved"), std::string::npos) << said;
}
