// mkernel: network commands, GPU -> host proxy. One command is one 64-byte
// cache line in a ring of pinned host memory; the GPU (or a host thread, in
// tests) writes words 1..7, then publishes word 0 with a release store.
//
// Bit layout (little endian, 8 x 64-bit words):
//   w0  [31:0]  stamp   = (sequence number + 1) mod 2^32; publishes the slot
//       [39:32] opcode  (CmdOp)
//       [47:40] sig_op  (0 none, 1 set, 2 add)
//       [63:48] region  (registered region id, 0 = signal region)
//   w1  [31:0]  peer    (global rank)
//       [63:32] sig_idx (signal word index in the peer's signal pool)
//   w2  src_off  byte offset in the local region
//   w3  dst_off  byte offset in the peer's region
//   w4  bytes
//   w5  sig_value
//   w6  aux      (PUT_INLINE: source bytes 0..7; else unused, reserved for ops)
//   w7  aux2     (PUT_INLINE: source bytes 8..15; else 0)
// A slot holds a valid command for sequence s exactly when its stamp equals
// (s + 1) mod 2^32; stamps of older laps differ by the ring size, so slots are
// never cleared.
#pragma once

#include <cstdint>

#include "../ctx.hpp"

namespace mk::net {

// What happens to the peer's signal word after the data of a write.
enum class SigOp : uint8_t { None = 0, Set = 1, Add = 2 };

enum class CmdOp : uint8_t {
  Put = 1,      // bytes from local region+src_off to peer region+dst_off, then optional signal
  Signal = 2,   // signal only (set/add sig_value at peer's sig_idx)
  Flush = 3,    // completes when every earlier command of this queue completed locally
  Barrier = 4,  // adds 1 to sig_idx on every rail peer (same local rank, other nodes)
  // A PUT of at most kMaxInlineBytes whose source bytes also travel in w6..w7
  // (read by the GPU when it pushed the command; unused bytes are 0). src_off
  // still names the source: a transport may use either.
  PutInline = 5,
};

// The most bytes a PUT_INLINE carries (words w6 and w7).
constexpr uint64_t kMaxInlineBytes = 16;

struct alignas(64) Cmd {
  uint64_t w[8];
};
static_assert(sizeof(Cmd) == 64, "a command is one cache line");

struct CmdFields {
  uint32_t stamp = 0;
  CmdOp op = CmdOp::Put;
  uint8_t sig_op = 0;
  uint16_t region = 0;
  uint32_t peer = 0;
  uint32_t sig_idx = 0;
  uint64_t src_off = 0;
  uint64_t dst_off = 0;
  uint64_t bytes = 0;
  uint64_t sig_value = 0;
  uint64_t aux = 0;
  uint64_t aux2 = 0;
};

MK_HD uint64_t pack_header(uint32_t stamp, CmdOp op, uint8_t sig_op, uint16_t region) {
  return uint64_t(stamp) | (uint64_t(static_cast<uint8_t>(op)) << 32) | (uint64_t(sig_op) << 40) |
         (uint64_t(region) << 48);
}

MK_HD uint32_t header_stamp(uint64_t w0) { return static_cast<uint32_t>(w0); }

// Body words 1..7 of a command (the header is published separately).
MK_HD void pack_body(const CmdFields& f, uint64_t body[7]) {
  body[0] = uint64_t(f.peer) | (uint64_t(f.sig_idx) << 32);
  body[1] = f.src_off;
  body[2] = f.dst_off;
  body[3] = f.bytes;
  body[4] = f.sig_value;
  body[5] = f.aux;
  body[6] = f.aux2;
}

MK_HD CmdFields unpack(const Cmd& c) {
  CmdFields f;
  f.stamp = static_cast<uint32_t>(c.w[0]);
  f.op = static_cast<CmdOp>(static_cast<uint8_t>(c.w[0] >> 32));
  f.sig_op = static_cast<uint8_t>(c.w[0] >> 40);
  f.region = static_cast<uint16_t>(c.w[0] >> 48);
  f.peer = static_cast<uint32_t>(c.w[1]);
  f.sig_idx = static_cast<uint32_t>(c.w[1] >> 32);
  f.src_off = c.w[2];
  f.dst_off = c.w[3];
  f.bytes = c.w[4];
  f.sig_value = c.w[5];
  f.aux = c.w[6];
  f.aux2 = c.w[7];
  return f;
}

MK_HD uint32_t stamp_for(uint64_t seq) { return static_cast<uint32_t>(seq + 1); }

}  // namespace mk::net
