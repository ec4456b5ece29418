// GEMM engine on one GPU, against cuBLAS (fp32 output of the same bf16
// inputs): random shapes (M not a multiple of the tile, K up to 16384),
// poisoned outputs with every element checked, a short last wave in parts
// of K (two streams, a graph), grouped mode with empty groups, the compute role on a subset of the grid, the load and epilogue
// hooks, and input validation.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "mkernel/error.hpp"
#include "mkernel/gemm.hpp"
#include "src/ops/gemm/gemm_host.hpp"
#include "tests/gpu/gemm_test_util.cuh"

namespace {

using namespace mkt;

class Gemm : public GemmFixture {
 protected:
  // One GEMM against cuBLAS; out has `pad` poisoned columns after n.
  void run_shape(int64_t m, int64_t n, int64_t k, int64_t pad, uint64_t seed) {
    SCOPED_TRACE("m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                 " pad=" + std::to_string(pad));
    const int64_t ldo = n + pad;
    Buf a(m * k * 2), b(n * k * 2), out(m * ldo * 2), ref(m * n * 4);
    random_bf16(a.p, m * k, seed);
    random_bf16(b.p, n * k, seed + 1);
    poison(out.p, m * ldo);
    mk::gemm_bf16(mk::GemmArgs{.a = a.p, .b = b.p, .out = out.p, .m = m, .n = n, .k = k, .ldo = ldo});
    reference(a.p, b.p, ref.as<float>(), m, n, k);
    CUDA_OK(cudaDeviceSynchronize());
    Check c = check(out.p, ldo, ref.as<float>(), m, n);
    EXPECT_EQ(c.nonfinite, 0u) << "elements left unwritten (poison) or non-finite";
    EXPECT_EQ(c.touched, 0u) << "padding columns beyond n were written";
    EXPECT_LT(c.rel, 1e-2) << "relative Frobenius error";
  }
};

TEST_F(Gemm, FixedAndRandomShapesMatchCublas) {
  struct S {
    int64_t m, n, k, pad;
  };
  std::vector<S> shapes = {{1, 64, 64, 0},        {7, 192, 128, 64},     {128, 256, 64, 0},   {129, 320, 256, 0},
                           {255, 512, 1024, 128}, {1000, 576, 4096, 0},  {300, 256, 16384, 0}, {1024, 1024, 16384, 64},
                           {2048, 2048, 2048, 0}, {4097, 1088, 640, 0},  {300, 320, 256, 2}};  // pad 2: plain stores
  std::mt19937_64 rng(20261130);
  for (int i = 0; i < 8; ++i)
    shapes.push_back({int64_t(1 + rng() % 3000), int64_t(64 * (1 + rng() % 40)), int64_t(64 * (1 + rng() % 64)),
                      int64_t(64 * (rng() % 2))});
  uint64_t seed = 1;
  for (const S& s : shapes) run_shape(s.m, s.n, s.k, s.pad, seed += 7);
}

// The compute role on 132, 100, 64 and 1 CTAs of a full grid while the other
// CTAs copy 64 MiB (Test role): bit-identical results, and the copy is right.
TEST_F(Gemm, RoleSubsetGivesSameResults) {
  const int64_t m = 1000, n = 1024, k = 1024;
  const size_t copy_bytes = size_t(64) << 20;
  Buf a(m * k * 2), b(n * k * 2), out(m * n * 2), first(m * n * 2), src(copy_bytes), dst(copy_bytes);
  random_bf16(a.p, m * k, 11);
  random_bf16(b.p, n * k, 12);
  random_bf16(src.p, copy_bytes / 2, 13);
  const int sms = mk::gemm::num_sms();
  const mk::gemm::Operands o{.a = a.p, .b = b.p, .out = out.p, .m = m, .n = n, .k = k};
  std::vector<uint16_t> want(m * n), got(m * n), src_h(copy_bytes / 2), dst_h(copy_bytes / 2);
  CUDA_OK(cudaMemcpy(src_h.data(), src.p, copy_bytes, cudaMemcpyDeviceToHost));
  bool have_first = false;
  for (int ctas : {sms, 100, 64, 1}) {
    SCOPED_TRACE("compute CTAs " + std::to_string(ctas) + " of " + std::to_string(sms));
    poison(out.p, m * n);
    cudaMemset(dst.p, 0, copy_bytes);
    mk::gemm::GemmParams p = mk::gemm::make_params(o, ctas);
    mk::gemm::TestRoleParams t{src.p, dst.p, copy_bytes};
    mk::gemm::launch(p, sms, t, nullptr);
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(got.data(), out.p, m * n * 2, cudaMemcpyDeviceToHost));
    if (!have_first) {
      Buf ref(m * n * 4);
      reference(a.p, b.p, ref.as<float>(), m, n, k);
      Check c = check(out.p, n, ref.as<float>(), m, n);
      EXPECT_EQ(c.nonfinite, 0u);
      EXPECT_LT(c.rel, 1e-2);
      want = got;
      have_first = true;
    } else {
      EXPECT_EQ(std::memcmp(want.data(), got.data(), m * n * 2), 0) << "results differ from the all-SM run";
    }
    if (ctas < sms) {
      CUDA_OK(cudaMemcpy(dst_h.data(), dst.p, copy_bytes, cudaMemcpyDeviceToHost));
      EXPECT_EQ(std::memcmp(src_h.data(), dst_h.data(), copy_bytes), 0) << "the Test role's copy is wrong";
    }
  }
}

// A short last wave is computed in halves of K (gemm_bf16: gemm::standalone_split, scratch from a stream-ordered
// pool, zeroed per call): the AG+GEMM per-rank shape at M = 1024 (448 tiles on 132 SMs: 52 in halves) and a
// one-tile last wave, called back to back on two streams with inputs swapped between the calls (a slot or flag
// left from the call before would show), then once inside a CUDA-graph capture (unsplit there: one kernel node)
// and replayed; every call against cuBLAS, and the split each call made (gemm::last_split_tiles) checked.
TEST_F(Gemm, ShortLastWaveInPartsOnTwoStreamsAndInAGraph) {
  const int sms = mk::gemm::num_sms();
  struct S {
    int64_t m, n, k;
  };
  int shapes_split = 0;
  for (const S& sh : {S{1024, 14336, 8192}, S{int64_t(128) * (sms + 1), 256, 4096}}) {
    const int64_t m = sh.m, n = sh.n, k = sh.k;
    SCOPED_TRACE("m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k));
    const int64_t tiles = (m + 127) / 128 * ((n + 255) / 256);
    const int64_t want = mk::gemm::standalone_split(tiles, sms, k / 64).tiles;
    if (want == 0) continue;  // this GPU's SM count leaves no short last wave here
    ++shapes_split;
    Buf a0(m * k * 2), a1(m * k * 2), b(n * k * 2), o0(m * n * 2), o1(m * n * 2), ref(m * n * 4);
    random_bf16(b.p, n * k, 41);
    Stream s[2];
    auto call = [&](const Buf& a, const Buf& o, cudaStream_t st) {
      mk::gemm::set_last_split_tiles(-1);
      mk::gemm_bf16(mk::GemmArgs{.a = a.p, .b = b.p, .out = o.p, .m = m, .n = n, .k = k}, st);
      return mk::gemm::last_split_tiles();
    };
    for (int round = 0; round < 3; ++round) {
      random_bf16(a0.p, m * k, 50 + 2 * round);
      random_bf16(a1.p, m * k, 51 + 2 * round);
      poison(o0.p, m * n);
      poison(o1.p, m * n);
      CUDA_OK(cudaDeviceSynchronize());
      EXPECT_EQ(call(a0, o0, s[0]), want);  // then the inputs swapped: o0 = a1 b^T, o1 = a0 b^T
      EXPECT_EQ(call(a1, o1, s[1]), want);
      EXPECT_EQ(call(a1, o0, s[0]), want);
      EXPECT_EQ(call(a0, o1, s[1]), want);
      CUDA_OK(cudaDeviceSynchronize());
      reference(a1.p, b.p, ref.as<float>(), m, n, k);
      expect_near(o0.p, ref.as<float>(), m, n, "stream 0, round " + std::to_string(round));
      reference(a0.p, b.p, ref.as<float>(), m, n, k);
      expect_near(o1.p, ref.as<float>(), m, n, "stream 1, round " + std::to_string(round));
    }
    int64_t captured = -1;
    const Captured g(s[0], [&] { captured = call(a0, o0, s[0]); });
    ASSERT_TRUE(g.ok());
    EXPECT_EQ(captured, 0) << "no split inside a capture";
    size_t nodes = 0;
    ASSERT_EQ(cudaGraphGetNodes(g.graph(), nullptr, &nodes), cudaSuccess);
    EXPECT_EQ(nodes, 1u) << "the captured call is one kernel (no scratch allocation or memset)";
    random_bf16(a0.p, m * k, 60);
    poison(o0.p, m * n);
    CUDA_OK(cudaDeviceSynchronize());
    ASSERT_EQ(g.launch(s[0]), cudaSuccess);
    CUDA_OK(cudaStreamSynchronize(s[0]));
    reference(a0.p, b.p, ref.as<float>(), m, n, k);
    expect_near(o0.p, ref.as<float>(), m, n, "graph replay");
  }
  EXPECT_GT(shapes_split, 0) << "the one-tile last wave always splits";
}

// The caller's workspace (GemmArgs::workspace): a captured call splits its short last wave as an eager call does
// and gives the same bits; the workspace's size query; too small or misaligned workspaces refused.
TEST_F(Gemm, AWorkspaceSplitsInsideAGraphWithTheEagerBits) {
  const int sms = mk::gemm::num_sms();
  const int64_t m = 1024, n = 14336, k = 8192;  // 448 tiles: a short last wave on 132 SMs
  const int64_t want = mk::gemm::standalone_split((m + 127) / 128 * (n / 256), sms, k / 64).tiles;
  if (want == 0) GTEST_SKIP() << "this GPU's " << sms << " SMs leave no short last wave at " << m << " x " << n;
  const mk::GemmArgs dims{.m = m, .n = n, .k = k};
  const size_t bytes = mk::gemm_workspace_bytes(dims);
  EXPECT_GE(bytes, size_t(want) * 128 * 256 * 4) << "at least one fp32 tile slot per split tile";
  EXPECT_EQ(mk::gemm_workspace_bytes(mk::GemmArgs{.m = 128 * int64_t(sms), .n = 256, .k = 8192}), 0u)
      << "whole waves split nothing";
  EXPECT_THROW(mk::gemm_workspace_bytes(mk::GemmArgs{.m = m, .n = 100, .k = k}), mk::Error);

  Buf a(m * k * 2), b(n * k * 2), eager(m * n * 2), pooled(m * n * 2), graphed(m * n * 2), ref(m * n * 4),
      ws(bytes + 16);
  random_bf16(a.p, m * k, 71);
  random_bf16(b.p, n * k, 72);
  poison(eager.p, m * n);
  poison(pooled.p, m * n);
  poison(graphed.p, m * n);
  Stream s;
  CUDA_OK(cudaDeviceSynchronize());
  auto call = [&](const Buf& o, void* w, size_t wb) {
    mk::gemm::set_last_split_tiles(-1);
    mk::gemm_bf16(mk::GemmArgs{.a = a.p, .b = b.p, .out = o.p, .m = m, .n = n, .k = k, .workspace = w,
                               .workspace_bytes = wb},
                  s);
    return mk::gemm::last_split_tiles();
  };
  EXPECT_EQ(call(eager, ws.p, bytes), want);
  EXPECT_EQ(call(pooled, nullptr, 0), want);
  int64_t captured = -1;
  const Captured g(s, [&] { captured = call(graphed, ws.p, bytes); });
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(captured, want) << "a given workspace splits inside a capture";
  size_t nodes = 0;
  ASSERT_EQ(cudaGraphGetNodes(g.graph(), nullptr, &nodes), cudaSuccess);
  EXPECT_EQ(nodes, 2u) << "the workspace's zeroing (a memset node) and the kernel";
  for (int replay = 0; replay < 2; ++replay) {  // the memset node re-zeroes the flags and counter each replay
    poison(graphed.p, m * n);
    CUDA_OK(cudaDeviceSynchronize());
    ASSERT_EQ(g.launch(s), cudaSuccess);
    CUDA_OK(cudaStreamSynchronize(s));
    EXPECT_EQ(count_diff(eager.p, graphed.p, m * n), 0u) << "replay " << replay << ": not the eager call's bits";
  }
  EXPECT_EQ(count_diff(eager.p, pooled.p, m * n), 0u) << "the pool's scratch and the workspace differ";
  reference(a.p, b.p, ref.as<float>(), m, n, k);
  expect_near(eager.p, ref.as<float>(), m, n, "eager call with a workspace");
  random_bf16(a.p, m * k, 73);  // fresh inputs through the same graph
  poison(graphed.p, m * n);
  CUDA_OK(cudaDeviceSynchronize());
  ASSERT_EQ(g.launch(s), cudaSuccess);
  CUDA_OK(cudaStreamSynchronize(s));
  reference(a.p, b.p, ref.as<float>(), m, n, k);
  expect_near(graphed.p, ref.as<float>(), m, n, "graph replay on fresh inputs");

  for (const auto& [w, wb, what] : {std::tuple{ws.p, bytes - 1, "too small"},
                                    std::tuple{static_cast<void*>(ws.as<char>() + 8), bytes, "16-byte aligned"}}) {
    try {
      call(eager, w, wb);
      ADD_FAILURE() << "a workspace that is " << what << " was accepted";
    } catch (const mk::Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  }
  CUDA_OK(cudaDeviceSynchronize());
}

TEST_F(Gemm, GroupedWithEmptyGroupsMatchesPerGroupCublas) {
  const int64_t n = 320, k = 512;
  for (std::vector<int32_t> groups : {std::vector<int32_t>{0, 130, 1, 0, 257, 64, 0}, std::vector<int32_t>{0, 0},
                                      std::vector<int32_t>{128, 128, 5}}) {
    const int g = static_cast<int>(groups.size());
    int64_t total = 0;
    for (int32_t x : groups) total += x;
    SCOPED_TRACE("groups " + std::to_string(g) + " total rows " + std::to_string(total));
    Buf a(total * k * 2), b(g * n * k * 2), out(total * n * 2), ref(total * n * 4), ws(mk::grouped_gemm_workspace_bytes(g));
    random_bf16(a.p, total * k, 21);
    random_bf16(b.p, g * n * k, 22);
    poison(out.p, total * n);
    mk::GroupedGemmArgs args;
    args.a = a.p;
    args.b = b.p;
    args.out = out.p;
    args.m_per_group = groups.data();
    args.num_groups = g;
    args.n = n;
    args.k = k;
    args.workspace = ws.p;
    mk::grouped_gemm_bf16(args);
    int64_t row = 0;
    for (int i = 0; i < g; ++i) {
      reference(a.as<uint16_t>() + row * k, b.as<uint16_t>() + int64_t(i) * n * k, ref.as<float>() + row * n,
                groups[i], n, k);
      row += groups[i];
    }
    CUDA_OK(cudaDeviceSynchronize());
    if (total == 0) continue;
    Check c = check(out.p, n, ref.as<float>(), total, n);
    EXPECT_EQ(c.nonfinite, 0u);
    EXPECT_LT(c.rel, 1e-2);
  }
}

// A grouped GEMM on a capturing stream is refused, saying why, and the capture stays valid (its tables come from
// the host at every call: before 2026-12-06 their pageable copies went into the capture).
TEST_F(Gemm, GroupedIsRefusedInsideACaptureLeavingTheCaptureValid) {
  const int64_t n = 128, k = 128;
  std::vector<int32_t> groups{64, 64};
  Buf a(128 * k * 2), b(2 * n * k * 2), out(128 * n * 2), ws(mk::grouped_gemm_workspace_bytes(2));
  mk::GroupedGemmArgs args;
  args.a = a.p;
  args.b = b.p;
  args.out = out.p;
  args.m_per_group = groups.data();
  args.num_groups = 2;
  args.n = n;
  args.k = k;
  args.workspace = ws.p;
  cudaStream_t s = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  std::string error;
  try {
    mk::grouped_gemm_bf16(args, s);
  } catch (const mk::Error& e) {
    error = e.what();
  }
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess) << "the refusal left the capture invalid";
  if (graph) cudaGraphDestroy(graph);
  EXPECT_NE(error.find("grouped gemm: cannot be captured into a CUDA graph"), std::string::npos) << error;
  mk::grouped_gemm_bf16(args, s);  // (outside the capture it runs)
  CUDA_OK(cudaStreamSynchronize(s));
  CUDA_OK(cudaStreamDestroy(s));
}

TEST_F(Gemm, RejectsBadInputBeforeLaunching) {
  Buf a(1 << 20), b(1 << 20), out(1 << 20);
  auto msg = [&](int64_t m, int64_t n, int64_t k, const void* ap, int ctas) -> std::string {
    try {
      mk::gemm_bf16(mk::GemmArgs{.a = ap, .b = b.p, .out = out.p, .m = m, .n = n, .k = k, .num_compute_ctas = ctas});
    } catch (const mk::Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(msg(64, 100, 64, a.p, 0).find("n must be a positive multiple of 64"), std::string::npos);
  EXPECT_NE(msg(64, 64, 96, a.p, 0).find("k must be a positive multiple of 64"), std::string::npos);
  EXPECT_NE(msg(0, 64, 64, a.p, 0).find("m must be >= 1"), std::string::npos);
  EXPECT_NE(msg(64, 64, 64, a.as<char>() + 2, 0).find("16-byte aligned"), std::string::npos);
  EXPECT_NE(msg(64, 64, 64, a.p, 100000).find("num_compute_ctas"), std::string::npos);
  EXPECT_NE(msg(64, 64, 64, nullptr, 0).find("device pointers"), std::string::npos);
  // out sharing bytes with a or b (in place would read rows other tiles already wrote)
  auto overlap = [&](const void* ap, const void* bp, void* op) -> std::string {
    try {
      mk::gemm_bf16(mk::GemmArgs{.a = ap, .b = bp, .out = op, .m = 128, .n = 128, .k = 128});
    } catch (const mk::Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(overlap(a.p, b.p, a.p).find("out overlaps a"), std::string::npos);
  EXPECT_NE(overlap(a.p, b.p, b.as<char>() + 128 * 128 * 2 - 16).find("out overlaps b"), std::string::npos);
  EXPECT_EQ(overlap(a.p, b.p, a.as<char>() + 128 * 128 * 2), "") << "out right after a shares no byte";
  // out's rows reaching past 2^61 elements: its byte count wrapped before (a few bytes of out passed the pointer
  // check)
  const std::string far = error_of([&] {
    mk::gemm_bf16(mk::GemmArgs{.a = a.p, .b = b.p, .out = out.p, .m = 3, .n = 64, .k = 64,
                               .ldo = (int64_t(1) << 62) - 30});
  });
  EXPECT_NE(far.find("(m - 1) x ldo + n must stay below 2^61"), std::string::npos) << "ldo 2^62 - 30: " << far;
  CUDA_OK(cudaDeviceSynchronize());
}

// A workspace that shares bytes with a, b or out is refused (the kernel writes its split tiles' parts, counter and
// flags there while it runs; the grouped GEMM's tile tables are copied there), and so is a grouped GEMM's out over
// its a or b, as the plain GEMM's. m = 384, n = 256, k = 4096 on 2 CTAs: 3 tiles, the last wave's one in halves.
TEST_F(Gemm, AWorkspaceOverlappingItsOperandsIsRefused) {
  const int64_t m = 384, n = 256, k = 4096;
  Buf a(m * k * 2), b(n * k * 2), out(m * n * 2), ref(m * n * 4);
  const mk::GemmArgs base{.a = a.p, .b = b.p, .out = out.p, .m = m, .n = n, .k = k, .num_compute_ctas = 2};
  const size_t ws_bytes = mk::gemm_workspace_bytes(base);
  ASSERT_GT(ws_bytes, 0u) << "this shape must split its last wave, or the workspace is ignored";
  ASSERT_LE(ws_bytes, size_t(m * n * 2)) << "the workspace must fit inside out for the test";
  auto msg = [&](void* ws) {
    mk::GemmArgs g = base;
    g.workspace = ws;
    g.workspace_bytes = ws_bytes;
    return error_of([&] { mk::gemm_bf16(g); });
  };
  EXPECT_NE(msg(out.p).find("gemm: the workspace overlaps out"), std::string::npos) << msg(out.p);
  EXPECT_NE(msg(a.p).find("gemm: the workspace overlaps a"), std::string::npos) << msg(a.p);
  EXPECT_NE(msg(b.p).find("gemm: the workspace overlaps b"), std::string::npos) << msg(b.p);
  Buf ws(ws_bytes);
  random_bf16(a.p, m * k, 31);
  random_bf16(b.p, n * k, 32);
  poison(out.p, m * n);
  EXPECT_EQ(msg(ws.p), "") << "a workspace of its own";
  reference(a.p, b.p, ref.as<float>(), m, n, k);
  CUDA_OK(cudaDeviceSynchronize());
  Check c = check(out.p, n, ref.as<float>(), m, n);
  EXPECT_EQ(c.nonfinite, 0u);
  EXPECT_LT(c.rel, 1e-2);

  std::vector<int32_t> rows{128, 0, 256};
  Buf gb(3 * n * k * 2), gws(mk::grouped_gemm_workspace_bytes(3));
  auto grouped = [&](void* gout, void* gw, int groups) {
    mk::GroupedGemmArgs g;
    g.a = a.p, g.b = gb.p, g.out = gout, g.m_per_group = rows.data(), g.num_groups = groups, g.n = n, g.k = k;
    g.workspace = gw;
    return error_of([&] { mk::grouped_gemm_bf16(g); });
  };
  EXPECT_NE(grouped(a.p, gws.p, 3).find("grouped gemm: out overlaps a"), std::string::npos) << grouped(a.p, gws.p, 3);
  EXPECT_NE(grouped(gb.p, gws.p, 3).find("grouped gemm: out overlaps b"), std::string::npos) << grouped(gb.p, gws.p, 3);
  EXPECT_NE(grouped(out.p, out.p, 3).find("the workspace overlaps out"), std::string::npos) << grouped(out.p, out.p, 3);
  EXPECT_NE(grouped(out.p, gb.p, 3).find("the workspace overlaps b"), std::string::npos) << grouped(out.p, gb.p, 3);
  EXPECT_NE(grouped(out.p, gws.p, 1 << 25).find("num_groups must be below 2^25"), std::string::npos);
  EXPECT_EQ(grouped(out.p, gws.p, 3), "") << "apart, it runs";
  CUDA_OK(cudaDeviceSynchronize());
}

}  // namespace
