// mkbench: the columns the fused tensor-parallel tables (ag_gemm, gemm_rs, gemm_ar)
// share, from their interleaved calls 0 compute alone, 1-2 the collective
// alone (baseline / mkernel), 3 serial, 4 two-stream overlap, 5 mkernel,
// 6 an mkernel variant.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/report.hpp"
#include "bench/timing.hpp"
#include "mkernel/communicator.hpp"
#include "mkernel/error.hpp"
#include "mkernel/network.hpp"
#include "src/ops/ag_gemm/tp_plan.hpp"

namespace mkb {

// Network bytes one more call of `call` puts from this rank, as the host
// proxy counts them (mk::Network::bytes_put): every rank's stream drained
// and a host barrier before and after (a peer's kernel that finished has
// received everything this rank put, so the proxy has taken it all). -1 on
// one node (no network). Collective: every rank calls it at the same point.
inline double measured_network_bytes(mk::Communicator& c, cudaStream_t s, const std::function<void(int)>& call) {
  if (c.topology().num_nodes < 2) return -1;
  mk::Network& net = c.network();
  MKB_CUDA(cudaStreamSynchronize(s));
  c.bootstrap().barrier();
  const uint64_t before = net.bytes_put();
  call(0);
  MKB_CUDA(cudaStreamSynchronize(s));
  c.bootstrap().barrier();
  return double(net.bytes_put() - before);
}

// measured_network_bytes, checked against the op's formula (`want`: this GPU's network bytes a call,
// tp::*_bytes_per_gpu): a rank whose proxy put other than that fails the run on every rank, naming the rank, M and
// both counts (the hierarchical paths must cross the network once per byte the formula counts: [multi-gpu-run]).
// `exact`: whether the formula is exact at this shape (tp::rs_bytes_per_gpu: GEMM+RS and GEMM+AR shares of whole
// 128-row blocks, n a multiple of 256; else the fused op's whole-tile puts send more, and only the count is shown).
inline double checked_network_bytes(mk::Communicator& c, cudaStream_t s, const std::function<void(int)>& call,
                                    const char* op, int64_t m, double want, bool exact = true) {
  const double got = measured_network_bytes(c, s, call);
  if (got < 0 || !exact) return got;  // (one node: no network)
  const bool off = std::llround(got) != std::llround(want);
  if (max_over_ranks(&c.bootstrap(), off ? 1.0 : 0.0) > 0) {
    if (!off) mk::fail(op, " bench at M=", m, ": another rank's network bytes differ from the op's formula");
    mk::fail(op, " bench at M=", m, " on rank ", c.rank(), " (", config_name(c.topology()), "): its proxy put ",
             std::llround(got), " bytes over the network in one call; the op's formula says ", std::llround(want));
  }
  return got;
}

// M, the seven times (1-2 as "a / b"), mkernel vs the best baseline, eta =
// max(compute alone, t_comm) / mkernel (t_comm: the fastest collective
// alone), the variant, and the MB one GPU sends over NVLink / the network
// by the op's formula, with the network bytes measured by the proxy
// (measured_network_bytes; < 0: one node, not shown).
inline std::vector<std::string> tp_row(int64_t m, const std::vector<Stats>& st, double t_comm,
                                       const mk::tp::LinkBytes& sent, double net_measured) {
  const double best = std::min(st[3].median_ms, st[4].median_ms);
  const double t_lb = std::max(st[0].median_ms, t_comm);
  return {std::to_string(m), fmt(st[0].median_ms), fmt(st[1].median_ms) + " / " + fmt(st[2].median_ms),
          fmt(st[3].median_ms), fmt(st[4].median_ms), fmt(st[5].median_ms),
          fmt(best / st[5].median_ms, 2) + "x", fmt(t_lb / st[5].median_ms, 2), fmt(st[6].median_ms),
          fmt(sent.nvlink / 1e6, 1) + " / " + fmt(sent.network / 1e6, 1) +
              (net_measured >= 0 ? " (measured " + fmt(net_measured / 1e6, 1) + ")" : "")};
}

// The last column of the TP tables: mkernel against the best baseline (serial or the quoted overlap, by median,
// as "mkernel vs best baseline"), round by round: "p10 / median / p90" of best_i / mkernel_i (paired_ratio).
inline constexpr const char* kPairedNote =
    " Last column: the best baseline's time over mkernel's, round by round (both calls of a round share the GPU's "
    "clock): p10 / median / p90. Where it straddles 1, the two are within the run's spread.";
inline std::string paired_vs_best_cell(const std::vector<Stats>& st) {
  const Stats& best = st[3].median_ms <= st[4].median_ms ? st[3] : st[4];
  const RatioRange r = paired_ratio(best, st[5]);
  if (r.median <= 0) return "-";
  return fmt(r.p10, 4) + " / " + fmt(r.median, 4) + " / " + fmt(r.p90, 4);
}

// TFLOP/s per GPU of serial / overlap / mkernel (st[3], st[4], st[5]) for one GPU's GEMM of m x n x k
// (MEASURING.md: time and TFLOP/s per GPU of each).
inline std::string tflops_cell(int64_t m, int64_t n, int64_t k, const std::vector<Stats>& st) {
  const double flop = 2.0 * double(m) * double(n) * double(k);
  auto tf = [&](double ms) { return fmt(flop / (ms * 1e9), 0); };
  return tf(st[3].median_ms) + " / " + tf(st[4].median_ms) + " / " + tf(st[5].median_ms);
}

}  // namespace mkb
