// mkbench's chunk-count sweep of the two-stream overlap baselines (bench/micro/overlap_sweep.hpp): the chunk
// counts each benchmark shape takes (the issue grids at W = 2, 4, 8), and which variant a table quotes.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bench/micro/overlap_sweep.hpp"

namespace {

using Counts = std::vector<int>;

TEST(OverlapSweep, ChunkCountsPreferTileSizedChunksAndFallBack) {
  // GEMM+RS / AG+GEMM: rows per owner M / W, granule 1. W = 2: M = 1024 gives 512 rows, 2 or 4 chunks of 128+.
  EXPECT_EQ(mkb::overlap_chunk_counts(512, 1), (Counts{2, 4}));
  EXPECT_EQ(mkb::overlap_chunk_counts(1024, 1), (Counts{2, 4, 8}));
  EXPECT_EQ(mkb::overlap_chunk_counts(8192, 1), (Counts{2, 4, 8}));
  // W = 8 at M = 1024: 128 rows per owner, no 128-row chunking; chunks of any rows instead (the run failed
  // before this fallback).
  EXPECT_EQ(mkb::overlap_chunk_counts(128, 1), (Counts{2, 4, 8}));
  // GEMM+AR: all M rows, granule W (a chunk plan shares its rows over W ranks): M = 1024 at W = 2 takes chunks of
  // 256 W, at W = 8 no chunk of 1024 W rows exists: chunks of a multiple of 8 rows.
  EXPECT_EQ(mkb::overlap_chunk_counts(1024, 2), (Counts{2, 4}));
  EXPECT_EQ(mkb::overlap_chunk_counts(1024, 8), (Counts{2, 4, 8}));
  EXPECT_EQ(mkb::overlap_chunk_counts(16384, 4), (Counts{2, 4, 8}));
  // Every issue grid shape at W = 2, 4, 8 has at least one count.
  for (int w : {2, 4, 8})
    for (int64_t m : {1024, 2048, 4096, 8192, 16384}) {
      EXPECT_FALSE(mkb::overlap_chunk_counts(m / w, 1).empty()) << m << " " << w;
      EXPECT_FALSE(mkb::overlap_chunk_counts(m, w).empty()) << m << " " << w;
    }
  // No count divides an odd number of rows: a clear error, not an empty sweep.
  try {
    mkb::overlap_chunk_counts(7, 1);
    FAIL() << "7 rows took a chunk count";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("no chunk count of the two-stream overlap"), std::string::npos) << e.what();
  }
}

mkb::Stats ms(double v) {
  mkb::Stats s;
  s.median_ms = v;
  return s;
}

TEST(OverlapSweep, TheFastestVariantIsQuotedInColumnFourWithItsName) {
  // RS / AR: call 4 timed counts[0], calls 7, 8 the other counts; calls 5 and 6 are mkernel's and stay.
  const Counts counts{2, 4, 8};
  const auto v = mkb::chunk_variants(counts, 7);
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0], (std::pair<std::string, size_t>{"S=2", 4}));
  EXPECT_EQ(v[1], (std::pair<std::string, size_t>{"S=4", 7}));
  EXPECT_EQ(v[2], (std::pair<std::string, size_t>{"S=8", 8}));
  std::vector<mkb::Stats> st = {ms(1), ms(2), ms(3), ms(4), ms(1.5), ms(0.9), ms(7), ms(1.25), ms(1.75)};
  const mkb::OverlapSweep o = mkb::best_overlap(st, v);
  EXPECT_EQ(o.cell, "1.250 (S=4)");
  EXPECT_EQ(o.sweep, "S=2: 1.500 / S=4: 1.250 / S=8: 1.750");
  EXPECT_DOUBLE_EQ(st[4].median_ms, 1.25);  // what 'vs best baseline' and eta read
  EXPECT_DOUBLE_EQ(st[5].median_ms, 0.9);   // mkernel untouched
  // AG: call 4 is "local rows first", the chunked pipeline's counts from call 7; the first variant can win.
  std::vector<mkb::Stats> ag = {ms(1), ms(2), ms(3), ms(4), ms(1.1), ms(0.9), ms(7), ms(1.2), ms(1.3)};
  const auto o2 = mkb::best_overlap(ag, {{"local rows first", 4}, {"S=2", 7}, {"S=4", 8}});
  EXPECT_EQ(o2.cell, "1.100 (local rows first)");
  EXPECT_DOUBLE_EQ(ag[4].median_ms, 1.1);
}

}  // namespace
