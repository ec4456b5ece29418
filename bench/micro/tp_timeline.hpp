// mkbench: the one-rank timeline of GemmRs and GemmAr inside their kernel
// (bench/micro/tp_timeline.cu; part of `mkbench gemm_rs` with one rank).
#pragma once

#include "bench/bench.hpp"

namespace mkb {

void tp_timeline_one_rank(BenchContext& bc);

}  // namespace mkb
