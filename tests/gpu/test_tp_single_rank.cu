// The tensor-parallel plans on a communicator of one rank (the GPU tier's):
// with MK_TP_SINGLE_RANK = plain run() is the standalone GEMM and the
// collectives copy; with fused, the fused kernels run as on several ranks;
// auto (the default) picks. Both against cuBLAS (every element, poisoned outputs, a ragged m),
// the gathered rows and the collectives byte for byte, CUDA-graph replay,
// bad input rejected before anything runs.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mkernel/mkernel.hpp"
#include "mkernel/tp.hpp"
#include "tests/gpu/gemm_test_util.cuh"
#include "tests/test_comm.hpp"

namespace {

using namespace mkt;
using mk::test::comm;

// MK_TP_SINGLE_RANK for the scope (read when a plan is made).
struct Mode {
  std::string old;
  bool had = false;
  explicit Mode(const char* v) {
    if (const char* o = std::getenv("MK_TP_SINGLE_RANK")) {
      had = true;
      old = o;
    }
    setenv("MK_TP_SINGLE_RANK", v, 1);
  }
  ~Mode() {
    if (had)
      setenv("MK_TP_SINGLE_RANK", old.c_str(), 1);
    else
      unsetenv("MK_TP_SINGLE_RANK");
  }
};

std::vector<uint8_t> bytes_of(const void* p, size_t n) {
  std::vector<uint8_t> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), p, n, cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

class TpSingleRank : public GemmFixture, public ::testing::WithParamInterface<const char*> {
 protected:
  void SetUp() override {
    GemmFixture::SetUp();
    if (comm().world() != 1) GTEST_SKIP() << "one rank only (the GPU tier)";
  }
  bool plain() const { return std::string(GetParam()) == "plain"; }
};

// m = 200 (not a multiple of the 128-row tile), n = 320, k = 192; then the issue's per-rank shape class.
constexpr int64_t kM = 200, kN = 320, kK = 192;

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
  EXPECT_THROW(plan.run(a.p, b.p, a.p, nullptr), std::exception) << "out overlapping a rejected";
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
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
  Buf a(kM * kK * 2), b(kN * kK * 2), out(kM * kN * 2), ref(kM * kN * 4), x(kM * kN * 2);
  random_bf16(b.p, kN * kK, 401);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  cudaGraph_t g;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  plan.run(a.p, b.p, out.p, s);
  ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  cudaGraphExec_t ge;
  ASSERT_EQ(cudaGraphInstantiate(&ge, g, 0), cudaSuccess);
  for (int call = 0; call < 3; ++call) {  // replays with fresh inputs
    random_bf16(a.p, kM * kK, 400 + call);
    poison(out.p, kM * kN);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(ge, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    reference(a.p, b.p, ref.as<float>(), kM, kN, kK);
    expect_near(out.p, ref.as<float>(), kM, kN, std::string("GemmAr graph ") + GetParam() + " replay " +
                                                    std::to_string(call));
  }
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  random_bf16(x.p, kM * kN, 410);
  poison(out.p, kM * kN);
  plan.all_reduce(x.p, out.p, s);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(bytes_of(out.p, kM * kN * 2), bytes_of(x.p, kM * kN * 2)) << "all_reduce";
  const std::vector<uint8_t> before = bytes_of(x.p, kM * kN * 2);
  plan.all_reduce(x.p, x.p, s);  // in place
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(bytes_of(x.p, kM * kN * 2), before) << "all_reduce in place";
  cudaStreamDestroy(s);
}

INSTANTIATE_TEST_SUITE_P(Modes, TpSingleRank, ::testing::Values("plain", "fused"),
                         [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

// auto (the default): plain unless the standalone GEMM's last wave idles over 5% of the SM-waves where the
// plan splits its tail.
TEST(TpSingleRankKnob, AutoByDefaultAndBadValuesAreRejected) {
  if (comm().world() != 1) GTEST_SKIP() << "one rank only (the GPU tier)";
  {
    const Mode unset("auto");
    unsetenv("MK_TP_SINGLE_RANK");
    EXPECT_TRUE(mk::GemmAr(comm(), 256, 256, 128).single_rank_plain()) << "no split tiles: plain";
    int sms = 0;
    ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
    // m x n tiles of 128 x 256: a whole number of waves, then one tile more.
    const int64_t whole = 256 * sms, short_wave = 128 * (sms + 1);
    mk::AgGemm full(comm(), whole, 256, 512), ragged(comm(), short_wave, 256, 512);
    EXPECT_TRUE(full.single_rank_plain()) << "whole waves";
    EXPECT_GT(ragged.split_tiles(), 0) << "a last wave of one tile is split";
    EXPECT_FALSE(ragged.single_rank_plain()) << "so the plan keeps its fused kernel";
  }
  const Mode bad("fast");
  EXPECT_THROW(mk::GemmRs(comm(), 256, 256, 128), std::exception) << "MK_TP_SINGLE_RANK=fast";
}

}  // namespace
