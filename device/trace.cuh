// mkernel: records one event of the device event log (device/trace.hpp).
#pragma once

#include "ptx.cuh"
#include "trace.hpp"

namespace mk::dev {

__device__ __forceinline__ void trace(const TraceBuf& tb, int cta, TraceKind kind, uint32_t arg) {
  if (!tb.base) return;
  uint64_t* mine = tb.base + static_cast<int64_t>(cta) * (1 + 2 * static_cast<int64_t>(tb.cap));
  const unsigned long long i = atomicAdd(reinterpret_cast<unsigned long long*>(mine), 1ull);
  if (i < static_cast<unsigned long long>(tb.cap)) {
    mine[1 + 2 * i] = globaltimer();
    mine[2 + 2 * i] = (static_cast<uint64_t>(kind) << 32) | arg;
  }
}

}  // namespace mk::dev
