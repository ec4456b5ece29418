// mkernel: the device API of the network (DESIGN.md §5). Call from ONE lane
// of a warp: each call pushes one command to a host proxy and returns its
// sequence number in that queue. Arriving data is announced by signals in
// this rank's pool: wait for them with mk::dev::wait_ge (bounded, epochs).
//
//   uint64_t s = net::put(nc, ctx, q, peer, region, dst_off, src_off, bytes,
//                         SigOp::Add, sig_idx, 1);     // data, then signal
//   net::flush(nc, ctx, q, s);   // source bytes of every command <= s reusable
//
// Regions are ids from Network::register_buffer (0 = the signal region).
#pragma once

#include "net_ctx.hpp"
#include "../signals.cuh"

namespace mk::net {

namespace detail {
// Bounded wait while a queue is full (the proxy is behind), reported as role
// kRole. R = Quiet in kernels that share a launch with the GEMM engine (no
// function calls there, device/signals.cuh: the GEMM epilogue's OnFullQuiet).
// The bound (MK_TIMEOUT_MS) is on the proxy taking no
// command, at most 3 x MK_TIMEOUT_MS in all (ProgressBound, cmd_queue.hpp).
template <dev::Report R, Role kRole = Role::InterSend>
struct OnFullDevice {
  const DeviceCtx& ctx;
  const CmdQueue& q;
  ProgressBound bound{};   // on the proxy's tail
  uint64_t next_host = 0;  // the host word at the first check, then rarely (device/signals.cuh, abort_word);
                           // a full queue's wait reads the proxy's tail in host memory anyway
  uint32_t spins = 0;
  __device__ __forceinline__ void operator()(uint64_t seq) {
    if (bound.t0 == 0) bound.start(dev::globaltimer(), 0);
    if ((++spins & 63u) == 0u) {
      const uint64_t now = dev::globaltimer();
      const uint32_t ab = dev::abort_word(ctx, now - bound.t0, next_host);
      const uint64_t tail = *reinterpret_cast<volatile uint64_t*>(q.tail);
      const dev::WaitSite site{static_cast<int32_t>(kRole), q.id, kDiagNetRoom};
      if (ab)
        dev::give_up<R>(ctx, site, seq - q.size + 1, tail, now - bound.t0, kWaitAborted, static_cast<int32_t>(ab) - 1);
      if (bound.expired(now, tail, ctx.timeout_ns))
        dev::give_up<R>(ctx, site, seq - q.size + 1, tail, now - bound.t0, kWaitTimeout, -1);
    }
  }
};
}  // namespace detail

// step: optional hook called after each stage of the push (CmdStep; diagnostics).
template <dev::Report R = dev::Report::Print, Role kRole = Role::InterSend, typename Step = NoCmdStep>
__device__ __forceinline__ uint64_t push(const NetCtx& nc, const DeviceCtx& ctx, int queue, const CmdFields& f,
                                         const Step& step = Step{}) {
  const CmdQueue& q = nc.queues[static_cast<unsigned>(queue) % static_cast<unsigned>(nc.num_queues)];
  return cmdq_push(q, f, detail::OnFullDevice<R, kRole>{ctx, q}, step);
}

// Bytes [src_off, src_off + bytes) of local region `region` go to the same
// region of `peer` at dst_off; then (if sig_op != None) the peer's signal
// word sig_idx is set to / increased by sig_value, never before the data.
// A small put (see NetCtx::inline_max) reads its source bytes here and sends
// them in the command (PUT_INLINE), which spares the transport a copy; the
// source stays reserved until flush either way.
template <dev::Report R = dev::Report::Print, Role kRole = Role::InterSend, typename Step = NoCmdStep>
__device__ __forceinline__ uint64_t put(const NetCtx& nc, const DeviceCtx& ctx, int queue, int peer, int region,
                                        uint64_t dst_off, uint64_t src_off, uint64_t bytes, SigOp sig_op = SigOp::None,
                                        int sig_idx = 0, uint64_t sig_value = 0, const Step& step = Step{}) {
  CmdFields f;
  f.op = CmdOp::Put;
  if (bytes != 0 && bytes <= nc.inline_max && ((src_off | bytes) & 3u) == 0 && region >= 0 &&
      region < kMaxInlineRegions && nc.region_base[region] != nullptr) {
    const volatile uint32_t* s =
        reinterpret_cast<const volatile uint32_t*>(static_cast<const char*>(nc.region_base[region]) + src_off);
    uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
    for (int k = 0; k < 4; ++k)
      if (uint64_t(k) * 4 < bytes) w[k] = s[k];
    f.op = CmdOp::PutInline;
    f.aux = uint64_t(w[0]) | (uint64_t(w[1]) << 32);
    f.aux2 = uint64_t(w[2]) | (uint64_t(w[3]) << 32);
  }
  f.peer = static_cast<uint32_t>(peer);
  f.region = static_cast<uint16_t>(region);
  f.dst_off = dst_off;
  f.src_off = src_off;
  f.bytes = bytes;
  f.sig_op = static_cast<uint8_t>(sig_op);
  f.sig_idx = static_cast<uint32_t>(sig_idx);
  f.sig_value = sig_value;
  return push<R, kRole>(nc, ctx, queue, f, step);
}

template <dev::Report R = dev::Report::Print, Role kRole = Role::InterSend>
__device__ __forceinline__ uint64_t signal(const NetCtx& nc, const DeviceCtx& ctx, int queue, int peer,
                                           SigOp sig_op, int sig_idx, uint64_t value) {
  CmdFields f;
  f.op = CmdOp::Signal;
  f.peer = static_cast<uint32_t>(peer);
  f.sig_op = static_cast<uint8_t>(sig_op);
  f.sig_idx = static_cast<uint32_t>(sig_idx);
  f.sig_value = value;
  return push<R, kRole>(nc, ctx, queue, f);
}

// Adds 1 to signal sig_idx of every rail peer (same local rank on the other
// nodes); pair with wait_ge(ctx.signals + sig_idx, epoch * num_rail_peers).
template <dev::Report R = dev::Report::Print>
__device__ __forceinline__ uint64_t barrier_signal(const NetCtx& nc, const DeviceCtx& ctx, int queue, int sig_idx) {
  CmdFields f;
  f.op = CmdOp::Barrier;
  f.sig_op = static_cast<uint8_t>(SigOp::Add);
  f.sig_idx = static_cast<uint32_t>(sig_idx);
  f.sig_value = 1;
  return push<R>(nc, ctx, queue, f);
}

// Waits (bounded) until every command of `queue` up to and including `seq`
// completed locally: their source bytes may be reused. q.done is in host
// memory, read in a tight loop by one thread: that costs the kernel's other
// threads' system-scope fences ~0.7 us per post, the same as one read per
// ~1 us (mkbench net_post, bench/results/net-post-20261201.md; many such
// readers, as the abort-word checks were, cost hundreds). Bounded as a full
// queue's wait is (ProgressBound): a backlog the proxy drains at a slow
// link's rate is not stuck (before 2026-12-06 this wait gave up MK_TIMEOUT_MS
// after it began, however steadily done moved).
template <dev::Report R = dev::Report::Print>
__device__ __forceinline__ void flush(const NetCtx& nc, const DeviceCtx& ctx, int queue, uint64_t seq) {
  const CmdQueue& q = nc.queues[static_cast<unsigned>(queue) % static_cast<unsigned>(nc.num_queues)];
  uint64_t v = dev::ld_acquire<dev::Scope::Sys>(q.done);
  if (v >= seq + 1) return;
  const dev::WaitSite site{static_cast<int32_t>(Role::InterSend), q.id, kDiagNetDone};
  ProgressBound bound{};
  bound.start(dev::globaltimer(), v);
  uint64_t next_host = ctx.host_abort_poll_ns;
  uint32_t spins = 0;
  while ((v = dev::ld_acquire<dev::Scope::Sys>(q.done)) < seq + 1) {
    if ((++spins & 127u) == 0u) {
      const uint64_t now = dev::globaltimer();
      const uint32_t ab = dev::abort_word(ctx, now - bound.t0, next_host);
      if (ab) dev::give_up<R>(ctx, site, seq + 1, v, now - bound.t0, kWaitAborted, static_cast<int32_t>(ab) - 1);
      if (bound.expired(now, v, ctx.timeout_ns))
        dev::give_up<R>(ctx, site, seq + 1, v, now - bound.t0, kWaitTimeout, -1);
    }
  }
}

// Enqueues a FLUSH and waits for it: everything pushed to `queue` before is
// locally complete.
template <dev::Report R = dev::Report::Print>
__device__ __forceinline__ void quiet(const NetCtx& nc, const DeviceCtx& ctx, int queue) {
  CmdFields f;
  f.op = CmdOp::Flush;
  flush<R>(nc, ctx, queue, push<R>(nc, ctx, queue, f));
}

}  // namespace mk::net
