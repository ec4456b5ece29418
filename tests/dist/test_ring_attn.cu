// Ring attention in the dist tier: the op finishes while another kernel
// holds all SMs but two (tests/dist/scarce_sms.cuh), with the same bits as
// a call that had every SM. The push's parts are claimed by the CTAs that
// run (device/roles/kv_push.cuh), so the two resident CTAs push every piece;
// were parts tied to CTA indices, their compute would wait on pieces of CTAs
// that never got an SM. Two calls on two streams are ordered by the plan.
// Numerics against SDPA: tests/python/gpu/dist_ring_attn_check.py.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "mkernel/mkernel.hpp"
#include "mkernel/ring_attention.hpp"
#include "tests/dist/scarce_sms.cuh"
#include "tests/dist/tp_test_util.hpp"
#include "tests/gpu/gemm_test_util.cuh"
#include "tests/test_comm.hpp"

using namespace mk;
using mk::test::comm;
using namespace mkt;

namespace {

std::vector<uint16_t> to_host(const void* p, int64_t elems) {
  std::vector<uint16_t> h(static_cast<size_t>(elems));
  EXPECT_EQ(cudaMemcpy(h.data(), p, h.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

TEST(RingAttnDist, FinishesWithTwoSmsFree) {
  if (!tp_ranks()) GTEST_SKIP() << kNeedsRanks;
  if (const std::string why = scarce_sms_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  const int me = comm().rank();
  const int64_t b = 1, s = 512, h = 4, hkv = 2;
  for (int64_t d : {128, 64}) {
    for (bool causal : {false, true}) {
      SCOPED_TRACE("D " + std::to_string(d) + (causal ? ", causal" : ", not causal"));
      RingAttention plan(comm(), b, s, h, hkv, d, causal);
      const int64_t nq = b * s * h * d, nkv = b * s * hkv * d;
      Buf q(nq * 2), k(nkv * 2), v(nkv * 2), ref(nq * 2), out(nq * 2), lse(b * h * s * 4), lse2(b * h * s * 4);
      const uint64_t seed = 1000 + 10 * me + (causal ? 1 : 0) + d;
      random_bf16(q.p, nq, seed);
      random_bf16(k.p, nkv, seed + 100);
      random_bf16(v.p, nkv, seed + 200);
      poison(ref.p, nq);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      comm().barrier();
      plan.run(q.p, k.p, v.p, ref.p, lse.as<float>(), nullptr);  // every SM
      comm().check(static_cast<int>(cudaDeviceSynchronize()), "ring attention, every SM");
      comm().barrier();
      poison(out.p, nq);
      EXPECT_EQ(finishes_on_free_sms(out.p, nq, 2,
                                     [&](cudaStream_t st) { plan.run(q.p, k.p, v.p, out.p, lse2.as<float>(), st); }),
                "");
      const std::vector<uint16_t> want = to_host(ref.p, nq), got = to_host(out.p, nq);
      int64_t differ = 0;
      for (size_t i = 0; i < want.size(); ++i) differ += want[i] != got[i];
      EXPECT_EQ(differ, 0) << "elements differing from the call on every SM";
      std::vector<float> lse_want(static_cast<size_t>(b * h * s)), lse_got(lse_want.size());
      ASSERT_EQ(cudaMemcpy(lse_want.data(), lse.p, lse_want.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(lse_got.data(), lse2.p, lse_got.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      EXPECT_EQ(std::memcmp(lse_want.data(), lse_got.data(), lse_want.size() * 4), 0) << "lse differs";
      comm().barrier();
    }
  }
}

// Two calls on two streams with no event between them (tp_test_util.hpp,
// second_stream_waits_for_first): the plan orders them itself, and each
// output has the bits of the same call made alone on one stream.
TEST(RingAttnDist, CallsOnTwoStreamsAreOrdered) {
  if (!tp_ranks()) GTEST_SKIP() << kNeedsRanks;
  const int me = comm().rank();
  const int64_t b = 1, s = 512, h = 4, hkv = 2, d = 128;
  RingAttention plan(comm(), b, s, h, hkv, d, /*causal=*/true);
  const int64_t nq = b * s * h * d, nkv = b * s * hkv * d, nl = b * h * s;
  Buf q1(nq * 2), k1(nkv * 2), v1(nkv * 2), q2(nq * 2), k2(nkv * 2), v2(nkv * 2);
  Buf ref1(nq * 2), ref2(nq * 2), out1(nq * 2), out2(nq * 2), lse(nl * 4), lse1(nl * 4), lse2(nl * 4);
  for (int c = 0; c < 2; ++c) {
    const uint64_t seed = 3000 + 10 * me + c;
    random_bf16((c ? q2 : q1).p, nq, seed);
    random_bf16((c ? k2 : k1).p, nkv, seed + 100);
    random_bf16((c ? v2 : v1).p, nkv, seed + 200);
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  comm().barrier();
  plan.run(q1.p, k1.p, v1.p, ref1.p, lse.as<float>(), nullptr);
  plan.run(q2.p, k2.p, v2.p, ref2.p, lse.as<float>(), nullptr);
  comm().check(static_cast<int>(cudaDeviceSynchronize()), "ring attention, one stream");
  poison(out1.p, nq);
  poison(out2.p, nq);
  EXPECT_EQ(second_stream_waits_for_first(
                [&](cudaStream_t st) { plan.run(q1.p, k1.p, v1.p, out1.p, lse1.as<float>(), st); },
                [&](cudaStream_t st) { plan.run(q2.p, k2.p, v2.p, out2.p, lse2.as<float>(), st); }),
            "");
  int64_t differ = 0;
  for (int c = 0; c < 2; ++c) {
    const std::vector<uint16_t> want = to_host((c ? ref2 : ref1).p, nq), got = to_host((c ? out2 : out1).p, nq);
    for (size_t i = 0; i < want.size(); ++i) differ += want[i] != got[i];
  }
  EXPECT_EQ(differ, 0) << "elements differing from the same calls on one stream";
  comm().barrier();
}

// The plan check compares the softmax scale's exact bits: two floats that print alike at 6 digits (0.1234567
// and the next float up both read 0.123457) passed it, and each rank then scaled its scores differently.
TEST(RingAttnDist, ScalesThatPrintAlikeButDifferAreRefused) {
  if (!tp_ranks()) GTEST_SKIP() << kNeedsRanks;
  RingAttentionOptions o;
  o.scale = 0.1234567f;
  if (comm().rank() == 1) o.scale = std::nextafter(o.scale, 1.f);
  const std::string m = error_of([&] { RingAttention p(comm(), 1, 256, 4, 2, 128, false, o); });
  EXPECT_NE(m.find("every rank must use the same shape"), std::string::npos) << m;
  o.scale = 0.1234567f;  // alike on every rank: the plan is made
  EXPECT_EQ(error_of([&] { RingAttention p(comm(), 1, 256, 4, 2, 128, false, o); }), "");
  comm().barrier();
}

// An s_local so large that s_local x world overflows int64 is refused by the size check (the product was taken
// before it: undefined behaviour; session 48).
TEST(RingAttnDist, AHugeShardIsRefusedWithoutOverflow) {
  if (!tp_ranks()) GTEST_SKIP() << kNeedsRanks;
  const int64_t huge = std::numeric_limits<int64_t>::max() / 2 + 1;
  const std::string m = error_of([&] { RingAttention p(comm(), 1, huge, 4, 2, 128, false); });
  EXPECT_NE(m.find("sizes too large"), std::string::npos) << m;
  comm().barrier();
}

// An s_local below the bound whose whole sequence (s_local x world) is not: the error names that product (it
// read "sizes too large (seq_q ..., seq_kv ...)", a length the caller never passed).
TEST(RingAttnDist, AWholeSequenceTooLongIsRefusedNamingTheProduct) {
  if (!tp_ranks()) GTEST_SKIP() << kNeedsRanks;
  const int64_t s_local = (int64_t(1) << 30) / comm().world() + 2;
  const std::string m = error_of([&] { RingAttention p(comm(), 1, s_local, 4, 2, 128, false); });
  EXPECT_NE(m.find("the whole sequence, s_local x world = "), std::string::npos) << m;
  EXPECT_NE(m.find("must be < 2^30"), std::string::npos) << m;
  comm().barrier();
}

}  // namespace
