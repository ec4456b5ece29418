// mkbench: the GEMM engine alone in the standalone GEMM kernel, with its own
// parameters or with those a GemmRs plan builds (bench/micro/gemm_rs_bench.cu's
// one-rank diagnosis, bench/micro/tp_timeline.cu): what the fused kernels are
// measured against.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "mkernel/communicator.hpp"
#include "src/ops/gemm/gemm_host.hpp"
#include "src/ops/gemm_rs/rs_plan.hpp"

namespace mkb {

// out [m x n] = a b^T on nc CTAs (0: every SM), swizzle swz (0: the
// engine's), TMA-store or plain RowMajor stores.
inline mk::gemm::GemmParams engine_alone_params(const void* a, const void* b, void* out, int64_t m, int64_t n,
                                                int64_t k, int nc, int swz, bool tma_store) {
  mk::gemm::GemmParams p =
      mk::gemm::make_params(mk::gemm::Operands{.a = a, .b = b, .out = out, .m = m, .n = n, .k = k}, nc);
  if (swz) p.sched.swizzle = swz;
  if (tma_store) mk::gemm::use_tma_store(p);
  return p;
}

// The GEMM parameters GemmRs builds (its walk, owner epilogue and row
// stores; plan `pl` of its own), without entry signals and on the static
// walk: for the standalone kernel (no storer, no epoch end).
inline mk::gemm::GemmParams rs_gemm_alone_params(const mk::tp::RsPlan& pl, mk::Communicator& c, const void* a,
                                                 const void* b, void* out, int ctas) {
  mk::gemm::GemmParams p = mk::tp::rs_gemm_params(pl, c.topology(), c.device_ctx(), a, b, out, ctas, false);
  p.load.num_start = 0;
  p.tile_counter = nullptr;
  return p;
}

inline void launch_alone(const mk::gemm::GemmParams& p, cudaStream_t s) {
  mk::gemm::launch(p, p.num_compute, mk::gemm::TestRoleParams{}, s);
}

}  // namespace mkb
