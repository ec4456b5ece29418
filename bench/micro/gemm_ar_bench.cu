// GEMM + AllReduce (1 node, or 2x1 emulated nodes): mkernel's fused kernel
// against serial cuBLAS + NCCL, a chunked two-stream overlap a user could
// write, and the parts alone, all interleaved call by call in one run
// (MEASURING.md). The MLP down-projection (row-parallel) of hidden 8192, FFN
// 28672 over W ranks: this rank's a [M x 28672 / W], b [8192 x 28672 / W];
// out = the sum over ranks of a b^T, [M x 8192] on every rank. PyTorch's
// matmul + symmetric-memory all-reduce is measured by bench/torch_tp_bench.py.
#include <cublas_v2.h>
#include <nccl.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/bench.hpp"
#include "bench/micro/tp_bench.hpp"
#include "bench/micro/tp_row.hpp"
#include "mkernel/gemm.hpp"
#include "mkernel/tp.hpp"
#include "src/ops/ag_gemm/tp_plan.hpp"

namespace mkb {

namespace {

// The issue's targets for one row: never slower than the best baseline;
// eta >= 0.90 at M >= 4096; speedup over serial >= 0.9 of the ideal.
std::string targets(int64_t m, double vs_best, double eta, double of_ideal) {
  std::string miss;
  auto add = [&](const std::string& s) { miss += (miss.empty() ? "" : "; ") + s; };
  if (vs_best < 1.0) add("vs best " + fmt(vs_best, 3) + " < 1");
  if (m >= 4096 && eta < 0.90) add("eta " + fmt(eta, 3) + " < 0.90");
  if (of_ideal < 0.90) add("speedup/ideal " + fmt(of_ideal, 3) + " < 0.90");
  return miss.empty() ? "met" : "MISSED: " + miss;
}

}  // namespace

void bench_gemm_ar(BenchContext& bc) {
  auto& c = *bc.comm;
  const int W = c.world();
  const auto& topo = c.topology();
  Table t{"GEMM + AllReduce, bf16, hidden 8192, FFN 28672 / W per rank (MLP down-projection, row-parallel: "
          "n = 8192, k = 28672 / W)",
          {"M", "cuBLAS alone ms", "AR alone ms (NCCL / mk)", "serial ms", "2-stream chunked overlap ms",
           "mkernel ms", "mkernel vs best baseline", "eta", "mk AR alone, 32 reduce CTAs ms",
           "MB per GPU (NVLink / network; measured network)", "ideal speedup (T_gemm + T_comm) / max", "mkernel speedup over serial",
           "achieved / ideal", "targets", "CTAs (run: gather + compute; AR alone: 17 + reduce)",
           "check vs reference (max |d| / rms)", "TFLOP/s per GPU (serial / overlap / mkernel)",
           "2-stream overlap ms by chunk count S",
           "mkernel vs best baseline per round (p10 / median / p90)"},
          {},
          ""};
  if (W < 2) {  // (any layout of two or more: 1xL, Nx1 and the hierarchical NxL)
    t.note = "skipped: needs >= 2 ranks";
    bc.report->add(t);
    return;
  }
  // Across nodes the baselines use mkernel's own standalone all-reduce on
  // the same transport (NCCL between emulated nodes would take NVLink).
  const bool net = topo.num_nodes > 1;
  if (28672 % (64 * W) || 1024 % (128 * W)) {
    t.note = "skipped: needs 28672 / W a multiple of 64 and M / W a multiple of 128 (W = 2, 4 or 8)";
    bc.report->add(t);
    return;
  }
  const TpBaselines env(c, net, bc.stream, bc.shared_gpu);
  const bool own = env.own;  // the baselines' collective: mkernel's (across nodes, or ranks sharing a GPU)
  cublasHandle_t h = env.h;

  const int64_t n = 8192, k = 28672 / W;
  std::vector<int64_t> ms = {1024, 2048, 4096, 8192, 16384};
  if (bc.quick) ms = {4096};
  for (int64_t m : ms) {
    // The overlap's chunk counts S: C = M / S rows each, a multiple of W (a chunk's all-reduce plan shares its rows
    // over the W ranks), of 128 W where M allows (overlap_chunk_counts).
    const std::vector<int> counts = overlap_chunk_counts(m, W);
    const size_t out_bytes = size_t(m) * n * 2;
    mk::GemmAr plan(c, m, n, k), plan32(c, m, n, k, mk::GemmArOptions{.num_reduce_ctas = 32});
    // The baselines' all-reduce across nodes: plans of their own (the fused
    // plans' calls stay in their order), for all rows and for one chunk of
    // each chunk count (chunk > 0: its rows).
    std::optional<mk::GemmAr> base;
    std::vector<std::unique_ptr<mk::GemmAr>> base_chunk(kMaxChunks + 1);
    if (own) {
      base.emplace(c, m, n, k);
      for (int s : counts) base_chunk[s] = std::make_unique<mk::GemmAr>(c, m / s, n, k);
    }
    auto ar = [&](const void* in, void* o, int64_t chunk, int s, cudaStream_t st) {
      if (own)
        (chunk ? *base_chunk[s] : *base).all_reduce(in, o, st);
      else
        MKB_NCCL(ncclAllReduce(in, o, size_t(chunk ? chunk : m) * n, ncclBfloat16, ncclSum, env.nc, st));
    };
    Rotating a(size_t(m) * k * 2), b(size_t(n) * k * 2), x(out_bytes);
    fill_rotating(a, size_t(m) * k, 700, c.rank(), bc.stream);
    fill_rotating(b, size_t(n) * k, 800, c.rank(), bc.stream);
    fill_rotating(x, size_t(m) * n, 900, c.rank(), bc.stream);
    DevBuf partial(out_bytes), out(out_bytes), ref(out_bytes), got(out_bytes);
    // Every cuBLAS shape once before any kernel can wait on the network
    // (a module load waits for running kernels, the emu proxy's copy behind
    // it: the 2x1 hang of 2026-11-30, see ag_gemm_bench.cu).
    gemm_bf16_tn(h, int(m), int(n), int(k), a.get(0), b.get(0), partial.p, bc.stream);
    for (int s : counts) gemm_bf16_tn(h, int(m / s), int(n), int(k), a.get(0), b.get(0), partial.p, bc.stream);
    MKB_CUDA(cudaStreamSynchronize(bc.stream));

    // The checks' reference: serial's GEMM, then a collective independent of mkernel's (ref_collective.hpp).
    RefCollective refc(c, env.ref_nc());
    auto reference = [&](const void* A, const void* B, void* o) {
      gemm_bf16_tn(h, int(m), int(n), int(k), A, B, partial.p, bc.stream);
      refc.all_reduce(partial.p, o, size_t(m) * n, bc.stream);
    };
    auto serial = [&](const void* A, const void* B, void* o) {
      gemm_bf16_tn(h, int(m), int(n), int(k), A, B, partial.p, bc.stream);
      ar(partial.p, o, 0, 0, bc.stream);
    };
    // S chunks of C = M / S rows. Chunk j: rows [j C, (j + 1) C) of a times b^T into the same rows of
    // partial, then on the side stream their all-reduce into the same rows
    // of out while chunk j + 1 computes; the side stream joins at the end.
    auto overlap = [&](int S, const void* A, const void* B, void* o) {
      const int64_t C = m / S;
      for (int j = 0; j < S; ++j) {
        const size_t row0 = size_t(j) * C;
        char* p = static_cast<char*>(partial.p) + row0 * n * 2;
        gemm_bf16_tn(h, int(C), int(n), int(k), static_cast<const char*>(A) + row0 * k * 2, B, p, bc.stream);
        MKB_CUDA(cudaEventRecord(env.computed[j], bc.stream));
        MKB_CUDA(cudaStreamWaitEvent(env.side, env.computed[j]));
        ar(p, static_cast<char*>(o) + row0 * n * 2, C, S, env.side);
        MKB_CUDA(cudaEventRecord(env.reduced[j], env.side));
      }
      MKB_CUDA(cudaStreamWaitEvent(bc.stream, env.reduced[S - 1]));
    };

    // Checks (outside timing): outputs poisoned (bf16 NaN) first, then compared with the reference on the same
    // inputs (serial's GEMM and a collective independent of mkernel's: NCCL, or the host where ranks share a GPU);
    // mkernel's output must also hold the same bits on every rank.
    const std::string at = " at M=" + std::to_string(m);
    MKB_CUDA(cudaMemsetAsync(ref.p, 0xff, out_bytes, bc.stream));
    reference(a.get(0), b.get(0), ref.p);
    MKB_CUDA(cudaMemsetAsync(got.p, 0xff, out_bytes, bc.stream));
    serial(a.get(0), b.get(0), got.p);  // the serial baseline itself (its collective may be mkernel's)
    check_vs(c.bootstrap(), "gemm_ar", "serial" + at, got.p, ref.p, m, n, bc.stream);
    for (int s : counts) {  // every chunk count at every M
      MKB_CUDA(cudaMemsetAsync(got.p, 0xff, out_bytes, bc.stream));
      overlap(s, a.get(0), b.get(0), got.p);
      check_vs(c.bootstrap(), "gemm_ar", "2-stream chunked overlap, S=" + std::to_string(s) + at, got.p, ref.p, m, n,
               bc.stream);
    }
    // Both plans' run() and the plan's all_reduce() against the reference on copy 0 of the inputs (ref holds the
    // reference's output, partial serial's GEMM); `when` names the check (before the timing, or after it on fresh
    // data: a call that reused an earlier call's state would pass the first and fail the second).
    double err = 0;
    auto check_plans = [&](const std::string& when) {
      for (mk::GemmAr* p : {&plan, &plan32}) {
        MKB_CUDA(cudaMemsetAsync(got.p, 0xff, out_bytes, bc.stream));
        p->run(a.get(0), b.get(0), got.p, bc.stream);
        err = std::max(err, check_vs(c.bootstrap(), "gemm_ar", (p == &plan ? "mkernel" : "mkernel (second plan)") +
                                                                   at + when, got.p, ref.p, m, n, bc.stream, true));
      }
      MKB_CUDA(cudaMemsetAsync(got.p, 0xff, out_bytes, bc.stream));
      plan.all_reduce(partial.p, got.p, bc.stream);  // partial: serial's GEMM of a.get(0), b.get(0)
      err = std::max(err, check_vs(c.bootstrap(), "gemm_ar", "mk all_reduce alone" + at + when, got.p, ref.p, m, n,
                                   bc.stream, true));
    };
    check_plans("");

    // Call cl of round i takes the next copy of each rotating input (copy
    // 100 + 10 i + cl), so no call finds its inputs in L2 from the one before.
    auto A = [&](int i, int cl) { return a.get(100 + 10 * i + cl); };
    auto B = [&](int i, int cl) { return b.get(100 + 10 * i + cl); };
    auto X = [&](int i, int cl) { return x.get(100 + 10 * i + cl); };
    std::vector<std::function<void(int)>> calls = {
        [&](int i) { gemm_bf16_tn(h, int(m), int(n), int(k), A(i, 0), B(i, 0), partial.p, bc.stream); },  // 0
        [&](int i) { ar(X(i, 1), out.p, 0, 0, bc.stream); },               // 1 NCCL (own: mk) AR alone
        [&](int i) { plan.all_reduce(X(i, 2), out.p, bc.stream); },        // 2 mk AR alone
        [&](int i) { serial(A(i, 3), B(i, 3), out.p); },                   // 3 serial
        [&](int i) { overlap(counts[0], A(i, 4), B(i, 4), out.p); },       // 4 2-stream chunked overlap
        [&](int i) { plan.run(A(i, 5), B(i, 5), out.p, bc.stream); },      // 5 mkernel
        [&](int i) { plan32.all_reduce(X(i, 6), out.p, bc.stream); },      // 6 mk AR alone, 32 reduce CTAs
    };
    for (size_t v = 1; v < counts.size(); ++v)  // 7.. the overlap at the other chunk counts
      calls.push_back([&, v](int i) { overlap(counts[v], A(i, 6 + int(v)), B(i, 6 + int(v)), out.p); });
    auto st = time_interleaved(&c.bootstrap(), bc.stream, bc.opts, calls, env.barrier());
    fill_random_bf16(a.get(0), size_t(m) * k, 50000 + 13 * c.rank(), bc.stream);  // data no call has seen
    MKB_CUDA(cudaMemsetAsync(ref.p, 0xff, out_bytes, bc.stream));
    reference(a.get(0), b.get(0), ref.p);
    check_plans(", after the timing");
    const OverlapSweep sweep = best_overlap(st, chunk_variants(counts, 7));
    const double t_gemm = st[0].median_ms, t_comm = std::min({st[1].median_ms, st[2].median_ms, st[6].median_ms});
    const double t_mk = st[5].median_ms, vs_best = std::min(st[3].median_ms, st[4].median_ms) / t_mk;
    const double eta = std::max(t_gemm, t_comm) / t_mk;
    // The ideal: what overlapping serial's own two parts would give over serial (its collective, st[1]).
    const double t_ser = st[1].median_ms;
    const double ideal = (t_gemm + t_ser) / std::max(t_gemm, t_ser), speedup = st[3].median_ms / t_mk;
    // Two-shot bytes (tp::ar_bytes_per_gpu): the reduce-scatter's, then the final rows' all-gather.
    const mk::tp::LinkBytes sent = mk::tp::ar_bytes_per_gpu(topo.num_nodes, topo.local_size, m, n);
    std::vector<std::string> row =
        tp_row(m, st, t_comm, sent, checked_network_bytes(c, bc.stream, calls[5], "gemm_ar", m, sent.network,
                                                    (m / c.world()) % 128 == 0 && n % 256 == 0));
    row[4] = sweep.cell;
    row.push_back(fmt(ideal, 2) + "x");
    row.push_back(fmt(speedup, 2) + "x");
    row.push_back(fmt(speedup / ideal, 2));
    row.push_back(bc.shared_gpu ? "- (shared GPU)" : targets(m, vs_best, eta, speedup / ideal));
    row.push_back(std::string(plan.one_shot() ? "one-shot " : "two-shot ") + std::to_string(plan.num_gather_ctas()) +
                  " + " + std::to_string(plan.num_compute_ctas()) + "; " +
                  std::to_string(plan.num_reduce_ctas()) + " (" + std::to_string(plan32.num_reduce_ctas()) + ")");
    row.push_back("checked (" + fmt(err, 4) + "), same bits on every rank");
    row.push_back(tflops_cell(m, n, k, st));  // (each GPU: m x n over its k)
    row.push_back(sweep.sweep);
    row.push_back(paired_vs_best_cell(st));
    t.rows.push_back(row);
  }
  t.clocks = take_clock_line();  // (before the diagnosis's timing: its table is added first)
  if (bc.quick) {
    // Diagnosis (--quick): the fused kernel's Gather CTAs and stores at a
    // small and a large M, against the GEMM alone (cuBLAS; mkernel's engine
    // on every SM, no communication).
    Table d{"GEMM+AR diagnosis: Gather CTAs, swizzle, stores", {"M", "variant", "ms"}, {}, ""};
    for (int64_t m : {int64_t(256), int64_t(512), int64_t(1024), int64_t(4096), int64_t(8192)}) {
      Rotating a(size_t(m) * k * 2), b(size_t(n) * k * 2);
      fill_rotating(a, size_t(m) * k, 700, c.rank(), bc.stream);
      fill_rotating(b, size_t(n) * k, 800, c.rank(), bc.stream);
      DevBuf partial(size_t(m) * n * 2), out(size_t(m) * n * 2);
      // Variants: the heuristic, then one knob each (swizzles that divide a share's row-blocks).
      std::vector<std::pair<std::string, mk::GemmArOptions>> vs = {{"", {}}};
      if (!net && W == 2) {  // (one-shot: one node of two ranks only)
        vs.push_back({", one-shot", mk::GemmArOptions{.one_shot = 1}});
        vs.push_back({", two-shot", mk::GemmArOptions{.one_shot = 0}});
      }
      vs.push_back({", two-shot", mk::GemmArOptions{.num_gather_ctas = 2, .one_shot = 0}});
      const int64_t share_blocks = (m / W + 127) / 128;  // row-blocks of a share (a partial one counts)
      for (int sw : {2, 4, 8})
        if (share_blocks % sw == 0)
          vs.push_back({", two-shot", mk::GemmArOptions{.swizzle = sw, .one_shot = 0}});
      vs.push_back({", two-shot, plain stores (async_store 0)", mk::GemmArOptions{.async_store = 0, .one_shot = 0}});
      vs.push_back({", two-shot, not interleaved (own share last)", mk::GemmArOptions{.one_shot = 0, .interleave = 0}});
      vs.push_back({", two-shot, interleaved", mk::GemmArOptions{.one_shot = 0, .interleave = 1}});
      vs.push_back({", two-shot, own rows by plain stores (own_tma_store 0)",
                    mk::GemmArOptions{.one_shot = 0, .own_tma_store = 0}});
      std::vector<std::unique_ptr<mk::GemmAr>> plans;
      for (auto& v : vs) plans.push_back(std::make_unique<mk::GemmAr>(c, m, n, k, v.second));
      gemm_bf16_tn(h, int(m), int(n), int(k), a.get(0), b.get(0), partial.p, bc.stream);
      MKB_CUDA(cudaStreamSynchronize(bc.stream));
      std::vector<std::function<void(int)>> calls = {
          [&](int i) {
            gemm_bf16_tn(h, int(m), int(n), int(k), a.get(100 + i), b.get(100 + i), partial.p, bc.stream);
          }};
      for (auto& p : plans)
        calls.push_back([&, pp = p.get()](int i) { pp->run(a.get(100 + i), b.get(100 + i), out.p, bc.stream); });
      calls.push_back([&](int i) {
        const mk::GemmArgs g{.a = a.get(100 + i), .b = b.get(100 + i), .out = partial.p, .m = m, .n = n, .k = k};
        mk::gemm_bf16(g, bc.stream);
      });
      mk::GemmRs rs_plan(c, m, n, k);  // the same GEMM with the reduce-scatter half only
      calls.push_back([&](int i) { rs_plan.run(a.get(100 + i), b.get(100 + i), out.p, bc.stream); });
      auto st = time_interleaved(&c.bootstrap(), bc.stream, bc.opts, calls, env.barrier());
      const std::string ms_ = std::to_string(m);
      auto ctas = [](const mk::GemmAr& p) {
        return std::to_string(p.num_gather_ctas()) + " gather + " + std::to_string(p.num_compute_ctas()) +
               " compute, swizzle " + std::to_string(p.swizzle()) + (p.one_shot() ? " (one-shot)" : "");
      };
      d.rows.push_back({ms_, "cuBLAS alone", fmt(st[0].median_ms)});
      for (size_t v = 0; v < vs.size(); ++v)
        d.rows.push_back({ms_, std::string(v == 0 ? "fused (heuristic): " : "fused: ") + ctas(*plans[v]) + vs[v].first,
                          fmt(st[1 + v].median_ms)});
      d.rows.push_back({ms_, "mk GEMM alone (no communication)", fmt(st[1 + vs.size()].median_ms)});
      d.rows.push_back({ms_, "mk GEMM+RS (the reduce-scatter half alone)", fmt(st[2 + vs.size()].median_ms)});
    }
    bc.report->add(d);
  }
  t.note =
      "Calls interleaved (one of each per round), each after an untimed 1-element NCCL all-reduce that lines the "
      "ranks up (no call absorbs the other rank's lag from the call before), each call's slowest rank, then the "
      "median; a, b and the AR "
      "input rotate through >= 256 MiB, a different copy per call. cuBLAS alone = this rank's full [M x 8192] partial "
      "GEMM. AR alone = all-reduce of an [M x 8192] bf16 input: NCCL / the plan's all_reduce (two-shot: the reduce-scatter's "
      "push and reduce items, then the gather). serial = cuBLAS, then NCCL all-reduce. 2-stream chunked overlap = the M "
      "rows cut into S chunks; per chunk one cuBLAS call into its rows of an [M x 8192] buffer, "
      "whose NCCL all-reduce runs on a side stream while the next chunk computes; S swept over {2, 4, 8} (chunks "
      "of a multiple of 128 W rows where M allows, else of W), each S timed in the same rounds, the fastest "
      "quoted with its S (every S's "
      "median in the last column). mkernel vs best baseline = "
      "min(serial, overlap) / mkernel. T_gemm = cuBLAS alone, T_comm = the fastest AR alone (of the three columns), "
      "eta = max(T_gemm, T_comm) / mkernel. ideal speedup = (T_gemm + T_ser) / max(T_gemm, T_ser), T_ser = the "
      "all-reduce serial runs (the first AR alone) (what perfect overlap would give over a serial run of its two "
      "parts); mkernel speedup over serial = serial (measured) / "
      "mkernel; achieved / ideal is their ratio. targets (issue tp-ar): vs best >= 1 at every M, eta >= 0.90 at M >= "
      "4096, achieved / ideal >= 0.90. MB per GPU (N nodes x L GPUs, share = M/W x 8192 x 2 B, two-shot, "
      "tp::ar_bytes_per_gpu): NVLink 2 (L-1) N shares (the reduce-scatter's partial rows out, as "
      "tp::rs_bytes_per_gpu, and the final rows pulled from node peers), network 2 (N-1) shares (the node's sum of "
      "each other node's share, and its own final share once per other node). Across nodes the network "
      "figure is followed by the bytes the host proxy took during one more mkernel call (measured: "
      "mk::Network::bytes_put), which must equal it on every rank (else the run fails). "
      "CTAs: run()'s Gather + compute CTAs; "
      "all_reduce()'s Reduce CTAs, its grid less 17 (the 32-CTA plan's in parentheses). check: outside timing, "
      "serial's output, both mkernel plans' run() and the plan's all_reduce() of serial's partial vs a reference "
      "(serial's GEMM, then NCCL's all-reduce, or the host's where ranks share a GPU: never mkernel's own), on the "
      "same inputs, every element within "
      "0.02 |ref| + 0.02 rms(ref), and the same bits on every rank (else the run fails), again after the timing on "
      "fresh random data; the chunked overlap is checked "
      "the same way, every S at every M. Across nodes (2x1 emulated) the AR baselines are mkernel's standalone "
      "all-reduce "
      "on the same transport, not NCCL (which would use NVLink between the emulated nodes): 'AR alone' shows it twice, "
      "and serial = cuBLAS then that all-reduce. PyTorch's matmul + symmetric-memory all-reduce (1x2) is measured by "
      "bench/torch_tp_bench.py.";
  t.note += kPairedNote;
  if (bc.shared_gpu) t.note = kSharedGpuNote + t.note;
  bc.report->add(t);
}

}  // namespace mkb
