// mkernel: the delivery ring, host proxy -> GPU (the reverse of cmd.hpp). A
// transport whose proxy must not issue CUDA work while a kernel waits on it
// (emu; bench/results/emu-work-queue-20261203.md) writes each write it wants
// done into this ring, at the time the write is due; the delivery agent, a
// CTA of every kernel that pushes network commands (device/net/agent.cuh),
// claims it, copies its bytes, writes its signal and marks it done. No copy
// engine, kernel launch or stream operation is involved, so nothing can queue
// in front of it.
//
// Slot layout (64 bytes, pinned host memory, written by the proxy thread: the
// body first, then w0 with a release store):
//   w0  stamp = sequence number + 1: publishes the slot
//   w1  [55:0]  bytes; [57:56] signal op (SigOp); [62] after (see w6);
//       [63] inline (bytes in w6..w7)
//   w2  source address (as this GPU addresses it; unused when inline)
//   w3  destination address (the peer's memory as this GPU addresses it)
//   w4  signal word address (0: none)
//   w5  signal value
//   w6  inline bytes 0..7; with `after`: k, the earlier chunks of this write
//       (the k slots before this one, 1 <= k < kMaxDeliveryChunks)
//   w7  inline bytes 8..15
// Chunks: the proxy may publish one write as up to kMaxDeliveryChunks
// consecutive slots, the first ones as their bytes leave the emulated link,
// so that their copy overlaps the wire time of the rest (src/net/emu/
// emu_ring.hpp says when). Only the last
// carries the signal, with `after`: its signal may be written only once the
// k slots before it are done (their done words hold at least sequence + 1).
// An agent that claimed all of them itself knows that already; one that did
// not waits for the other agents' done words (device/net/agent.cuh).
// Claims: agents take slots in order with a compare-and-swap on `claim`
// (device memory: several agents, of concurrent kernels, may serve one
// ring); `busy` (device memory) rouses the agents that rest. Completion:
// the agent stores sequence + 1 into done[seq % size] (pinned host), which
// the proxy reads; `claimed` (pinned host) mirrors
// `claim` for the proxy's stall reports. The proxy publishes slot s only
// once slot s - size is done, so a slot is never rewritten while claimed.
#pragma once

#include <cstdint>

#include "../ctx.hpp"
#include "cmd.hpp"

namespace mk::net {

struct alignas(64) DeliverySlot {
  uint64_t w[8];
};
static_assert(sizeof(DeliverySlot) == 64, "a delivery slot is one cache line");

constexpr uint64_t kDeliveryBytesMask = (uint64_t(1) << 56) - 1;
constexpr uint64_t kDeliveryInline = uint64_t(1) << 63;
constexpr uint64_t kDeliveryAfter = uint64_t(1) << 62;
// At most this many slots for one write (a warp of the agent reads the done
// words of all but the last in one round trip).
constexpr uint32_t kMaxDeliveryChunks = 32;

struct DeliveryRing {
  DeliverySlot* slots = nullptr;  // pinned host, `size` slots
  uint64_t* claim = nullptr;      // device memory: the next sequence to claim
  uint64_t* done = nullptr;       // pinned host, `size` words
  uint64_t* claimed = nullptr;    // pinned host: the claim counter as the agents last wrote it
  // Device memory: how many kernels' first agents are on a batch that wants
  // the others' help (device/net/agent.cuh); nullptr: the others never rest
  // (every agent polls the ring).
  uint64_t* busy = nullptr;
  uint32_t size = 0;              // power of two; 0: no ring
};

// Word w1 of a slot.
MK_HD uint64_t delivery_meta(uint64_t bytes, SigOp sig_op, bool inline_bytes, bool after = false) {
  return (bytes & kDeliveryBytesMask) | (uint64_t(static_cast<uint8_t>(sig_op) & 3u) << 56) |
         (inline_bytes ? kDeliveryInline : 0) | (after ? kDeliveryAfter : 0);
}
MK_HD uint64_t delivery_bytes(uint64_t meta) { return meta & kDeliveryBytesMask; }
MK_HD SigOp delivery_sig_op(uint64_t meta) { return static_cast<SigOp>((meta >> 56) & 3u); }
MK_HD bool delivery_inline(uint64_t meta) { return (meta & kDeliveryInline) != 0; }
MK_HD bool delivery_after(uint64_t meta) { return (meta & kDeliveryAfter) != 0; }

}  // namespace mk::net
