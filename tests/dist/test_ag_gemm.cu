// AllGather + GEMM on 2 or more ranks (1x2 NVLink, 2x1 network, 2x2 both): against an fp32 reference of the
// gathered rows times this rank's B, every element; the gathered rows
// themselves byte for byte; M down to W rows and chunks that are not tile
// multiples; 100 back-to-back calls with changing inputs and no host sync;
// CUDA-graph replay; calls on two streams; the standalone all-gather; bad plans and inputs
// rejected with the reason.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "mkernel/mkernel.hpp"
#include "mkernel/tp.hpp"
#include "src/ops/ag_gemm/tp_plan.hpp"
#include "tests/gpu/gemm_test_util.cuh"
#include "tests/dist/scarce_sms.cuh"
#include "tests/dist/tp_test_util.hpp"
#include "tests/test_comm.hpp"

using namespace mk;
using mk::test::comm;
using namespace mkt;

namespace {

#define CK(x) comm().check(static_cast<int>(x), #x)


uint64_t seed_a(int rank, int call) { return 5000 + 31 * rank + 977 * call; }

class AgGemmTest : public GemmCheck {
 protected:
  // A of every rank, regenerated here from the seeds: [W m_local x k].
  void gathered_reference(void* full, int64_t m_local, int64_t k, int call) {
    for (int r = 0; r < comm().world(); ++r)
      random_bf16(static_cast<uint16_t*>(full) + r * m_local * k, m_local * k, seed_a(r, call));
  }

  void check_call(const void* out, const void* gathered, int64_t m_local, int64_t n, int64_t k, const void* b,
                  int call, const char* what) {
    const int64_t m = comm().world() * m_local;
    Buf full(m * k * 2), ref(m * n * 4);
    gathered_reference(full.p, m_local, k, call);
    simt_reference(full.p, b, ref.as<float>(), m, n, k);
    CK(cudaDeviceSynchronize());
    Check c = check(out, n, ref.as<float>(), m, n);
    EXPECT_EQ(c.nonfinite, 0u) << what << " call " << call << ": rows never computed";
    EXPECT_LT(c.rel, 1e-2) << what << " call " << call;
    EXPECT_EQ(far_elements(out, n, ref.as<float>(), m, n, c), 0u) << what << " call " << call << ": stale elements";
    if (gathered) {
      std::vector<uint16_t> want(m * k), got(m * k);
      CK(cudaMemcpy(want.data(), full.p, m * k * 2, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(got.data(), gathered, m * k * 2, cudaMemcpyDeviceToHost));
      EXPECT_EQ(std::memcmp(want.data(), got.data(), m * k * 2), 0) << what << " call " << call << ": gathered rows";
    }
  }

  // run() on a 512-row share per rank while another kernel holds all SMs
  // but `free_sms` (tests/dist/scarce_sms.cuh; 0: the plan's comm CTAs),
  // checked against the reference.
  void expect_run_finishes_on(int free_sms, int call, const char* what) {
    const int me = comm().rank();
    const int64_t m_local = 512, n = 256, k = 256, m = comm().world() * m_local;
    AgGemm plan(comm(), m_local, n, k);
    if (free_sms == 0) free_sms = plan.num_comm_ctas();
    SCOPED_TRACE(std::to_string(plan.num_comm_ctas()) + " comm CTAs, " + std::to_string(free_sms) + " SMs free");
    Buf a(m_local * k * 2), b(n * k * 2), out(m * n * 2);
    random_bf16(a.p, m_local * k, seed_a(me, call));
    random_bf16(b.p, n * k, 77 + me);
    poison(out.p, m * n);
    EXPECT_EQ(finishes_on_free_sms(out.p, m * n, free_sms, [&](cudaStream_t s) { plan.run(a.p, b.p, out.p, s); }), "");
    check_call(out.p, nullptr, m_local, n, k, b.p, call, what);
    comm().barrier();
  }
};

TEST_F(AgGemmTest, MatchesReferenceAcrossShapes) {
  if (!tp_ranks()) GTEST_SKIP() << kNeedsRanks;
  struct S {
    int64_t m_local, n, k;
  };
  const int me = comm().rank();
  int call = 0;
  for (S s : {S{1, 64, 64}, S{100, 192, 256}, S{1000, 320, 512}, S{2048, 512, 1024}}) {
    SCOPED_TRACE("m_local " + std::to_string(s.m_local) + " n " + std::to_string(s.n) + " k " + std::to_string(s.k));
    AgGemm plan(comm(), s.m_local, s.n, s.k);
    const int64_t m = comm().world() * s.m_local;
    Buf a(s.m_local * s.k * 2), b(s.n * s.k * 2), out(m * s.n * 2), gathered(m * s.k * 2);
    random_bf16(b.p, s.n * s.k, 77 + me);  // each rank its own column shard
    ++call;
    random_bf16(a.p, s.m_local * s.k, seed_a(me, call));
    poison(out.p, m * s.n);
    poison(gathered.p, m * s.k);
    CK(cudaDeviceSynchronize());
    plan.run(a.p, b.p, out.p, nullptr, gathered.p);
    CK(cudaDeviceSynchronize());
    check_call(out.p, gathered.p, s.m_local, s.n, s.k, b.p, call, "run");
    comm().barrier();
  }
}

// What one call sends over the network, as the host proxy counts it, is the
// documented figure (tp::ag_bytes_per_gpu: own rows once per other node).
TEST_F(AgGemmTest, NetworkBytesMatchTheFormula) {
  if (!tp_ranks() || !across_nodes()) GTEST_SKIP() << (tp_ranks() ? kNeedsNodes : kNeedsRanks);
  const int64_t m_local = 256, n = 256, k = 512, m = comm().world() * m_local;
  AgGemm plan(comm(), m_local, n, k);
  Buf a(m_local * k * 2), b(n * k * 2), out(m * n * 2), gathered(m * k * 2);
  random_bf16(a.p, m_local * k, 7 + comm().rank());
  random_bf16(b.p, n * k, 8 + comm().rank());
  const auto& t = comm().topology();
  expect_network_bytes(
      tp::ag_bytes_per_gpu(t.num_nodes, t.local_size, m_local, k).network, [&] { plan.run(a.p, b.p, out.p, nullptr); },
      "all_gather()", [&] { plan.all_gather(a.p, gathered.p, nullptr); });
}

// A plan destroyed while its buffer cannot be freed on one rank (that
// rank's device sync is refused: a stream capture in progress in global
// mode) keeps the buffer on every rank alike (free_symmetric exchanges the
// outcome) and keeps its signal words, and the ranks stay in step: the next
// plan, made collectively, works. Across nodes the plan's network region
// stays registered on every rank too (Network::deregister_buffer exchanges
// the sync outcomes; before session 35 every rank let it go), and so the
// buffer is not even tried.
TEST_F(AgGemmTest, APlanWhoseBufferCannotBeFreedKeepsItOnEveryRank) {
  if (!tp_ranks()) GTEST_SKIP() << kNeedsRanks;
  const int64_t m_local = 128, n = 256, k = 256;
  const int failing = comm().world() - 1;
  auto plan = std::make_unique<AgGemm>(comm(), m_local, n, k);
  const size_t held = comm().symmetric_bytes();
  const bool across = comm().topology().num_nodes > 1;
  const int regions = across ? comm().network().registered_buffers() : 0;
  if (across) EXPECT_GE(regions, 1) << "an AgGemm plan across nodes registers its buffer";
  // (never throws: the failed free is said in a warning)
  mk::test::with_global_capture(comm().rank() == failing, [&] { plan.reset(); });
  // The refused frees' errors are cleared in the library's own CUDA runtime
  // (teardown_call): left set, the next plan's first run reported them
  // (session 36).
  EXPECT_EQ(mk::pending_cuda_error(), 0) << "rank " << comm().rank() << ": the plan's teardown left "
                                         << mk::cuda_error_string(mk::pending_cuda_error()) << " pending";
  EXPECT_EQ(comm().symmetric_bytes(), held) << "rank " << comm().rank() << " freed the plan's buffer although rank "
                                            << failing << "'s free failed";
  if (across)
    EXPECT_EQ(comm().network().registered_buffers(), regions)
        << "rank " << comm().rank() << " let the plan's network region go although rank " << failing
        << "'s device sync failed";
  AgGemm next(comm(), m_local, n, k);
  const int64_t m = comm().world() * m_local;
  Buf a(m_local * k * 2), b(n * k * 2), out(m * n * 2);
  random_bf16(b.p, n * k, 77 + comm().rank());
  random_bf16(a.p, m_local * k, seed_a(comm().rank(), 1));
  poison(out.p, m * n);
  CK(cudaDeviceSynchronize());
  next.run(a.p, b.p, out.p, nullptr);
  CK(cudaDeviceSynchronize());
  check_call(out.p, nullptr, m_local, n, k, b.p, 1, "run after the kept plan");
  comm().barrier();
}

// 100 calls queued back to back (inputs refreshed on the stream, outputs
// copied aside), one synchronisation at the end, every call checked.
TEST_F(AgGemmTest, HundredBackToBackCallsWithChangingInputs) {
  if (!tp_ranks()) GTEST_SKIP() << kNeedsRanks;
  const int me = comm().rank();
  const int64_t m_local = 192, n = 256, k = 256, m = comm().world() * m_local;
  const int calls = 100;
  AgGemm plan(comm(), m_local, n, k);
  Buf a(m_local * k * 2), b(n * k * 2), out(m * n * 2), all(calls * m * n * 2);
  random_bf16(b.p, n * k, 91 + me);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CK(cudaDeviceSynchronize());
  for (int i = 0; i < calls; ++i) {
    fill_random<<<64, 256, 0, s>>>(a.as<uint16_t>(), m_local * k, seed_a(me, 1000 + i));
    plan.run(a.p, b.p, out.p, s);
    CK(cudaMemcpyAsync(all.as<char>() + i * m * n * 2, out.p, m * n * 2, cudaMemcpyDeviceToDevice, s));
  }
  CK(cudaStreamSynchronize(s));
  for (int i = 0; i < calls; ++i)
    check_call(all.as<char>() + i * m * n * 2, nullptr, m_local, n, k, b.p, 1000 + i, "back-to-back");
  cudaStreamDestroy(s);
  comm().barrier();
}

// run() on one stream, then at once on another, with no event between them:
// the plan orders its own calls (the second waits for the first on the
// device: tp_test_util.hpp, second_stream_waits_for_first), so both outputs
// are right; were they unordered the second would have run while the first
// was held, on the same epoch (device/epoch.cuh) and buffers. Both return
// the gathered rows: the first call's copy out of the plan's buffer must end
// before the second call's pushes refill it.
TEST_F(AgGemmTest, CallsOnTwoStreamsAreOrdered) {
  if (!tp_ranks()) GTEST_SKIP() << kNeedsRanks;
  const int me = comm().rank();
  const int64_t m_local = 256, n = 256, k = 256, m = comm().world() * m_local;
  AgGemm plan(comm(), m_local, n, k);
  Buf a1(m_local * k * 2), a2(m_local * k * 2), b(n * k * 2), out1(m * n * 2), out2(m * n * 2);
  Buf gathered1(m * k * 2), gathered2(m * k * 2);
  random_bf16(b.p, n * k, 95 + me);
  random_bf16(a1.p, m_local * k, seed_a(me, 2101));
  random_bf16(a2.p, m_local * k, seed_a(me, 2102));
  poison(out1.p, m * n);
  poison(out2.p, m * n);
  EXPECT_EQ(second_stream_waits_for_first([&](cudaStream_t s) { plan.run(a1.p, b.p, out1.p, s, gathered1.p); },
                                          [&](cudaStream_t s) { plan.run(a2.p, b.p, out2.p, s, gathered2.p); }),
            "");
  check_call(out1.p, gathered1.p, m_local, n, k, b.p, 2101, "first stream");
  check_call(out2.p, gathered2.p, m_local, n, k, b.p, 2102, "second stream");
  comm().barrier();
}

// Two plans of one communicator (two shapes), run() on one stream, then the other at once on another: the
// second waits for the first, as two calls of one plan do (mkernel/launch_order.hpp: the communicator's plans
// share one order). Before 2026-12-06 they were unordered: with every SM taken by the one a rank started first,
// ranks that started them in opposite orders each waited for a kernel the other could not start.
TEST_F(AgGemmTest, TwoPlansOfOneCommunicatorOnTwoStreamsRunInIssueOrder) {
  if (!tp_ranks()) GTEST_SKIP() << kNeedsRanks;
  const int me = comm().rank();
  const int64_t n = 256, k = 256, m1 = comm().world() * 256, m2 = comm().world() * 128;
  AgGemm first(comm(), 256, n, k), second(comm(), 128, n, k);
  Buf a1(256 * k * 2), a2(128 * k * 2), b(n * k * 2), out1(m1 * n * 2), out2(m2 * n * 2);
  random_bf16(b.p, n * k, 95 + me);
  random_bf16(a1.p, 256 * k, seed_a(me, 2111));
  random_bf16(a2.p, 128 * k, seed_a(me, 2112));
  poison(out1.p, m1 * n);
  poison(out2.p, m2 * n);
  EXPECT_EQ(second_stream_waits_for_first([&](cudaStream_t s) { first.run(a1.p, b.p, out1.p, s); },
                                          [&](cudaStream_t s) { second.run(a2.p, b.p, out2.p, s); }),
            "");
  check_call(out1.p, nullptr, 256, n, k, b.p, 2111, "first plan");
  check_call(out2.p, nullptr, 128, n, k, b.p, 2112, "second plan");
  comm().barrier();
}

// One captured run, replayed 4 times back to back with new inputs copied in
// on the stream between replays: each replay gets a fresh epoch from the
// plan's device counter (captured arguments are frozen), no host sync.
TEST_F(AgGemmTest, CudaGraphReplayWithNewInputs) {
  if (!tp_ranks()) GTEST_SKIP() << kNeedsRanks;
  const int me = comm().rank();
  const int64_t m_local = 300, n = 320, k = 512, m = comm().world() * m_local;
  const int reps = 4;
  AgGemm plan(comm(), m_local, n, k);
  Buf a(m_local * k * 2), b(n * k * 2), out(m * n * 2), fresh(reps * m_local * k * 2), all(reps * m * n * 2);
  random_bf16(b.p, n * k, 93 + me);
  for (int rep = 0; rep < reps; ++rep)
    random_bf16(fresh.as<uint16_t>() + rep * m_local * k, m_local * k, seed_a(me, 2001 + rep));
  EXPECT_FALSE(plan.captured()) << "a plan never launched in a stream capture";
  bool held = false;  // graphs_alive() right after the captured call
  replay_on_fresh_inputs([&](cudaStream_t s) { plan.run(a.p, b.p, out.p, s); held = plan.graphs_alive(); },
                         a.p, fresh.p, m_local * k * 2, out.p, all.p, m * n * 2, reps);
  EXPECT_TRUE(plan.captured()) << "a plan launched in a stream capture (Python's bounded cache keeps it)";
  EXPECT_TRUE(held) << "graphs_alive() inside the capture";
  EXPECT_TRUE(graphs_released_within(plan, 5)) << "graphs_alive() after its graph was destroyed";
  for (int rep = 0; rep < reps; ++rep)
    check_call(all.as<char>() + rep * m * n * 2, nullptr, m_local, n, k, b.p, 2001 + rep, "graph replay");
  comm().barrier();
}

TEST_F(AgGemmTest, StandaloneAllGather) {
  if (!tp_ranks()) GTEST_SKIP() << kNeedsRanks;
  const int me = comm().rank();
  const int64_t m_local = 777, k = 1024, m = comm().world() * m_local;
  AgGemm plan(comm(), m_local, 64, k);
  Buf a(m_local * k * 2), gathered(m * k * 2), full(m * k * 2);
  for (int call = 3000; call < 3003; ++call) {
    random_bf16(a.p, m_local * k, seed_a(me, call));
    poison(gathered.p, m * k);
    CK(cudaDeviceSynchronize());
    // One call with the ranks 50 ms apart: the early rank's launch must not
    // end (and copy out) before the late rank's rows arrived.
    if (call == 3001 && me == 1) usleep(50000);
    plan.all_gather(a.p, gathered.p, nullptr);
    CK(cudaDeviceSynchronize());
    gathered_reference(full.p, m_local, k, call);
    std::vector<uint16_t> want(m * k), got(m * k);
    CK(cudaMemcpy(want.data(), full.p, m * k * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(got.data(), gathered.p, m * k * 2, cudaMemcpyDeviceToHost));
    EXPECT_EQ(std::memcmp(want.data(), got.data(), m * k * 2), 0) << "call " << call;
  }
  comm().barrier();
}

TEST_F(AgGemmTest, RoleSplitsGiveTheSameResult) {
  if (!tp_ranks()) GTEST_SKIP() << kNeedsRanks;
  const int me = comm().rank();
  const int64_t m_local = 512, n = 512, k = 512, m = comm().world() * m_local;
  Buf a(m_local * k * 2), b(n * k * 2), out(m * n * 2);
  random_bf16(b.p, n * k, 95 + me);
  int call = 4000;
  // The last option computes every tile whole; the others split the tiles of a short last wave
  // (tp::split_tail: 16 tiles on 37-40 CTAs on 1x2 and 2x1, in halves: 8 K blocks allow no more).
  for (AgGemmOptions o : {AgGemmOptions{1, 0}, AgGemmOptions{16, 0}, AgGemmOptions{3, 40},
                          AgGemmOptions{.num_comm_ctas = 3, .num_ctas = 40, .split_tail = false},
                          AgGemmOptions{.num_comm_ctas = 3, .num_ctas = 40, .join = false}}) {
    SCOPED_TRACE("comm CTAs " + std::to_string(o.num_comm_ctas) + " grid " + std::to_string(o.num_ctas) +
                 " split tail " + std::to_string(o.split_tail) + " join " + std::to_string(o.join));
    AgGemm plan(comm(), m_local, n, k, o);
    if (!o.split_tail) EXPECT_EQ(plan.split_tiles(), 0);
    random_bf16(a.p, m_local * k, seed_a(me, ++call));
    poison(out.p, m * n);
    CK(cudaDeviceSynchronize());
    plan.run(a.p, b.p, out.p, nullptr);
    CK(cudaDeviceSynchronize());
    check_call(out.p, nullptr, m_local, n, k, b.p, call, "role split");
    comm().barrier();
  }
}

// A tail of 25 tiles (640 rows x 1280 columns) on 43 CTAs (40 computing at
// the end across nodes) with 32 K blocks: halves would gain nothing, so the
// plan splits it in more than two parts (tp::split_tail), and the result must
// not change, also with the plan's all-gather alone between runs (it moves
// the plan's epoch without computing); with max_split_parts = 2 (halves, the
// rule before 2026-12-01) this tail stays whole: halves gain nothing there.
TEST_F(AgGemmTest, SplitTilesInManyPartsMatchTheReference) {
  if (!tp_ranks()) GTEST_SKIP() << kNeedsRanks;
  const int me = comm().rank();
  if (640 % comm().world()) GTEST_SKIP() << "640 rows over " << comm().world() << " ranks";
  const int64_t m_local = 640 / comm().world(), n = 1280, k = 2048, m = comm().world() * m_local;
  Buf a(m_local * k * 2), b(n * k * 2), out(m * n * 2), gathered(m * k * 2);
  random_bf16(b.p, n * k, 97 + me);
  int call = 5000;
  for (int max_parts : {0, 2}) {
    AgGemm plan(comm(), m_local, n, k, AgGemmOptions{.num_comm_ctas = 3, .num_ctas = 43, .max_split_parts = max_parts});
    SCOPED_TRACE("max_split_parts " + std::to_string(max_parts) + ": " + std::to_string(plan.split_tiles()) +
                 " split tiles in " + std::to_string(plan.split_parts()) + " parts");
    if (max_parts == 2) {
      EXPECT_EQ(plan.split_tiles(), 0);  // halves gain nothing on this tail: every tile whole
    } else {
      ASSERT_GT(plan.split_tiles(), 0);
      EXPECT_GT(plan.split_parts(), 2);
    }
    for (int rep = 0; rep < 3; ++rep) {  // repeated calls: the parts' flags follow the epoch
      random_bf16(a.p, m_local * k, seed_a(me, ++call));
      poison(out.p, m * n);
      CK(cudaDeviceSynchronize());
      plan.run(a.p, b.p, out.p, nullptr);
      plan.all_gather(a.p, gathered.p, nullptr);
      CK(cudaDeviceSynchronize());
      check_call(out.p, nullptr, m_local, n, k, b.p, call, "split parts");
      comm().barrier();
    }
  }
  EXPECT_NE(error_of([&] { AgGemm p(comm(), m_local, n, k, AgGemmOptions{.max_split_parts = 1}); })
                .find("max_split_parts must be"),
            std::string::npos);
}

// With only its communication CTAs' SMs free, run() finishes: those CTAs
// take the lowest indices, push, then join the compute; the compute CTAs
// run late.
TEST_F(AgGemmTest, FinishesWithOnlyItsCommSmsFree) {
  if (!tp_ranks()) GTEST_SKIP() << kNeedsRanks;
  if (const std::string why = scarce_sms_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  expect_run_finishes_on(0, 7000, "run on the comm CTAs' SMs");
}

// With two SMs free, fewer than its communication CTAs (16 at n = 256):
// the two resident CTAs claim every part of the push
// (device/roles/allgather_push.cuh), then compute; were the parts tied to
// CTA indices, the peers' compute would wait on rows of CTAs without an SM.
// (Not all_gather(): its output is copied out after the kernel, which ends
// only once every CTA ran, held SMs or not.)
TEST_F(AgGemmTest, FinishesWithTwoSmsFree) {
  if (!tp_ranks()) GTEST_SKIP() << kNeedsRanks;
  if (const std::string why = scarce_sms_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  expect_run_finishes_on(2, 7100, "run on 2 free SMs");
}

TEST(AgGemmErrors, BadPlansAndInputsAreRejected) {
  auto msg = [](auto&& f) { return error_of(f); };
  EXPECT_NE(msg([] { AgGemm p(comm(), 128, 100, 128); }).find("n must be a positive multiple of 64"), std::string::npos);
  EXPECT_NE(msg([] { AgGemm p(comm(), 0, 128, 128); }).find("m_local must be >= 1"), std::string::npos);
  // Ranks disagreeing on the shape: both hear which rank asked for what.
  const int64_t n = comm().rank() == 0 ? 128 : 192;
  std::string m = msg([&] { AgGemm p(comm(), 64, n, 128); });
  EXPECT_NE(m.find("every rank must use the same shape"), std::string::npos) << m;
  // One rank's arguments bad (an uneven split left it no rows): every rank
  // fails at once with that rank's error (tp::PlanArgs; before session 35
  // the others waited MK_BOOTSTRAP_TIMEOUT_MS in the plan check), and the
  // signal words the others took go back, so the next plan still agrees.
  if (tp_ranks()) {
    const int last = comm().world() - 1, held = comm().signals_in_use();
    const auto t0 = std::chrono::steady_clock::now();
    m = msg([&] { AgGemm p(comm(), comm().rank() == last ? 0 : 64, 128, 128); });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_NE(m.find("rank " + std::to_string(last) + " could not make its plan"), std::string::npos) << m;
    EXPECT_NE(m.find("m_local must be >= 1"), std::string::npos) << m;
    EXPECT_LT(s, 10.0) << "every rank should fail at once, not after the bootstrap bound";
    EXPECT_EQ(comm().signals_in_use(), held) << "the failed plan's signal words were not given back";
  }
  AgGemm plan(comm(), 64, 128, 128);
  Buf a(64 * 128 * 2), b(128 * 128 * 2), out(comm().world() * 64 * 128 * 2);
  EXPECT_NE(msg([&] { plan.run(nullptr, b.p, out.p, nullptr); }).find("a_local must be"), std::string::npos);
  EXPECT_NE(msg([&] { plan.run(a.as<char>() + 2, b.p, out.p, nullptr); }).find("16-byte aligned"), std::string::npos);
  EXPECT_NE(msg([&] { plan.run(a.p, b.p, a.p, nullptr); }).find("overlaps"), std::string::npos);
  // run()'s gathered rows: written after the GEMM, so never over an input or the output.
  for (void* g : {out.p, b.p, static_cast<void*>(a.p)})
    EXPECT_NE(msg([&] { plan.run(a.p, b.p, out.p, nullptr, g); }).find("gathered overlaps"), std::string::npos);
  // Nor any of them in the plan's own gathered buffer, which the peers write into during the call (session 47).
  if (void* own = const_cast<void*>(plan.gathered_buffer())) {
    EXPECT_NE(msg([&] { plan.run(a.p, b.p, own, nullptr); }).find("the plan's own gathered buffer"), std::string::npos);
    EXPECT_NE(msg([&] { plan.run(own, b.p, out.p, nullptr); }).find("the plan's own gathered buffer"),
              std::string::npos);
    EXPECT_NE(msg([&] { plan.run(a.p, b.p, out.p, nullptr, own); }).find("the plan's own gathered buffer"),
              std::string::npos);
    EXPECT_NE(msg([&] { plan.all_gather(a.p, own, nullptr); }).find("the plan's own gathered buffer"),
              std::string::npos);
  }
  // A call from a thread whose current device is another GPU (its launch would land there): refused, named.
  int devices = 0;
  CK(cudaGetDeviceCount(&devices));
  if (devices > 1) {
    const int other = (comm().device() + 1) % devices;
    if (cudaSetDevice(other) == cudaSuccess) {  // (not in exclusive-process mode with a peer on it: skipped then)
      m = msg([&] { plan.run(a.p, b.p, out.p, nullptr); });
      // The trace's buffer too (it was allocated on, and sized for, the current device: session 48).
      const std::string t = msg([&] { plan.enable_trace(16); });
      const std::string r = msg([&] { (void)plan.read_trace(); });
      CK(cudaSetDevice(comm().device()));
      EXPECT_NE(m.find("current CUDA device is " + std::to_string(other)), std::string::npos) << m;
      EXPECT_NE(t.find("AgGemm::enable_trace: the calling thread's current CUDA device is " + std::to_string(other)),
                std::string::npos) << t;
      EXPECT_NE(r.find("AgGemm::read_trace: the calling thread's current CUDA device is"), std::string::npos) << r;
    } else {
      cudaGetLastError();
      CK(cudaSetDevice(comm().device()));
    }
  }
  comm().barrier();
}

// A grid too small for the comm CTAs' default (7 at n = 8192, tp::comm_ctas_heuristic) takes every CTA but one
// (before session 47 a plan with num_ctas = 4 and no num_comm_ctas failed, naming a count the caller never gave).
TEST_F(AgGemmTest, ASmallGridFitsTheDefaultCommCtas) {
  if (!tp_ranks()) GTEST_SKIP() << kNeedsRanks;
  const int me = comm().rank();
  const int64_t m_local = 256, n = 8192, k = 128, m = comm().world() * m_local;
  AgGemm plan(comm(), m_local, n, k, {.num_ctas = 4});
  EXPECT_EQ(plan.num_comm_ctas(), 3);
  Buf a(m_local * k * 2), b(n * k * 2), out(m * n * 2);
  random_bf16(a.p, m_local * k, seed_a(me, 4100));
  random_bf16(b.p, n * k, 96 + me);
  poison(out.p, m * n);
  CK(cudaDeviceSynchronize());
  plan.run(a.p, b.p, out.p, nullptr);
  CK(cudaDeviceSynchronize());
  check_call(out.p, nullptr, m_local, n, k, b.p, 4100, "grid of 4");
  comm().barrier();
}

}  // namespace
