// mkbench: what the fused tensor-parallel benchmarks with a reduction
// (gemm_rs, gemm_ar) share: device buffers, random fills of rotating inputs,
// the check of an output against the serial baseline, and the baselines'
// handles (NCCL communicators, the untimed barrier before each timed call,
// cuBLAS, the side stream and events of the chunked two-stream overlap).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/baselines/cublas_util.hpp"
#include "bench/baselines/nccl_util.hpp"
#include "bench/report.hpp"
#include "bench/micro/overlap_sweep.hpp"
#include "bench/micro/ref_collective.hpp"
#include "bench/timing.hpp"
#include "tests/test_env.hpp"

namespace mkb {

struct DevBuf {
  void* p = nullptr;
  explicit DevBuf(size_t bytes) { MKB_CUDA(cudaMalloc(&p, bytes)); }
  ~DevBuf() { cudaFree(p); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
};

// An environment variable for a scope (a knob read when a plan is made, e.g. MK_TP_SINGLE_RANK).
using ScopedEnv = mk::test::EnvGuard;

inline double bf16_value(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Every copy of `r` ([count] bf16) random, copy i from seed + i + 13 rank
// (different data on every rank and in every copy).
inline void fill_rotating(const Rotating& r, size_t count, uint64_t seed, int rank, cudaStream_t s) {
  for (int i = 0; i < r.copies(); ++i) fill_random_bf16(r.get(i), count, seed + i + 13 * rank, s);
}

// got vs ref ([rows x n] bf16 each, on the device, after `s`): every element
// within 0.02 |ref| + 0.02 rms(ref). A miss on any rank fails every rank
// (no rank is left waiting in a collective). With `identical`, got must also
// hold the same bits on every rank (an all-reduce's promise). Returns max
// |d| / rms(ref), max over ranks. `op` names the benchmark in messages.
inline double check_vs(mk::Bootstrap& bs, const char* op, const std::string& what, const void* got, const void* ref,
                       int64_t rows, int64_t n, cudaStream_t s, bool identical = false) {
  MKB_CUDA(cudaStreamSynchronize(s));
  const size_t count = size_t(rows) * n;
  std::vector<uint16_t> g(count), r(count);
  MKB_CUDA(cudaMemcpy(g.data(), got, count * 2, cudaMemcpyDeviceToHost));
  MKB_CUDA(cudaMemcpy(r.data(), ref, count * 2, cudaMemcpyDeviceToHost));
  double ss = 0;
  for (uint16_t v : r) ss += bf16_value(v) * bf16_value(v);
  const double rms = std::sqrt(ss / double(count));
  double max_abs = 0;
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < count; ++i) {
    const double want = bf16_value(r[i]), d = std::fabs(bf16_value(g[i]) - want);
    if (!(d <= 0.02 * std::fabs(want) + 0.02 * rms) && !bad++) first = i;
    if (d > max_abs) max_abs = d;
  }
  if (!(rms > 0)) bad = count;  // a NaN or all-zero reference checks nothing
  if (max_over_ranks(&bs, double(bad)) > 0) {
    if (!bad) mk::fail(op, " bench: ", what, ": another rank's output is wrong (this rank's matches)");
    mk::fail(op, " bench: ", what, " on rank ", bs.rank(), ": ", bad, " of ", count,
             " elements off the serial baseline (first: row ", first / n, ", col ", first % n, ": got ",
             bf16_value(g[first]), ", want ", bf16_value(r[first]), "); max |d| ", max_abs, ", rms(ref) ", rms);
  }
  if (identical) {  // FNV-1a of the bits, compared over ranks
    uint64_t hash = 1469598103934665603ull;
    for (uint16_t v : g) hash = (hash ^ v) * 1099511628211ull;
    const auto all = bs.allgather(std::string(reinterpret_cast<const char*>(&hash), sizeof(hash)));
    for (size_t q = 0; q < all.size(); ++q)
      if (all[q] != all[static_cast<size_t>(bs.rank())])
        mk::fail(op, " bench: ", what, ": rank ", q, "'s output differs in its bits from rank ", bs.rank(),
                 "'s (both within tolerance of the serial baseline)");
  }
  return max_over_ranks(&bs, max_abs / rms);
}

// kMaxChunks, overlap_chunk_counts, best_overlap, chunk_variants: bench/micro/overlap_sweep.hpp.

// What a TP table's note starts with where the ranks share a GPU (BenchContext::shared_gpu).
inline constexpr const char* kSharedGpuNote =
    "SHARED GPU: a correctness run, not a measurement. The ranks time-slice one GPU; the baselines' collective is "
    "mkernel's own and the barrier before each call a host barrier, whatever the text below says of NCCL; the "
    "targets are not judged. ";

// The baselines' handles for one benchmark. Every timed call starts after an
// untimed device barrier (`barrier()`: NCCL over NVLink, also between
// emulated nodes: it only lines the ranks up). `nc` is NCCL for the
// baselines' collective inside a node, null across nodes (the baselines use
// mkernel's own collective on the same transport there: NCCL between
// emulated nodes would take NVLink). Collective: every rank makes one.
// Ranks sharing a GPU (`shared`: NCCL refuses them) take mkernel's own
// collective and a host barrier, as if across nodes (`own` says which).
struct TpBaselines {
  ncclComm_t nc = nullptr, bar_nc = nullptr;
  std::unique_ptr<NcclBarrier> bar;
  cublasHandle_t h = nullptr;
  cudaStream_t side = nullptr;
  cudaEvent_t computed[kMaxChunks] = {}, reduced[kMaxChunks] = {};
  bool own = false;  // the baselines' collective is mkernel's (across nodes, or ranks sharing a GPU)
  // The checks' reference collective (bench/micro/ref_collective.hpp): NCCL wherever the ranks have it, else the host.
  ncclComm_t ref_nc() const { return nc ? nc : bar_nc; }

  TpBaselines(mk::Communicator& c, bool net, cudaStream_t stream, bool shared = false) : own(net || shared) {
    nc = own ? nullptr : make_nccl_comm(c);
    bar_nc = make_nccl_comm_unless_shared(c, shared);
    bar = shared ? std::make_unique<NcclBarrier>(&c.bootstrap(), stream)
                 : std::make_unique<NcclBarrier>(bar_nc, stream);
    MKB_CUBLAS(cublasCreate(&h));
    MKB_CUDA(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    for (int j = 0; j < kMaxChunks; ++j) {
      MKB_CUDA(cudaEventCreateWithFlags(&computed[j], cudaEventDisableTiming));
      MKB_CUDA(cudaEventCreateWithFlags(&reduced[j], cudaEventDisableTiming));
    }
  }
  ~TpBaselines() {
    cublasDestroy(h);
    if (nc) ncclCommDestroy(nc);
    bar.reset();
    if (bar_nc) ncclCommDestroy(bar_nc);
    cudaStreamDestroy(side);
    for (int j = 0; j < kMaxChunks; ++j) {
      cudaEventDestroy(computed[j]);
      cudaEventDestroy(reduced[j]);
    }
  }
  TpBaselines(const TpBaselines&) = delete;
  TpBaselines& operator=(const TpBaselines&) = delete;

  // time_interleaved's `before`.
  std::function<void(int)> barrier() const { return std::cref(*bar); }
};

}  // namespace mkb
