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
__device__ __forceinline__ void quad_transpose(uint32_t (&v)[4]) {
  const int lane = threadIdx.x % 32, q = lane & 3;
  uint32_t w[4] = {v[0], v[1], v[2], v[3]};  // round 0: w[q] = v[q]
#pragma unroll
  for (int r = 1; r < 4; ++r) {
    // Lane q reads from lane (q + r) & 3 the pair that lane keeps for q.
    const int give = (q - r) & 3;
    const uint32_t send = give == 0 ? v[0] : give == 1 ? v[1] : give == 2 ? v[2] : v[3];
    const uint32_t got = __shfl_sync(0xffffffffu, send, (lane & ~3) | ((q + r) & 3));
    const int k = (q + r) & 3;
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = i == k ? got : w[i];
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) v[i] = w[i];
}

}  // namespace mk::dev
