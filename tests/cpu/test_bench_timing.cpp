// mkbench's timing helpers that need no GPU: the clock line under each table (bench/gpu_clocks.hpp), the
// balanced call order of time_interleaved, the round-by-round ratio of two calls and the median of each call's
// slowest rank (bench/timing.hpp).
#include <gtest/gtest.h>

#include <map>
#include <utility>

#include "bench/gpu_clocks.hpp"
#include "bench/timing.hpp"

namespace {

using mkb::ClockSample;

TEST(GpuClocks, NoSamplesNoLine) { EXPECT_EQ(mkb::summarize_clocks({}, 10), ""); }

TEST(GpuClocks, MedianSpreadPowerAndTheShareOfEachSlowdown) {
  std::vector<ClockSample> s;
  // 10 samples: clocks 1000..1900 MHz (given out of order); the power cap on 4 of them, thermal slowdown
  // (software and hardware bits) on 2, the hardware power brake on 1, idle (0x1, not counted) on 3.
  const unsigned long long reasons[10] = {0x4, 0x4 | 0x20, 0x4, 0x4, 0x40, 0x80, 0x1, 0x1, 0x1, 0};
  for (int i = 0; i < 10; ++i) s.push_back(ClockSample{unsigned(1000 + 100 * ((i * 7) % 10)), reasons[i]});
  const std::string line = mkb::summarize_clocks(s, 10);
  EXPECT_NE(line.find("10 NVML samples every 10 ms"), std::string::npos) << line;
  // nearest-rank quantiles of 1000..1900: median index 4.5 -> 5 (1500), p10 index 0.9 -> 1 (1100), p90 8.1 -> 8
  EXPECT_NE(line.find("SM clock median 1500 MHz (p10-p90 1100-1800);"), std::string::npos) << line;
  EXPECT_NE(line.find("power cap held the clock in 40% of the samples"), std::string::npos) << line;
  EXPECT_NE(line.find("thermal slowdown in 20%"), std::string::npos) << line;
  EXPECT_NE(line.find("hardware slowdown in 10%"), std::string::npos) << line;
}

TEST(GpuClocks, OneSample) {
  const std::string line = mkb::summarize_clocks({ClockSample{1980, 0}}, 10);
  EXPECT_NE(line.find("SM clock median 1980 MHz (p10-p90 1980-1980); the power cap held the clock in 0%"),
            std::string::npos) << line;
}

// Over n rounds (2n for odd n) every call directly follows every other call equally often (once, twice for odd
// n), each round holds every call once, and --fixed-order keeps 0..n-1.
TEST(CallOrder, BalancedOverTheRoundsAndFixedWithoutRotation) {
  for (size_t n = 1; n <= 12; ++n) {
    const int rounds = int(n % 2 ? 2 * n : n);
    std::map<std::pair<size_t, size_t>, int> after;
    for (int r = 0; r < rounds; ++r) {
      const std::vector<size_t> o = mkb::call_order(n, r, true);
      std::vector<int> seen(n, 0);
      for (size_t c : o) ++seen.at(c);
      for (size_t c = 0; c < n; ++c) EXPECT_EQ(seen[c], 1) << "n " << n << " round " << r;
      for (size_t j = 1; j < n; ++j) ++after[{o[j - 1], o[j]}];
      const std::vector<size_t> f = mkb::call_order(n, r, false);
      for (size_t j = 0; j < n; ++j) EXPECT_EQ(f[j], j);
    }
    EXPECT_EQ(after.size(), n * (n - 1)) << "n " << n;  // every ordered pair of different calls
    for (const auto& [pair, count] : after) EXPECT_EQ(count, n % 2 ? 2 : 1) << "n " << n;
  }
}

// best_i / mkernel_i over the rounds: nearest-rank p10, median and p90; rounds beyond the shorter list and a
// zero denominator are left out; no paired rounds: all 0.
TEST(PairedRatio, QuantilesOfTheRoundByRoundRatio) {
  mkb::Stats best, mk;
  for (int i = 0; i < 11; ++i) {
    best.per_round.push_back(1.0 + 0.01 * ((i * 3) % 11));  // ratios 1.00 .. 1.10, shuffled
    mk.per_round.push_back(1.0);
  }
  best.per_round.push_back(5.0);  // a round mkernel lacks: not paired
  mkb::RatioRange r = mkb::paired_ratio(best, mk);
  EXPECT_NEAR(r.p10, 1.01, 1e-12);    // index 1.0 of 11
  EXPECT_NEAR(r.median, 1.05, 1e-12);  // index 5
  EXPECT_NEAR(r.p90, 1.09, 1e-12);    // index 9
  mk.per_round[3] = 0;  // a zero time: left out
  r = mkb::paired_ratio(best, mk);
  EXPECT_GT(r.median, 0);
  r = mkb::paired_ratio(best, mkb::Stats{});
  EXPECT_EQ(r.median, 0);
  EXPECT_EQ(r.p10, 0);
}

// The median of an even count is the mean of the two middle values; a call's time over ranks is its slowest
// rank's, and the median is taken over those (a median per rank, then the max, would say max(3, 3) = 3 below).
TEST(BenchTiming, MedianOfTheCallsSlowestRanks) {
  EXPECT_EQ(mkb::median({}), 0);
  EXPECT_EQ(mkb::median({3, 1, 2}), 2);
  EXPECT_EQ(mkb::median({4, 1, 3, 2}), 2.5);
  const std::vector<double> slowest = mkb::slowest_per_call({{1, 5}, {4, 2}});
  EXPECT_EQ(slowest, (std::vector<double>{4, 5}));
  const mkb::Stats s = mkb::stats_of(slowest);
  EXPECT_EQ(s.median_ms, 4.5);
  EXPECT_EQ(s.min_ms, 4);
  EXPECT_EQ(s.iters, 2);
  EXPECT_EQ(s.per_round, slowest);  // (round order kept: paired_ratio pairs rounds)
  EXPECT_THROW(mkb::slowest_per_call({{1, 2}, {3}}), mk::Error);
  // Spread: (p90 - p10) / median, nearest rank below, over 1..10: (10 - 2) / 5.5.
  std::vector<double> ten;
  for (int i = 10; i >= 1; --i) ten.push_back(i);
  EXPECT_DOUBLE_EQ(mkb::stats_of(ten).spread, 8 / 5.5);
  EXPECT_EQ(mkb::stats_of({}).iters, 0);
}

}  // namespace
