// mkernel: vectorized copies between local and NVLink-peer memory.
//
// NOTES: the 16-byte path needs dst and src at the same offset mod 16: a
// byte loop copies the head up to dst's first 16-byte boundary and the tail;
// pointers at different offsets mod 16 are copied byte by byte (slow). Loads are issued kUnroll
// deep before the stores so that enough bytes are in flight per thread to
// keep NVLink busy with few SMs.
#pragma once

#include <cstdint>

#include "ptx.cuh"
#include "signals.cuh"

namespace mk::dev {

constexpr int kCopyUnroll = 8;

// Copies `bytes` with threads [tid, tid + nthreads) of whatever group the
// caller chose (a warp, a block, or the whole grid). kNcSource: the source is
// not written by anyone during the kernel (allows the non-coherent path).
// No __restrict__: it would let the compiler use non-coherent loads even
// when kNcSource is false and a peer writes the source during the kernel.
// kUnroll: 16-byte loads in flight per thread (registers: 4 per load).
// kTailInFlight: the last, partial group's loads in flight too, 8 at a time
// (else one round trip each: what a warp copying a few KB waits for). The
// delivery agent uses it inside the GEMM engine's kernels: 16 at a time
// spilled 68 bytes in the standalone GEMM's, 8 spills none
// (tools/check_ptxas.sh).
template <bool kNcSource = false, int kUnroll = kCopyUnroll, bool kTailInFlight = false>
__device__ __forceinline__ void copy_v16(void* dst, const void* src, size_t bytes,
                                         size_t tid, size_t nthreads) {
  auto d8 = static_cast<char*>(dst);
  auto s8 = static_cast<const char*>(src);
  const uintptr_t da = reinterpret_cast<uintptr_t>(d8), sa = reinterpret_cast<uintptr_t>(s8);
  // The bytes before the 16-byte aligned body: all of them when the two
  // offsets mod 16 differ (no body), else up to dst's next boundary.
  size_t head = ((da ^ sa) & 15u) ? bytes : (16u - (da & 15u)) & 15u;
  if (head > bytes) head = bytes;
  for (size_t b = tid; b < head; b += nthreads) d8[b] = s8[b];
  d8 += head;
  s8 += head;
  bytes -= head;
  size_t nvec = bytes / 16;
  auto d = reinterpret_cast<uint4*>(d8);
  auto s = reinterpret_cast<const uint4*>(s8);
  const size_t step = nthreads * kUnroll;
  size_t i = tid;
  for (; i + (kUnroll - 1) * nthreads < nvec; i += step) {
    uint4 r[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      r[u] = kNcSource ? ld_nc_v4(s + i + u * nthreads) : s[i + u * nthreads];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) st_v4(d + i + u * nthreads, r[u]);
  }
  constexpr int kTail = kUnroll > 8 ? 8 : kUnroll;
  for (; kTailInFlight && i < nvec; i += nthreads * kTail) {
    uint4 r[kTail];
#pragma unroll
    for (int u = 0; u < kTail; ++u)
      if (i + u * nthreads < nvec) r[u] = kNcSource ? ld_nc_v4(s + i + u * nthreads) : s[i + u * nthreads];
#pragma unroll
    for (int u = 0; u < kTail; ++u)
      if (i + u * nthreads < nvec) st_v4(d + i + u * nthreads, r[u]);
  }
  for (; i < nvec; i += nthreads) st_v4(d + i, kNcSource ? ld_nc_v4(s + i) : s[i]);
  for (size_t b = nvec * 16 + tid; b < bytes; b += nthreads) d8[b] = s8[b];
}

}  // namespace mk::dev
