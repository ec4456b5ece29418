// GEMM + AllReduce on 2 or more ranks (1x2 over NVLink, 2x1 over the
// network, 2x2): out [m x n] = sum over ranks of a_r b_r^T against an fp32
// reference, every element, and the same bits on every rank; the
// standalone all-reduce likewise; 100 back-to-back calls alternating both
// entry points with changing inputs and one sync; CUDA-graph replay; role
// splits; bad plans and inputs rejected before launch; a plan failing after
// its allocations gives them back.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mkernel/mkernel.hpp"
#include "mkernel/tp.hpp"
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

uint64_t seed_a(int rank, int call) { return 11000 + 41 * rank + 1013 * call; }  // a, and x of all_reduce()
uint64_t seed_b(int rank) { return 1300 + rank; }

std::string shape_of(int64_t m, int64_t n, int64_t k) {
  return "m " + std::to_string(m) + " n " + std::to_string(n) + " k " + std::to_string(k);
}

class GemmArTest : public GemmCheck {
 protected:
  // Every row of sum_s a_s b_s^T (each rank's a and b regenerated), then
  // the same bits on every rank. Collective.
  void check_call(const void* out, int64_t m, int64_t n, int64_t k, int call, const std::string& what) {
    Buf ref(m * n * 4);
    sum_of_products(ref.as<float>(), m, n, k, 0, m, [&](int s) { return seed_a(s, call); }, seed_b);
    expect_near(out, ref.as<float>(), m, n, what + " call " + std::to_string(call));
    EXPECT_EQ(differences_from_rank0(out, m * n * 2, n), "") << what << " call " << call;
  }

  // Every row of sum_s x_s (x_s [m x n] regenerated from seed_a(s, call)),
  // the same bits on every rank. Collective.
  void check_all_reduce(const void* out, int64_t m, int64_t n, int call, const std::string& what) {
    Buf ref(m * n * 4);
    sum_of_inputs(ref.as<float>(), m, n, 0, m, [&](int s) { return seed_a(s, call); });
    expect_near(out, ref.as<float>(), m, n, what + " call " + std::to_string(call));
    EXPECT_EQ(differences_from_rank0(out, m * n * 2, n), "") << what << " call " << call;
  }

  // One synchronised run() with fresh a (b: seed_b) into poisoned out.
  void run_once(GemmAr& plan, const Buf& a, const Buf& b, const Buf& out, int64_t m, int64_t n, int64_t k, int call,
                const std::string& what) {
    random_bf16(a.p, m * k, seed_a(comm().rank(), call));
    poison(out.p, m * n);
    CK(cudaDeviceSynchronize());
    plan.run(a.p, b.p, out.p, nullptr);
    CK(cudaDeviceSynchronize());
    check_call(out.p, m, n, k, call, what);
  }
};

// Shapes given for 2 ranks (rows scale with the world): the smallest (one
// row-block per rank), 3 and 5 row-blocks per rank (not a multiple of the
// swizzle cap of 8; 5 is prime), n not a multiple of the 256-wide tiles, k
// of one and of three 64-blocks, and one larger shape.
TEST_F(GemmArTest, MatchesReferenceAcrossShapes) {
  if (!tp_ranks()) GTEST_SKIP() << kNeedsRanks;
  struct S {
    int64_t m, n, k;
  };
  int call = 0;
  for (S s : {S{256, 64, 64}, S{768, 192, 192}, S{1280, 320, 256}, S{512, 576, 128}, S{2048, 1024, 512},
              S{2, 64, 64}, S{402, 320, 192}, S{1000, 192, 128}}) {
    s.m = rows_for_world(s.m);
    SCOPED_TRACE(shape_of(s.m, s.n, s.k));
    for (int variant : {-1, 0}) {  // the default (one-shot on one node at these sizes), two-shot
    SCOPED_TRACE("one_shot option " + std::to_string(variant));
    GemmAr plan(comm(), s.m, s.n, s.k, GemmArOptions{.one_shot = variant});
    EXPECT_GE(plan.swizzle(), 1);
    if (plan.swizzle() >= 1) EXPECT_EQ((s.m / comm().world() + 127) / 128 % plan.swizzle(), 0) << "swizzle " << plan.swizzle();
    Buf a(s.m * s.k * 2), b(s.n * s.k * 2), out(s.m * s.n * 2);
    random_bf16(b.p, s.n * s.k, seed_b(comm().rank()));
    // Twice per plan: the second call must not see the first one's rows.
    for (int rep = 0; rep < 2; ++rep) run_once(plan, a, b, out, s.m, s.n, s.k, ++call, "run");
    comm().barrier();
    }
  }
}

// What one call sends over the network, as the host proxy counts it, is the
// documented figure (tp::ar_bytes_per_gpu: the reduce-scatter's node sums,
// then this rank's final share once per other node).
TEST_F(GemmArTest, NetworkBytesMatchTheFormula) {
  if (!tp_ranks() || !across_nodes()) GTEST_SKIP() << (tp_ranks() ? kNeedsNodes : kNeedsRanks);
  const int64_t m = comm().world() * 256, n = 256, k = 256;
  GemmAr plan(comm(), m, n, k);
  Buf a(m * k * 2), b(n * k * 2), x(m * n * 2), out(m * n * 2);
  random_bf16(a.p, m * k, 7 + comm().rank());
  random_bf16(b.p, n * k, 8 + comm().rank());
  random_bf16(x.p, m * n, 9 + comm().rank());
  const auto& t = comm().topology();
  expect_network_bytes(
      tp::ar_bytes_per_gpu(t.num_nodes, t.local_size, m, n).network, [&] { plan.run(a.p, b.p, out.p, nullptr); },
      "all_reduce()", [&] { plan.all_reduce(x.p, out.p, nullptr); });
}

TEST_F(GemmArTest, StandaloneAllReduce) {
  if (!tp_ranks()) GTEST_SKIP() << kNeedsRanks;
  const int me = comm().rank();
  const int64_t m = rows_for_world(1024), n = 768;
  // Grids of 16 + 1 + the default (16), 1, 37 Reduce CTAs (54: more CTAs than items in a round).
  GemmAr plan(comm(), m, n, 64), plan1(comm(), m, n, 64, {.num_reduce_ctas = 1}),
      plan37(comm(), m, n, 64, {.num_reduce_ctas = 37});
  EXPECT_EQ(plan.num_reduce_ctas(), 16);
  EXPECT_EQ(plan1.num_reduce_ctas(), 1);
  EXPECT_EQ(plan37.num_reduce_ctas(), 37);
  Buf x(m * n * 2), out(m * n * 2);
  for (int call = 3000; call < 3006; ++call) {
    GemmAr& p = call == 3003 ? plan1 : call == 3004 ? plan37 : plan;
    random_bf16(x.p, m * n, seed_a(me, call));
    poison(out.p, m * n);
    CK(cudaDeviceSynchronize());
    if (call == 3001 && me == 1) usleep(50000);  // ranks 50 ms apart once
    p.all_reduce(x.p, out.p, nullptr);
    CK(cudaDeviceSynchronize());
    check_all_reduce(out.p, m, n, call, "all_reduce");
  }
  {  // 201 rows per rank: a partial last row-block in every share
    const int64_t mr = rows_for_world(402);
    GemmAr pr(comm(), mr, n, 64);
    Buf xr(mr * n * 2), outr(mr * n * 2);
    for (int call = 3020; call < 3022; ++call) {
      random_bf16(xr.p, mr * n, seed_a(me, call));
      poison(outr.p, mr * n);
      CK(cudaDeviceSynchronize());
      pr.all_reduce(xr.p, outr.p, nullptr);
      CK(cudaDeviceSynchronize());
      check_all_reduce(outr.p, mr, n, call, "all_reduce, ragged shares");
    }
  }
  // In place (out == x): every rank's rows are read before any sum is gathered.
  for (int call = 3010; call < 3012; ++call) {
    random_bf16(x.p, m * n, seed_a(me, call));
    CK(cudaDeviceSynchronize());
    plan.all_reduce(x.p, x.p, nullptr);
    CK(cudaDeviceSynchronize());
    check_all_reduce(x.p, m, n, call, "all_reduce in place");
  }
  comm().barrier();
}

// NaN and infinities through the standalone all-reduce's reduction (as
// torch and NCCL give them): a NaN stays a NaN, +Inf + -Inf is a NaN, an
// infinity stays one, in rows of the first and the last rank's shares.
// Before session 47 its rounding to bf16 by integer adds made CUDA's
// canonical NaN a signed zero (the fused run() rounded in hardware).
TEST_F(GemmArTest, AllReduceKeepsNanAndInfinities) {
  if (!tp_ranks()) GTEST_SKIP() << kNeedsRanks;
  const int me = comm().rank(), world = comm().world();
  const int64_t m = rows_for_world(256), n = 256;
  GemmAr plan(comm(), m, n, 64);
  constexpr uint16_t kNan = 0x7FC0, kInf = 0x7F80, kNegInf = 0xFF80, kOne = 0x3F80;
  std::vector<uint16_t> x(static_cast<size_t>(m * n), 0);
  for (const int64_t row : {int64_t{0}, m - 1}) {
    uint16_t* r = x.data() + row * n;
    r[0] = me == 0 ? kNan : kOne;                      // NaN + 1s: NaN
    r[1] = me == 0 ? kInf : me == 1 ? kNegInf : kOne;  // +Inf + -Inf: NaN
    r[2] = kInf;                                       // Inf + Inf: Inf
    r[3] = kOne;                                       // world
  }
  Buf xb(m * n * 2), out(m * n * 2);
  CK(cudaMemcpy(xb.p, x.data(), x.size() * 2, cudaMemcpyHostToDevice));
  poison(out.p, m * n);
  CK(cudaDeviceSynchronize());
  plan.all_reduce(xb.p, out.p, nullptr);
  CK(cudaDeviceSynchronize());
  std::vector<uint16_t> got(x.size());
  CK(cudaMemcpy(got.data(), out.p, got.size() * 2, cudaMemcpyDeviceToHost));
  auto is_nan = [](uint16_t v) { return (v & 0x7F80) == 0x7F80 && (v & 0x7F) != 0; };
  for (const int64_t row : {int64_t{0}, m - 1}) {
    const uint16_t* r = got.data() + row * n;
    EXPECT_TRUE(is_nan(r[0])) << "row " << row << ": NaN + 1s gave 0x" << std::hex << r[0];
    EXPECT_TRUE(is_nan(r[1])) << "row " << row << ": +Inf + -Inf gave 0x" << std::hex << r[1];
    EXPECT_EQ(r[2], kInf) << "row " << row << ": Inf + Inf";
    float sum = 0;
    const uint32_t bits = uint32_t{r[3]} << 16;
    std::memcpy(&sum, &bits, 4);
    EXPECT_EQ(sum, static_cast<float>(world)) << "row " << row << ": a sum of ones";
    EXPECT_EQ(r[4], 0) << "row " << row << ": a sum of zeros";
  }
  comm().barrier();
}

// 100 calls on one plan and one stream, run() and all_reduce() in turn,
// inputs refreshed on the stream, outputs copied aside, the ranks 20 ms
// apart at the start, one synchronisation at the end: the epochs and the
// entry handshake alone keep every staging slot and finished row apart.
// Every call against its reference; all 100 outputs bit for bit across ranks.
TEST_F(GemmArTest, HundredBackToBackCallsAlternatingEntryPoints) {
  if (!tp_ranks()) GTEST_SKIP() << kNeedsRanks;
  const int me = comm().rank();
  const int64_t m = rows_for_world(512), n = 320, k = 256;
  const int calls = 100;
  for (int variant : {-1, 0}) {  // the default (one-shot at this size on one node of two), two-shot
  SCOPED_TRACE("one_shot option " + std::to_string(variant));
  GemmAr plan(comm(), m, n, k, GemmArOptions{.one_shot = variant});
  Buf a(m * k * 2), b(n * k * 2), x(m * n * 2), out(m * n * 2), all(calls * m * n * 2);
  random_bf16(b.p, n * k, seed_b(me));
  poison(all.p, calls * m * n);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CK(cudaDeviceSynchronize());
  comm().barrier();
  if (me == 1) usleep(20000);
  for (int i = 0; i < calls; ++i) {
    const int call = 1000 + i;
    if (i % 2 == 0) {
      fill_random<<<64, 256, 0, s>>>(a.as<uint16_t>(), m * k, seed_a(me, call));
      plan.run(a.p, b.p, out.p, s);
    } else {
      fill_random<<<64, 256, 0, s>>>(x.as<uint16_t>(), m * n, seed_a(me, call));
      plan.all_reduce(x.p, out.p, s);
    }
    CK(cudaMemcpyAsync(all.as<char>() + i * m * n * 2, out.p, m * n * 2, cudaMemcpyDeviceToDevice, s));
  }
  CK(cudaStreamSynchronize(s));
  cudaStreamDestroy(s);
  for (int i = 0; i < calls; ++i) {
    const void* o = all.as<char>() + i * m * n * 2;
    if (i % 2 == 0)
      check_call(o, m, n, k, 1000 + i, "back-to-back run");
    else
      check_all_reduce(o, m, n, 1000 + i, "back-to-back all_reduce");
  }
  comm().barrier();
  }
}

// run() on one stream, then all_reduce() at once on another, with no event
// between them, one-shot and two-shot: the plan orders its own calls
// (tp_test_util.hpp, second_stream_waits_for_first), so both outputs are right.
TEST_F(GemmArTest, CallsOnTwoStreamsAreOrdered) {
  if (!tp_ranks()) GTEST_SKIP() << kNeedsRanks;
  const int me = comm().rank();
  const int64_t m = rows_for_world(512), n = 320, k = 256;
  for (int variant : {-1, 0}) {  // the default (one-shot at this size on one node of two), two-shot
    SCOPED_TRACE("one_shot option " + std::to_string(variant));
    GemmAr plan(comm(), m, n, k, GemmArOptions{.one_shot = variant});
    Buf a(m * k * 2), b(n * k * 2), x(m * n * 2), out1(m * n * 2), out2(m * n * 2);
    random_bf16(b.p, n * k, seed_b(me));
    random_bf16(a.p, m * k, seed_a(me, 1201));
    random_bf16(x.p, m * n, seed_a(me, 1202));
    poison(out1.p, m * n);
    poison(out2.p, m * n);
    EXPECT_EQ(second_stream_waits_for_first([&](cudaStream_t s) { plan.run(a.p, b.p, out1.p, s); },
                                            [&](cudaStream_t s) { plan.all_reduce(x.p, out2.p, s); }),
              "");
    check_call(out1.p, m, n, k, 1201, "first stream");
    check_all_reduce(out2.p, m, n, 1202, "second stream");
    comm().barrier();
  }
}

// One captured run, replayed back to back with new inputs copied in on the
// stream between replays: each replay gets a fresh epoch from the plan's
// device counter (captured arguments are frozen), no host sync.
TEST_F(GemmArTest, CudaGraphReplayWithNewInputs) {
  if (!tp_ranks()) GTEST_SKIP() << kNeedsRanks;
  const int me = comm().rank();
  const int64_t m = rows_for_world(768), n = 320, k = 512;
  const int reps = 5;
  for (int variant : {-1, 0}) {
  SCOPED_TRACE("one_shot option " + std::to_string(variant));
  GemmAr plan(comm(), m, n, k, GemmArOptions{.one_shot = variant});
  Buf a(m * k * 2), b(n * k * 2), out(m * n * 2), fresh(reps * m * k * 2), all(reps * m * n * 2);
  random_bf16(b.p, n * k, seed_b(me));
  for (int rep = 0; rep < reps; ++rep) random_bf16(fresh.as<uint16_t>() + rep * m * k, m * k, seed_a(me, 2001 + rep));
  poison(out.p, m * n);
  EXPECT_FALSE(plan.captured()) << "a plan never launched in a stream capture";
  bool held = false;  // graphs_alive() right after the captured call
  replay_on_fresh_inputs([&](cudaStream_t s) { plan.run(a.p, b.p, out.p, s); held = plan.graphs_alive(); },
                         a.p, fresh.p, m * k * 2, out.p, all.p, m * n * 2, reps);
  EXPECT_TRUE(plan.captured()) << "a plan launched in a stream capture (Python's bounded cache keeps it)";
  EXPECT_TRUE(held) << "graphs_alive() inside the capture";
  EXPECT_TRUE(graphs_released_within(plan, 5)) << "graphs_alive() after its graph was destroyed";
  for (int rep = 0; rep < reps; ++rep) check_call(all.as<char>() + rep * m * n * 2, m, n, k, 2001 + rep, "replay");
  // The plan still runs eagerly after the replays (the epochs stayed in step).
  run_once(plan, a, b, out, m, n, k, 2001 + reps, "eager after replay");
  comm().barrier();
  }
}

// Gather CTAs 1, 2, 8 beside the GEMM on every SM; smaller grids (down to
// one compute CTA); swizzle 1 against the default; plain-store epilogue.
// Each against the reference and across ranks.
TEST_F(GemmArTest, RoleSplitsGiveTheSameResult) {
  if (!tp_ranks()) GTEST_SKIP() << kNeedsRanks;
  const int me = comm().rank();
  const int64_t m = rows_for_world(1536), n = 512, k = 512;  // 6 row-blocks per rank
  Buf a(m * k * 2), b(n * k * 2), out(m * n * 2);
  random_bf16(b.p, n * k, seed_b(me));
  int call = 4000;
  std::vector<GemmArOptions> opts = {
      GemmArOptions{}, GemmArOptions{.num_gather_ctas = 1, .one_shot = 0},
      GemmArOptions{.num_gather_ctas = 2, .one_shot = 0}, GemmArOptions{.num_gather_ctas = 8, .one_shot = 0},
      GemmArOptions{.num_gather_ctas = 3, .num_ctas = 40, .one_shot = 0},
      GemmArOptions{.num_gather_ctas = 1, .num_ctas = 2, .one_shot = 0}, GemmArOptions{.swizzle = 1, .one_shot = 0},
      GemmArOptions{.swizzle = 2, .one_shot = 0}, GemmArOptions{.async_store = 0, .one_shot = 0},
      GemmArOptions{.one_shot = 0, .interleave = 0}, GemmArOptions{.swizzle = 1, .one_shot = 0, .interleave = 1},
      GemmArOptions{.one_shot = 0, .own_tma_store = 0},
      GemmArOptions{.num_ctas = 40, .one_shot = 0, .own_tma_store = 0},
      GemmArOptions{.num_gather_ctas = 1, .num_ctas = 2, .async_store = 0, .one_shot = 0}};
  if (comm().topology().num_nodes == 1 && comm().world() == 2)  // one-shot: one node of two ranks only
    for (GemmArOptions o : {GemmArOptions{.one_shot = 1}, GemmArOptions{.num_ctas = 40, .one_shot = 1},
                            GemmArOptions{.num_ctas = 2, .swizzle = 1, .one_shot = 1}})
      opts.push_back(o);
  for (GemmArOptions o : opts) {
    SCOPED_TRACE("gather CTAs " + std::to_string(o.num_gather_ctas) + " grid " + std::to_string(o.num_ctas) +
                 " swizzle " + std::to_string(o.swizzle) + " async store " + std::to_string(o.async_store) +
                 " one-shot " + std::to_string(o.one_shot) + " own TMA stores " + std::to_string(o.own_tma_store));
    GemmAr plan(comm(), m, n, k, o);
    if (o.one_shot >= 0) EXPECT_EQ(plan.one_shot(), o.one_shot == 1);
    if (o.num_gather_ctas) EXPECT_EQ(plan.num_gather_ctas(), o.num_gather_ctas);
    EXPECT_GE(plan.num_compute_ctas(), 1);
    if (o.num_ctas && !plan.one_shot()) EXPECT_EQ(plan.num_gather_ctas() + plan.num_compute_ctas(), o.num_ctas);
    if (o.num_ctas && plan.one_shot()) EXPECT_LE(plan.num_compute_ctas(), o.num_ctas);
    if (o.swizzle) EXPECT_EQ(plan.swizzle(), o.swizzle);
    run_once(plan, a, b, out, m, n, k, ++call, "role split");
    comm().barrier();
  }
}

// With only two SMs free (another kernel holds the rest, tests/dist/
// scarce_sms.cuh), run() finishes on its two resident CTAs: they are
// compute CTAs, the Gather CTAs (which wait on compute) come after them and
// run late. all_reduce() too: its CTAs claim the push, then the reduce
// items, then gather (with push and Reduce CTAs by index, the push CTAs,
// done, spun in the gather while the Reduce CTAs had no SM).
TEST_F(GemmArTest, FinishesWithTwoSmsFree) {
  if (!tp_ranks()) GTEST_SKIP() << kNeedsRanks;
  if (const std::string why = scarce_sms_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  const int me = comm().rank();
  const int64_t m = rows_for_world(1024), n = 256, k = 256;  // 4 row-blocks per rank
  Buf a(m * k * 2), b(n * k * 2), out(m * n * 2);
  random_bf16(b.p, n * k, seed_b(me));
  int call = 5000;
  for (int variant : {-1, 0}) {  // the default (one-shot at 1x2), two-shot
    GemmAr plan(comm(), m, n, k, GemmArOptions{.one_shot = variant});
    SCOPED_TRACE(std::string(plan.one_shot() ? "one-shot" : "two-shot") + ", " +
                 std::to_string(plan.num_compute_ctas()) + " compute CTAs");
    ++call;
    random_bf16(a.p, m * k, seed_a(me, call));
    poison(out.p, m * n);
    EXPECT_EQ(finishes_on_free_sms(out.p, m * n, 2, [&](cudaStream_t s) { plan.run(a.p, b.p, out.p, s); }), "");
    check_call(out.p, m, n, k, call, "run on 2 free SMs");
    comm().barrier();
  }
  GemmAr plan(comm(), m, n, k);
  Buf x(m * n * 2);
  ++call;
  random_bf16(x.p, m * n, seed_a(me, call));
  poison(out.p, m * n);
  EXPECT_EQ(finishes_on_free_sms(out.p, m * n, 2, [&](cudaStream_t s) { plan.all_reduce(x.p, out.p, s); }), "");
  check_all_reduce(out.p, m, n, call, "all_reduce on 2 free SMs");
  comm().barrier();
}

TEST(GemmArErrors, BadPlansAreRejected) {
  const int w = comm().world();
  auto expect_error = [](const std::string& what, const char* want, auto&& make) {
    const std::string m = error_of(make);
    EXPECT_NE(m.find(want), std::string::npos) << what << ": got \"" << m << "\", want \"" << want << "\"";
  };
  // m must split into W equal row blocks of at least one row.
  expect_error("m W x 128 + 1", "equal row blocks", [&] { GemmAr p(comm(), w * 128 + 1, 128, 128); });
  expect_error("m W - 1", "equal row blocks", [&] { GemmAr p(comm(), w - 1, 128, 128); });
  expect_error("m 0", "equal row blocks", [] { GemmAr p(comm(), 0, 128, 128); });
  const int64_t m = w * 128;
  expect_error("n 100", "n must be a positive multiple of 64", [&] { GemmAr p(comm(), m, 100, 128); });
  expect_error("n 0", "n must be a positive multiple of 64", [&] { GemmAr p(comm(), m, 0, 128); });
  expect_error("k 96", "k_local must be a positive multiple of 64", [&] { GemmAr p(comm(), m, 128, 96); });
  expect_error("k 0", "k_local must be a positive multiple of 64", [&] { GemmAr p(comm(), m, 128, 0); });
  // Role counts out of range: negative, more than the SMs, none left to compute.
  expect_error("gather -1", "num_gather_ctas", [&] { GemmAr p(comm(), m, 128, 128, {.num_gather_ctas = -1}); });
  expect_error("gather 100000", "num_gather_ctas",
               [&] { GemmAr p(comm(), m, 128, 128, {.num_gather_ctas = 100000}); });
  expect_error("gather = grid", "num_gather_ctas",
               [&] { GemmAr p(comm(), m, 128, 128, {.num_gather_ctas = 4, .num_ctas = 4}); });
  expect_error("reduce 100000", "num_reduce_ctas",
               [&] { GemmAr p(comm(), m, 128, 128, {.num_reduce_ctas = 100000}); });
  expect_error("one_shot 2", "one_shot must be -1, 0 or 1", [&] { GemmAr p(comm(), m, 128, 128, {.one_shot = 2}); });
  expect_error("own_tma_store 2", "own_tma_store must be -1, 0 or 1",
               [&] { GemmAr p(comm(), m, 128, 128, {.own_tma_store = 2}); });
  if (comm().topology().num_nodes > 1 || comm().world() > 2)  // across nodes, or one node of more than two ranks
    expect_error("one-shot beyond one node of two", "one_shot = 1 needs one node of 2 ranks",
                 [&] { GemmAr p(comm(), m, 128, 128, {.one_shot = 1}); });
  expect_error("swizzle 2 of 3 row-blocks", "swizzle", [&] { GemmAr p(comm(), 3 * m, 128, 128, {.swizzle = 2}); });
  // Ranks disagreeing on the shape: every rank hears it.
  if (tp_ranks()) {
    const int64_t n = comm().rank() == 0 ? 128 : 192;
    expect_error("n differs on rank 0", "every rank must use the same shape", [&] { GemmAr p(comm(), m, n, 128); });
    // The walk and variant too (ranks walking different orders could wait on each other).
    expect_error("swizzle differs on rank 0", "every rank must use the same shape",
                 [&] { GemmAr p(comm(), 4 * m, 128, 128, {.swizzle = comm().rank() == 0 ? 1 : 2, .one_shot = 0}); });
    expect_error("interleave differs on rank 0", "every rank must use the same shape",
                 [&] { GemmAr p(comm(), m, 128, 128, {.one_shot = 0, .interleave = comm().rank() == 0 ? 1 : 0}); });
  }
  comm().barrier();
}

// A plan made while rank 0's thread has another GPU current: every rank
// refuses it at once, naming rank 0 and both devices (the plan would hold its
// memory on one GPU and launch on another's pointers), and the same plan made
// right after, with the device current, is made (its runs are checked by the
// tests above). Needs a second visible GPU: skipped on one, run in the 2-GPU tier.
TEST(GemmArErrors, APlanMadeWithAnotherDeviceCurrentIsRefusedOnEveryRank) {
  int count = 0;
  MK_CUDA_CHECK(cudaGetDeviceCount(&count));
  if (!tp_ranks() || count < 2) GTEST_SKIP() << "needs 2 ranks and a second visible GPU (" << count << " visible)";
  const int mine = comm().device(), other = (mine + 1) % count;
  const int64_t m = comm().world() * 128, n = 128, k = 128;
  if (comm().rank() == 0) MK_CUDA_CHECK(cudaSetDevice(other));
  const std::string e = error_of([&] { GemmAr p(comm(), m, n, k); });
  MK_CUDA_CHECK(cudaSetDevice(mine));
  const std::string want = "rank 0 could not make its plan: GemmAr: the calling thread's current CUDA device is " +
                           std::to_string(other) + ", the communicator's is ";
  EXPECT_NE(e.find(want), std::string::npos) << "want \"" << want << "\", got \"" << e << "\"";
  GemmAr plan(comm(), m, n, k);
  comm().barrier();
}

// MK_SYMM_MAX_BYTES set for one scope (every rank, or the ranks given).
struct SymmBudget {
  explicit SymmBudget(size_t bytes, bool here = true) {
    if (here) setenv("MK_SYMM_MAX_BYTES", std::to_string(bytes).c_str(), 1);
  }
  ~SymmBudget() { unsetenv("MK_SYMM_MAX_BYTES"); }
};

// A plan whose constructor throws after it allocated gives the memory back
// (C++ runs no destructor for a constructor that throws; before
// tp::undo_on_throw it was kept for the communicator's life). One-shot on one
// node of 2 allocates the reduce-scatter part's staging, then the one-shot
// staging: MK_SYMM_MAX_BYTES leaves room for the first but not the second,
// (1) on every rank, (2) on rank 0 only (alloc_symmetric then fails on every
// rank alike). Afterwards the same plan is made and computes (the ranks still
// in step).
TEST_F(GemmArTest, APlanFailingAfterItsAllocationsGivesThemBack) {
  if (!tp_ranks() || comm().world() != 2 || comm().topology().num_nodes != 1)
    GTEST_SKIP() << "the one-shot variant needs one node of 2 ranks";
  const int64_t m = 512, n = 8192, k = 128;
  const size_t os_request = size_t(m) * n * 2;  // one-shot's own staging: one partial result per node peer
  const size_t before = comm().symmetric_bytes();
  size_t rs_bytes = 0, both_bytes = 0;  // what the two-shot and the one-shot plan of this shape hold
  {
    GemmAr two(comm(), m, n, k, {.one_shot = 0});
    rs_bytes = comm().symmetric_bytes() - before;
  }
  {
    GemmAr one(comm(), m, n, k, {.one_shot = 1});
    both_bytes = comm().symmetric_bytes() - before;
  }
  ASSERT_EQ(comm().symmetric_bytes(), before) << "plans destroyed: their memory back";
  ASSERT_GT(rs_bytes, 0u);
  ASSERT_GE(both_bytes, rs_bytes + os_request) << "the one-shot plan adds its own staging";
  for (const bool everywhere : {true, false}) {
    SCOPED_TRACE(everywhere ? "budget on every rank" : "budget on rank 0 only");
    std::string e;
    {
      SymmBudget budget(before + rs_bytes + os_request - 1, everywhere || comm().rank() == 0);
      e = error_of([&] { GemmAr p(comm(), m, n, k, {.one_shot = 1}); });
    }
    const std::string want = "alloc_symmetric of " + std::to_string(os_request) +
                             " bytes: rank 0 could not allocate its part: MK_SYMM_MAX_BYTES";
    EXPECT_NE(e.find(want), std::string::npos) << "want \"" << want << "\", got \"" << e << "\"";
    EXPECT_EQ(comm().symmetric_bytes(), before)
        << "the failed plan kept " << comm().symmetric_bytes() - before << " bytes (its reduce-scatter staging: "
        << rs_bytes << ")";
  }
  GemmAr plan(comm(), m, n, k, {.one_shot = 1});
  Buf a(m * k * 2), b(n * k * 2), out(m * n * 2);
  random_bf16(b.p, n * k, seed_b(comm().rank()));
  run_once(plan, a, b, out, m, n, k, 4000, "the same plan made after the failed ones");
  comm().barrier();
}

// Bad pointers are refused on the host before anything is launched: out
// keeps its poison, and the plan (its epochs in step on every rank) still
// computes correctly afterwards.
TEST_F(GemmArTest, BadInputsAreRejectedBeforeLaunch) {
  if (!tp_ranks()) GTEST_SKIP() << kNeedsRanks;
  const int64_t m = rows_for_world(256), n = 128, k = 128;
  GemmAr plan(comm(), m, n, k);
  Buf a(m * k * 2), b(n * k * 2), out(m * n * 2), x(m * n * 2);
  random_bf16(b.p, n * k, seed_b(comm().rank()));
  random_bf16(x.p, m * n, 1);
  poison(out.p, m * n);
  CK(cudaDeviceSynchronize());
  auto expect_error = [](const std::string& what, const char* want, auto&& call) {
    const std::string e = error_of(call);
    EXPECT_FALSE(e.empty()) << what << ": not rejected";
    EXPECT_NE(e.find(want), std::string::npos) << what << ": got \"" << e << "\", want \"" << want << "\"";
  };
  char* ca = a.as<char>();
  expect_error("a null", "16-byte aligned", [&] { plan.run(nullptr, b.p, out.p, nullptr); });
  expect_error("b null", "16-byte aligned", [&] { plan.run(a.p, nullptr, out.p, nullptr); });
  expect_error("out null", "16-byte aligned", [&] { plan.run(a.p, b.p, nullptr, nullptr); });
  expect_error("a misaligned", "16-byte aligned", [&] { plan.run(ca + 2, b.p, out.p, nullptr); });
  expect_error("b misaligned", "16-byte aligned", [&] { plan.run(a.p, b.as<char>() + 8, out.p, nullptr); });
  expect_error("out misaligned", "16-byte aligned", [&] { plan.run(a.p, b.p, out.as<char>() + 2, nullptr); });
  expect_error("out = a", "overlaps", [&] { plan.run(a.p, b.p, a.p, nullptr); });
  expect_error("out = b", "overlaps", [&] { plan.run(a.p, b.p, b.p, nullptr); });
  // a is [m x k] and out [m x n]: out starting inside a's last row.
  expect_error("out inside a", "overlaps", [&] { plan.run(a.p, b.p, ca + (m * k - k) * 2, nullptr); });
  expect_error("a inside out", "overlaps", [&] { plan.run(out.as<char>() + 16, b.p, out.p, nullptr); });
  expect_error("all_reduce x misaligned", "16-byte aligned",
               [&] { plan.all_reduce(x.as<char>() + 2, out.p, nullptr); });
  expect_error("all_reduce out misaligned", "16-byte aligned",
               [&] { plan.all_reduce(x.p, out.as<char>() + 2, nullptr); });
  expect_error("all_reduce out null", "16-byte aligned", [&] { plan.all_reduce(x.p, nullptr, nullptr); });
  EXPECT_FALSE(error_of([&] { plan.all_reduce(nullptr, out.p, nullptr); }).empty()) << "all_reduce x null";
  CK(cudaDeviceSynchronize());
  std::vector<uint16_t> h(m * n);
  CK(cudaMemcpy(h.data(), out.p, m * n * 2, cudaMemcpyDeviceToHost));
  int64_t written = 0;
  for (uint16_t v : h) written += v != kPoison;
  EXPECT_EQ(written, 0) << "a rejected call wrote out";
  comm().barrier();
  run_once(plan, a, b, out, m, n, k, 7000, "run after rejected calls");
  comm().barrier();
}

}  // namespace
