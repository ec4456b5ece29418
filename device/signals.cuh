// mkernel: device signalling. Signals are monotonic 64-bit counters; a waiter
// compares against a value derived from the call's epoch, so no flag is ever
// reset and back-to-back launches or graph replays need no host sync.
//
// NOTES: every wait is bounded by ctx.timeout_ns. On expiry (or when another
// rank, or the host proxy, raised the abort word) the waiter records who
// waited for what in ctx.diag (host memory), prints it, raises this rank's
// and its node peers' abort words, and traps.
#pragma once

#include <cstdio>

#include "ctx.hpp"
#include "ptx.cuh"

namespace mk::dev {

// Who is waiting, for diagnostics.
struct WaitSite {
  int32_t role;    // mk::Role
  int32_t peer;    // rank expected to signal, -1 if unknown
  int32_t signal;  // index in the signal pool, -1 if outside it
};

__device__ __forceinline__ int32_t signal_index(const DeviceCtx& ctx, const uint64_t* sig) {
  ptrdiff_t i = sig - ctx.signals;
  return (i >= 0 && i < ctx.num_signals) ? static_cast<int32_t>(i) : -1;
}

// Raises the abort word of this rank, its host, and its node peers (first
// writer wins: the word holds the aborting rank + 1).
// NOTES: no atomics on the host-mapped words: PCIe hosts need not support
// device atomics to system memory. Device words take atomicCAS_system.
__device__ __forceinline__ void raise_abort(const DeviceCtx& ctx) {
  const uint32_t mark = static_cast<uint32_t>(ctx.rank) + 1;
  volatile uint32_t* host = ctx.abort_host;
  if (*host == 0u) *host = mark;
  atomicCAS_system(ctx.abort_dev, 0u, mark);
  for (int i = 0; i < ctx.local_size && i < kMaxLocalRanks; ++i)
    if (ctx.abort_peer[i]) atomicCAS_system(ctx.abort_peer[i], 0u, mark);
  __threadfence_system();
}

// Records the first failure of this rank in ctx.diag (host-readable) and
// raises the abort words. Inline and call-free, so that warpgroups issuing
// wgmma can use it without serialising their MMA pipeline (ptxas does that
// around any function call).
__device__ __forceinline__ void record_failure(const DeviceCtx& ctx, WaitSite site, uint64_t expected, uint64_t seen,
                                               uint64_t waited_ns, int32_t reason, int32_t aborter) {
  if (atomicCAS(ctx.diag_claim, 0u, 1u) == 0u) {
    volatile WaitDiag* d = ctx.diag;
    d->rank = ctx.rank;
    d->role = site.role;
    d->peer = site.peer;
    d->signal = site.signal;
    d->block = static_cast<int32_t>(blockIdx.x);
    d->thread = static_cast<int32_t>(threadIdx.x);
    d->reason = reason;
    d->aborter = aborter;
    d->expected = expected;
    d->seen = seen;
    d->waited_ns = waited_ns;
    __threadfence_system();
    d->state = 2u;
    __threadfence_system();
  }
  raise_abort(ctx);
}

// Failure without printf (the host prints ctx.diag): for MMA warpgroups.
__device__ __forceinline__ void fail_wait_quiet(const DeviceCtx& ctx, WaitSite site, uint64_t expected, uint64_t seen,
                                                uint64_t waited_ns, int32_t reason, int32_t aborter) {
  record_failure(ctx, site, expected, seen, waited_ns, reason, aborter);
  __trap();
}

inline __device__ __noinline__ void fail_wait(const DeviceCtx& ctx, WaitSite site, uint64_t expected,
                                       uint64_t seen, uint64_t waited_ns, int32_t reason,
                                       int32_t aborter) {
  const int32_t block = static_cast<int32_t>(blockIdx.x);
  const int32_t thread = static_cast<int32_t>(threadIdx.x);
  record_failure(ctx, site, expected, seen, waited_ns, reason, aborter);
  if (reason == kWaitTimeout)
    printf("mkernel: rank %d role %s (block %d thread %d) timed out after %llu ms waiting on signal %d "
           "from peer %d (a negative signal: a site of device/ctx.hpp's kDiag*, the peer then its queue; the "
           "host's report names it): expected >= %llu, seen %llu (MK_TIMEOUT_MS); aborting\n",
           ctx.rank, role_name(site.role), block, thread,
           static_cast<unsigned long long>(waited_ns / 1000000), site.signal, site.peer,
           static_cast<unsigned long long>(expected), static_cast<unsigned long long>(seen));
  else
    printf("mkernel: rank %d role %s (block %d thread %d) stopped waiting on signal %d from peer %d "
           "(expected >= %llu, seen %llu): abort raised by rank %d\n",
           ctx.rank, role_name(site.role), block, thread, site.signal, site.peer,
           static_cast<unsigned long long>(expected), static_cast<unsigned long long>(seen), aborter);
  __trap();
}

// How a failed wait reports. Print: printf, then trap. Quiet: the diagnostic
// record only (the host prints it), no function call: for code that shares a
// kernel with the GEMM engine, because ptxas serialises every wgmma of a
// kernel that contains a call.
enum class Report { Print, Quiet };

template <Report R>
__device__ __forceinline__ void give_up(const DeviceCtx& ctx, WaitSite site, uint64_t expected, uint64_t seen,
                                        uint64_t waited_ns, int32_t reason, int32_t aborter) {
  if constexpr (R == Report::Quiet)
    fail_wait_quiet(ctx, site, expected, seen, waited_ns, reason, aborter);
  else
    fail_wait(ctx, site, expected, seen, waited_ns, reason, aborter);
}

// The abort word a wait checks: the device word at every check (raised by
// kernels of this rank and of its node peers, and by the host:
// Communicator::raise_abort writes it from a stream of its own); the
// host-mapped word, a fallback, only once `waited` reaches `next_host` (start
// at ctx.host_abort_poll_ns), then once per ctx.host_abort_poll_ns.
// NOTES: reads of host memory from waiting threads make every system-scope
// fence of the GPU wait: with one waiter per SM reading the host word every
// 128 spins, a network command's post (its st.release.sys) took 100 us
// instead of 1; with four per SM 495-518 us, and as long with a read once per
// 10 or 100 us of waiting (mkbench net_post, bench/results/net-post-20261201.md).
// The kernels publish every NVLink signal and every network command with such
// a fence. So the host word is read once per 100 ms of waiting (kHostAbortPollNs).
__device__ __forceinline__ uint32_t abort_word(const DeviceCtx& ctx, uint64_t waited, uint64_t& next_host) {
  uint32_t ab = ld_volatile(ctx.abort_dev);
  if (!ab && waited >= next_host) {
    ab = ld_volatile(ctx.abort_host);
    next_host = waited + ctx.host_abort_poll_ns;
  }
  return ab;
}

// Spins until *sig >= expected, with acquire semantics at scope S. One thread
// waits; the caller broadcasts to its block/warp with a barrier.
template <Scope S = Scope::Sys, Report R = Report::Print>
__device__ __forceinline__ uint64_t wait_ge(const DeviceCtx& ctx, const uint64_t* sig,
                                            uint64_t expected, WaitSite site) {
  uint64_t v = ld_acquire<S>(sig);
  if (v >= expected) return v;
  const uint64_t t0 = globaltimer();
  uint64_t next_host = ctx.host_abort_poll_ns;
  uint32_t spins = 0;
  while (true) {
    v = ld_acquire<S>(sig);
    if (v >= expected) return v;
    if ((++spins & 127u) == 0u) {
      const uint64_t waited = globaltimer() - t0;
      const uint32_t ab = abort_word(ctx, waited, next_host);
      if (ab) give_up<R>(ctx, site, expected, v, waited, kWaitAborted, static_cast<int32_t>(ab) - 1);
      if (waited > ctx.timeout_ns) give_up<R>(ctx, site, expected, v, waited, kWaitTimeout, -1);
    }
  }
}

// Publishes a signal value (release: everything this thread, and by
// cumulativity everything its block made visible to it via a barrier, is
// visible before the value).
template <Scope S = Scope::Sys>
__device__ __forceinline__ void signal_set(uint64_t* sig, uint64_t value) {
  st_release<S>(sig, value);
}

template <Scope S = Scope::Sys>
__device__ __forceinline__ void signal_add(uint64_t* sig, uint64_t delta) {
  red_add_release<S>(sig, delta);
}

// Signal word `index` of node peer `local_rank` (own pool when it is us).
__device__ __forceinline__ uint64_t* peer_signal(const DeviceCtx& ctx, int local_rank, int index) {
  return ctx.peer_signals[local_rank] + index;
}

}  // namespace mk::dev
