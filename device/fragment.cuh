// mkernel: register-fragment helpers shared by the engines' epilogues (GEMM,
// attention).
#pragma once

#include <cstdint>

namespace mk::dev {

// Lane q of each quad of lanes holds, for 4 consecutive 8-column groups of
// one accumulator row, v[i] = the bf16 pair at columns 8 i + 2 q of group i
// (wgmma's accumulator layout); afterwards v[k] = the pair at columns 2 k of
// group q: lane q holds group q whole (one 16-byte store or load instead of
// four 4-byte ones; NVLink and L2 like them better). Its own inverse. All
// 32 lanes must call.
// A 4 x 4 transpose of 32-bit words in two butterfly stages: lanes q and
// q ^ 2 swap their off-diagonal 2 x 2 blocks, then lanes q and q ^ 1 swap
// inside each block. Every select is on one bit of the lane, where a
// rotation by r (the earlier version) selected by (q +- r) & 3 and cost
// ~60 instructions per call in the GEMM's TMA-store epilogue (checked
// against it, lane by lane, by tools/wip/quad_butterfly_sim.py; measured in
// bench/results/gemm-epilogue-20261202.md).
__device__ __forceinline__ void quad_transpose(uint32_t (&v)[4]) {
  const int lane = threadIdx.x % 32;
  const bool hi2 = (lane & 2) != 0, hi1 = (lane & 1) != 0;
#pragma unroll
  for (int t = 0; t < 2; ++t) {  // lanes q, q ^ 2: v[t + 2] of the lower for v[t] of the upper
    const uint32_t got = __shfl_xor_sync(0xffffffffu, hi2 ? v[t] : v[t + 2], 2);
    v[t] = hi2 ? got : v[t];
    v[t + 2] = hi2 ? v[t + 2] : got;
  }
#pragma unroll
  for (int t = 0; t < 4; t += 2) {  // lanes q, q ^ 1: v[t + 1] of the lower for v[t] of the upper
    const uint32_t got = __shfl_xor_sync(0xffffffffu, hi1 ? v[t] : v[t + 1], 1);
    v[t] = hi1 ? got : v[t];
    v[t + 1] = hi1 ? v[t + 1] : got;
  }
}

}  // namespace mk::dev
