// Tile schedulers (device/sched/tile_scheduler.hpp) on the CPU: for every
// order, every shape and every number of compute CTAs, the persistent
// iteration covers each output tile exactly once, and each order has the
// property it exists for.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "device/sched/tile_scheduler.hpp"

using namespace mk::sched;

namespace {

using Key = std::tuple<int, int, int>;

// Runs the static persistent schedule for ncta CTAs; returns visit counts.
std::map<Key, int> visit(const TileSchedParams& p, int ncta, std::vector<Tile>* order = nullptr) {
  std::map<Key, int> seen;
  std::vector<std::pair<int64_t, Tile>> all;
  for (int c = 0; c < ncta; ++c) {
    StaticSchedule s(p, c, ncta);
    int64_t w;
    while (s.get_next(&w)) {
      Tile t = tile_of(p, w);
      ++seen[{t.group, t.m_blk, t.n_blk}];
      all.push_back({w, t});
    }
  }
  if (order) {
    std::sort(all.begin(), all.end(), [](auto& a, auto& b) { return a.first < b.first; });
    for (auto& [w, t] : all) order->push_back(t);
  }
  return seen;
}

}  // namespace

TEST(TileScheduler, EveryStaticOrderCoversEveryTileOnceForAnyCtaCount) {
  for (int m = 1; m <= 13; ++m)
    for (int n = 1; n <= 7; ++n)
      for (int ncta : {1, 2, 3, 7, 64, 132}) {
        for (TileOrder o : {TileOrder::RowMajor, TileOrder::Swizzled, TileOrder::RankRotated}) {
          for (int knob = 0; knob < (o == TileOrder::RowMajor ? 1 : 4); ++knob) {
            TileSchedParams p;
            p.order = o;
            p.m_blocks = m;
            p.n_blocks = n;
            p.swizzle = 1 + knob;
            p.rotate_mblk = (knob * 5) % m;
            auto seen = visit(p, ncta);
            ASSERT_EQ(total_tiles(p), int64_t(m) * n);
            const std::string what = "order " + std::to_string(int(o)) + " m=" + std::to_string(m) +
                                     " n=" + std::to_string(n) + " ncta=" + std::to_string(ncta);
            ASSERT_EQ(seen.size(), size_t(m) * n) << what;
            for (auto& [k, cnt] : seen) {
              ASSERT_EQ(cnt, 1) << what;
              ASSERT_EQ(std::get<0>(k), 0) << what;
              ASSERT_GE(std::get<1>(k), 0) << what;
              ASSERT_LT(std::get<1>(k), m) << what;
              ASSERT_GE(std::get<2>(k), 0) << what;
              ASSERT_LT(std::get<2>(k), n) << what;
            }
          }
        }
      }
}

TEST(TileScheduler, RankRotatedStartsOnTheRanksOwnRowBlocks) {
  TileSchedParams p;
  p.order = TileOrder::RankRotated;
  p.m_blocks = 8;
  p.n_blocks = 3;
  p.rotate_mblk = 6;
  std::vector<Tile> order;
  visit(p, 4, &order);
  std::vector<int> rows;
  for (size_t i = 0; i < order.size(); i += 3) rows.push_back(order[i].m_blk);
  EXPECT_EQ(rows, (std::vector<int>{6, 7, 0, 1, 2, 3, 4, 5}));
}

TEST(TileScheduler, SwizzleKeepsTilesInFlightOnFewRowsAndColumns) {
  TileSchedParams p;
  p.order = TileOrder::Swizzled;
  p.m_blocks = 10;
  p.n_blocks = 6;
  p.swizzle = 4;
  std::vector<Tile> order;
  visit(p, 5, &order);
  // Inside a full group, 4 consecutive work indices share one column and
  // cover the group's 4 rows.
  for (int g = 0; g < 2; ++g)
    for (int col = 0; col < 6; ++col) {
      std::set<int> rows;
      for (int i = 0; i < 4; ++i) {
        const Tile& t = order[g * 24 + col * 4 + i];
        EXPECT_EQ(t.n_blk, col);
        rows.insert(t.m_blk);
      }
      EXPECT_EQ(rows, (std::set<int>{4 * g, 4 * g + 1, 4 * g + 2, 4 * g + 3}));
    }
  // The last group has only 2 rows (m = 10).
  EXPECT_EQ(order[48].m_blk, 8);
  EXPECT_EQ(order[49].m_blk, 9);
  EXPECT_EQ(order[49].n_blk, 0);
  EXPECT_EQ(order[50].n_blk, 1);
}

TEST(TileScheduler, ArrivalQueueFollowsTheArrivalOrder) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 50; ++trial) {
    const int m = 1 + rng() % 20, n = 1 + rng() % 6;
    std::vector<int32_t> arrival(m);
    std::iota(arrival.begin(), arrival.end(), 0);
    std::shuffle(arrival.begin(), arrival.end(), rng);
    TileSchedParams p;
    p.order = TileOrder::ArrivalQueue;
    p.m_blocks = m;
    p.n_blocks = n;
    p.arrival = arrival.data();
    std::vector<Tile> order;
    auto seen = visit(p, 1 + rng() % 9, &order);
    ASSERT_EQ(seen.size(), size_t(m) * n);
    for (auto& [k, c] : seen) ASSERT_EQ(c, 1);
    for (size_t i = 0; i < order.size(); ++i) ASSERT_EQ(order[i].m_blk, arrival[i / n]) << "work " << i;
  }
}

TEST(TileScheduler, GroupedCoversEveryGroupAndSkipsEmptyOnes) {
  std::mt19937 rng(7);
  const int block_m = 128;
  for (int trial = 0; trial < 200; ++trial) {
    const int groups = 1 + rng() % 12, n = 1 + rng() % 5;
    std::vector<int32_t> ms(groups);
    for (auto& x : ms) x = (rng() % 3 == 0) ? 0 : 1 + rng() % 700;  // a third of the groups empty
    std::vector<int64_t> starts(groups + 1);
    const int64_t total = build_group_tiles(ms.data(), groups, block_m, n, starts.data());
    TileSchedParams p;
    p.order = TileOrder::Grouped;
    p.n_blocks = n;
    p.num_groups = groups;
    p.group_tile_start = starts.data();
    ASSERT_EQ(total_tiles(p), total);
    auto seen = visit(p, 1 + rng() % 16);
    int64_t expected = 0;
    for (int g = 0; g < groups; ++g) expected += int64_t((ms[g] + block_m - 1) / block_m) * n;
    ASSERT_EQ(int64_t(seen.size()), expected);
    for (auto& [k, c] : seen) {
      ASSERT_EQ(c, 1);
      const int g = std::get<0>(k);
      ASSERT_GT(ms[g], 0) << "an empty group got a tile";
      ASSERT_LT(std::get<1>(k), (ms[g] + block_m - 1) / block_m);
      ASSERT_LT(std::get<2>(k), n);
    }
  }
}

TEST(TileScheduler, NoTilesMeansNoWork) {
  TileSchedParams p;
  p.order = TileOrder::Grouped;
  p.n_blocks = 4;
  int32_t ms[3] = {0, 0, 0};
  int64_t starts[4];
  build_group_tiles(ms, 3, 128, 4, starts);
  p.num_groups = 3;
  p.group_tile_start = starts;
  StaticSchedule s(p, 0, 8);
  int64_t w;
  EXPECT_FALSE(s.get_next(&w));
}

// SharePermuted with share_interleave (the GEMM+AllReduce walk): every tile
// once; the shares' swizzle groups interleave in share order, and the last
// share's group g comes after group g + lag of every other share (the
// partial tiles it adds were computed a step earlier on the other ranks).
TEST(TileScheduler, InterleavedSharesLagTheLastShare) {
  for (int W : {1, 2, 3, 4})
    for (int share_blocks : {1, 2, 4, 6, 8})
      for (int sw : {1, 2, 3})
        for (int lag : {0, 1, 2}) {
          if (share_blocks % sw) continue;
          const int G = share_blocks / sw, n = 3;
          TileSchedParams p;
          p.order = TileOrder::SharePermuted;
          p.m_blocks = W * share_blocks;
          p.n_blocks = n;
          p.swizzle = sw;
          p.share_blocks = share_blocks;
          p.share_interleave = 1;
          p.share_lag = lag;
          for (int i = 0; i < W; ++i) p.share_order[i] = static_cast<int8_t>((i + 1) % W);  // own share (0) last
          std::vector<Tile> order;
          auto seen = visit(p, 5, &order);
          const std::string what = "W=" + std::to_string(W) + " blocks=" + std::to_string(share_blocks) +
                                   " sw=" + std::to_string(sw) + " lag=" + std::to_string(lag);
          ASSERT_EQ(seen.size(), size_t(W) * share_blocks * n) << what;
          for (auto& [k, cnt] : seen) ASSERT_EQ(cnt, 1) << what;
          // Position of each (share, group) block in the walk: whole groups, in order.
          std::map<std::pair<int, int>, int> first;
          for (size_t w = 0; w < order.size(); ++w) {
            const int s = order[w].m_blk / share_blocks, g = (order[w].m_blk % share_blocks) / sw;
            first.emplace(std::make_pair(s, g), static_cast<int>(w / (size_t(sw) * n)));
          }
          auto at = [&](int sh, int g) { return first[std::make_pair(sh, g)]; };
          const int L = std::min(lag, G);
          for (int g = 0; g < G; ++g)
            for (int s = 1; s < W; ++s) {
              ASSERT_LT(at(s, g), at(0, g)) << what;  // partials before the owner's group
              if (g + L < G) {
                ASSERT_LT(at(s, g + L), at(0, g)) << what;
              }
              if (s + 1 < W) {
                ASSERT_LT(at(s, g), at(s + 1, g)) << what;  // share order inside a step
              }
              if (g + 1 < G) {
                ASSERT_LT(at(s, g), at(s, g + 1)) << what;
              }
            }
          if (W > 1 && G > L + 1) {  // interleaved: the owner's first group comes before the others' last
            ASSERT_LT(at(0, 0), at(1, G - 1)) << what;
          }
        }
}

// A group of nearly 2^31 rows: its tile count in int64 (before 2026-12-06 m + block_m - 1 overflowed int32 for an
// m within 127 of 2^31, giving a negative count, and the grouped GEMM launched no work and returned success).
TEST(TileScheduler, GroupTilesOfAGroupNear2To31Rows) {
  const int32_t ms[2] = {2147483600, 5};
  int64_t starts[3];
  EXPECT_EQ(build_group_tiles(ms, 2, 128, 3, starts), (int64_t(16777216) + 1) * 3);
  EXPECT_EQ(starts[1], int64_t(16777216) * 3);
}
