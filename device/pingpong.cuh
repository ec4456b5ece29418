// mkernel: signal ping-pong between two parties (two GPUs, or two CTAs of one
// GPU). Used by the signalling tests and the round-trip latency benchmark.
//
// Round i (1-based) of a call with base b: the initiator writes a payload
// word b+i into the responder's buffer, then signals b+i; the responder waits
// for b+i, checks the payload, writes its own payload and signals back. The
// base grows with every call (epoch * rounds), so signals are never reset.
#pragma once

#include "ctx.hpp"
#include "signals.cuh"

namespace mk::dev {

struct PingPongSide {
  uint64_t* my_signal;     // where the other side signals me
  uint64_t* peer_signal;   // where I signal the other side
  uint64_t* my_payload;    // the other side writes here before signalling
  uint64_t* peer_payload;  // I write here before signalling
  int32_t peer;            // rank of the other side (diagnostics)
  int32_t signal_id;       // index of my_signal in the pool (diagnostics)
  bool initiator;
};

template <Scope S>
__device__ __forceinline__ void pingpong_side(const DeviceCtx& ctx, const PingPongSide& p, int rounds,
                                              uint64_t base, uint32_t* errors) {
  const WaitSite site{static_cast<int32_t>(Role::Test), p.peer, p.signal_id};
  uint32_t bad = 0;
  for (int i = 1; i <= rounds; ++i) {
    const uint64_t v = base + static_cast<uint64_t>(i);
    if (p.initiator) {
      if (p.peer_payload) *reinterpret_cast<volatile uint64_t*>(p.peer_payload) = v;
      signal_set<S>(p.peer_signal, v);
      wait_ge<S>(ctx, p.my_signal, v, site);
      if (p.my_payload && *reinterpret_cast<volatile uint64_t*>(p.my_payload) != v) ++bad;
    } else {
      uint64_t seen = wait_ge<S>(ctx, p.my_signal, v, site);
      if (seen != v) ++bad;  // a lost or duplicated round
      if (p.my_payload && *reinterpret_cast<volatile uint64_t*>(p.my_payload) != v) ++bad;
      if (p.peer_payload) *reinterpret_cast<volatile uint64_t*>(p.peer_payload) = v;
      signal_set<S>(p.peer_signal, v);
    }
  }
  if (bad && errors) atomicAdd(errors, bad);
}

// One thread per side; launch <<<1, 32>>> per GPU (lane 0 works).
template <Scope S>
__global__ void pingpong_kernel(DeviceCtx ctx, PingPongSide side, int rounds, uint64_t base, uint32_t* errors) {
  if (threadIdx.x == 0) pingpong_side<S>(ctx, side, rounds, base, errors);
}

}  // namespace mk::dev
