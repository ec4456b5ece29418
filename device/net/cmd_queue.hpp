// mkernel: the GPU -> host command ring, producer side. The same code runs in
// CUDA kernels (many warps of many CTAs) and in host threads (tests).
//
// NOTES:
// - A producer claims sequence s with an atomic add on `head`, waits until
//   s < tail + size (the proxy has consumed the previous lap's command in that
//   slot), writes the body, then publishes the header with a system-scope
//   release. The proxy reads the header with acquire and checks the stamp.
// - Device producers read the proxy's `tail` (host memory, over PCIe) only
//   when the cached copy in device memory says the ring is full.
// - `done` is the proxy's count of locally completed commands, a prefix: all
//   commands with sequence < done have completed (source reusable).
#pragma once

#include <cstdint>

#include "cmd.hpp"


namespace mk::net {

struct CmdQueue {
  Cmd* ring = nullptr;             // pinned host memory, `size` commands
  uint64_t* head = nullptr;        // claim counter (device memory; host memory for host producers)
  uint64_t* tail_cache = nullptr;  // device memory (nullptr for host producers)
  uint64_t* tail = nullptr;        // pinned host: commands consumed by the proxy
  uint64_t* done = nullptr;        // pinned host: commands locally complete (prefix)
  uint32_t size = 0;               // power of two
  int32_t id = 0;
};

MK_HD uint64_t cmdq_load_acquire(const uint64_t* p) {
#if defined(__CUDA_ARCH__)
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
#else
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

MK_HD uint64_t cmdq_claim(const CmdQueue& q) {
#if defined(__CUDA_ARCH__)
  return atomicAdd(reinterpret_cast<unsigned long long*>(q.head), 1ull);
#else
  return __atomic_fetch_add(q.head, 1, __ATOMIC_RELAXED);
#endif
}

// True when slot `seq` may be written; refreshes the cached tail if needed.
MK_HD bool cmdq_has_room(const CmdQueue& q, uint64_t seq) {
#if defined(__CUDA_ARCH__)
  uint64_t cached = *reinterpret_cast<volatile uint64_t*>(q.tail_cache);
  if (seq < cached + q.size) return true;
  uint64_t t = cmdq_load_acquire(q.tail);
  atomicMax(reinterpret_cast<unsigned long long*>(q.tail_cache), static_cast<unsigned long long>(t));
  return seq < t + q.size;
#else
  return seq < cmdq_load_acquire(q.tail) + q.size;
#endif
}

// What cmdq_push reports to its optional `step` hook (diagnostics: the ring
// attention's InterSend traces them, tools/ring_trace.py).
enum class CmdStep : int { Claimed = 0, Room = 1, Body = 2 };
// The bound of a device wait on the proxy's progress (a full queue's room, a flush's completions): give up
// when the counter watched has not moved for timeout_ns, or after 3 x timeout_ns in all. A queue that drains, if
// at a slow link's rate behind a long backlog, is not stuck (the proxy bounds each operation itself); 3 x stays
// below the 4 x bound of the engines' pipeline waits in the same CTA (device/bounded_wait.cuh), whose report
// would name a stage instead.
struct ProgressBound {
  uint64_t t0 = 0;
  uint64_t t_moved = 0;  // when the counter was last seen to move
  uint64_t last = 0;
  MK_HD void start(uint64_t now, uint64_t value) {
    t0 = t_moved = now;
    last = value;
  }
  // true: give up (now and value: a fresh reading of the clock and the counter).
  MK_HD bool expired(uint64_t now, uint64_t value, uint64_t timeout_ns) {
    if (value != last) last = value, t_moved = now;
    return now - t_moved > timeout_ns || now - t0 > 3 * timeout_ns;
  }
};

struct NoCmdStep {
  MK_HD void operator()(CmdStep) const {}
};

template <typename Step = NoCmdStep>
MK_HD void cmdq_write(const CmdQueue& q, uint64_t seq, const CmdFields& f, const Step& step = Step{}) {
  Cmd* slot = q.ring + (seq & (q.size - 1));
  uint64_t body[7];
  pack_body(f, body);
  const uint64_t hdr = pack_header(stamp_for(seq), f.op, f.sig_op, f.region);
#if defined(__CUDA_ARCH__)
  volatile uint64_t* w = slot->w;
#pragma unroll
  for (int i = 0; i < 7; ++i) w[i + 1] = body[i];
  step(CmdStep::Body);
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(slot->w), "l"(hdr) : "memory");
#else
  for (int i = 0; i < 7; ++i) slot->w[i + 1] = body[i];
  step(CmdStep::Body);
  __atomic_store_n(&slot->w[0], hdr, __ATOMIC_RELEASE);
#endif
}

// Producer: claim, wait for room (calling on_full(seq) while the ring is full;
// it must bound the wait), write, publish. Returns the command's sequence.
template <typename OnFull, typename Step = NoCmdStep>
MK_HD uint64_t cmdq_push(const CmdQueue& q, const CmdFields& f, OnFull&& on_full, const Step& step = Step{}) {
  const uint64_t seq = cmdq_claim(q);
  step(CmdStep::Claimed);
  while (!cmdq_has_room(q, seq)) on_full(seq);
  step(CmdStep::Room);
  cmdq_write(q, seq, f, step);
  return seq;
}

// Consumer (host proxy): true and the command when slot `seq` is published.
inline bool cmdq_peek(const CmdQueue& q, uint64_t seq, CmdFields* out) {
  const Cmd* slot = q.ring + (seq & (q.size - 1));
  const uint64_t hdr = __atomic_load_n(&slot->w[0], __ATOMIC_ACQUIRE);
  if (header_stamp(hdr) != stamp_for(seq)) return false;
  Cmd c;
  c.w[0] = hdr;
  for (int i = 1; i < 8; ++i) c.w[i] = reinterpret_cast<const volatile uint64_t*>(slot->w)[i];
  *out = unpack(c);
  return true;
}

}  // namespace mk::net
