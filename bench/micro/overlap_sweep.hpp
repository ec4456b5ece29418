// mkbench: the two-stream overlap baselines' chunk-count sweep (gemm_rs, gemm_ar, ag_gemm): which chunk counts
// a shape takes, and which variant a table quotes. Host-only and free of CUDA calls, so the CPU tests check it
// (tests/cpu/test_overlap_sweep.cpp).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "bench/timing.hpp"  // Stats (a plain struct)
#include "mkernel/mkernel.hpp"

namespace mkb {

// A time in ms as the tables print it (fmt's default: 3 decimals).
inline std::string ms3(double v) {
  char b[64];
  std::snprintf(b, sizeof(b), "%.3f", v);
  return b;
}

constexpr int kMaxChunks = 8;  // chunks of the two-stream overlap baselines, at most

// The chunk counts S the two-stream overlap baselines sweep: S in {2, 4, 8} that cut `rows` into chunks of a
// multiple of 128 `granule` rows each (tile-sized chunks: a choice, no plan needs it), else, where none does (W = 8
// at M = 1024), of a multiple of `granule` rows. The table quotes the fastest: a user would tune S, so the
// baseline is tuned too.
inline std::vector<int> overlap_chunk_counts(int64_t rows, int64_t granule) {
  for (int64_t unit : {128 * granule, granule}) {
    std::vector<int> s;
    for (int c : {2, 4, 8})
      if (c <= kMaxChunks && rows % (int64_t(c) * unit) == 0) s.push_back(c);
    if (!s.empty()) return s;
  }
  mk::fail("mkbench: no chunk count of the two-stream overlap (2, 4 or 8) divides ", rows, " rows into chunks of a ",
           "multiple of ", granule, " rows");
}

// The two-stream overlap baselines' variants: (label, index into st) each. Moves the fastest into st[4] (what the
// overlap column, 'vs best baseline', eta and the targets read) and returns the overlap cell's text
// ("1.234 (S=4)") and the sweep's ("S=2: 1.250 / S=4: 1.234").
struct OverlapSweep {
  std::string cell, sweep;
};
inline OverlapSweep best_overlap(std::vector<Stats>& st, const std::vector<std::pair<std::string, size_t>>& variants) {
  size_t best = 0;
  OverlapSweep o;
  for (size_t i = 0; i < variants.size(); ++i) {
    if (st[variants[i].second].median_ms < st[variants[best].second].median_ms) best = i;
    o.sweep += (i ? " / " : "") + variants[i].first + ": " + ms3(st[variants[i].second].median_ms);
  }
  st[4] = st[variants[best].second];
  o.cell = ms3(st[4].median_ms) + " (" + variants[best].first + ")";
  return o;
}

// The variants of a chunk-count sweep timed as call 4 (counts[0]) and calls first, first + 1, ... (the rest).
inline std::vector<std::pair<std::string, size_t>> chunk_variants(const std::vector<int>& counts, size_t first) {
  std::vector<std::pair<std::string, size_t>> v;
  for (size_t i = 0; i < counts.size(); ++i)
    v.push_back({"S=" + std::to_string(counts[i]), i == 0 ? size_t(4) : first + i - 1});
  return v;
}

}  // namespace mkb
