// mkbench: the columns the fused tensor-parallel tables (ag_gemm, gemm_rs, gemm_ar)
// share, from their interleaved calls 0 compute alone, 1-2 the collective
// alone (baseline / mkernel), 3 serial, 4 two-stream overlap, 5 mkernel,
// 6 an mkernel variant.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "bench/report.hpp"
#include "bench/timing.hpp"
#include "src/ops/ag_gemm/tp_plan.hpp"

namespace mkb {

// M, the seven times (1-2 as "a / b"), mkernel vs the best baseline, eta =
// max(compute alone, t_comm) / mkernel (t_comm: the fastest collective
// alone), the variant, and the MB one GPU sends over NVLink / the network.
inline std::vector<std::string> tp_row(int64_t m, const std::vector<Stats>& st, double t_comm,
                                       const mk::tp::LinkBytes& sent) {
  const double best = std::min(st[3].median_ms, st[4].median_ms);
  const double t_lb = std::max(st[0].median_ms, t_comm);
  return {std::to_string(m), fmt(st[0].median_ms), fmt(st[1].median_ms) + " / " + fmt(st[2].median_ms),
          fmt(st[3].median_ms), fmt(st[4].median_ms), fmt(st[5].median_ms),
          fmt(best / st[5].median_ms, 2) + "x", fmt(t_lb / st[5].median_ms, 2), fmt(st[6].median_ms),
          fmt(sent.nvlink / 1e6, 1) + " / " + fmt(sent.network / 1e6, 1)};
}

}  // namespace mkb
