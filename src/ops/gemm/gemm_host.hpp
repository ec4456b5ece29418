// mkernel: host side of the GEMM engine, shared by the standalone GEMM and
// the fused ops: validation, TMA descriptors, defaults, launch.
#pragma once

#include <cuda_runtime_api.h>

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

// SMs of the current device.
int num_sms();

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

// Launches `grid` CTAs: [0, p.num_compute) compute, the rest run the Test role.
void launch(const GemmParams& p, int grid, const TestRoleParams& test, cudaStream_t stream);

}  // namespace mk::gemm
