// mkbench: the GPU's SM clock, power and clock-event reasons while timed calls run, read through NVML on a
// host thread, summarized under each table. Why: a call's time depends on the GPU's power state, not only on the
// call. On one H100 (bench/results/session45-gpu-20261205.md) back-to-back GEMMs ran at the power cap, at a
// median SM clock of ~1410 MHz, and the same GEMMs after a 1 ms GPU spin ran at ~1965 MHz and 5-19% faster. A
// report that records the clocks says which regime its numbers come from.
//
// NVML is opened at run time (dlopen of the driver's libnvidia-ml.so.1), not linked: the build machines have no
// driver and the CUDA toolkit here ships no nvml.h, so the few entry points used are declared below with NVML's
// documented signatures. Without NVML the tables carry no clock line and the report's meta says why.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace mkb {

struct ClockSample {
  unsigned sm_mhz = 0;
  unsigned power_mw = 0;             // NVML's power reading (the driver's average), milliwatts
  unsigned long long reasons = 0;    // NVML's clock-event (throttle) reason bits
};

// NVML's clock-event reason bits (nvmlClocksEventReason*, formerly nvmlClocksThrottleReason*).
constexpr unsigned long long kReasonPowerCap = 0x4;       // SwPowerCap
constexpr unsigned long long kReasonHwSlowdown = 0x8;     // HwSlowdown
constexpr unsigned long long kReasonSwThermal = 0x20;     // SwThermalSlowdown
constexpr unsigned long long kReasonHwThermal = 0x40;     // HwThermalSlowdown
constexpr unsigned long long kReasonHwPowerBrake = 0x80;  // HwPowerBrakeSlowdown

// One line for a table's note: the samples' SM clock (median, p10-p90), power (median, of the enforced limit)
// and the share of samples held back by the power cap, by thermal slowdown and by the hardware's slowdowns.
// Pure (no NVML, no CUDA): the CPU tests check it (tests/cpu/test_gpu_clocks.cpp). Empty without samples.
inline std::string summarize_clocks(std::vector<ClockSample> s, unsigned limit_mw, int period_ms) {
  if (s.empty()) return "";
  const size_t n = s.size();
  auto pct = [&](unsigned long long bits) {
    size_t c = 0;
    for (const auto& x : s) c += (x.reasons & bits) != 0;
    return int(100.0 * double(c) / double(n) + 0.5);
  };
  const int cap = pct(kReasonPowerCap), thermal = pct(kReasonSwThermal | kReasonHwThermal),
            hw = pct(kReasonHwSlowdown | kReasonHwPowerBrake);
  auto quantile = [&](auto key, double q) {  // nearest rank
    std::vector<unsigned> v;
    for (const auto& x : s) v.push_back(key(x));
    std::sort(v.begin(), v.end());
    return v[std::min(n - 1, size_t(q * double(n - 1) + 0.5))];
  };
  auto clk = [](const ClockSample& x) { return x.sm_mhz; };
  auto pw = [](const ClockSample& x) { return x.power_mw; };
  char b[400];
  std::snprintf(b, sizeof(b),
                "GPU during the timed calls (rank 0's, %zu NVML samples every %d ms): SM clock median %u MHz "
                "(p10-p90 %u-%u), power median %u W%s; held at the power cap in %d%% of the samples, by thermal "
                "slowdown in %d%%, by hardware slowdown in %d%%.",
                n, period_ms, quantile(clk, 0.5), quantile(clk, 0.1), quantile(clk, 0.9), quantile(pw, 0.5) / 1000,
                limit_mw ? (" of a " + std::to_string(limit_mw / 1000) + " W limit").c_str() : "", cap, thermal, hw);
  return b;
}

// Samples this process's current GPU every period while started (a thread of its own); one per process.
class ClockSampler {
 public:
  static ClockSampler& instance();
  // How the clocks are read, or why they are not ("not sampled: ..."), for the report's meta.
  std::string status();
  void start();  // around the timed calls (time_interleaved): samples accumulate until take_summary()
  void stop();
  std::string take_summary();  // summarize_clocks of the samples since the last take, then forgets them

  static constexpr int kPeriodMs = 10;

 private:
  ClockSampler() = default;
  ~ClockSampler();
  bool open();  // NVML and this GPU's handle, once

  struct Nvml;
  Nvml* nvml_ = nullptr;
  bool tried_ = false;
  std::string why_not_;
  unsigned limit_mw_ = 0;
  std::mutex mu_;
  std::vector<ClockSample> samples_;
  std::thread thread_;
  bool running_ = false;  // under mu_
};

}  // namespace mkb
