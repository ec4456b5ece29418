// mkbench timing helpers (MEASURING.md): CUDA events around each call,
// warm-up first, median of the timed calls, max over ranks, inputs rotated
// through more than L2.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "mkernel/mkernel.hpp"

namespace mkb {

#define MKB_CUDA(x) MK_CUDA_CHECK(x)

struct TimingOpts {
  int warmup = 5;
  int iters = 20;
  // > 0: before each call of time_interleaved (after the caller's barrier, warm-up included) one GPU thread spins
  // as long as this many cycles take at the GPU's top SM clock -- timed by the global timer, so ranks at different
  // clocks leave it together -- so the host's launches of the call are queued before its start event (the
  // Python benches' GPU spin, bench/dist_timing.py's --lead-cycles; their host sync and host barrier are not
  // copied); 0: calls back to back after the barrier.
  long long lead_cycles = 0;
  // time_interleaved's order in each round: true (the default): call_order's balanced orders, so that within
  // n rounds (2n for odd n) every call directly follows every other equally often; false: 0..n-1 every round.
  // A call's time depends on the power the calls before it drew: on one H100 an 8192^3 GEMM took 1.50-1.61 ms
  // among GEMMs and 1.39-1.40 ms among lighter calls (bench/results/session45-gpu-20261205.md); a fixed order
  // gives the call after a light one (a collective alone) a rest the others never get.
  bool rotate = true;
};

// Round `round`'s order of n calls: with `rotate`, row `round` of a Williams design (the sequence 0, 1, n-1, 2,
// n-2, ... shifted by the round, reversed in every other block of n rounds when n is odd), the same on every rank;
// without, 0..n-1. Host-only (tests/cpu/test_bench_timing.cpp checks the balance).
inline std::vector<size_t> call_order(size_t n, int round, bool rotate) {
  std::vector<size_t> o(n);
  for (size_t j = 0; j < n; ++j) {
    const size_t base = j == 0 ? 0 : (j % 2 ? (j + 1) / 2 : n - j / 2);
    o[j] = rotate ? (base + size_t(round)) % n : j;
  }
  if (rotate && n % 2 && (size_t(round) / n) % 2) std::reverse(o.begin(), o.end());
  return o;
}

struct Stats {
  double median_ms = 0;  // median over the calls of each call's slowest rank
  double min_ms = 0;     // the fastest call (each call's slowest rank)
  double spread = 0;     // (p90 - p10) / median of each call's slowest rank
  int iters = 0;
  std::vector<double> per_round;  // each timed call's slowest rank's ms, in round order (time_interleaved)
};

// The ratio num / den of two calls timed in the same rounds, round by round: its p10, median and p90 (nearest
// rank). A ratio of medians moves with the GPU's clock from run to run (one H100 at the power cap: up to 7%
// within one row, bench/results/session45-gpu-20261205.md call E); the two calls of one round share most of the
// clock's drift, so this spread says whether a ratio near 1 is a tie. {0, 0, 0} without paired rounds.
struct RatioRange {
  double p10 = 0, median = 0, p90 = 0;
};
inline RatioRange paired_ratio(const Stats& num, const Stats& den) {
  std::vector<double> r;
  for (size_t i = 0; i < num.per_round.size() && i < den.per_round.size(); ++i)
    if (den.per_round[i] > 0) r.push_back(num.per_round[i] / den.per_round[i]);
  if (r.empty()) return {};
  std::sort(r.begin(), r.end());
  auto q = [&](double f) { return r[std::min(r.size() - 1, size_t(f * double(r.size() - 1) + 0.5))]; };
  return {q(0.1), q(0.5), q(0.9)};
}

// Times `call(i)` on `stream`: `warmup` untimed calls, then `iters` calls
// each between two events. `before(i)` runs on the host before each timed
// call (a barrier, a fresh epoch) and is not timed.
Stats time_calls(mk::Bootstrap* bs, cudaStream_t stream, const TimingOpts& opts,
                 const std::function<void(int)>& call, const std::function<void(int)>& before = nullptr);

// Times several calls under the same conditions (clocks, temperature): each
// round runs every call once (in call_order's order); one Stats per call.
std::vector<Stats> time_interleaved(mk::Bootstrap* bs, cudaStream_t stream, const TimingOpts& opts,
                                    const std::vector<std::function<void(int)>>& calls,
                                    const std::function<void(int)>& before = nullptr);

// The median (the mean of the two middle values for an even count; 0 for none).
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Each timed call's time over the ranks: the slowest rank's (by_rank[r][i]: rank r's call i). The calls start
// together, after the caller's barrier, so the slowest rank sets the step time (MEASURING.md); a median per rank
// and then the max would pair calls of different rounds.
inline std::vector<double> slowest_per_call(const std::vector<std::vector<double>>& by_rank) {
  std::vector<double> out = by_rank.empty() ? std::vector<double>() : by_rank[0];
  for (const auto& r : by_rank) {
    if (r.size() != out.size()) mk::fail("mkbench: ranks timed different numbers of calls");
    for (size_t i = 0; i < r.size(); ++i) out[i] = std::max(out[i], r[i]);
  }
  return out;
}

// Median, min and spread of the calls' slowest-rank times (every statistic of them, MEASURING.md).
inline Stats stats_of(std::vector<double> per_round) {
  Stats s;
  s.iters = static_cast<int>(per_round.size());
  s.per_round = per_round;
  s.median_ms = median(per_round);
  if (per_round.empty()) return s;
  std::sort(per_round.begin(), per_round.end());
  s.min_ms = per_round.front();
  const size_t n = per_round.size(), hi = std::min(n - 1, n * 9 / 10), lo = n / 10;
  s.spread = s.median_ms > 0 ? (per_round[hi] - per_round[lo]) / s.median_ms : 0;
  return s;
}

double max_over_ranks(mk::Bootstrap* bs, double v);

// Fills a device buffer with random values (bf16 in [-1, 1) or raw bytes);
// never zeros.
void fill_random_bf16(void* dst, size_t count, uint64_t seed, cudaStream_t s);
void fill_random_bytes(void* dst, size_t bytes, uint64_t seed, cudaStream_t s);

// `copies` device buffers of `bytes` each, enough that cycling through them
// defeats the 60 MB L2: min_total bytes in all (at least 2 copies, at most
// max_copies; 8 left a 4 MiB shard at W = 4 cycling through 32 MiB).
class Rotating {
 public:
  Rotating(size_t bytes, size_t min_total = size_t(256) << 20, int max_copies = 128);
  ~Rotating();
  void* get(int i) const { return bufs_[static_cast<size_t>(i) % bufs_.size()]; }
  int copies() const { return static_cast<int>(bufs_.size()); }
  size_t bytes() const { return bytes_; }

 private:
  size_t bytes_;
  std::vector<void*> bufs_;
};

}  // namespace mkb
