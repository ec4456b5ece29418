// GEMM + ReduceScatter (1 node, or 2x1 emulated nodes): mkernel's fused kernel against serial
// cuBLAS + NCCL, a chunked two-stream overlap a user could write, and the
// parts alone, all interleaved call by call in one run (MEASURING.md).
// Row-parallel layer of hidden 8192, FFN 28672 over W ranks: this rank's
// a [M x 28672 / W], b [8192 x 28672 / W]; out = its M / W rows of the sum
// over ranks of a b^T.
#include <cublas_v2.h>
#include <nccl.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench.hpp"
#include "bench/micro/gemm_alone.hpp"
#include "bench/micro/tp_bench.hpp"
#include "bench/micro/tp_row.hpp"
#include "bench/micro/tp_timeline.hpp"
#include "mkernel/gemm.hpp"
#include "mkernel/tp.hpp"
#include "src/ops/ag_gemm/tp_plan.hpp"
#include "src/ops/gemm/gemm_host.hpp"
#include "src/ops/gemm_rs/rs_plan.hpp"

namespace mkb {

namespace {

// gemm_bf16_tn's row-major trick (C = A B^T is column-major C^T = B A^T:
// gemm(T, N) with b first), batched over the w owners: batch d computes
// `rows` rows of a starting at a + d * owner_rows rows (a points at the
// chunk's first row of owner 0) times b^T into c + d * rows * n, so c is
// [w][rows x n], contiguous. b is the same for every batch (stride 0).
void gemm_bf16_tn_owners(cublasHandle_t h, int w, int rows, int n, int k, int64_t owner_rows, const void* a,
                         const void* b, void* c, cudaStream_t s) {
  const float alpha = 1.f, beta = 0.f;
  MKB_CUBLAS(cublasSetStream(h, s));
  MKB_CUBLAS(cublasGemmStridedBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, rows, k, &alpha, b, CUDA_R_16BF, k, 0, a,
                                        CUDA_R_16BF, k, owner_rows * k, &beta, c, CUDA_R_16BF, n,
                                        int64_t(rows) * n, w, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// One rank (no communication): the fused plans' GEMM machinery at the 1x2
// per-rank shape (n = 8192, k = 28672 / 2) against cuBLAS and the engine
// alone, to locate what the owner-final path costs (every tile is an own
// final tile at W = 1): the walk, the grid, TMA against plain stores.
void rs_diagnosis_one_rank(BenchContext& bc, const TpBaselines& base) {
  auto& c = *bc.comm;
  const int64_t n = 8192, k = 28672 / 2;
  const int sms = mk::gemm::num_sms();
  Table d{"GEMM+RS / GEMM+AR on one rank (no communication: every tile is an own final tile), the 1x2 per-rank "
          "shape n = 8192, k = 14336: the plans against the GEMM engine alone and cuBLAS",
          {"M", "variant", "ms"},
          {},
          ""};
  for (int64_t m : {int64_t(1024), int64_t(2048), int64_t(4096), int64_t(8192), int64_t(16384)}) {
    Rotating a(size_t(m) * k * 2), b(size_t(n) * k * 2);
    fill_rotating(a, size_t(m) * k, 700, c.rank(), bc.stream);
    fill_rotating(b, size_t(n) * k, 800, c.rank(), bc.stream);
    DevBuf out(size_t(m) * n * 2);
    mk::GemmRs rs(c, m, n, k), rs_all(c, m, n, k, {.num_ctas = sms}), rs_sync(c, m, n, k, {.async_store = 0});
    mk::GemmRs rs_whole(c, m, n, k, {.split_tail = false});
    mk::GemmAr ar(c, m, n, k);
    mk::GemmRs rs_plain(c, m, n, k, {.own_tma_store = 0});
    mk::GemmAr ar_plain(c, m, n, k, {.own_tma_store = 0});
    // The two plans' walks swapped (GemmRs groups up to 8 row-blocks, GemmAr up to 4: tp::ar_swizzle).
    mk::GemmRs rs_sw4(c, m, n, k, {.swizzle = 4});
    mk::GemmAr ar_sw8(c, m, n, k, {.swizzle = 8});
    std::unique_ptr<mk::GemmRs> rs_one;  // what one rank runs by default: the standalone GEMM
    std::unique_ptr<mk::GemmAr> ar_one;
    {
      const ScopedEnv plain("MK_TP_SINGLE_RANK", "plain");
      rs_one = std::make_unique<mk::GemmRs>(c, m, n, k);
      ar_one = std::make_unique<mk::GemmAr>(c, m, n, k);
    }
    const int ctas = rs.num_compute_ctas(), sw = rs.swizzle();
    // The engine alone: TMA-store or plain RowMajor stores (what the owner
    // tiles use).
    auto engine = [&](int i, int nc, int swz, bool tma_store) {
      launch_alone(engine_alone_params(a.get(100 + i), b.get(100 + i), out.p, m, n, k, nc, swz, tma_store), bc.stream);
    };
    // GemmRs's own GEMM parameters (a plan of its own) in the standalone
    // kernel (no storer, no entry signals, no epoch end), static or dynamic
    // walk, its SharePermuted walk or the engine's Swizzled one: what of the
    // fused kernel costs time, one factor at a time.
    mk::tp::RsPlan pl = mk::tp::rs_make_plan(c, "diag", m, n, k, 0, 0, 0, nullptr);
    DevBuf counter(sizeof(uint64_t));
    auto rs_alone = [&](int i, bool dynamic, bool swizzled) {
      mk::gemm::GemmParams p = rs_gemm_alone_params(pl, c, a.get(100 + i), b.get(100 + i), out.p, ctas);
      if (dynamic) {
        MKB_CUDA(cudaMemsetAsync(counter.p, 0, sizeof(uint64_t), bc.stream));
        p.tile_counter = static_cast<uint64_t*>(counter.p);
      }
      if (swizzled) p.sched.order = mk::sched::TileOrder::Swizzled;
      launch_alone(p, bc.stream);
    };
    std::vector<std::function<void(int)>> calls = {
        [&](int i) { gemm_bf16_tn(base.h, int(m), int(n), int(k), a.get(100 + i), b.get(100 + i), out.p, bc.stream); },
        [&](int i) { rs.run(a.get(100 + i), b.get(100 + i), out.p, bc.stream); },
        [&](int i) { rs_all.run(a.get(100 + i), b.get(100 + i), out.p, bc.stream); },
        [&](int i) { ar.run(a.get(100 + i), b.get(100 + i), out.p, bc.stream); },
        [&](int i) { engine(i, 0, 8, true); },
        [&](int i) { engine(i, 0, 8, false); },
        [&](int i) { engine(i, ctas, sw, true); },
        [&](int i) { engine(i, ctas, sw, false); },
        [&](int i) { rs_alone(i, false, false); },
        [&](int i) { rs_alone(i, true, false); },
        [&](int i) { rs_alone(i, false, true); },
        [&](int i) { rs_sync.run(a.get(100 + i), b.get(100 + i), out.p, bc.stream); },
        [&](int i) { rs_whole.run(a.get(100 + i), b.get(100 + i), out.p, bc.stream); },
        [&](int i) { rs_plain.run(a.get(100 + i), b.get(100 + i), out.p, bc.stream); },
        [&](int i) { ar_plain.run(a.get(100 + i), b.get(100 + i), out.p, bc.stream); },
        [&](int i) { rs_one->run(a.get(100 + i), b.get(100 + i), out.p, bc.stream); },
        [&](int i) { ar_one->run(a.get(100 + i), b.get(100 + i), out.p, bc.stream); },
        [&](int i) { rs_sw4.run(a.get(100 + i), b.get(100 + i), out.p, bc.stream); },
        [&](int i) { ar_sw8.run(a.get(100 + i), b.get(100 + i), out.p, bc.stream); },
    };
    // Every variant's output against cuBLAS's on the same inputs (poisoned first).
    DevBuf ref(size_t(m) * n * 2);
    gemm_bf16_tn(base.h, int(m), int(n), int(k), a.get(0), b.get(0), ref.p, bc.stream);
    for (size_t v = 1; v < calls.size(); ++v) {
      MKB_CUDA(cudaMemsetAsync(out.p, 0xff, size_t(m) * n * 2, bc.stream));
      calls[v](-100);  // copy 0 of a and b
      check_vs(c.bootstrap(), "gemm_rs", "one-rank variant " + std::to_string(v) + " at M=" + std::to_string(m), out.p,
               ref.p, m, n, bc.stream);
    }
    auto st = time_interleaved(&c.bootstrap(), bc.stream, bc.opts, calls, base.barrier());
    const std::string split = rs.split_tiles() ? ", " + std::to_string(rs.split_tiles()) + " tiles in " +
                                                     std::to_string(rs.split_parts()) + " parts"
                                               : "";
    const std::string cs = std::to_string(ctas) + " CTAs, swizzle " + std::to_string(sw);
    const std::string names[] = {"cuBLAS",
                                 "GemmRs (heuristic: " + cs + split + ")",
                                 "GemmRs, " + std::to_string(sms) + " CTAs",
                                 "GemmAr (heuristic)",
                                 "engine alone, every SM, swizzle 8, TMA stores",
                                 "engine alone, every SM, swizzle 8, plain stores",
                                 "engine alone, " + cs + ", TMA stores",
                                 "engine alone, " + cs + ", plain stores",
                                 "GemmRs's GEMM in the standalone kernel, static walk",
                                 "GemmRs's GEMM in the standalone kernel, dynamic walk (+ a memset)",
                                 "GemmRs's GEMM in the standalone kernel, static Swizzled walk",
                                 "GemmRs, no storer (async_store 0)",
                                 "GemmRs, no split tail (" + std::to_string(rs_whole.num_compute_ctas()) + " CTAs)",
                                 "GemmRs, own rows by plain stores (own_tma_store 0)",
                                 "GemmAr, own rows by plain stores, gathered into out (own_tma_store 0)",
                                 "GemmRs, MK_TP_SINGLE_RANK=plain (auto's choice here: the standalone GEMM)",
                                 "GemmAr, MK_TP_SINGLE_RANK=plain",
                                 "GemmRs, swizzle 4",
                                 "GemmAr, swizzle 8"};
    for (size_t v = 0; v < calls.size(); ++v) d.rows.push_back({std::to_string(m), names[v], fmt(st[v].median_ms)});
    MKB_CUDA(cudaStreamSynchronize(bc.stream));
    mk::tp::rs_free_plan(c, pl);
  }
  d.note =
      "One rank: every tile of GemmRs / GemmAr is an own final tile (no communication, no partial tiles to add); "
      "their rows are the fused kernels (mkbench sets MK_TP_SINGLE_RANK=fused with one rank unless it is set) "
      "except the MK_TP_SINGLE_RANK=plain ones. "
      "Calls interleaved, medians; a and b rotate through >= 4x L2. engine alone = mk's GEMM kernel with the "
      "TMA-store or plain row stores. GemmRs's GEMM in the standalone kernel = the parameters GemmRs builds (its "
      "walk, owner epilogue and row stores), launched in the standalone GEMM kernel without the fused kernel's "
      "entry signals, storer thread and epoch end; 'dynamic' takes tiles from a counter zeroed by a memset before "
      "each call (timed with it). Every variant's output checked against cuBLAS's (0.02 |ref| + 0.02 rms(ref)) "
      "before timing.";
  bc.report->add(d);
}

}  // namespace

void bench_gemm_rs(BenchContext& bc) {
  auto& c = *bc.comm;
  const int W = c.world();
  const auto& topo = c.topology();
  Table t{"GEMM + ReduceScatter, bf16, hidden 8192, FFN 28672 / W per rank (row-parallel: n = 8192, k = 28672 / W)",
          {"M", "cuBLAS alone ms", "RS alone ms (NCCL / mk)", "serial ms", "2-stream chunked overlap ms",
           "mkernel ms", "mkernel vs best baseline", "eta", "mk RS alone, 32 reduce CTAs ms",
           "MB sent per GPU (NVLink / network; measured network)",
           "CTAs (run: compute; RS alone: 16 + reduce)", "check vs reference (max |d| / rms)",
           "TFLOP/s per GPU (serial / overlap / mkernel)", "2-stream overlap ms by chunk count S",
           "mkernel vs best baseline per round (p10 / median / p90)"},
          {},
          ""};
  if (W < 2) {  // (any layout of two or more: 1xL, Nx1 and the hierarchical NxL)
    t.note = "skipped: needs >= 2 ranks (one rank: the diagnosis table instead)";
    bc.report->add(t);
    const TpBaselines one(c, false, bc.stream);
    rs_diagnosis_one_rank(bc, one);
    tp_timeline_one_rank(bc);
    return;
  }
  // Across nodes the baselines use mkernel's own standalone reduce-scatter on
  // the same transport (NCCL between emulated nodes would take NVLink).
  const bool net = topo.num_nodes > 1;
  if (28672 % (64 * W) || 1024 % (128 * W)) {
    t.note = "skipped: needs 28672 / W a multiple of 64 and M / W a multiple of 128 (W = 2, 4 or 8)";
    bc.report->add(t);
    return;
  }
  const TpBaselines base_env(c, net, bc.stream, bc.shared_gpu);
  const bool own = base_env.own;  // the baselines' collective: mkernel's (across nodes, or ranks sharing a GPU)
  const ncclComm_t nc = base_env.nc;
  cublasHandle_t h = base_env.h;
  cudaStream_t side = base_env.side;
  const cudaEvent_t *computed = base_env.computed, *reduced = base_env.reduced;

  const int64_t n = 8192, k = 28672 / W;
  std::vector<int64_t> ms = {1024, 2048, 4096, 8192, 16384};
  if (bc.quick) ms = {4096};
  for (int64_t m : ms) {
    const int64_t R = m / W;  // rows per owner
    // The overlap's chunk counts S: R / S rows per owner in a chunk (overlap_chunk_counts: multiples of 128 where
    // it can).
    const std::vector<int> counts = overlap_chunk_counts(R, 1);
    const size_t out_bytes = size_t(R) * n * 2;
    mk::GemmRs plan(c, m, n, k), plan32(c, m, n, k, {32, 0}), base(c, m, n, k);
    // The baselines' reduce-scatter: NCCL inside a node, else mkernel's own
    // (plans of their own: the fused plans' calls stay in their order), for
    // all rows and for one chunk of each chunk count (chunk > 0: its rows
    // per owner).
    std::vector<std::unique_ptr<mk::GemmRs>> base_chunk(kMaxChunks + 1);
    if (own)
      for (int s : counts) base_chunk[s] = std::make_unique<mk::GemmRs>(c, W * (R / s), n, k);
    auto rs = [&](const void* in, void* o, int64_t chunk, int s, cudaStream_t st) {
      if (own)
        (chunk ? *base_chunk[s] : base).reduce_scatter(in, o, st);
      else
        MKB_NCCL(ncclReduceScatter(in, o, size_t(chunk ? chunk : R) * n, ncclBfloat16, ncclSum, nc, st));
    };
    Rotating a(size_t(m) * k * 2), b(size_t(n) * k * 2), x(size_t(m) * n * 2);
    fill_rotating(a, size_t(m) * k, 700, c.rank(), bc.stream);
    fill_rotating(b, size_t(n) * k, 800, c.rank(), bc.stream);
    fill_rotating(x, size_t(m) * n, 900, c.rank(), bc.stream);
    DevBuf partial(size_t(m) * n * 2), out(out_bytes), ref(out_bytes), got(out_bytes);
    const int64_t C_max = R / counts.front();  // the largest chunk (the fewest chunks)
    DevBuf chunk0(size_t(W) * C_max * n * 2), chunk1(size_t(W) * C_max * n * 2);
    void* chunk[2] = {chunk0.p, chunk1.p};

    // The checks' reference: serial's GEMM, then a collective independent of mkernel's (ref_collective.hpp).
    RefCollective refc(c, base_env.ref_nc());
    auto reference = [&](const void* A, const void* B, void* o) {
      gemm_bf16_tn(h, int(m), int(n), int(k), A, B, partial.p, bc.stream);
      refc.reduce_scatter(partial.p, o, size_t(R) * n, bc.stream);
    };
    auto serial = [&](const void* A, const void* B, void* o) {
      gemm_bf16_tn(h, int(m), int(n), int(k), A, B, partial.p, bc.stream);
      rs(partial.p, o, 0, 0, bc.stream);
    };
    // S chunks of C = R / S rows per owner. Chunk j: rows [d R + j C,
    // d R + (j + 1) C) of every owner d in one batched GEMM into
    // chunk[j % 2] ([W][C x n]), then on the side stream
    // its reduce-scatter into out rows [j C, (j + 1) C) while chunk j + 1
    // computes. chunk[j % 2] is rewritten only after chunk j - 2's
    // reduce-scatter read it; the side stream joins back at the end.
    auto overlap = [&](int S, const void* A, const void* B, void* o) {
      const int64_t C = R / S;
      for (int j = 0; j < S; ++j) {
        if (j >= 2) MKB_CUDA(cudaStreamWaitEvent(bc.stream, reduced[j - 2]));
        gemm_bf16_tn_owners(h, W, int(C), int(n), int(k), R, static_cast<const char*>(A) + size_t(j) * C * k * 2, B,
                            chunk[j % 2], bc.stream);
        MKB_CUDA(cudaEventRecord(computed[j], bc.stream));
        MKB_CUDA(cudaStreamWaitEvent(side, computed[j]));
        rs(chunk[j % 2], static_cast<char*>(o) + size_t(j) * C * n * 2, C, S, side);
        MKB_CUDA(cudaEventRecord(reduced[j], side));
      }
      MKB_CUDA(cudaStreamWaitEvent(bc.stream, reduced[S - 1]));
    };

    // Checks (outside timing): outputs poisoned (bf16 NaN) first, then compared with the reference on the same
    // inputs (serial's GEMM and a collective independent of mkernel's: NCCL, or the host where ranks share a GPU).
    const std::string at = " at M=" + std::to_string(m);
    // Every batched cuBLAS shape once before any kernel can wait on the network (a module load waits for running
    // kernels, the emu proxy's copy behind it: the 2x1 hang of 2026-11-30, see ag_gemm_bench.cu).
    for (int s : counts)
      gemm_bf16_tn_owners(h, W, int(R / s), int(n), int(k), R, a.get(0), b.get(0), chunk0.p, bc.stream);
    MKB_CUDA(cudaStreamSynchronize(bc.stream));
    MKB_CUDA(cudaMemsetAsync(ref.p, 0xff, out_bytes, bc.stream));
    reference(a.get(0), b.get(0), ref.p);
    MKB_CUDA(cudaMemsetAsync(got.p, 0xff, out_bytes, bc.stream));
    serial(a.get(0), b.get(0), got.p);  // the serial baseline itself (its collective may be mkernel's)
    check_vs(c.bootstrap(), "gemm_rs", "serial" + at, got.p, ref.p, R, n, bc.stream);
    for (int s : counts) {  // every chunk count at every M
      MKB_CUDA(cudaMemsetAsync(got.p, 0xff, out_bytes, bc.stream));
      overlap(s, a.get(0), b.get(0), got.p);
      check_vs(c.bootstrap(), "gemm_rs", "2-stream chunked overlap, S=" + std::to_string(s) + at, got.p, ref.p, R, n,
               bc.stream);
    }
    // Both plans against the reference on copy 0 of the inputs; `when` names the check (before the timing, or
    // after it on fresh data: a call that reused an earlier call's state would pass the first and fail the second).
    double err = 0;
    auto check_plans = [&](const std::string& when) {
      for (mk::GemmRs* p : {&plan, &plan32}) {
        MKB_CUDA(cudaMemsetAsync(got.p, 0xff, out_bytes, bc.stream));
        p->run(a.get(0), b.get(0), got.p, bc.stream);
        err = std::max(err, check_vs(c.bootstrap(), "gemm_rs", (p == &plan ? "mkernel" : "mkernel (second plan)") +
                                                                   at + when, got.p, ref.p, R, n, bc.stream));
      }
    };
    check_plans("");

    // Call cl of round i takes the next copy of each rotating input (copy
    // 100 + 10 i + cl), so no call finds its inputs in L2 from the one before.
    auto A = [&](int i, int cl) { return a.get(100 + 10 * i + cl); };
    auto B = [&](int i, int cl) { return b.get(100 + 10 * i + cl); };
    auto X = [&](int i, int cl) { return x.get(100 + 10 * i + cl); };
    std::vector<std::function<void(int)>> calls = {
        [&](int i) { gemm_bf16_tn(h, int(m), int(n), int(k), A(i, 0), B(i, 0), partial.p, bc.stream); },  // 0
        [&](int i) { rs(X(i, 1), out.p, 0, 0, bc.stream); },  // 1 NCCL (own: mk) RS alone
        [&](int i) { plan.reduce_scatter(X(i, 2), out.p, bc.stream); },  // 2 mk RS alone
        [&](int i) { serial(A(i, 3), B(i, 3), out.p); },                 // 3 serial
        [&](int i) { overlap(counts[0], A(i, 4), B(i, 4), out.p); },     // 4 2-stream chunked overlap
        [&](int i) { plan.run(A(i, 5), B(i, 5), out.p, bc.stream); },    // 5 mkernel
        [&](int i) { plan32.reduce_scatter(X(i, 6), out.p, bc.stream); },  // 6 mk RS alone, 32 reduce CTAs
    };
    for (size_t v = 1; v < counts.size(); ++v)  // 7.. the overlap at the other chunk counts
      calls.push_back([&, v](int i) { overlap(counts[v], A(i, 6 + int(v)), B(i, 6 + int(v)), out.p); });
    auto st = time_interleaved(&c.bootstrap(), bc.stream, bc.opts, calls, base_env.barrier());
    fill_random_bf16(a.get(0), size_t(m) * k, 50000 + 13 * c.rank(), bc.stream);  // data no call has seen
    MKB_CUDA(cudaMemsetAsync(ref.p, 0xff, out_bytes, bc.stream));
    reference(a.get(0), b.get(0), ref.p);
    check_plans(", after the timing");
    const OverlapSweep sweep = best_overlap(st, chunk_variants(counts, 7));
    const mk::tp::LinkBytes sent = mk::tp::rs_bytes_per_gpu(topo.num_nodes, topo.local_size, m, n);
    std::vector<std::string> row =
        tp_row(m, st, std::min({st[1].median_ms, st[2].median_ms, st[6].median_ms}), sent,
               checked_network_bytes(c, bc.stream, calls[5], "gemm_rs", m, sent.network,
                                     (m / c.world()) % 128 == 0 && n % 256 == 0));
    row[4] = sweep.cell;
    row.push_back(std::to_string(plan.num_compute_ctas()) +
                  (plan.split_tiles() ? " (" + std::to_string(plan.split_tiles()) + " own tiles in " +
                                            std::to_string(plan.split_parts()) + " parts)"
                                      : "") +
                  "; 16 + " + std::to_string(plan.num_reduce_ctas()));
    row.push_back("checked (" + fmt(err, 4) + ")");
    row.push_back(tflops_cell(m, n, k, st));  // (each GPU: m x n over its k)
    row.push_back(sweep.sweep);
    row.push_back(paired_vs_best_cell(st));
    t.rows.push_back(row);
  }
  t.clocks = take_clock_line();  // (before the diagnosis's timing: its table is added first)
  if (bc.quick) {
    // Diagnosis (--quick): the fused kernel's tile walk (swizzle groups
    // inside a share) at a small and a large M, against the GEMM alone.
    Table d{"GEMM+RS diagnosis: tile walk", {"M", "variant", "ms"}, {}, ""};
    for (int64_t m : {int64_t(1024), int64_t(4096)}) {
      const int64_t blocks = m / W / 128;
      std::vector<int> sws;
      for (int sw : {1, 2, 4, 8})
        if (blocks % sw == 0) sws.push_back(sw);
      Rotating a(size_t(m) * k * 2), b(size_t(n) * k * 2);
      fill_rotating(a, size_t(m) * k, 700, c.rank(), bc.stream);
      fill_rotating(b, size_t(n) * k, 800, c.rank(), bc.stream);
      DevBuf partial(size_t(m) * n * 2), out(size_t(m / W) * n * 2);
      std::vector<std::unique_ptr<mk::GemmRs>> plans;
      plans.push_back(std::make_unique<mk::GemmRs>(c, m, n, k));
      for (int sw : sws) plans.push_back(std::make_unique<mk::GemmRs>(c, m, n, k, mk::GemmRsOptions{.swizzle = sw}));
      plans.push_back(std::make_unique<mk::GemmRs>(c, m, n, k, mk::GemmRsOptions{.async_store = 0}));
      plans.push_back(std::make_unique<mk::GemmRs>(c, m, n, k, mk::GemmRsOptions{.own_tma_store = 0}));
      gemm_bf16_tn(h, int(m), int(n), int(k), a.get(0), b.get(0), partial.p, bc.stream);
      MKB_CUDA(cudaStreamSynchronize(bc.stream));
      std::vector<std::function<void(int)>> calls = {
          [&](int i) {
            gemm_bf16_tn(h, int(m), int(n), int(k), a.get(100 + i), b.get(100 + i), partial.p, bc.stream);
          }};
      for (auto& p : plans)
        calls.push_back([&, pp = p.get()](int i) { pp->run(a.get(100 + i), b.get(100 + i), out.p, bc.stream); });
      // The same GEMM without communication: the engine alone (mk::gemm_bf16), every SM, row-major output.
      calls.push_back([&](int i) {
        mk::gemm_bf16(mk::GemmArgs{.a = a.get(100 + i), .b = b.get(100 + i), .out = partial.p, .m = m, .n = n, .k = k},
                      bc.stream);
      });
      auto st = time_interleaved(&c.bootstrap(), bc.stream, bc.opts, calls, base_env.barrier());
      d.rows.push_back({std::to_string(m), "cuBLAS alone", fmt(st[0].median_ms)});
      d.rows.push_back({std::to_string(m), "fused (heuristic: swizzle " + std::to_string(plans[0]->swizzle()) + ")",
                        fmt(st[1].median_ms)});
      for (size_t v = 0; v < sws.size(); ++v)
        d.rows.push_back({std::to_string(m), "fused, swizzle " + std::to_string(sws[v]), fmt(st[2 + v].median_ms)});
      const size_t nv = sws.size();
      d.rows.push_back({std::to_string(m), "fused, plain stores (async_store 0)", fmt(st[2 + nv].median_ms)});
      d.rows.push_back(
          {std::to_string(m), "fused, own rows by plain stores (own_tma_store 0)", fmt(st[3 + nv].median_ms)});
      d.rows.push_back({std::to_string(m), "mk GEMM alone (no communication)", fmt(st[4 + nv].median_ms)});
    }
    bc.report->add(d);
  }
  t.note =
      "Calls interleaved (one of each per round), each after an untimed 1-element NCCL all-reduce that lines the "
      "ranks up (no call absorbs the other rank's lag from the call before), each call's slowest rank, then the "
      "median; a, b and the "
      "RS input rotate through >= 256 MiB, a different copy per call. cuBLAS alone = this rank's full [M x 8192] "
      "partial GEMM. RS alone = reduce-scatter of an [M x 8192] bf16 input: NCCL / the plan's reduce_scatter. "
      "serial = cuBLAS, then NCCL reduce-scatter. 2-stream chunked overlap = each owner's M/W rows cut into S "
      "chunks; per chunk one strided-batched cuBLAS call over the W owners into a double-buffered [W][M/(S W) x "
      "8192] buffer, whose NCCL reduce-scatter runs on a side stream while the next chunk computes; S swept over "
      "{2, 4, 8} (chunks of a multiple of 128 rows per owner where M allows), each S timed in the same rounds, "
      "the fastest quoted "
      "with its S (every S's median in the last column). mkernel vs best "
      "baseline = min(serial, overlap) / mkernel. eta = max(cuBLAS alone, fastest RS alone) / mkernel. MB sent per "
      "GPU (N nodes x L GPUs, mkernel's bf16 partial rows): NVLink (L-1)/L x M x 8192 x 2 B, network (N-1)/(N L) x "
      "M x 8192 x 2 B (tp::rs_bytes_per_gpu: reduced inside the node first). Across nodes the network figure is "
      "followed by the bytes the host proxy took during one more mkernel call (measured: mk::Network::bytes_put), "
      "which must equal it on every rank (else the run fails). CTAs: run() computes on every SM (no Reduce CTAs: "
      "each owner adds the other ranks' "
      "tiles in its epilogue); the standalone reduce-scatter runs on 16 + 16 (or 32) CTAs, each taking push and "
      "reduce items in one order. check: outside timing, serial's and both mkernel plans' output vs a reference "
      "(serial's GEMM, then NCCL's reduce-scatter, or the host's where ranks share a GPU: never mkernel's own), on "
      "the same inputs, every element within 0.02 |ref| + 0.02 rms(ref) (else the run fails), again after the "
      "timing on fresh random data; the chunked overlap is checked "
      "the same way, every S at every M. "
      "Across nodes (2x1 "
      "emulated) the RS baselines are mkernel's standalone reduce-scatter on the same transport, not NCCL (which "
      "would use NVLink between the emulated nodes): 'RS alone' shows it twice. PyTorch's "
      "fused_matmul_reduce_scatter is measured by bench/torch_tp_bench.py.";
  t.note += kPairedNote;
  if (bc.shared_gpu) t.note = kSharedGpuNote + t.note;
  bc.report->add(t);
}

}  // namespace mkb
