// mkernel: work claimed at run time by the CTAs that got an SM, so no
// resident CTA waits on work held by a CTA without one (another kernel or
// an MPS client holding SMs). Shared by the pushes (ring attention's
// kv_push.cuh, AllGather+GEMM's allgather_push.cuh) and the standalone
// collectives (reduce_scatter.cuh rs_claimed, ar_gather.cuh). The part
// mapping has no CUDA-only syntax (CPU-tested: tests/cpu/kv_items_test.cpp).
#pragma once

#include <cstdint>

#include "../ctx.hpp"

namespace mk::roles {

// Items first, first + stride, ... below end.
struct PartRange {
  int64_t first, end, stride;
};

// Part q of a push's 2 nparts parts: q < nparts a part of the own items
// [0, own_items), else one of the forwarded items [own_items, items). Own
// parts come first: a forwarded item waits on the rail peer's InterSend,
// which waits on that rank's own items, so a running CTA blocked on a
// forwarded item must never leave an own part unclaimed (a cycle across
// nodes).
MK_HD PartRange own_first_part(int64_t own_items, int64_t items, int nparts, int q) {
  const bool forwarded = q >= nparts;
  return PartRange{(forwarded ? own_items : 0) + (forwarded ? q - nparts : q), forwarded ? items : own_items, nparts};
}

#ifdef __CUDACC__
// The CTA's next claim of `counter` (a per-call counter, back to 0 after
// the launch: dev::DeviceEpoch), taken by thread 0 and broadcast through
// the shared word `slot`; all threads of the CTA.
__device__ __forceinline__ int64_t claim_next(uint64_t* counter, volatile int64_t* slot) {
  if (threadIdx.x == 0) *slot = static_cast<int64_t>(atomicAdd(reinterpret_cast<unsigned long long*>(counter), 1ull));
  __syncthreads();
  const int64_t c = *slot;
  __syncthreads();  // every thread read the slot before thread 0 writes the next claim
  return c;
}
#endif

}  // namespace mk::roles
