// mk::SignalPool (src/runtime/signal_pool.hpp), the bookkeeping behind
// Communicator::reserve_signals / release_signals: released runs are reused
// first fit, neighbours merge, a run reaching the high-water mark lowers it,
// releases must be whole runs held now (else refused with a reason), and making and destroying plans for
// ever new shapes (the leak this fixed) stays within the pool.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>
#include <vector>

#include "src/runtime/signal_pool.hpp"

using mk::SignalPool;

TEST(SignalPool, HandsOutConsecutiveRunsUntilFull) {
  SignalPool p(100);
  EXPECT_EQ(p.reserve(10), 0);
  EXPECT_EQ(p.reserve(30), 10);
  EXPECT_EQ(p.reserve(60), 40);
  EXPECT_EQ(p.reserve(1), -1);
  EXPECT_EQ(p.in_use(), 100);
  EXPECT_EQ(p.largest_free(), 0);
  EXPECT_EQ(p.reserve(0), -1);
  EXPECT_EQ(p.reserve(-3), -1);
}

TEST(SignalPool, ReusesReleasedRunsFirstFitAndMerges) {
  SignalPool p(1000);
  const int a = p.reserve(10), b = p.reserve(20), c = p.reserve(30), d = p.reserve(5);
  ASSERT_EQ(d, 60);
  ASSERT_EQ(p.releasable(b, 20), "");
  p.release(b, 20);  // hole [10, 30)
  EXPECT_EQ(p.free_runs(), 1);
  EXPECT_EQ(p.reserve(8), 10);   // first fit, front of the hole
  EXPECT_EQ(p.reserve(12), 18);  // the rest of it, exactly
  EXPECT_EQ(p.free_runs(), 0);
  EXPECT_EQ(p.reserve(4), 65);   // no hole left: above the mark
  p.release(a, 10);
  p.release(10, 8);  // merges with [0, 10)
  p.release(18, 12);  // and with [0, 18)
  EXPECT_EQ(p.free_runs(), 1);
  EXPECT_EQ(p.reserve(30), 0);   // the merged run
  EXPECT_EQ(p.high_water(), 69);
  (void)c;
}

TEST(SignalPool, ARunAtTheMarkLowersItWithItsFreeNeighbour) {
  SignalPool p(100);
  const int a = p.reserve(10), b = p.reserve(10), c = p.reserve(10);
  p.release(b, 10);
  EXPECT_EQ(p.high_water(), 30);
  p.release(c, 10);  // reaches the mark, merges with b's run: the mark drops to 10
  EXPECT_EQ(p.high_water(), 10);
  EXPECT_EQ(p.free_runs(), 0);
  EXPECT_EQ(p.largest_free(), 90);
  p.release(a, 10);
  EXPECT_EQ(p.high_water(), 0);
  EXPECT_EQ(p.in_use(), 0);
  EXPECT_EQ(p.reserve(100), 0);
}

TEST(SignalPool, RefusesReleasesOfRunsNotHandedOutOrReleasedAlready) {
  SignalPool p(100);
  const int a = p.reserve(10);
  p.reserve(10);
  for (auto [b, n] : {std::pair{20, 5}, {-1, 2}, {15, 10}, {5, 10}})
    EXPECT_NE(p.releasable(b, n).find("not a run held now"), std::string::npos) << b << " " << n;
  EXPECT_NE(p.releasable(0, 5).find("runs are released whole"), std::string::npos) << p.releasable(0, 5);
  EXPECT_NE(p.releasable(0, 0).find("[0, 10) is"), std::string::npos) << p.releasable(0, 0);
  p.release(a, 10);
  EXPECT_NE(p.releasable(a, 10).find("released already"), std::string::npos) << p.releasable(a, 10);
  EXPECT_EQ(p.releasable(10, 10), "");
  p.release(10, 10);  // reaches the mark: it drops to 0
  EXPECT_EQ(p.high_water(), 0);
  EXPECT_NE(p.releasable(10, 10).find("not a run held now"), std::string::npos);
  EXPECT_EQ(p.in_use(), 0);
}

// What a process does that makes a plan for every new shape and closes the
// old ones: the pool never runs out. Before, a 65536-word pool ran out after
// ~250-500 GemmRs plans on 2 ranks (m = 8192-16384) however many were destroyed.
TEST(SignalPool, PlansForEverNewShapesStayWithinThePool) {
  SignalPool p(4096);
  std::mt19937 rng(7);
  struct Plan { std::vector<std::pair<int, int>> runs; };
  std::vector<Plan> live;
  for (int i = 0; i < 20000; ++i) {
    Plan pl;
    const int world = 1 + static_cast<int>(rng() % 8), blocks = 1 + static_cast<int>(rng() % 128);
    for (int n : {world, blocks, blocks, (i % 3) ? blocks : 0}) {
      if (!n) continue;
      const int b = p.reserve(n);
      ASSERT_GE(b, 0) << "plan " << i << ": " << p.in_use() << " in use, largest free " << p.largest_free();
      pl.runs.emplace_back(b, n);
    }
    live.push_back(std::move(pl));
    while (live.size() > 6) {  // a few live plans; the oldest closed (in reverse order, as a plan's lease does)
      const size_t k = rng() % live.size();
      for (auto it = live[k].runs.rbegin(); it != live[k].runs.rend(); ++it) {
        ASSERT_EQ(p.releasable(it->first, it->second), "");
        p.release(it->first, it->second);
      }
      live.erase(live.begin() + static_cast<long>(k));
    }
  }
  // The live runs are disjoint and the counts agree.
  std::set<int> words;
  int held = 0;
  for (const auto& pl : live)
    for (auto [b, n] : pl.runs) {
      held += n;
      for (int w = b; w < b + n; ++w) EXPECT_TRUE(words.insert(w).second) << "word " << w << " handed out twice";
    }
  EXPECT_EQ(p.in_use(), held);
}

// Every rank replays the same reservations and releases: the same indices.
TEST(SignalPool, TheSameSequenceGivesTheSameIndices) {
  SignalPool r0(500), r1(500);
  std::mt19937 rng(3);
  std::vector<std::pair<int, int>> held;
  for (int i = 0; i < 2000; ++i) {
    if (!held.empty() && rng() % 2) {
      const size_t k = rng() % held.size();
      r0.release(held[k].first, held[k].second);
      r1.release(held[k].first, held[k].second);
      held.erase(held.begin() + static_cast<long>(k));
    } else {
      const int n = 1 + static_cast<int>(rng() % 40);
      const int b0 = r0.reserve(n), b1 = r1.reserve(n);
      ASSERT_EQ(b0, b1);
      if (b0 >= 0) held.emplace_back(b0, n);
    }
  }
}
