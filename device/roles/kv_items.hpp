// mkernel: the work items of the ring-attention K/V push (device/roles/
// kv_push.cuh): which chunk piece goes where. No CUDA-only syntax: the CPU
// tests enumerate the items of every rank of a topology with this code.
//
// Items, in order: own chunks, chunk-major (every piece of chunk 0 to every
// destination first), destinations r + 1, r + 2, ... of the node and then,
// with own_to_self, this rank's own slot (the network's source); then, on
// several nodes, the chunks that the rail peer j nodes on sent here, to the
// node's other ranks (j = 1 .. nodes - 1).
#pragma once

#include <cstdint>

#include "../ctx.hpp"
#include "claims.hpp"

namespace mk::roles {

struct KvItems {
  int32_t w, r;       // ranks per node, this rank's local rank
  int32_t own_dests;  // w - 1, + 1 with own_to_self
  int64_t chunks, pieces;
  int64_t own_items;  // own_dests x chunks x pieces
  int64_t items;      // + (nodes - 1) (w - 1) chunks pieces
};

MK_HD KvItems kv_items(int32_t w, int32_t r, int32_t nodes, bool own_to_self, int64_t chunks, int64_t pieces) {
  KvItems x;
  x.w = w;
  x.r = r;
  x.own_dests = (w - 1) + (own_to_self ? 1 : 0);
  x.chunks = chunks;
  x.pieces = pieces;
  x.own_items = int64_t(x.own_dests) * chunks * pieces;
  x.items = x.own_items + int64_t(nodes - 1) * (w - 1) * chunks * pieces;
  return x;
}

// Pieces of a chunk: ~16 KB each, so that every push CTA takes part in the
// first heads' chunks (one CTA per chunk moved ~3 GB/s with 4 loads in
// flight per thread: the compute waited). With one in flight
// (kv_push.cuh's kv_copy_piece) a CTA should move a quarter of the 64 KB
// pieces it took before 2026-12-02 in about the same time (not yet measured
// on 2 GPUs).
MK_HD int32_t kv_pieces(int64_t chunk_bytes) { return static_cast<int32_t>((chunk_bytes + 16383) / 16384); }

// 16-byte units per piece of a chunk of `units` (K's rows, then V's, of
// head_dim / 8 units each): an even share rounded up to whole rows, so that
// every piece starts at a row (kv_copy_piece's column walk). Piece p is
// [p per_piece, min((p + 1) per_piece, units)), empty past the end.
MK_HD int64_t kv_piece_units(int64_t units, int64_t pieces, int32_t head_dim) {
  const int64_t row_mask = head_dim / 8 - 1;  // 8 or 16 units per row
  return ((units + pieces - 1) / pieces + row_mask) & ~row_mask;
}

struct KvItem {
  int32_t d;      // destination local rank
  int32_t j;      // 0: own chunk; j >= 1: from the rail peer j nodes on (forwarded)
  int64_t c;      // chunk (b x kv_heads + hkv)
  int64_t piece;  // of the chunk
};

MK_HD KvItem kv_item(const KvItems& x, int64_t item) {
  KvItem it;
  int64_t q;
  const int64_t P = x.pieces;
  if (item < x.own_items) {
    it.j = 0;
    it.c = item / (x.own_dests * P);
    q = item % (x.own_dests * P);
    const int k = static_cast<int>(q / P);  // k-th destination: r + 1, r + 2, ..., then r itself
    it.d = k == x.w - 1 ? x.r : (x.r + 1 + k) % x.w;
  } else {
    const int64_t y = item - x.own_items;
    it.j = 1 + static_cast<int>(y / ((x.w - 1) * x.chunks * P));
    it.c = (y / ((x.w - 1) * P)) % x.chunks;
    q = y % ((x.w - 1) * P);
    it.d = (x.r + 1 + static_cast<int>(q / P)) % x.w;
  }
  it.piece = q % P;
  return it;
}

// The push's claims (kv_push.cuh, claimed at run time by the push CTAs that
// run): on one node, ncta parts of the items; on several, claim 0 is
// InterSend, then ncta - 1 parts of the own items, then ncta - 1 parts of
// the forwarded ones (every own part is claimed before any forwarded one).
// Claim v's items: first, first + stride, ... below end.
struct KvClaim {
  bool inter_send;
  int64_t first, end, stride;
};

MK_HD int kv_claims(int32_t nodes, int ncta) { return nodes > 1 ? 1 + 2 * (ncta - 1) : ncta; }

MK_HD KvClaim kv_claim(const KvItems& x, int32_t nodes, int ncta, int v) {
  KvClaim k{false, 0, 0, 1};
  const bool multi = nodes > 1;
  if (multi && v == 0) {
    k.inter_send = true;
    return k;
  }
  const PartRange p = own_first_part(x.own_items, x.items, multi ? ncta - 1 : ncta, multi ? v - 1 : v);
  k.first = p.first;
  k.end = p.end;
  k.stride = p.stride;
  return k;
}

}  // namespace mk::roles
