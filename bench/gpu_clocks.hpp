// mkbench: the GPU's SM clock and clock-event reasons while timed calls run, read through NVML on a host thread,
// summarized under each table. Why: a call's time depends on the GPU's power state, not only on the call. On one
// H100 (bench/results/session45-gpu-20261205.md) back-to-back GEMMs ran at the power cap, at a median SM clock
// of ~1400 MHz, and the same GEMMs after a 1 ms GPU spin before each took 0-19% less time. A report that records
// the clocks says which regime its numbers come from. Its samples span the whole timed
// rounds (the barriers and any lead spin too), so with --lead-cycles its median is above the clock the calls
// themselves ran at.
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
  unsigned long long reasons = 0;  // NVML's clock-event (throttle) reason bits
};

// NVML's clock-event reason bits (nvmlClocksEventReason*, formerly nvmlClocksThrottleReason*).
constexpr unsigned long long kReasonPowerCap = 0x4;       // SwPowerCap
constexpr unsigned long long kReasonHwSlowdown = 0x8;     // HwSlowdown
constexpr unsigned long long kReasonSwThermal = 0x20;     // SwThermalSlowdown
constexpr unsigned long long kReasonHwThermal = 0x40;     // HwThermalSlowdown
constexpr unsigned long long kReasonHwPowerBrake = 0x80;  // HwPowerBrakeSlowdown

// One line for a table's note: the samples' SM clock (median, p10-p90, nearest rank) and the share of samples
// the power cap, thermal slowdown and the hardware's slowdowns held back (a sample can count in more than one).
// No power figure: NVML's power reading is a 1 s average, longer than many tables, and its energy counter, read
// around each table's rounds, gave averages above the 700 W limit on one H100 (call E of
// bench/results/session45-gpu-20261205.md: the counter lags the windows). Pure (no NVML, no CUDA): the CPU tests
// check it (tests/cpu/test_bench_timing.cpp). Empty without samples.
inline std::string summarize_clocks(std::vector<ClockSample> s, int period_ms) {
  if (s.empty()) return "";
  const size_t n = s.size();
  auto pct = [&](unsigned long long bits) {
    size_t c = 0;
    for (const auto& x : s) c += (x.reasons & bits) != 0;
    return int(100.0 * double(c) / double(n) + 0.5);
  };
  const int cap = pct(kReasonPowerCap), thermal = pct(kReasonSwThermal | kReasonHwThermal),
            hw = pct(kReasonHwSlowdown | kReasonHwPowerBrake);
  std::vector<unsigned> v;
  for (const auto& x : s) v.push_back(x.sm_mhz);
  std::sort(v.begin(), v.end());
  auto q = [&](double f) { return v[std::min(n - 1, size_t(f * double(n - 1) + 0.5))]; };
  char b[512];
  std::snprintf(b, sizeof(b),
                "GPU while the timed rounds ran (rank 0's; barriers and any lead spins included; %zu NVML samples "
                "every %d ms): SM clock median %u MHz (p10-p90 %u-%u); the power cap held the clock in %d%% of the "
                "samples, thermal slowdown in %d%%, hardware slowdown in %d%%.",
                n, period_ms, q(0.5), q(0.1), q(0.9), cap, thermal, hw);
  return b;
}

// Samples this process's current GPU every period while started (a thread of its own); one per process.
class ClockSampler {
 public:
  static ClockSampler& instance();
  // How the clocks are read, or why they are not ("not sampled: ..."), for the report's meta.
  std::string status();
  // Around the timed rounds (ClockWindow; time_interleaved): samples accumulate until take_summary(). One
  // thread at a time starts and stops.
  void start();
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
  std::mutex ctl_;  // start() / stop()
  std::mutex mu_;   // the sampler thread's results
  std::vector<ClockSample> samples_;
  std::thread thread_;
  bool running_ = false;  // under mu_: the sampler thread goes on
};

// Samples while in scope: ClockSampler::start() here, stop() on leaving, a throw included (a failed call must not
// leave the thread sampling into the next table).
struct ClockWindow {
  ClockWindow() { ClockSampler::instance().start(); }
  ~ClockWindow() { ClockSampler::instance().stop(); }
  ClockWindow(const ClockWindow&) = delete;
  ClockWindow& operator=(const ClockWindow&) = delete;
};

}  // namespace mkb
