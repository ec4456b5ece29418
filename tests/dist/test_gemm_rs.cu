// GEMM + ReduceScatter on 2 or more ranks (1x2 over NVLink, 2x1 over the network, 2x2): this rank's rows of the sum over
// ranks of a_r b_r^T against an fp32 reference, every element; 100
// back-to-back calls with changing inputs and one sync; CUDA-graph replay;
// the standalone reduce-scatter; role splits; bad plans rejected.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "mkernel/mkernel.hpp"
#include "mkernel/tp.hpp"
#include "device/trace.hpp"
#include "src/ops/ag_gemm/tp_plan.hpp"
#include "src/ops/gemm_rs/rs_plan.hpp"
#include "tests/gpu/gemm_test_util.cuh"
#include "tests/dist/scarce_sms.cuh"
#include "tests/dist/tp_test_util.hpp"
#include "tests/test_comm.hpp"

using namespace mk;
using mk::test::comm;
using namespace mkt;

namespace {

#define CK(x) comm().check(static_cast<int>(x), #x)

uint64_t seed_a(int rank, int call) { return 7000 + 37 * rank + 1009 * call; }
uint64_t seed_b(int rank) { return 900 + rank; }

class GemmRsTest : public GemmCheck {
 protected:
  // This rank's rows of sum_s a_s b_s^T, each rank's a and b regenerated.
  void check_call(const void* out, int64_t m, int64_t n, int64_t k, int call, const char* what) {
    const int64_t rows = m / comm().world();
    Buf ref(rows * n * 4);
    sum_of_products(ref.as<float>(), m, n, k, comm().rank() * rows, rows, [&](int s) { return seed_a(s, call); },
                    seed_b);
    expect_near(out, ref.as<float>(), rows, n, std::string(what) + " call " + std::to_string(call));
  }

  // One run() on fresh inputs: this rank's a regenerated for `call`, out
  // poisoned, then every row of out checked.
  void run_checked(GemmRs& plan, const Buf& a, const Buf& b, const Buf& out, int64_t m, int64_t n, int64_t k,
                   int call, const char* what) {
    random_bf16(a.p, m * k, seed_a(comm().rank(), call));
    poison(out.p, m / comm().world() * n);
    CK(cudaDeviceSynchronize());
    plan.run(a.p, b.p, out.p, nullptr);
    CK(cudaDeviceSynchronize());
    check_call(out.p, m, n, k, call, what);
  }

  // This rank's rows of sum_s x_s (x_s [m x n] regenerated from seed_a(s, call)).
  void check_reduce_scatter(const void* out, int64_t m, int64_t n, int call) {
    const int64_t rows = m / comm().world();
    Buf ref(rows * n * 4);
    sum_of_inputs(ref.as<float>(), m, n, comm().rank() * rows, rows, [&](int s) { return seed_a(s, call); });
    expect_near(out, ref.as<float>(), rows, n, "reduce_scatter call " + std::to_string(call));
  }
};

TEST_F(GemmRsTest, MatchesReferenceAcrossShapes) {
  if (!tp_ranks()) GTEST_SKIP() << kNeedsRanks;
  struct S {
    int64_t m, n, k;
  };
  const int me = comm().rank();
  int call = 0;
  // Shapes given for 2 ranks (rows scale with the world), down to one row
  // per rank and shares that end inside a row-block (201 rows per rank).
  for (S s : {S{256, 64, 64}, S{512, 320, 256}, S{2048, 512, 1024}, S{2, 64, 64}, S{402, 320, 192}}) {
    s.m = rows_for_world(s.m);
    SCOPED_TRACE("m " + std::to_string(s.m) + " n " + std::to_string(s.n) + " k " + std::to_string(s.k));
    GemmRs plan(comm(), s.m, s.n, s.k);
    Buf a(s.m * s.k * 2), b(s.n * s.k * 2), out(s.m / comm().world() * s.n * 2);
    ++call;
    random_bf16(a.p, s.m * s.k, seed_a(me, call));
    random_bf16(b.p, s.n * s.k, seed_b(me));
    poison(out.p, s.m / comm().world() * s.n);
    CK(cudaDeviceSynchronize());
    plan.run(a.p, b.p, out.p, nullptr);
    CK(cudaDeviceSynchronize());
    check_call(out.p, s.m, s.n, s.k, call, "run");
    comm().barrier();
  }
}

// What one call sends over the network, as the host proxy counts it, is the
// documented figure (tp::rs_bytes_per_gpu: the node's sum of each other
// node's share of this local index, once).
TEST_F(GemmRsTest, NetworkBytesMatchTheFormula) {
  if (!tp_ranks() || !across_nodes()) GTEST_SKIP() << (tp_ranks() ? kNeedsNodes : kNeedsRanks);
  const int64_t m = comm().world() * 256, n = 256, k = 256;
  GemmRs plan(comm(), m, n, k);
  Buf a(m * k * 2), b(n * k * 2), x(m * n * 2), out(m / comm().world() * n * 2);
  random_bf16(a.p, m * k, 7 + comm().rank());
  random_bf16(b.p, n * k, 8 + comm().rank());
  random_bf16(x.p, m * n, 9 + comm().rank());
  const auto& t = comm().topology();
  expect_network_bytes(
      tp::rs_bytes_per_gpu(t.num_nodes, t.local_size, m, n).network, [&] { plan.run(a.p, b.p, out.p, nullptr); },
      "reduce_scatter()", [&] { plan.reduce_scatter(x.p, out.p, nullptr); });
}

TEST_F(GemmRsTest, HundredBackToBackCallsWithChangingInputs) {
  if (!tp_ranks()) GTEST_SKIP() << kNeedsRanks;
  const int me = comm().rank();
  const int64_t m = rows_for_world(512), n = 256, k = 256, rows = m / comm().world();
  const int calls = 100;
  GemmRs plan(comm(), m, n, k);
  Buf a(m * k * 2), b(n * k * 2), out(rows * n * 2), all(calls * rows * n * 2);
  random_bf16(b.p, n * k, seed_b(me));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CK(cudaDeviceSynchronize());
  for (int i = 0; i < calls; ++i) {
    fill_random<<<64, 256, 0, s>>>(a.as<uint16_t>(), m * k, seed_a(me, 1000 + i));
    plan.run(a.p, b.p, out.p, s);
    CK(cudaMemcpyAsync(all.as<char>() + i * rows * n * 2, out.p, rows * n * 2, cudaMemcpyDeviceToDevice, s));
  }
  CK(cudaStreamSynchronize(s));
  for (int i = 0; i < calls; ++i) check_call(all.as<char>() + i * rows * n * 2, m, n, k, 1000 + i, "back-to-back");
  cudaStreamDestroy(s);
  comm().barrier();
}

// A plan made after another was destroyed takes its signal words (first fit, Communicator::release_signals)
// and must start from zeroed counts: the first plan's 40 calls left each of its words at 40 times its adds per
// call, and with those the second plan's first calls would pass their waits before the peers' tiles arrived.
// The first plan's last calls are standalone reduce-scatters, whose entry signals across nodes go to rail peers
// only (rs_announce): a signal no kernel waited for could land in a reused word after the plan was destroyed.
TEST_F(GemmRsTest, APlanOnAClosedPlansSignalsStartsFromZero) {
  if (!tp_ranks()) GTEST_SKIP() << kNeedsRanks;
  const int me = comm().rank();
  const int64_t m = rows_for_world(512), n = 256, k = 256, rows = m / comm().world();
  const int held0 = comm().signals_in_use();
  int held = 0;
  Buf a(m * k * 2), b(n * k * 2), out(rows * n * 2), x(m * n * 2);
  random_bf16(b.p, n * k, seed_b(me));
  random_bf16(x.p, m * n, seed_b(me) + 1);
  {
    GemmRs first(comm(), m, n, k);
    held = comm().signals_in_use();
    for (int i = 0; i < 40; ++i) first.run(a.p, b.p, out.p, nullptr);
    for (int i = 0; i < 5; ++i) first.reduce_scatter(x.p, out.p, nullptr);
    CK(cudaDeviceSynchronize());
  }
  EXPECT_EQ(comm().signals_in_use(), held0) << "the destroyed plan kept its signals";
  GemmRs second(comm(), m, n, k);
  EXPECT_EQ(comm().signals_in_use(), held) << "the second plan did not take the same number of words";
  for (int call = 0; call < 3; ++call) run_checked(second, a, b, out, m, n, k, 2000 + call, "reused signals");
  comm().barrier();
}

// Replays of one captured call, each on new inputs, back to back; also a
// plan whose last tile is split in parts (their flags' epochs come from the
// device counter, as the call's).
TEST_F(GemmRsTest, CudaGraphReplayWithNewInputs) {
  if (!tp_ranks()) GTEST_SKIP() << kNeedsRanks;
  const int me = comm().rank();
  const int64_t m = rows_for_world(1024), n = 320, k = 1024, rows = m / comm().world();
  const int64_t tiles = tp::rs_share_blocks(m, comm().world()) * comm().world() * 2;  // 2 column blocks
  const int reps = 4;
  for (GemmRsOptions o : {GemmRsOptions{}, GemmRsOptions{.num_ctas = static_cast<int>(tiles / 2 - 1)}}) {
    GemmRs plan(comm(), m, n, k, o);
    SCOPED_TRACE("split tiles " + std::to_string(plan.split_tiles()));
    if (o.num_ctas) ASSERT_GT(plan.split_tiles(), 0);
    Buf a(m * k * 2), b(n * k * 2), out(rows * n * 2), fresh(reps * m * k * 2), all(reps * rows * n * 2);
    random_bf16(b.p, n * k, seed_b(me));
    for (int rep = 0; rep < reps; ++rep) random_bf16(fresh.as<uint16_t>() + rep * m * k, m * k, seed_a(me, 2001 + rep));
    EXPECT_FALSE(plan.captured()) << "a plan never launched in a stream capture";
    bool held = false;  // graphs_alive() right after the captured call
    replay_on_fresh_inputs([&](cudaStream_t s) { plan.run(a.p, b.p, out.p, s); held = plan.graphs_alive(); },
                           a.p, fresh.p, m * k * 2, out.p, all.p, rows * n * 2, reps);
    EXPECT_TRUE(plan.captured()) << "a plan launched in a stream capture (Python's bounded cache keeps it)";
    EXPECT_TRUE(held) << "graphs_alive() inside the capture";
    EXPECT_TRUE(graphs_released_within(plan, 5)) << "graphs_alive() after its graph was destroyed";
    for (int rep = 0; rep < reps; ++rep) check_call(all.as<char>() + rep * rows * n * 2, m, n, k, 2001 + rep, "replay");
    comm().barrier();
  }
}

TEST_F(GemmRsTest, StandaloneReduceScatter) {
  if (!tp_ranks()) GTEST_SKIP() << kNeedsRanks;
  const int w = comm().world(), me = comm().rank();
  // Whole row-blocks per rank, then 201 rows per rank (a partial last row-block).
  for (const int64_t m : {rows_for_world(1024), rows_for_world(402)}) {
  SCOPED_TRACE("m " + std::to_string(m));
  const int64_t n = 768, rows = m / w;
  // Grids of 16 + the default (16), 1, 37 Reduce CTAs (53: more CTAs than items in a round).
  GemmRs plan(comm(), m, n, 64), plan1(comm(), m, n, 64, {1, 0}), plan37(comm(), m, n, 64, {37, 0});
  Buf x(m * n * 2), out(rows * n * 2), tmp(m * n * 2);
  for (int call = 3000; call < 3005; ++call) {
    GemmRs& p = call == 3003 ? plan1 : call == 3004 ? plan37 : plan;
    random_bf16(x.p, m * n, seed_a(me, call));
    poison(out.p, rows * n);
    CK(cudaDeviceSynchronize());
    if (call == 3001 && me == 1) usleep(50000);  // ranks 50 ms apart once
    p.reduce_scatter(x.p, out.p, nullptr);
    CK(cudaDeviceSynchronize());
    // Across nodes each node's partial sum is rounded to bf16 before the
    // network (as a bf16 ring reduce-scatter rounds every step): the error
    // bound grows with the magnitude of the summands, not of the result.
    std::vector<float> want(rows * n, 0.f), mag(rows * n, 0.f);
    std::vector<uint16_t> h(m * n), got(rows * n);
    for (int s = 0; s < w; ++s) {
      random_bf16(tmp.p, m * n, seed_a(s, call));
      CK(cudaMemcpy(h.data(), tmp.p, m * n * 2, cudaMemcpyDeviceToHost));
      for (int64_t i = 0; i < rows * n; ++i) {
        uint32_t u = uint32_t(h[me * rows * n + i]) << 16;
        float f;
        std::memcpy(&f, &u, 4);
        want[i] += f;
        mag[i] += std::fabs(f);
      }
    }
    CK(cudaMemcpy(got.data(), out.p, rows * n * 2, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    int64_t first = -1;
    float first_got = 0;
    for (int64_t i = 0; i < rows * n; ++i) {
      uint32_t u = uint32_t(got[i]) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      const float tol = 1e-2f * std::fabs(want[i]) + 1e-3f + 2.f * std::ldexp(mag[i], -8);
      if (!(std::fabs(f - want[i]) <= tol) && bad++ == 0) {
        first = i;
        first_got = f;
      }
    }
    EXPECT_EQ(bad, 0u) << "call " << call << ": first bad element row " << first / n << " col " << first % n
                       << " of " << rows << " x " << n << ": got " << first_got << ", want "
                       << (first >= 0 ? want[first] : 0.f);
  }
  comm().barrier();
  }
}

// One plan, both entry points in turn: the arrival counts must stay in step.
TEST_F(GemmRsTest, RunAndReduceScatterOnOnePlan) {
  if (!tp_ranks()) GTEST_SKIP() << kNeedsRanks;
  const int me = comm().rank();
  const int64_t m = rows_for_world(512), n = 576, k = 128, rows = m / comm().world();
  GemmRs plan(comm(), m, n, k);
  Buf a(m * k * 2), b(n * k * 2), x(m * n * 2), out(rows * n * 2);
  random_bf16(b.p, n * k, seed_b(me));
  for (int call = 5000; call < 5004; ++call) {
    poison(out.p, rows * n);
    if (call % 2 == 0) {
      random_bf16(a.p, m * k, seed_a(me, call));
      CK(cudaDeviceSynchronize());
      plan.run(a.p, b.p, out.p, nullptr);
      CK(cudaDeviceSynchronize());
      check_call(out.p, m, n, k, call, "run");
    } else {
      random_bf16(x.p, m * n, seed_a(me, call));
      CK(cudaDeviceSynchronize());
      plan.reduce_scatter(x.p, out.p, nullptr);
      CK(cudaDeviceSynchronize());
      check_reduce_scatter(out.p, m, n, call);
    }
    comm().barrier();
  }
}

// run() on one stream, then reduce_scatter() at once on another, with no
// event between them: the plan orders its own calls (tp_test_util.hpp,
// second_stream_waits_for_first), so both outputs are right.
TEST_F(GemmRsTest, CallsOnTwoStreamsAreOrdered) {
  if (!tp_ranks()) GTEST_SKIP() << kNeedsRanks;
  const int me = comm().rank();
  const int64_t m = rows_for_world(512), n = 256, k = 128, rows = m / comm().world();
  GemmRs plan(comm(), m, n, k);
  Buf a(m * k * 2), b(n * k * 2), x(m * n * 2), out1(rows * n * 2), out2(rows * n * 2);
  random_bf16(b.p, n * k, seed_b(me));
  random_bf16(a.p, m * k, seed_a(me, 6101));
  random_bf16(x.p, m * n, seed_a(me, 6102));
  poison(out1.p, rows * n);
  poison(out2.p, rows * n);
  EXPECT_EQ(second_stream_waits_for_first([&](cudaStream_t s) { plan.run(a.p, b.p, out1.p, s); },
                                          [&](cudaStream_t s) { plan.reduce_scatter(x.p, out2.p, s); }),
            "");
  check_call(out1.p, m, n, k, 6101, "first stream");
  check_reduce_scatter(out2.p, m, n, 6102);
  comm().barrier();
}

// Both entry points alternating back to back on one stream, the ranks 20 ms
// apart at the start, one synchronisation at the end: the entry handshake
// alone keeps every staging slot from being overwritten while it is read.
TEST_F(GemmRsTest, AlternatingEntryPointsBackToBack) {
  if (!tp_ranks()) GTEST_SKIP() << kNeedsRanks;
  const int me = comm().rank();
  const int64_t m = rows_for_world(512), n = 256, k = 128, rows = m / comm().world();
  const int calls = 40;
  GemmRs plan(comm(), m, n, k);
  Buf a(m * k * 2), b(n * k * 2), x(m * n * 2), out(rows * n * 2), all(calls * rows * n * 2);
  random_bf16(b.p, n * k, seed_b(me));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CK(cudaDeviceSynchronize());
  comm().barrier();
  if (me == 1) usleep(20000);
  for (int i = 0; i < calls; ++i) {
    const int call = 6000 + i;
    if (i % 2 == 0) {
      fill_random<<<64, 256, 0, s>>>(a.as<uint16_t>(), m * k, seed_a(me, call));
      plan.run(a.p, b.p, out.p, s);
    } else {
      fill_random<<<64, 256, 0, s>>>(x.as<uint16_t>(), m * n, seed_a(me, call));
      plan.reduce_scatter(x.p, out.p, s);
    }
    CK(cudaMemcpyAsync(all.as<char>() + i * rows * n * 2, out.p, rows * n * 2, cudaMemcpyDeviceToDevice, s));
  }
  CK(cudaStreamSynchronize(s));
  for (int i = 0; i < calls; ++i) {
    const void* o = all.as<char>() + i * rows * n * 2;
    if (i % 2 == 0)
      check_call(o, m, n, k, 6000 + i, "alternating run");
    else
      check_reduce_scatter(o, m, n, 6000 + i);
  }
  cudaStreamDestroy(s);
  comm().barrier();
}

TEST_F(GemmRsTest, RoleSplitsGiveTheSameResult) {
  if (!tp_ranks()) GTEST_SKIP() << kNeedsRanks;
  const int me = comm().rank();
  const int64_t m = rows_for_world(1024), n = 512, k = 512, rows = m / comm().world();
  Buf a(m * k * 2), b(n * k * 2), out(rows * n * 2);
  random_bf16(b.p, n * k, seed_b(me));
  int call = 4000;
  // run() computes on the whole grid: every SM, 40 CTAs, 2 CTAs; the own final rows by plain stores, or by TMA
  // with no storer (the held stage kept for the owner tiles only).
  for (GemmRsOptions o : {GemmRsOptions{1, 0}, GemmRsOptions{16, 40}, GemmRsOptions{3, 2},
                          GemmRsOptions{.own_tma_store = 0}, GemmRsOptions{.num_ctas = 40, .own_tma_store = 0},
                          GemmRsOptions{.async_store = 0}}) {
    SCOPED_TRACE("grid " + std::to_string(o.num_ctas) + " async store " + std::to_string(o.async_store) +
                 " own TMA stores " + std::to_string(o.own_tma_store));
    GemmRs plan(comm(), m, n, k, o);
    run_checked(plan, a, b, out, m, n, k, ++call, "role split");
    comm().barrier();
  }
}

// The device event log (enable_trace): every CTA logs its entry, the
// engine's start and end and its exit in that order, every work unit of the
// walk is begun exactly once and its K loop ends once, inside it, the
// result stays right, and 0 turns it off.
TEST_F(GemmRsTest, TraceLogsEveryWorkUnitOnce) {
  if (!tp_ranks()) GTEST_SKIP() << kNeedsRanks;
  using K = dev::TraceKind;
  const int me = comm().rank();
  const int64_t m = rows_for_world(1024), n = 512, k = 256, rows = m / comm().world();
  const int64_t tiles = tp::rs_share_blocks(m, comm().world()) * comm().world() * (n / gemm::kBlockN);
  GemmRs plan(comm(), m, n, k, GemmRsOptions{.num_ctas = 3});
  const int64_t units = tiles + plan.split_tiles() * (plan.split_parts() - 1);  // a split tile: a unit per part
  Buf a(m * k * 2), b(n * k * 2), out(rows * n * 2);
  random_bf16(b.p, n * k, seed_b(me));
  plan.enable_trace(64);
  // The log keeps the second call's events only.
  for (int call = 5000; call < 5002; ++call) run_checked(plan, a, b, out, m, n, k, call, "traced");
  const std::vector<TraceEvent> ev = plan.read_trace();
  std::vector<int> begun(units, 0), mma_done(units, 0);
  for (int cta = 0; cta < 3; ++cta) {
    std::vector<uint32_t> kinds;
    uint64_t prev = 0;
    int64_t open_unit = -1;
    for (const TraceEvent& e : ev) {
      if (e.cta != cta) continue;
      EXPECT_GE(e.t_ns, prev) << "CTA " << cta << ": events out of order";
      prev = e.t_ns;
      if (e.kind == static_cast<uint32_t>(K::UnitBegin)) {
        ASSERT_LT(e.arg, uint64_t(units));
        ++begun[e.arg];
        open_unit = int64_t(e.arg);
        continue;
      }
      if (e.kind == static_cast<uint32_t>(K::UnitMmaDone)) {  // the K loop of the unit this CTA began last
        EXPECT_EQ(int64_t(e.arg), open_unit) << "CTA " << cta << ": K loop done for a unit it is not in";
        ASSERT_LT(e.arg, uint64_t(units));
        ++mma_done[e.arg];
        open_unit = -1;
        continue;
      }
      kinds.push_back(e.kind);
    }
    const std::vector<uint32_t> want = {uint32_t(K::KernelEntry), uint32_t(K::CtaStart), uint32_t(K::CtaEnd),
                                        uint32_t(K::KernelExit)};
    EXPECT_EQ(kinds, want) << "CTA " << cta;
  }
  for (int64_t u = 0; u < units; ++u) {
    EXPECT_EQ(begun[u], 1) << "work unit " << u;
    EXPECT_EQ(mma_done[u], 1) << "work unit " << u << ": K loop done events";
  }
  for (const TraceEvent& e : ev) EXPECT_LT(e.cta, 3) << "an event of a CTA outside the grid";
  plan.enable_trace(0);
  plan.run(a.p, b.p, out.p, nullptr);
  EXPECT_TRUE(plan.read_trace().empty());
  // Before the buffers are freed: across emulated nodes a cudaFree during
  // the call would hold up the proxy the call waits on (src/net/emu NOTES).
  CK(cudaDeviceSynchronize());
  comm().barrier();
}

// Split tiles at the end of the walk (GemmParams::split_last): a grid that
// leaves a short last wave computes its tiles (own final tiles) in parts of
// K, the last part adding the others before the owner reduce; every call
// gives the reference, also with the parts' flags reused across calls.
TEST_F(GemmRsTest, SplitLastWaveOfOwnTilesMatchesReference) {
  if (!tp_ranks()) GTEST_SKIP() << kNeedsRanks;
  const int me = comm().rank();
  const int64_t m = rows_for_world(2048), n = 512, k = 1024, rows = m / comm().world();
  const int64_t tiles = tp::rs_share_blocks(m, comm().world()) * comm().world() * (n / gemm::kBlockN);
  Buf a(m * k * 2), b(n * k * 2), out(rows * n * 2);
  random_bf16(b.p, n * k, seed_b(me));
  int call = 6000;
  // Grids of at most the other shares' tiles (the plan splits only then):
  // two tiles left over (halves at most), and four (the rule's pick of up
  // to 8 parts: thirds, as K has 16 blocks).
  for (GemmRsOptions o : {GemmRsOptions{.num_ctas = static_cast<int>(tiles / 2 - 1), .max_split_parts = 2},
                          GemmRsOptions{.num_ctas = static_cast<int>(tiles / 2 - 2)}}) {
    GemmRs plan(comm(), m, n, k, o);
    SCOPED_TRACE("grid " + std::to_string(o.num_ctas) + ": " + std::to_string(plan.split_tiles()) + " tiles in " +
                 std::to_string(plan.split_parts()) + " parts");
    ASSERT_GT(plan.split_tiles(), 0);
    ASSERT_LE(plan.split_tiles(), tiles / comm().world());  // own tiles only
    for (int rep = 0; rep < 3; ++rep) run_checked(plan, a, b, out, m, n, k, ++call, "split tail");
    comm().barrier();
  }
  // Off: whole waves on the grid given. Nor where own tiles would share the
  // first wave with the other shares' (a grid larger than their tiles).
  GemmRs whole(comm(), m, n, k, GemmRsOptions{.num_ctas = static_cast<int>(tiles / 2 - 1), .split_tail = false});
  EXPECT_EQ(whole.split_tiles(), 0);
  GemmRs mixed(comm(), m, n, k, GemmRsOptions{.num_ctas = static_cast<int>(tiles - 2)});
  EXPECT_EQ(mixed.split_tiles(), 0);
}

// With only two SMs free (another kernel holds the rest, tests/dist/
// scarce_sms.cuh), run() finishes on its two resident CTAs (tiles from the
// dynamic queue: no CTA waits on one that is not resident), and so does
// reduce_scatter() (push and reduce items from one claim order, which
// finishes on one resident CTA per rank: rs::ClaimOrder).
TEST_F(GemmRsTest, FinishesWithTwoSmsFree) {
  if (!tp_ranks()) GTEST_SKIP() << kNeedsRanks;
  if (const std::string why = scarce_sms_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  const int me = comm().rank();
  const int64_t m = rows_for_world(1024), n = 256, k = 256, rows = m / comm().world();
  GemmRs plan(comm(), m, n, k);
  Buf a(m * k * 2), b(n * k * 2), x(m * n * 2), out(rows * n * 2);
  int call = 6000;
  random_bf16(a.p, m * k, seed_a(me, call));
  random_bf16(b.p, n * k, seed_b(me));
  poison(out.p, rows * n);
  EXPECT_EQ(finishes_on_free_sms(out.p, rows * n, 2, [&](cudaStream_t s) { plan.run(a.p, b.p, out.p, s); }), "")
      << "run()";
  check_call(out.p, m, n, k, call, "run on 2 free SMs");
  comm().barrier();
  ++call;
  random_bf16(x.p, m * n, seed_a(me, call));
  poison(out.p, rows * n);
  EXPECT_EQ(finishes_on_free_sms(out.p, rows * n, 2, [&](cudaStream_t s) { plan.reduce_scatter(x.p, out.p, s); }),
            "")
      << "reduce_scatter()";
  check_reduce_scatter(out.p, m, n, call);
  comm().barrier();
}

TEST(GemmRsErrors, BadPlansAreRejected) {
  auto msg = [](auto&& f) { return error_of(f); };
  const int w = comm().world();
  EXPECT_NE(msg([&] { GemmRs p(comm(), w * 100 + 1, 128, 128); }).find("equal row blocks"), std::string::npos);
  EXPECT_NE(msg([&] { GemmRs p(comm(), w - 1, 128, 128); }).find("equal row blocks"), std::string::npos);
  EXPECT_NE(msg([] { GemmRs p(comm(), 512, 100, 128); }).find("n must be a positive multiple of 64"),
            std::string::npos);
  for (int parts : {-1, 1, 9})
    EXPECT_NE(msg([&] { GemmRs p(comm(), 512, 128, 128, GemmRsOptions{.max_split_parts = parts}); })
                  .find("max_split_parts must be 0 or in [2, 8]"),
              std::string::npos);
  EXPECT_NE(msg([&] { GemmRs p(comm(), w * 128, 128, 128, GemmRsOptions{.own_tma_store = 2}); })
                .find("own_tma_store must be -1, 0 or 1"),
            std::string::npos);
  const int64_t n = comm().rank() == 0 ? 128 : 192;
  std::string m = msg([&] { GemmRs p(comm(), 512, n, 128); });
  EXPECT_NE(m.find("every rank must use the same shape"), std::string::npos) << m;
  comm().barrier();
}

}  // namespace
