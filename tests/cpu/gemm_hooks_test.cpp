// The GEMM engine's host checks of split tiles (gemm::validate_hooks), no
// GPU: split_last takes only the owner's final tiles at the end of the walk
// (GemmParams::split_last); anything else is refused with a message before
// a launch.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>

#include "device/gemm/gemm_params.hpp"
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

}  // namespace
