// The GEMM engine's host checks of split tiles (gemm::validate_hooks), no
// GPU: split_last takes only the owner's final tiles at the end of the walk
// (GemmParams::split_last); anything else is refused with a message before
// a launch.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>

#include "device/gemm/gemm_params.hpp"
#include "mkernel/gemm.hpp"
#include "src/ops/gemm/gemm_host.hpp"

namespace {

using namespace mk;

alignas(16) uint16_t g_slots[64];
alignas(16) uint64_t g_words[64];

// A GEMM+RS walk of rank 0 of 2 on one node (as tp::rs_gemm_params makes
// it): share 1 (the peer's partial tiles, signalled) first, share 0 (own,
// summed with the peer's tiles, final) last; its last 2 tiles in halves.
gemm::GemmParams rs_like() {
  gemm::GemmParams p{};
  p.m = 1024;
  p.n = 512;
  p.k = 1024;
  p.num_compute = 30;
  p.timeout_ns = 1000000000;
  p.sched.order = sched::TileOrder::SharePermuted;
  p.sched.m_blocks = 8;
  p.sched.n_blocks = 2;
  p.sched.share_blocks = 4;
  p.sched.share_order[0] = 1;
  p.sched.share_order[1] = 0;
  p.sched.swizzle = 1;
  gemm::EpilogueHook& e = p.epi;
  e.layout = gemm::OutLayout::FragMajor;
  e.rows_per_dest = 512;
  e.signal = gemm::EpiSignal::PerRowBlock;
  e.out[0] = g_slots;
  e.out[1] = g_slots;
  e.signals[1] = g_words;
  e.own_mask = 1;
  e.own_final = 0;
  e.own_nsrc = 1;
  e.own_slots = g_slots;
  e.own_signals = g_words;
  e.own_sig_stride = 8;
  e.own_expect = 2;
  e.own_out = g_slots;
  e.own_ldo = 512;
  p.load.epoch_counter = g_words;
  p.tile_counter = g_words + 1;
  p.split_tiles = 2;
  p.split_parts = 2;
  p.split_ws = reinterpret_cast<float*>(g_words);
  p.split_flags = g_words + 2;
  p.split_last = 1;
  return p;
}

std::string error_of(const std::function<void(gemm::GemmParams&)>& change) {
  gemm::GemmParams p = rs_like();
  change(p);
  try {
    gemm::validate_hooks(p);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// The error a call raises ("" when none).
std::string error_of_call(const std::function<void()>& call) {
  try {
    call();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(GemmHooks, SplitLastTakesOnlyTheOwnersFinalTilesAtTheEnd) {
  EXPECT_EQ(error_of([](gemm::GemmParams&) {}), "");                                  // the RS walk: accepted
  EXPECT_EQ(error_of([](gemm::GemmParams& p) { p.split_tiles = 8; }), "");            // every own tile
  const std::string refused = "split_last needs the owner's final share last";
  EXPECT_NE(error_of([](gemm::GemmParams& p) { p.split_tiles = 9; }).find(refused), std::string::npos);
  EXPECT_NE(error_of([](gemm::GemmParams& p) {  // own share first: its tiles are waited for by nothing, but
              p.sched.share_order[0] = 0;       // the peer's are split, and its owner waits for them
              p.sched.share_order[1] = 1;
            }).find(refused),
            std::string::npos);
  EXPECT_NE(error_of([](gemm::GemmParams& p) { p.sched.share_interleave = 1; }).find(refused), std::string::npos);
  EXPECT_NE(error_of([](gemm::GemmParams& p) { p.sched.order = sched::TileOrder::Swizzled; }).find(refused),
            std::string::npos);
  EXPECT_NE(error_of([](gemm::GemmParams& p) { p.epi.fin_publish = 1; }).find(refused), std::string::npos);
  // Split tiles at the start of the walk keep to the plain RowMajor Store epilogue.
  EXPECT_NE(error_of([](gemm::GemmParams& p) { p.split_last = 0; }).find("split tiles need the RowMajor Store"),
            std::string::npos);
}

// GEMM+AR's final-row signals are indexed by the schedule's row-blocks: with ragged shares (m = 600 over 2 ranks:
// 300 rows a share, 3 row-blocks of 384 padded rows each, 6 in all) there are more of them than m / 128 rounded
// down (4) or up (5); the pool must hold all 6.
TEST(GemmHooks, FinalRowSignalsMustFitEveryRowBlockOfTheSchedule) {
  auto fin = [](int64_t pool) {
    return [pool](gemm::GemmParams& p) {
      p.split_tiles = p.split_parts = p.split_last = 0;
      p.split_ws = nullptr;
      p.split_flags = nullptr;
      p.m = 600;
      p.sched.m_blocks = 6;
      p.sched.share_blocks = 3;
      p.epi.rows_per_dest = 384;
      p.epi.fin_publish = 1;
      p.epi.fin_sig = 16;
      p.has_ctx = 1;
      p.ctx.num_signals = static_cast<int32_t>(pool);
    };
  };
  EXPECT_EQ(error_of(fin(16 + 6)), "");
  for (int64_t short_pool : {16 + 5, 16 + 4})
    EXPECT_NE(error_of(fin(short_pool)).find("needs fin_sig + its 6 row-blocks inside the signal pool"),
              std::string::npos)
        << error_of(fin(short_pool));
}

// Dimensions: at most 2^31 - 256 (gemm::kMaxDim), refused before the device is asked (these run without one).
// Before 2026-12-06 an m within 127 of 2^31 passed and overflowed row0 + 128 in the producer, and the workspace
// query gave a size for an n or k >= 2^31 that the call refuses, or for a negative group count.
TEST(GemmDims, TheBoundLeavesRoomForALastBlockAndTheQueriesKeepTheCallsRules) {
  alignas(16) static uint16_t buf[8];
  const auto make = [&](int64_t m, int64_t n, int64_t k, int groups = 0) {
    return [=] { (void)gemm::make_params(gemm::Operands{.a = buf, .b = buf, .out = buf, .m = m, .n = n, .k = k,
                                                        .ldo = n, .num_groups = groups}, 0); };
  };
  const std::string bound = "dimensions must stay at or below 2^31 - 256 = 2147483392";
  for (int64_t m : {(int64_t(1) << 31) - 100, gemm::kMaxDim + 1})
    EXPECT_NE(error_of_call(make(m, 64, 64)).find(bound), std::string::npos) << m;
  EXPECT_NE(error_of_call(make(1024, int64_t(1) << 31, 64)).find(bound), std::string::npos);
  EXPECT_NE(error_of_call(make(1024, 64, int64_t(1) << 31)).find(bound), std::string::npos);
  EXPECT_NE(error_of_call(make(1024, int64_t(1) << 25, 64, 64)).find(bound), std::string::npos);  // n x groups
  for (GemmArgs a : {GemmArgs{.m = 1024, .n = int64_t(1) << 31, .k = 8192},
                     GemmArgs{.m = 1024, .n = 8192, .k = int64_t(1) << 31},
                     GemmArgs{.m = (int64_t(1) << 31) - 100, .n = 8192, .k = 8192}})
    EXPECT_NE(error_of_call([&] { (void)gemm_workspace_bytes(a); }).find(bound), std::string::npos);
  for (int g : {-2, -1, 0, 1 << 25})
    EXPECT_NE(error_of_call([&] { (void)grouped_gemm_workspace_bytes(g); }).find("num_groups must be in [1, 2^25)"),
              std::string::npos)
        << g;
  EXPECT_EQ(grouped_gemm_workspace_bytes(1), size_t(2 * 12 + 16));
}

}  // namespace
