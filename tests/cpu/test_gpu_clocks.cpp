// mkbench's clock line under each table (bench/gpu_clocks.hpp): the summary of NVML samples, without NVML.
#include <gtest/gtest.h>

#include "bench/gpu_clocks.hpp"

namespace {

using mkb::ClockSample;

TEST(GpuClocks, NoSamplesNoLine) { EXPECT_EQ(mkb::summarize_clocks({}, 700000, 10), ""); }

TEST(GpuClocks, MedianSpreadPowerAndTheShareOfEachSlowdown) {
  std::vector<ClockSample> s;
  // 10 samples: clocks 1000..1900 MHz (given out of order), power 600..690 W; the power cap on 4 of them, thermal
  // slowdown (software and hardware bits) on 2, the hardware power brake on 1, idle (0x1, not counted) on 3.
  const unsigned long long reasons[10] = {0x4, 0x4 | 0x20, 0x4, 0x4, 0x40, 0x80, 0x1, 0x1, 0x1, 0};
  for (int i = 0; i < 10; ++i) {
    const int j = (i * 7) % 10;  // a permutation of 0..9
    s.push_back(ClockSample{unsigned(1000 + 100 * j), unsigned(600000 + 10000 * j), reasons[i]});
  }
  const std::string line = mkb::summarize_clocks(s, 700000, 10);
  EXPECT_NE(line.find("10 NVML samples every 10 ms"), std::string::npos) << line;
  // nearest-rank quantiles of 1000..1900: median index 4.5 -> 5 (1500), p10 index 0.9 -> 1 (1100), p90 8.1 -> 8
  EXPECT_NE(line.find("SM clock median 1500 MHz (p10-p90 1100-1800)"), std::string::npos) << line;
  EXPECT_NE(line.find("power median 650 W of a 700 W limit"), std::string::npos) << line;
  EXPECT_NE(line.find("power cap in 40% of the samples"), std::string::npos) << line;
  EXPECT_NE(line.find("thermal slowdown in 20%"), std::string::npos) << line;
  EXPECT_NE(line.find("hardware slowdown in 10%"), std::string::npos) << line;
}

TEST(GpuClocks, AnUnknownLimitIsLeftOut) {
  const std::string line = mkb::summarize_clocks({ClockSample{1980, 300000, 0}}, 0, 10);
  EXPECT_NE(line.find("SM clock median 1980 MHz (p10-p90 1980-1980), power median 300 W;"), std::string::npos)
      << line;
  EXPECT_EQ(line.find("limit"), std::string::npos) << line;
  EXPECT_NE(line.find("power cap in 0%"), std::string::npos) << line;
}

}  // namespace
