// mkernel: host side of the GEMM engine, shared by the standalone GEMM and
// the fused ops: validation, TMA descriptors, defaults, launch.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "device/gemm/gemm_params.hpp"

namespace mk::gemm {

// Operands of one launch. Grouped when num_groups > 0 (b holds num_groups
// [n x k] matrices; the caller sets sched/group arrays, see grouped_gemm_bf16).
struct Operands {
  const void* a = nullptr;
  const void* b = nullptr;
  void* out = nullptr;
  int64_t m = 0;    // rows of a (grouped: total)
  int64_t n = 0;
  int64_t k = 0;
  int64_t ldo = 0;  // 0: n
  int num_groups = 0;
};

// Split tiles (GemmParams::split_tiles, split_parts): the tiles a
// last partial wave would hold, each computed in P parts of K by P CTAs
// (earlier parts at the start of the walk, the last parts at its end), with
// P chosen so that the tail's parts come out closest to even waves: the
// tail then takes ceil(tail P / ctas) / P tile times instead of one, plus
// kSplitPartCost per extra part. None when the waves already come out
// even, when no P gains, or when K is one block; P at most max_parts and
// K blocks / 4 (2 always allowed). The cost is measured (one H200, AG at
// the 1x2 per-rank shape, W = 1: bench/results/ag-split-parts-20261201.md):
// 5 parts cost 0.336 ms at M = 1024 against 0.322 in halves, and 0.735 at
// M = 2048 against 0.708 unsplit, i.e. 0.085-0.12 tile times (8-12 us) per
// extra part (its fp32 slot written and read back, a pipeline start, at
// the start of the walk where every CTA does the same), not the ~2 us the
// bytes alone take. With it: M = 1024 -> 52 tiles in halves (3.5 tile
// times instead of 4); M = 4096 -> 76 tiles in 3 parts (13.67 instead of 14).
constexpr double kSplitPartCost = 0.1;

struct SplitTail {
  int64_t tiles = 0;
  int parts = 2;
};
inline SplitTail split_tail(int64_t tiles, int64_t ctas, int64_t kblocks, int max_parts = kMaxSplitParts) {
  SplitTail best;
  if (kblocks < 2 || ctas < 2 || max_parts < 2) return best;
  const int64_t tail = tiles % ctas;
  if (tail == 0) return best;
  double best_cost = 1.0;  // unsplit: the last wave takes a whole tile time
  const int64_t pmax =
      std::min<int64_t>({int64_t(max_parts), int64_t(kMaxSplitParts), std::max<int64_t>(2, kblocks / 4)});
  for (int64_t p = 2; p <= pmax; ++p) {
    const double cost = double((tail * p + ctas - 1) / ctas) / double(p) + kSplitPartCost * double(p - 1);
    if (cost < best_cost - 1e-9) {
      best_cost = cost;
      best = SplitTail{tail, static_cast<int>(p)};
    }
  }
  return best;
}

// The standalone GEMM's split (gemm_bf16): at most 2 parts (3 parts at m, n, k = 4096, 14336, 8192 ran 2.3%
// slower sustained than unsplit on one H200; halves at 1024, 14336, 8192 2.4% faster:
// bench/results/tp-single-rank-20261202.md) and only from kStandaloneSplitMinKBlocks K blocks: a part's extra
// cost is ~8-12 us whatever K (kSplitPartCost's measurement), a tenth of a tile at K = 8192 but as much as the
// half it saves near K = 2048; measured at K = 8192 only.
constexpr int64_t kStandaloneSplitMinKBlocks = 64;  // K >= 4096
inline SplitTail standalone_split(int64_t tiles, int64_t ctas, int64_t kblocks) {
  return kblocks < kStandaloneSplitMinKBlocks ? SplitTail{} : split_tail(tiles, ctas, kblocks, 2);
}
// Test hook: the split tiles of this thread's last gemm_bf16 call (0: none, e.g. inside a graph capture).
int64_t last_split_tiles();
void set_last_split_tiles(int64_t v);

// Validates (clear mk::Error on bad input) and returns params with TMA
// descriptors, block counts, Swizzled order, RowMajor Store epilogue into
// `out`, no load hook, and `num_compute` CTAs (0: every SM).
GemmParams make_params(const Operands& ops, int num_compute);

// Turns on the TMA-store epilogue (EpilogueHook::tma_store, with its
// descriptor of out) when p's epilogue allows it: plain RowMajor Store to one
// destination, ldo a multiple of 8, out 16-byte aligned, not Grouped.
// Returns whether it did; launches need kSmemBytesAsync then.
bool use_tma_store(GemmParams& p);

// Turns on TMA stores for the owner-final tiles (EpilogueHook::own_tma, only
// in kernels built with the asynchronous epilogue: GEMM+RS, GEMM+AR), with
// tma_out over own_out's [rows_per_dest x n] share rows and, given `out2`
// (same shape and row stride), tma_out2 over it (own_tma 2). Needs own_final,
// own_ldo >= n and a multiple of 8, 16-byte aligned buffers, no one-shot
// broadcast and no tma_store; returns whether it did.
bool use_own_tma(GemmParams& p, void* out2);

// Rows [row_lo, row_lo + rows) of A come from `a2` ([rows x k], its own
// allocation) instead of p's A (see GemmParams::tma_a2).
void set_second_a(GemmParams& p, const void* a2, int64_t row_lo, int64_t rows);

// SMs and L2 bytes of the current device.
int num_sms();
int64_t l2_bytes();

// The standalone launch's second role (tests: proves the compute role runs
// on a subset of the grid while other CTAs do other work): CTAs
// [num_compute, grid) copy `bytes` from src to dst (16-byte aligned).
struct TestRoleParams {
  const void* src = nullptr;
  void* dst = nullptr;
  size_t bytes = 0;
};

// Hook settings that would fault or hang on the device: mk::Error. Every
// launch of the engine (standalone or fused) calls it.
void validate_hooks(const GemmParams& p);

// Dynamic shared memory opt-in for a kernel that runs the engine (per device).
void allow_engine_smem(const void* kernel, size_t bytes = kSmemBytes);

// Launches `grid` CTAs: [0, p.num_compute) compute, the rest run the Test role;
// with agent.ctas (an epilogue that puts over a network whose kernels run the
// delivery agent: NetCtx::agent), that many more first, which deliver, and
// agent_finished, a zeroed device word (net::with_agent): launches that share
// one must be ordered (one stream), never run at the same time.
void launch(const GemmParams& p, int grid, const TestRoleParams& test, cudaStream_t stream,
            const net::AgentLaunch& agent = {}, uint32_t* agent_finished = nullptr);

}  // namespace mk::gemm
