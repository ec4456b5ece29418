// mkernel: the bounded waits of the engines' pipelines (GEMM, attention),
// shared: a parameter block P with timeout_ns, has_ctx and ctx (DeviceCtx)
// says how long to wait and where to report.
//
// NOTES: no function calls (no printf): ptxas serialises every wgmma of a
// kernel that calls a function. A failure is recorded in the communicator's
// diagnostic record (the host prints who waited for what) and the kernel
// traps; without a communicator (a one-GPU launch, whose only waits are its
// own pipeline) it traps.
#pragma once

#include "ptx.cuh"
#include "mbarrier.cuh"
#include "signals.cuh"

namespace mk::dev {

// Records a failed wait for the host (with a communicator) and raises the
// abort word; does not stop the thread.
template <class P>
__device__ __forceinline__ void engine_record_failure(const P& p, int peer, const uint64_t* sig, uint64_t expected,
                                                      uint64_t seen, uint64_t waited) {
  if (p.has_ctx) {
    const int32_t idx = sig ? signal_index(p.ctx, sig) : kDiagPipelineStage;
    uint32_t ab = ld_volatile(p.ctx.abort_dev);
    if (!ab) ab = ld_volatile(p.ctx.abort_host);
    record_failure(p.ctx, WaitSite{static_cast<int32_t>(Role::Compute), peer, idx}, expected, seen, waited,
                   ab ? kWaitAborted : kWaitTimeout, static_cast<int32_t>(ab) - 1);
  }
}

template <class P>
__device__ __forceinline__ void engine_give_up(const P& p, int peer, const uint64_t* sig, uint64_t expected,
                                               uint64_t seen, uint64_t waited) {
  engine_record_failure(p, peer, sig, expected, seen, waited);
  __trap();
}

// Bounded wait on an mbarrier phase of this CTA (the fast path is one
// try_wait); `what` (the stage) is reported as the expected value. These
// waits are on another role of this CTA, which may itself sit in bounded
// waits on other ranks for up to a timeout each: 4 timeouts here, so that
// the wait on the other rank is the one that reports; after the first
// timeout, another rank's abort ends it. NOTES: the abort flags are not read
// before that: these waits are many and hot (every pipeline stage), and a
// read of the host-mapped flag every 256 spins from them made the 1x2
// GEMM+RS 20x slower (bench/results/mkbench-20261130T122542Z).
//
// engine_mbar_wait_or: the same, but a failure records and then calls
// `stop()` (which must not return) instead of trapping: for MMA warpgroups
// whose registers ptxas holds to the launch's count in any code region that
// contains a trap (the attention engine's consumers; see attn_engine.cuh).
// `quit()`, asked every 256 spins, ends the wait at once through stop()
// (without a record: another thread of the CTA already made one).
struct NeverQuit {
  __device__ __forceinline__ bool operator()() const { return false; }
};
template <class P, class Stop, class Quit = NeverQuit>
__device__ __forceinline__ void engine_mbar_wait_or(const P& p, uint64_t* bar, uint32_t parity, int what,
                                                    const Stop& stop, const Quit& quit = Quit{}) {
  if (mbar_try_wait(bar, parity)) return;
  const uint64_t t0 = globaltimer();
  uint32_t spins = 0;
  while (!mbar_try_wait(bar, parity)) {
    if ((++spins & 255u) == 0u) {
      if (quit()) stop();
      const uint64_t waited = globaltimer() - t0;
      if (waited <= p.timeout_ns) continue;
      // NOTES: after a first timeout only, so the host word's cost (see
      // device/signals.cuh, abort_word) falls on a run that is stalled
      // already; rarer reads here spilled the attention engine's producer.
      const bool aborted = p.has_ctx && (ld_volatile(p.ctx.abort_dev) || ld_volatile(p.ctx.abort_host));
      if (aborted || waited > 4 * p.timeout_ns) {
        engine_record_failure(p, -1, nullptr, uint64_t(what), parity, waited);
        stop();
      }
    }
  }
}

// The same wait (trapping on failure) that also ends, returning false, as soon as `done()` says the phase will
// never complete (the GEMM engine's storer: the consumers' end mark). true: the phase completed.
template <class P, class Done>
__device__ __forceinline__ bool engine_mbar_wait_unless(const P& p, uint64_t* bar, uint32_t parity, int what,
                                                        const Done& done) {
  if (mbar_try_wait(bar, parity)) return true;
  const uint64_t t0 = globaltimer();
  uint32_t spins = 0;
  while (!mbar_try_wait(bar, parity)) {
    if (done()) return false;
    if ((++spins & 255u) == 0u) {
      const uint64_t waited = globaltimer() - t0;
      if (waited <= p.timeout_ns) continue;
      const bool aborted = p.has_ctx && (ld_volatile(p.ctx.abort_dev) || ld_volatile(p.ctx.abort_host));
      if (aborted || waited > 4 * p.timeout_ns) {
        engine_record_failure(p, -1, nullptr, uint64_t(what), parity, waited);
        __trap();
      }
    }
  }
  return true;
}

struct TrapStop {
  __device__ __forceinline__ void operator()() const { __trap(); }
};

template <class P>
__device__ __forceinline__ void engine_mbar_wait(const P& p, uint64_t* bar, uint32_t parity, int what) {
  engine_mbar_wait_or(p, bar, parity, what, TrapStop{});
}

// Bounded wait until a signal word reaches `expected` (also ends when
// another rank aborted).
template <class P>
__device__ __forceinline__ void engine_wait_signal(const P& p, const uint64_t* sig, uint64_t expected, int peer) {
  uint64_t v = ld_acquire<Scope::Sys>(sig);
  if (v >= expected) return;
  const uint64_t t0 = globaltimer();
  uint64_t next_host = p.ctx.host_abort_poll_ns;  // the host word rarely (device/signals.cuh, abort_word)
  uint32_t spins = 0;
  while ((v = ld_acquire<Scope::Sys>(sig)) < expected) {
    if ((++spins & 127u) == 0u) {
      const uint64_t waited = globaltimer() - t0;
      const bool aborted = p.has_ctx && abort_word(p.ctx, waited, next_host) != 0u;
      if (aborted || waited > p.timeout_ns) engine_give_up(p, peer, sig, expected, v, waited);
    }
  }
}

}  // namespace mk::dev
