// AllGather + GEMM (1 node, or 2x1 emulated nodes): mkernel's fused kernel against serial NCCL +
// cuBLAS, a two-stream overlap a user could write, and the parts alone, all
// interleaved call by call in one run (MEASURING.md). Widths: hidden 8192,
// FFN 28672 over W ranks (this rank's B: [28672 / W x 8192]).
#include <cublas_v2.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/baselines/cublas_util.hpp"
#include "bench/baselines/nccl_util.hpp"
#include "bench/bench.hpp"
#include "bench/micro/tp_bench.hpp"
#include "bench/micro/tp_row.hpp"
#include "mkernel/gemm.hpp"
#include "mkernel/tp.hpp"
#include "src/ops/ag_gemm/tp_plan.hpp"

namespace mkb {

// out rows of w owners from a gathered chunk: batch d computes `rows` rows of a + d * rows * k (the chunk's
// [w][rows x k], contiguous) times b^T into c + d * c_owner_rows * n (owner d's rows of out, at the chunk's
// offset); gemm_bf16_tn's row-major trick, b shared (stride 0).
void gemm_bf16_tn_gathered(cublasHandle_t h, int w, int rows, int n, int k, const void* a, const void* b, void* c,
                           int64_t c_owner_rows, cudaStream_t s) {
  const float alpha = 1.f, beta = 0.f;
  MKB_CUBLAS(cublasSetStream(h, s));
  MKB_CUBLAS(cublasGemmStridedBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, rows, k, &alpha, b, CUDA_R_16BF, k, 0, a,
                                        CUDA_R_16BF, k, int64_t(rows) * k, &beta, c, CUDA_R_16BF, n,
                                        c_owner_rows * n, w, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// Diagnosis: the fused kernel's tile walk and pushing CTAs, and the GEMM
// alone (cuBLAS; the engine on every SM and on the fused plan's compute
// CTAs with its walk), at M in `ms` (all rows: W m_local), n columns.
void ag_diagnosis(BenchContext& bc, cublasHandle_t h, const NcclBarrier& bar, std::initializer_list<int64_t> ms,
                  int64_t n, const std::string& title) {
  auto& c = *bc.comm;
  const int W = c.world();
  const int64_t k = 8192;
  Table d{title, {"M", "variant", "ms"}, {}, ""};
  for (int64_t m : ms) {
    const int64_t ml = m / W;
    Rotating a(size_t(ml) * k * 2);
    void *b = nullptr, *full = nullptr, *out = nullptr;
    MKB_CUDA(cudaMalloc(&b, size_t(n) * k * 2));
    MKB_CUDA(cudaMalloc(&full, size_t(m) * k * 2));
    MKB_CUDA(cudaMalloc(&out, size_t(m) * n * 2));
    fill_random_bf16(b, size_t(n) * k, 500, bc.stream);
    fill_random_bf16(full, size_t(m) * k, 600, bc.stream);
    fill_rotating(a, size_t(ml) * k, 400, 0, bc.stream);
    // The GEMMs alone read a rotating gathered A too (the fused calls' A is their shard's next copy): none finds
    // its input in L2 from the call before.
    Rotating fulls(size_t(m) * k * 2);
    fill_rotating(fulls, size_t(m) * k, 700, 0, bc.stream);
    mk::AgGemm p(c, ml, n, k), p8(c, ml, n, k, {.swizzle = 8}), p16(c, ml, n, k, {.num_comm_ctas = 16}),
        pw(c, ml, n, k, {.split_tail = false}), pj(c, ml, n, k, {.join = false}),
        p2(c, ml, n, k, {.max_split_parts = 2}), p1(c, ml, n, k, {.num_comm_ctas = 1});
    gemm_bf16_tn(h, int(m), int(n), int(k), full, b, out, bc.stream);
    MKB_CUDA(cudaStreamSynchronize(bc.stream));
    auto engine = [&](int ctas, int sw) {
      return [&, ctas, sw](int i) {
        mk::gemm_bf16(mk::GemmArgs{.a = fulls.get(i + 100), .b = b, .out = out, .m = m, .n = n, .k = k,
                                   .num_compute_ctas = ctas, .swizzle = sw},
                      bc.stream);
      };
    };
    auto st = time_interleaved(&c.bootstrap(), bc.stream, bc.opts,
                               {[&](int i) { p.run(a.get(i + 100), b, out, bc.stream); },
                                [&](int i) { p8.run(a.get(i + 100), b, out, bc.stream); },
                                [&](int i) { p16.run(a.get(i + 100), b, out, bc.stream); },
                                [&](int i) {
                                  gemm_bf16_tn(h, int(m), int(n), int(k), fulls.get(i + 100), b, out, bc.stream);
                                },
                                engine(0, 0), engine(p.num_compute_ctas(), p.swizzle()),
                                [&](int i) { p16.all_gather(a.get(i + 100), full, bc.stream); },
                                [&](int i) { pw.run(a.get(i + 100), b, out, bc.stream); },
                                [&](int i) { pj.run(a.get(i + 100), b, out, bc.stream); },
                                [&](int i) { p2.run(a.get(i + 100), b, out, bc.stream); },
                                [&](int i) { p1.run(a.get(i + 100), b, out, bc.stream); }},
                               std::cref(bar));
    const std::string sw = std::to_string(p.swizzle()), cc = std::to_string(p.num_compute_ctas());
    const std::string names[] = {"fused (heuristic: swizzle " + sw + ", " + std::to_string(p.num_comm_ctas()) +
                                     " comm CTAs, " + std::to_string(p.split_tiles()) + " split tiles in " +
                                     std::to_string(p.split_parts()) + " parts)",
                                 "fused, swizzle 8",
                                 "fused, 16 comm CTAs",
                                 "cuBLAS alone",
                                 "mk GEMM alone, every SM, swizzle 8",
                                 "mk GEMM alone, " + cc + " CTAs, swizzle " + sw,
                                 "mk all-gather alone, 16 CTAs",
                                 "fused, no split tiles",
                                 "fused, comm CTAs do not join compute",
                                 "fused, split tiles in halves only (" + std::to_string(p2.split_tiles()) + ")",
                                 "fused, 1 comm CTA (" + std::to_string(p1.split_tiles()) + " split tiles in " +
                                     std::to_string(p1.split_parts()) + " parts)"};
    for (int v = 0; v < 11; ++v) d.rows.push_back({std::to_string(m), names[v], fmt(st[v].median_ms)});
    cudaFree(b);
    cudaFree(full);
    cudaFree(out);
  }
  bc.report->add(d);
}

void bench_ag_gemm(BenchContext& bc) {
  auto& c = *bc.comm;
  const int W = c.world();
  const auto& topo = c.topology();
  Table t{"AllGather + GEMM, bf16, hidden 8192, FFN 28672 / W per rank",
          {"M", "cuBLAS alone ms", "AG alone ms (NCCL / mk)", "serial ms", "2-stream overlap ms", "mkernel ms",
           "mkernel vs best baseline", "eta", "mkernel, 16 comm CTAs ms",
           "MB sent per GPU (NVLink / network; measured network)", "roles comm/compute",
           "check vs reference (max |d| / rms)", "TFLOP/s per GPU (serial / overlap / mkernel)",
           "2-stream overlap ms by variant",
           "mkernel vs best baseline per round (p10 / median / p90)"},
          {},
          ""};
  if (W < 2) {  // one rank: the plan's machinery without communication, at the 1x2 per-rank shape
    t.note = "skipped: needs >= 2 ranks (one rank: the diagnosis table instead)";
    bc.report->add(t);
    ncclComm_t one = make_nccl_comm(c);
    const NcclBarrier bar1(one, bc.stream);
    cublasHandle_t h1;
    if (cublasCreate(&h1) != CUBLAS_STATUS_SUCCESS) mk::fail("cublasCreate failed");
    ag_diagnosis(bc, h1, bar1, {1024, 2048, 4096, 8192}, 28672 / 2,
                 "AG+GEMM on one rank (no communication: every row is local), the 1x2 per-rank shape n = 28672 / 2: "
                 "the plan's walk, split tiles and joining CTAs against the GEMM alone");
    cublasDestroy(h1);
    ncclCommDestroy(one);
    return;
  }
  // The shapes need n = 28672 / W a multiple of 64 and every M / W a multiple of 128 (as the RS and AR tables).
  if (28672 % (64 * W) || 1024 % (128 * W)) {
    t.note = "skipped: needs 28672 / W a multiple of 64 and M / W a multiple of 128 (W = 2, 4 or 8)";
    bc.report->add(t);
    return;
  }
  // Across nodes the baselines use mkernel's own standalone all-gather on
  // the same transport (NCCL between emulated nodes would take NVLink).
  // Ranks sharing a GPU (a correctness run: NCCL refuses them) take mkernel's
  // all-gather too, and a host barrier.
  const bool own = topo.num_nodes > 1 || bc.shared_gpu;
  ncclComm_t nc = own ? nullptr : make_nccl_comm(c);
  // Every timed call starts after an untimed device barrier (NCCL over
  // NVLink also between emulated nodes: it only lines the ranks up).
  ncclComm_t bar_nc = make_nccl_comm_unless_shared(c, bc.shared_gpu);
  const std::unique_ptr<NcclBarrier> bar_own = bc.shared_gpu ? std::make_unique<NcclBarrier>(&c.bootstrap(), bc.stream)
                                                             : std::make_unique<NcclBarrier>(bar_nc, bc.stream);
  const NcclBarrier& bar = *bar_own;
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) mk::fail("cublasCreate failed");
  cudaStream_t side;
  MKB_CUDA(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  cudaEvent_t fork, join;
  MKB_CUDA(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  MKB_CUDA(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  cudaEvent_t gathered_ev[kMaxChunks], used_ev[kMaxChunks];  // the chunked overlap's
  for (int j = 0; j < kMaxChunks; ++j) {
    MKB_CUDA(cudaEventCreateWithFlags(&gathered_ev[j], cudaEventDisableTiming));
    MKB_CUDA(cudaEventCreateWithFlags(&used_ev[j], cudaEventDisableTiming));
  }

  const int64_t n = 28672 / W, k = 8192;
  std::vector<int64_t> ms = {1024, 2048, 4096, 8192, 16384};
  if (bc.quick) ms = {4096};
  for (int64_t m : ms) {
    const int64_t ml = m / W;
    mk::AgGemm plan(c, ml, n, k), plan16(c, ml, n, k, {16, 0}), base(c, ml, n, k);
    // The chunked two-stream overlap (issue [tp-ag-rs]'s "two-stream chunked overlap"): S row chunks of every
    // rank's shard, S swept (overlap_chunk_counts: chunks of 128 rows where it can); the side stream all-gathers
    // chunk j into a double buffer ([W][C x k]) while the compute stream multiplies chunk j - 1 (all W owners'
    // rows in one batched GEMM into their rows of out). Across nodes each S's chunk all-gather is a plan of its
    // own on the transport.
    const std::vector<int> counts = overlap_chunk_counts(ml, 1);
    std::vector<std::unique_ptr<mk::AgGemm>> base_chunk(kMaxChunks + 1);
    if (own)
      for (int s : counts) base_chunk[s] = std::make_unique<mk::AgGemm>(c, ml / s, n, k);
    const int64_t C_max = ml / counts.front();
    DevBuf gch0(size_t(W) * C_max * k * 2), gch1(size_t(W) * C_max * k * 2);
    void* gch[2] = {gch0.p, gch1.p};
    MKB_CUDA(cudaMemsetAsync(gch0.p, 0, size_t(W) * C_max * k * 2, bc.stream));  // (the preload's input)
    Rotating a(size_t(ml) * k * 2);
    fill_rotating(a, size_t(ml) * k, 400, c.rank(), bc.stream);
    void *b = nullptr, *full = nullptr, *out = nullptr;
    MKB_CUDA(cudaMalloc(&b, size_t(n) * k * 2));
    MKB_CUDA(cudaMalloc(&full, size_t(m) * k * 2));
    MKB_CUDA(cudaMalloc(&out, size_t(m) * n * 2));
    fill_random_bf16(b, size_t(n) * k, 500 + c.rank(), bc.stream);
    fill_random_bf16(full, size_t(m) * k, 600, bc.stream);
    // cuBLAS alone reads its own rotating gathered A (as every other call reads its shard's next copy): `full`, which
    // the serial call has just gathered into, could sit in L2 at M <= 2048 and flatter it (session 48's review).
    Rotating fulls(size_t(m) * k * 2);
    fill_rotating(fulls, size_t(m) * k, 700, c.rank(), bc.stream);
    const int me = c.rank();
    // The baselines' all-gather: NCCL inside a node, else mkernel's own
    // (a plan of its own, so the fused plans' calls stay in their order).
    // Each call of a round reads its own A shard (100 + 10 i + call, as the GEMM+RS and GEMM+AR benches do):
    // no call finds its input in L2 from the one before it (session 38: all calls of a round read one).
    auto A = [&](int i, int cl) { return a.get(100 + 10 * i + cl); };
    auto gather_full = [&](const void* src, cudaStream_t st) {  // the baselines' all-gather of a shard into full
      if (own)
        base.all_gather(src, full, st);
      else
        MKB_NCCL(ncclAllGather(src, full, size_t(ml) * k, ncclBfloat16, nc, st));
    };
    auto nccl_ag = [&](int i, int cl, cudaStream_t st) { gather_full(A(i, cl), st); };
    // Two streams, local rows first: this rank's rows while the gather runs on the side stream, then the rest.
    auto local_first = [&](const void* A_local, void* o) {
      MKB_CUDA(cudaEventRecord(fork, bc.stream));
      MKB_CUDA(cudaStreamWaitEvent(side, fork));
      gather_full(A_local, side);
      MKB_CUDA(cudaEventRecord(join, side));
      gemm_bf16_tn(h, int(ml), int(n), int(k), A_local, b, static_cast<char*>(o) + size_t(me) * ml * n * 2,
                   bc.stream);
      MKB_CUDA(cudaStreamWaitEvent(bc.stream, join));
      for (int r = 0; r < W; ++r)
        if (r != me)
          gemm_bf16_tn(h, int(ml), int(n), int(k), static_cast<char*>(full) + size_t(r) * ml * k * 2, b,
                       static_cast<char*>(o) + size_t(r) * ml * n * 2, bc.stream);
    };
    // Every cuBLAS shape once, before any kernel can wait on the network:
    // cuBLAS loads a kernel the first time it meets a shape (whatever
    // CUDA_MODULE_LOADING says), the load waits for the kernels running on
    // this GPU, and the emu proxy's copy call then blocks behind it while the
    // running all-gather waits for that copy (the 2x1 hang of 2026-11-30:
    // bench/results/mkbench-20261130T1218Z-2x1-ag-hang-proxy-in-copy-call.log).
    gemm_bf16_tn(h, int(m), int(n), int(k), full, b, out, bc.stream);
    gemm_bf16_tn(h, int(ml), int(n), int(k), a.get(0), b, out, bc.stream);
    for (int s : counts) gemm_bf16_tn_gathered(h, W, int(ml / s), int(n), int(k), gch[0], b, out, ml, bc.stream);
    MKB_CUDA(cudaStreamSynchronize(bc.stream));
    auto chunked = [&](int S, const void* A_local, void* o) {
      const int64_t C = ml / S;
      MKB_CUDA(cudaEventRecord(fork, bc.stream));  // (after the stream's earlier work: the last call read gch)
      MKB_CUDA(cudaStreamWaitEvent(side, fork));
      for (int j = 0; j < S; ++j) {
        if (j >= 2) MKB_CUDA(cudaStreamWaitEvent(side, used_ev[j - 2]));  // gch[j % 2] read by chunk j - 2
        const void* src = static_cast<const char*>(A_local) + size_t(j) * C * k * 2;
        if (own)
          base_chunk[S]->all_gather(src, gch[j % 2], side);
        else
          MKB_NCCL(ncclAllGather(src, gch[j % 2], size_t(C) * k, ncclBfloat16, nc, side));
        MKB_CUDA(cudaEventRecord(gathered_ev[j], side));
        MKB_CUDA(cudaStreamWaitEvent(bc.stream, gathered_ev[j]));
        gemm_bf16_tn_gathered(h, W, int(C), int(n), int(k), gch[j % 2], b,
                              static_cast<char*>(o) + size_t(j) * C * n * 2, ml, bc.stream);
        MKB_CUDA(cudaEventRecord(used_ev[j], bc.stream));
      }
    };
    // Serial's, both plans' and the overlaps' outputs (poisoned first: 0xffff is a bf16 NaN) against a reference on
    // the same inputs, before the timing, as the GEMM+RS and GEMM+AR benches check theirs (check_vs: a miss fails
    // every rank).
    double err = 0;
    DevBuf ref(size_t(m) * n * 2), got(size_t(m) * n * 2);
    const std::string at = " at M=" + std::to_string(m);
    // Both plans against the reference on input a.get(0); `when` names the check (before the timing, or after it
    // on fresh data: a call that reused an earlier call's state would pass the first and fail the second).
    // The reference: a gather independent of mkernel's (ref_collective.hpp: NCCL, or the host where ranks share a
    // GPU), then serial's GEMM.
    RefCollective refc(c, nc ? nc : bar_nc);
    auto check_plans = [&](const std::string& when) {
      refc.all_gather(a.get(0), full, size_t(ml) * k, bc.stream);
      gemm_bf16_tn(h, int(m), int(n), int(k), full, b, ref.p, bc.stream);
      for (mk::AgGemm* p : {&plan, &plan16}) {
        MKB_CUDA(cudaMemsetAsync(got.p, 0xff, size_t(m) * n * 2, bc.stream));
        p->run(a.get(0), b, got.p, bc.stream);
        err = std::max(err, check_vs(c.bootstrap(), "ag_gemm",
                                     (p == &plan ? "mkernel" : "mkernel, 16 comm CTAs") + at + when, got.p, ref.p,
                                     m, n, bc.stream));
      }
    };
    check_plans("");
    {
      MKB_CUDA(cudaMemsetAsync(got.p, 0xff, size_t(m) * n * 2, bc.stream));
      gather_full(a.get(0), bc.stream);  // the serial baseline itself (its gather may be mkernel's)
      gemm_bf16_tn(h, int(m), int(n), int(k), full, b, got.p, bc.stream);
      check_vs(c.bootstrap(), "ag_gemm", "serial" + at, got.p, ref.p, m, n, bc.stream);
      // The overlaps too (their errors are the baselines': not in err): local rows first, the chunked one at every S.
      MKB_CUDA(cudaMemsetAsync(got.p, 0xff, size_t(m) * n * 2, bc.stream));
      local_first(a.get(0), got.p);
      check_vs(c.bootstrap(), "ag_gemm", "2-stream overlap, local rows first" + at, got.p, ref.p, m, n, bc.stream);
      for (int s : counts) {
        MKB_CUDA(cudaMemsetAsync(got.p, 0xff, size_t(m) * n * 2, bc.stream));
        chunked(s, a.get(0), got.p);
        check_vs(c.bootstrap(), "ag_gemm", "2-stream chunked overlap, S=" + std::to_string(s) + at, got.p, ref.p, m,
                 n, bc.stream);
      }
    }
    std::vector<std::function<void(int)>> calls = {
        [&](int i) { gemm_bf16_tn(h, int(m), int(n), int(k), fulls.get(100 + i), b, out, bc.stream); },  // 0 alone
        [&](int i) { nccl_ag(i, 1, bc.stream); },                                           // 1 NCCL (own: mk) AG alone
        [&](int i) { plan.all_gather(A(i, 2), full, bc.stream); },                          // 2 mk AG alone
        [&](int i) {                                                                        // 3 serial
          nccl_ag(i, 3, bc.stream);
          gemm_bf16_tn(h, int(m), int(n), int(k), full, b, out, bc.stream);
        },
        [&](int i) { local_first(A(i, 4), out); },  // 4 two streams: local rows while the gather runs, then the rest
        [&](int i) { plan.run(A(i, 5), b, out, bc.stream); },    // 5 mkernel
        [&](int i) { plan16.run(A(i, 6), b, out, bc.stream); },  // 6 mkernel, more pushing CTAs
    };
    std::vector<std::pair<std::string, size_t>> variants = {{"local rows first", 4}};
    for (int s : counts) {  // 7.. the chunked overlap at each chunk count
      variants.push_back({"S=" + std::to_string(s), calls.size()});
      calls.push_back([&, s, cl = int(calls.size())](int i) { chunked(s, A(i, cl), out); });
    }
    auto st = time_interleaved(&c.bootstrap(), bc.stream, bc.opts, calls, std::cref(bar));
    fill_random_bf16(a.get(0), size_t(ml) * k, 50000 + 13 * c.rank(), bc.stream);  // data no call has seen
    check_plans(", after the timing");
    const OverlapSweep sweep = best_overlap(st, variants);
    // Rows this GPU sends (tp::ag_bytes_per_gpu: NVLink / network).
    const mk::tp::LinkBytes sent = mk::tp::ag_bytes_per_gpu(topo.num_nodes, topo.local_size, ml, k);
    std::vector<std::string> row =
        tp_row(m, st, std::min(st[1].median_ms, st[2].median_ms), sent,
               checked_network_bytes(c, bc.stream, calls[5], "ag_gemm", m, sent.network));
    row[4] = sweep.cell;
    row.push_back(std::to_string(plan.num_comm_ctas()) + "/" + std::to_string(plan.num_compute_ctas()));
    row.push_back("checked (" + fmt(err, 4) + ")");
    row.push_back(tflops_cell(m, n, k, st));  // (each GPU: all m rows by its n columns)
    row.push_back(sweep.sweep);
    row.push_back(paired_vs_best_cell(st));
    t.rows.push_back(row);
    cudaFree(b);
    cudaFree(full);
    cudaFree(out);
  }
  t.clocks = take_clock_line();  // (before the diagnosis's timing: its table is added first)
  if (bc.quick)  // (across nodes too: its one cuBLAS shape runs before any fused call)
    ag_diagnosis(bc, h, bar, {1024, 4096}, n, "AG+GEMM diagnosis");
  t.note =
      "Calls interleaved (one of each per round), each after an untimed 1-element NCCL all-reduce that lines the "
      "ranks up (no call absorbs the other rank's lag from the call before), each call's slowest rank, then the "
      "median. Before the timing serial's, both plans' and every overlap's outputs (poisoned first) are checked "
      "against a reference on the same inputs (a gather independent of mkernel's: NCCL, or the host where ranks "
      "share a GPU; then serial's GEMM), every element within 0.02 |ref| + 0.02 rms(ref) (else the run fails); "
      "after it both plans are checked again on fresh random data. "
      "cuBLAS alone reads a rotating [M x 8192] A (>= 256 MiB of copies), as every call reads its shard's next copy. "
      "eta = max(cuBLAS alone, fastest AG alone) / mkernel. 2-stream overlap: the fastest of these, each timed in "
      "the same rounds (the last column has them all): local rows first (NCCL all-gather on a side stream while "
      "cuBLAS computes the local rows, then the remote rows), and a chunked pipeline of S chunks, S in {2, 4, 8} "
      "(chunks of a multiple of 128 rows of each shard where M allows: the side stream all-gathers chunk j of "
      "every shard into a "
      "double buffer while the compute stream multiplies chunk j - 1 of every rank in one batched GEMM). "
      "mk AG alone = the plan's all-gather (push kernel + a copy out of the symmetric "
      "buffer). Across nodes (2x1 emulated) the AG baselines are mkernel's standalone all-gather on the same "
      "transport, not NCCL (which would use NVLink between the emulated nodes): 'AG alone' shows it twice. "
      "PyTorch's fused_all_gather_matmul is measured by bench/torch_tp_bench.py. MB sent per GPU (N nodes x L "
      "GPUs): NVLink (L-1) N x M/W x 8192 x 2 B (own rows and the rows from other nodes, to each node peer), "
      "network (N-1) x M/W x 8192 x 2 B (own rows once per other node; tp::ag_bytes_per_gpu)."
      " Across nodes the network figure is followed by the bytes the host proxy took during one more "
      "mkernel call (measured: mk::Network::bytes_put), which must equal it on every rank (else the run fails).";
  t.note += kPairedNote;
  if (bc.shared_gpu) t.note = kSharedGpuNote + t.note;
  bc.report->add(t);
  cublasDestroy(h);
  if (nc) ncclCommDestroy(nc);
  if (bar_nc) ncclCommDestroy(bar_nc);
  cudaStreamDestroy(side);
  cudaEventDestroy(fork);
  cudaEventDestroy(join);
  for (int j = 0; j < kMaxChunks; ++j) {
    cudaEventDestroy(gathered_ev[j]);
    cudaEventDestroy(used_ev[j]);
  }
}

}  // namespace mkb
