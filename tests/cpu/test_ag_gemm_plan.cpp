// Tensor-parallel plan decisions (src/ops/ag_gemm/tp_plan.hpp) and the
// tile order it uses, on the CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <utility>
#include <set>
#include <string>
#include <vector>

#include "device/gemm/gemm_params.hpp"
#include "device/sched/tile_scheduler.hpp"
#include "src/ops/ag_gemm/plan_args.hpp"
#include "src/ops/ag_gemm/tp_plan.hpp"
#include "tests/test_env.hpp"

using namespace mk;

TEST(AgGemmPlan, ChunkRowsDivideTheRankBlockAndStayNearATile) {
  for (int64_t m = 1; m <= 5000; ++m) {
    const int64_t c = tp::chunk_rows(m);
    ASSERT_EQ(m % c, 0) << m;
    ASSERT_TRUE(c == m || (c >= 16 && c <= 128)) << m << " -> " << c;
    // No divisor in [16, 128] larger than the one chosen.
    for (int64_t d = c + 1; d <= 128 && d <= m; ++d) ASSERT_NE(m % d, 0) << m;
  }
  EXPECT_EQ(tp::chunk_rows(8192), 128);
  EXPECT_EQ(tp::chunk_rows(1000), 125);
  EXPECT_EQ(tp::chunk_rows(1), 1);
  EXPECT_EQ(tp::chunk_rows(1009), 1009);  // prime: one chunk
}

TEST(AgGemmPlan, CommCtaHeuristicFollowsTheWidthAndIsClamped) {
  EXPECT_EQ(tp::comm_ctas_heuristic(14336), 4);
  EXPECT_EQ(tp::comm_ctas_heuristic(8192), 7);
  EXPECT_EQ(tp::comm_ctas_heuristic(64), 16);
  EXPECT_EQ(tp::comm_ctas_heuristic(1 << 20), 2);
}

TEST(AgGemmPlan, MismatchedPlansNameTheRanks) {
  tp::check_same_plan({"64x128x128", "64x128x128"}, 1, "AgGemm", "m_local x n x k");
  try {
    tp::check_same_plan({"64x128x128", "64x192x128"}, 0, "AgGemm", "m_local x n x k");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("rank 1 made a plan for m_local x n x k = 64x192x128, rank 0 for 64x128x128"), std::string::npos)
        << m;
  }
  try {  // the same plan on other signal words: plans made or destroyed in another order on one rank
    tp::check_same_plan({"64x128x128 (signals 0, 2)", "64x128x128 (signals 40, 42)"}, 0, "AgGemm", "m_local x n x k");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("rank 1 made the same plan"), std::string::npos) << m;
    EXPECT_NE(m.find("make and destroy plans in the same order"), std::string::npos) << m;
  }
  EXPECT_TRUE(mk::overlap(reinterpret_cast<void*>(4096), 16, reinterpret_cast<void*>(4100), 4));
  EXPECT_FALSE(mk::overlap(reinterpret_cast<void*>(4096), 16, reinterpret_cast<void*>(4112), 4));
  EXPECT_FALSE(mk::overlap(nullptr, 16, reinterpret_cast<void*>(4112), 4));
  EXPECT_FALSE(mk::overlap(reinterpret_cast<void*>(4096), 16, reinterpret_cast<void*>(4100), 0));  // (empty)
  EXPECT_TRUE(tp::own_rows_in_place(1024, 128));
  EXPECT_FALSE(tp::own_rows_in_place(1000, 128));
}

// The AG+GEMM walk's groups hold own row-blocks only (so the first tiles
// need no remote row), at most 8; partial own blocks: the default 8.
TEST(AgGemmPlan, SwizzleGroupsNeverMixOwnAndRemoteRows) {
  for (int64_t own = 1; own <= 64; ++own) {
    const int sw = tp::ag_swizzle(own * 128, 128);
    ASSERT_GE(sw, 1);
    ASSERT_LE(sw, 8);
    ASSERT_EQ(own % sw, 0) << own;
    for (int d = sw + 1; d <= 8; ++d) ASSERT_NE(own % d, 0) << own << " could use " << d;
  }
  EXPECT_EQ(tp::ag_swizzle(512, 128), 4);   // M = 1024 on 1x2
  EXPECT_EQ(tp::ag_swizzle(1024, 128), 8);  // M = 2048 on 1x2
  EXPECT_EQ(tp::ag_swizzle(1000, 128), 8);  // own rows copied: no in-place walk
}

// Split tiles: the tail of a partial last wave in P parts, P where the
// parts come out closest to even waves (and only when that beats the
// unsplit wave); the work units cover every tile once (whole) or in P
// parts, and every earlier part comes before every last part (which waits
// for them); with split_last the split tiles are the walk's last and come
// after every whole tile.
TEST(AgGemmPlan, SplitTilesCoverEveryTileOnceAndEarlierPartsComeFirst) {
  auto st = [](int64_t t, int64_t c, int64_t kb, int maxp = gemm::kMaxSplitParts) {
    const tp::SplitTail s = tp::split_tail(t, c, kb, maxp);
    return std::make_pair(s.tiles, s.tiles ? s.parts : 0);
  };
  using P = std::pair<int64_t, int>;
  EXPECT_EQ(st(448, 132, 128), P(52, 2));      // AG M = 1024 on 1x2: 3.5 tile times (5 parts: measured slower)
  EXPECT_EQ(st(448, 132, 128, 2), P(52, 2));   // halves only: what the plan did before 2026-12-01
  EXPECT_EQ(st(448, 128, 128), P(64, 2));      // 64 tail tiles: their halves fill 128 CTAs once
  EXPECT_EQ(st(896, 128, 128), P(0, 0));       // even waves
  EXPECT_EQ(st(1792, 132, 128), P(76, 3));     // AG M = 4096 on 1x2: tail 76 in thirds, halves gain nothing
  EXPECT_EQ(st(896, 132, 128), P(0, 0));       // AG M = 2048 on 1x2: tail 104, no P gains
  EXPECT_EQ(st(1792, 132, 128, 2), P(0, 0));
  EXPECT_EQ(st(60, 132, 128), P(60, 2));       // one partial wave
  EXPECT_EQ(st(60, 132, 1), P(0, 0));          // K of one block cannot be split
  EXPECT_EQ(st(100, 40, 8), P(20, 2));         // K of 8 blocks: at most 2 parts
  EXPECT_EQ(st(131, 132, 128), P(0, 0));       // a nearly full wave: no P gains
  for (int last = 0; last < 2; ++last)  // split tiles at the walk's start, or at its end (split_last)
  for (int64_t tiles : {1, 7, 52, 300, 448, 1000, 1792})
    for (int64_t ctas : {2, 64, 128, 132})
      for (int64_t kblocks : {2, 8, 128}) {
        const tp::SplitTail sp = tp::split_tail(tiles, ctas, kblocks);
        ASSERT_LT(sp.tiles, ctas);
        ASSERT_GE(sp.parts, 2);
        ASSERT_LE(sp.parts, std::max<int64_t>(2, kblocks / 4));
        gemm::GemmParams p{};
        p.sched.order = sched::TileOrder::RowMajor;
        p.sched.m_blocks = static_cast<int32_t>(tiles);
        p.sched.n_blocks = 1;
        p.k = static_cast<int32_t>(kblocks * gemm::kBlockK);
        p.split_tiles = static_cast<int32_t>(sp.tiles);
        p.split_parts = sp.parts;
        p.split_last = last;
        const int parts = sp.parts;
        const int64_t first_split = last ? tiles - sp.tiles : 0;  // split tiles [first_split, + sp.tiles)
        int64_t last_whole = -1, first_part = int64_t(1) << 40;
        ASSERT_EQ(gemm::total_units(p), tiles + sp.tiles * (parts - 1));
        std::vector<int> whole(tiles, 0);
        std::vector<std::vector<int64_t>> seen(tiles, std::vector<int64_t>(parts, -1));
        for (int64_t u = 0; u < gemm::total_units(p); ++u) {
          const gemm::WorkUnit w = gemm::work_unit(p, u);
          ASSERT_GE(w.tile, 0);
          ASSERT_LT(w.tile, tiles);
          if (w.part < 0) {
            ++whole[w.tile];
            last_whole = u;
            continue;
          }
          first_part = std::min(first_part, u);
          ASSERT_EQ(w.split, w.tile - first_split);
          ASSERT_LT(w.part, parts);
          ASSERT_EQ(seen[w.tile][w.part], -1) << "part seen twice";
          seen[w.tile][w.part] = u;
        }
        int64_t last_early = -1, first_last = int64_t(1) << 40;
        for (int64_t i = 0; i < tiles; ++i) {
          const bool is_split = i >= first_split && i < first_split + sp.tiles;
          ASSERT_EQ(whole[i], is_split ? 0 : 1) << tiles << "/" << ctas << " tile " << i;
          if (!is_split) continue;
          int32_t kb = 0;  // the parts cover K once, in order
          for (int q = 0; q < parts; ++q) {
            ASSERT_GE(seen[i][q], 0) << tiles << "/" << ctas << " tile " << i << " part " << q;
            const gemm::KRange r = gemm::k_range(p, gemm::work_unit(p, seen[i][q]));
            ASSERT_EQ(r.begin, kb);
            ASSERT_GT(r.end, r.begin);
            kb = r.end;
            if (q < parts - 1) last_early = std::max(last_early, seen[i][q]);
          }
          ASSERT_EQ(kb, kblocks);
          first_last = std::min(first_last, seen[i][parts - 1]);
        }
        ASSERT_LT(last_early, first_last);
        if (last && sp.tiles) {
          ASSERT_LT(last_whole, first_part) << "split_last: every whole tile comes first";
        }
      }
}

// The AG+GEMM order: swizzled groups over row-blocks rotated to this rank's
// own rows: the first (own row-blocks x n) work items are all own rows when
// the own row-blocks are a multiple of the swizzle, and every tile comes once.
TEST(AgGemmPlan, RankRotatedSwizzledStartsOnOwnRows) {
  using namespace mk::sched;
  for (int rank = 0; rank < 4; ++rank) {
    TileSchedParams p;
    p.order = TileOrder::RankRotated;
    p.m_blocks = 64;  // 4 ranks x 16 row-blocks
    p.n_blocks = 56;
    p.swizzle = 8;
    p.rotate_mblk = rank * 16;
    std::set<std::pair<int, int>> seen;
    for (int64_t w = 0; w < total_tiles(p); ++w) {
      Tile t = tile_of(p, w);
      ASSERT_TRUE(seen.insert({t.m_blk, t.n_blk}).second);
      if (w < 16 * 56) {
        ASSERT_GE(t.m_blk, rank * 16) << "rank " << rank << " item " << w;
        ASSERT_LT(t.m_blk, rank * 16 + 16) << "rank " << rank << " item " << w;
      }
    }
    ASSERT_EQ(seen.size(), size_t(64 * 56));
  }
}

TEST(AgGemmPlan, TopologiesTheTpPlansServe) {
  // 2x1, 1x2 and 2x2 are served; nodes of different sizes are not.
  EXPECT_NO_THROW(mk::tp::check_topology(mk::compute_topology({"h0", "h1"}, 0, 0), "AgGemm", 16));
  EXPECT_NO_THROW(mk::tp::check_topology(mk::compute_topology({"h0", "h0"}, 1, 0), "AgGemm", 16));
  EXPECT_NO_THROW(mk::tp::check_topology(mk::compute_topology({"h0", "h0", "h1", "h1"}, 2, 0), "AgGemm", 16));
  try {
    mk::tp::check_topology(mk::compute_topology({"h0", "h0", "h1"}, 0, 0), "AgGemm", 16);
    ADD_FAILURE() << "nodes of 2 and 1 ranks were accepted";
  } catch (const mk::Error& e) {
    EXPECT_NE(std::string(e.what()).find("nodes of different sizes"), std::string::npos) << e.what();
  }
  try {
    mk::tp::check_topology(mk::compute_topology({"h0", "h1", "h2"}, 0, 0), "GemmRs", 2);
    ADD_FAILURE() << "3 nodes were accepted with a limit of 2";
  } catch (const mk::Error& e) {
    EXPECT_NE(std::string(e.what()).find("at most 2 nodes"), std::string::npos) << e.what();
  }
}

TEST(AgGemmPlan, GemmRsWalkPutsEveryOwnTileLast) {
  // The GEMM+RS walk: from the next rank's rows, own rows last, swizzle from
  // rs_swizzle. Any other rank's tile after an own tile could deadlock.
  using namespace mk::sched;
  for (int w : {2, 3, 4, 8})
    for (int64_t blocks : {1, 2, 3, 4, 6, 8, 12, 16, 40}) {
      TileSchedParams p;
      p.order = TileOrder::RankRotated;
      p.m_blocks = static_cast<int32_t>(w * blocks);
      p.n_blocks = 5;
      p.swizzle = mk::tp::rs_swizzle(blocks);
      ASSERT_GE(p.swizzle, 1);
      ASSERT_LE(p.swizzle, 8);
      for (int rank = 0; rank < w; ++rank) {
        p.rotate_mblk = static_cast<int32_t>(((rank + 1) % w) * blocks);
        bool own_seen = false;
        int64_t own_tiles = 0;
        std::set<std::pair<int64_t, int64_t>> seen;  // every tile of the walk once (none dropped, none repeated)
        for (int64_t i = 0; i < total_tiles(p); ++i) {
          const auto t = tile_of(p, i);
          const bool own = t.m_blk / blocks == rank;
          ASSERT_FALSE(own_seen && !own) << "W " << w << " blocks " << blocks << " rank " << rank << " item " << i;
          ASSERT_TRUE(seen.emplace(t.m_blk, t.n_blk).second) << "W " << w << " blocks " << blocks << " item " << i;
          own_seen |= own;
          own_tiles += own;
        }
        EXPECT_EQ(static_cast<int64_t>(seen.size()), w * blocks * 5) << "W " << w << " blocks " << blocks;
        EXPECT_EQ(own_tiles, blocks * 5) << "W " << w << " blocks " << blocks << " rank " << rank;
      }
    }
}

// GEMM+RS CTA count: the fewest CTAs for the fewest waves, every wave
// full; at the issue shapes (n = 8192: 32 column blocks) 128 of 132 SMs,
// so that on 1x2 the other rank's tiles fill whole waves.
TEST(AgGemmPlan, BalancedCtasKeepTheWaveCountAndFillEveryWave) {
  using mk::tp::balanced_ctas;
  for (int64_t m : {1024, 2048, 4096, 8192, 16384}) EXPECT_EQ(balanced_ctas((m / 128) * 32, 132), 128) << m;
  EXPECT_EQ(balanced_ctas(100, 132), 100);  // one wave: one CTA per tile
  EXPECT_EQ(balanced_ctas(1, 132), 2);      // at least 2 (the launch's minimum)
  EXPECT_EQ(balanced_ctas(448, 132), 112);  // 4 waves either way
  for (int64_t tiles = 1; tiles < 3000; tiles += 37)
    for (int avail : {2, 7, 131, 132}) {
      const int c = balanced_ctas(tiles, avail);
      EXPECT_LE(c, std::max(avail, 2));
      EXPECT_EQ((tiles + c - 1) / c, std::max<int64_t>(1, (tiles + avail - 1) / avail)) << tiles << " " << avail;
    }
}

// GEMM+AR plan rules: Gather CTAs from the bandwidth the gather needs
// (clamped), groups of at most 4 row-blocks dividing a share, one-shot only
// on one node of two ranks and up to the measured crossover, and the bytes
// each GPU moves (reduce-scatter, then the final rows).
TEST(GemmArPlan, GatherCtasSwizzleOneShotAndBytes) {
  EXPECT_EQ(tp::ar_gather_ctas(14336), 3);  // 6e14 / (20e9 * 14336) = 2.09
  EXPECT_EQ(tp::ar_gather_ctas(7168), 5);
  EXPECT_EQ(tp::ar_gather_ctas(1 << 20), 2);  // clamped below
  EXPECT_EQ(tp::ar_gather_ctas(64), 16);      // and above
  for (int64_t blocks = 1; blocks <= 64; ++blocks) {
    const int sw = tp::ar_swizzle(1 + int(blocks % 2), blocks);
    EXPECT_GE(sw, 1);
    EXPECT_LE(sw, 4);
    EXPECT_EQ(blocks % sw, 0) << blocks;
  }
  EXPECT_EQ(tp::ar_swizzle(1, 16), 4);
  EXPECT_EQ(tp::ar_swizzle(1, 6), 3);
  EXPECT_EQ(tp::ar_swizzle(1, 4), 4);
  EXPECT_EQ(tp::ar_swizzle(2, 4), 2);  // across nodes, few row-blocks: at least two groups
  EXPECT_EQ(tp::ar_swizzle(2, 16), 4);
  EXPECT_TRUE(tp::ar_one_shot_fits(1, 2, 512, 8192));
  EXPECT_FALSE(tp::ar_one_shot_fits(1, 2, 1024, 8192));  // two-shot measured faster from here
  EXPECT_FALSE(tp::ar_one_shot_fits(2, 2, 256, 8192));   // across nodes: never
  EXPECT_FALSE(tp::ar_one_shot_fits(1, 4, 256, 8192));   // more than two ranks: bits would differ
  EXPECT_TRUE(tp::ar_interleave(2));                       // final rows cross the network during the GEMM
  EXPECT_FALSE(tp::ar_interleave(1));
  // 1x2, M = 4096, n = 8192: a 2048-row share (33.6 MB) out and one in, all NVLink.
  const double share = 2048.0 * 8192 * 2;
  auto b = tp::ar_bytes_per_gpu(1, 2, 4096, 8192);
  EXPECT_DOUBLE_EQ(b.nvlink, 2 * share);
  EXPECT_DOUBLE_EQ(b.network, 0);
  // 2x1: the same over the network.
  b = tp::ar_bytes_per_gpu(2, 1, 4096, 8192);
  EXPECT_DOUBLE_EQ(b.nvlink, 0);
  EXPECT_DOUBLE_EQ(b.network, 2 * share);
  // 2x2: quarter shares; NVLink 2 (L-1) N, network 2 (N-1) of them.
  b = tp::ar_bytes_per_gpu(2, 2, 4096, 8192);
  EXPECT_DOUBLE_EQ(b.nvlink, 4 * share / 2);
  EXPECT_DOUBLE_EQ(b.network, 2 * share / 2);
}

// The standalone GEMM's split (gemm::standalone_split): halves only, from 64 K blocks.
TEST(AgGemmPlan, StandaloneSplitIsHalvesOfAShortTailWithDeepK) {
  const gemm::SplitTail ag1024 = gemm::standalone_split(448, 132, 128);  // 1024 x 14336 x 8192
  EXPECT_EQ(ag1024.tiles, 52);
  EXPECT_EQ(ag1024.parts, 2);
  EXPECT_EQ(gemm::standalone_split(1792, 132, 128).tiles, 0);  // 4096 x 14336: tail 76 > 66, the plans' 3 parts
  EXPECT_EQ(tp::split_tail(1792, 132, 128).parts, 3);
  EXPECT_EQ(gemm::standalone_split(133, 132, 63).tiles, 0);  // k < 4096
  EXPECT_EQ(gemm::standalone_split(133, 132, 64).tiles, 1);
  EXPECT_EQ(gemm::standalone_split(264, 132, 128).tiles, 0);  // whole waves
  for (int64_t t = 1; t < 2000; ++t) {
    const gemm::SplitTail s = gemm::standalone_split(t, 132, 64);
    ASSERT_TRUE(s.tiles == 0 || (s.parts == 2 && s.tiles == t % 132 && 2 * s.tiles <= 132)) << t;
  }
}

// One rank: MK_TP_SINGLE_RANK (auto by default) -> plain (eager and captured calls alike: the plain path's
// split tiles take the plan's workspace).
TEST(AgGemmPlan, SingleRankChoice) {
  Topology one, two;
  two.world = 2;
  auto choice = [&](const Topology& t, int64_t m, int64_t n, int64_t k, bool splits) {
    return tp::single_rank(t, m, n, k, 132, splits);
  };
  test::EnvGuard mode("MK_TP_SINGLE_RANK", nullptr);  // the default; restored at the end
  EXPECT_FALSE(choice(two, 1024, 14336, 8192, true)) << "several ranks: fused";
  EXPECT_TRUE(choice(one, 4096, 14336, 8192, true)) << "97% busy";
  EXPECT_TRUE(choice(one, 1024, 14336, 8192, true)) << "85%: the standalone splits";
  EXPECT_FALSE(choice(one, 1024, 14336, 2048, true)) << "85%, k 2048: it does not";
  EXPECT_TRUE(choice(one, 1024, 14336, 2048, false)) << "the plan splits nothing";
  // 1664 x 4096: 208 tiles, tail 76 (79% busy): the plan splits in 3, the standalone not at all.
  EXPECT_FALSE(choice(one, 1664, 4096, 8192, true));
  setenv("MK_TP_SINGLE_RANK", "plain", 1);
  EXPECT_TRUE(choice(one, 1664, 4096, 8192, true));
  setenv("MK_TP_SINGLE_RANK", "fused", 1);
  EXPECT_FALSE(choice(one, 4096, 14336, 8192, true));
  setenv("MK_TP_SINGLE_RANK", "fast", 1);
  EXPECT_THROW(choice(one, 4096, 14336, 8192, true), std::exception);
}

// A plan's argument checks travel in the plan check's exchange
// (tp::PlanArgs): one rank's failure is every rank's error, the same text
// on every rank, naming that rank and its own message.
TEST(PlanArgs, OneRanksFailureIsEveryRanksErrorNamingIt) {
  using mk::tp::plan_args_error;
  using mk::tp::kPlanTags;
  const std::string plan = std::string(kPlanTags.ok) + "64x128x128 (signals 1, 3)";
  EXPECT_EQ(plan_args_error({plan, plan}, 0, "AgGemm"), "");
  const std::vector<std::string> bad = {
      plan, mk::step_status::failed(mk::Error("mkernel: AgGemm: m_local must be >= 1 (got 0)"), kPlanTags)};
  const std::string e = plan_args_error(bad, 0, "AgGemm");
  EXPECT_NE(e.find("rank 1 could not make its plan: AgGemm: m_local must be >= 1 (got 0)"), std::string::npos) << e;
  EXPECT_EQ(e.find("mkernel: AgGemm: m_local"), std::string::npos) << "the inner prefix is dropped: " << e;
  EXPECT_EQ(plan_args_error(bad, 1, "AgGemm"), e) << "every rank throws the same text";
  const std::vector<std::string> two = {mk::step_status::failed(mk::Error("mkernel: AgGemm: n must be ..."), kPlanTags),
                                        mk::step_status::failed(mk::Error("mkernel: AgGemm: k must be ..."), kPlanTags)};
  EXPECT_NE(plan_args_error(two, 1, "AgGemm").find("rank 0 could not make its plan"), std::string::npos)
      << "the first rank that failed is named";
  // Another collective step's answers at this point: out of step, both ways (another step's plain "ok:" here,
  // e.g. a network registration's, and the plan's answer read by that step).
  EXPECT_NE(plan_args_error({plan, "3"}, 0, "AgGemm").find("out of step"), std::string::npos);
  EXPECT_NE(plan_args_error({plan, "ok:"}, 0, "AgGemm").find("out of step"), std::string::npos);
  EXPECT_NE(mk::step_status::step_error({"ok:", plan}, 0, "free_symmetric", "could not").find("out of step"),
            std::string::npos);
  EXPECT_NE(mk::step_status::step_error({"ok:", bad[1]}, 0, "free_symmetric", "could not").find("out of step"),
            std::string::npos);
}

// The kernel takes the GEMM's dimensions as int32 (gemm::make_params): the plans refuse larger ones when they are
// made, not first at run(); AgGemm's rows are m_local x world, checked without forming an overflowing product. The
// bound is 2^31 - 256 (gemm::kMaxDim): a last block's start plus its size stays in int32 (before 2026-12-06 any m
// below 2^31 passed, and row0 + 128 of the last block overflowed in the producer).
TEST(AgGemmPlan, DimensionsAboveTheInt32BoundAreRefusedWhenThePlanIsMade) {
  const int64_t lim = gemm::kMaxDim;
  ASSERT_EQ(lim, (int64_t(1) << 31) - 256);
  EXPECT_NO_THROW(tp::check_dims_int32("GemmRs", lim, lim, lim));
  EXPECT_THROW(tp::check_dims_int32("GemmRs", lim + 1, 8192, 8192), mk::Error);
  EXPECT_THROW(tp::check_dims_int32("GemmRs", (int64_t(1) << 31) - 100, 8192, 8192), mk::Error);
  EXPECT_THROW(tp::check_dims_int32("GemmRs", 8192, lim + 64, 8192), mk::Error);
  EXPECT_THROW(tp::check_dims_int32("GemmRs", 8192, 8192, lim + 64), mk::Error);
  EXPECT_NO_THROW(tp::check_dims_int32("AgGemm", lim / 8, 8192, 8192, 8));
  EXPECT_NO_THROW(tp::check_dims_int32("AgGemm", lim / 3, 8192, 8192, 3));  // 3 x that <= the bound
  EXPECT_THROW(tp::check_dims_int32("AgGemm", lim / 3 + 1, 8192, 8192, 3), mk::Error);
  EXPECT_THROW(tp::check_dims_int32("AgGemm", lim / 8 + 1, 8192, 8192, 8), mk::Error);
  EXPECT_THROW(tp::check_dims_int32("AgGemm", int64_t(1) << 62, 8192, 8192, 8), mk::Error);  // no overflow
  try {
    tp::check_dims_int32("AgGemm", int64_t(1) << 28, 8192, 8192, 8);
    ADD_FAILURE() << "not refused";
  } catch (const mk::Error& e) {
    EXPECT_NE(std::string(e.what()).find("AgGemm: dimensions must stay at or below 2^31 - 256 = 2147483392 "
                                         "(268435456 x 8 rows"),
              std::string::npos)
        << e.what();
  }
}
