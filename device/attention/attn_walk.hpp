// mkernel: the attention engine's walk over work units and key blocks
// (device/attention/attn_engine.cuh runs it on the device; the CPU tests
// run the same code): which query tile a unit is, which key blocks of each
// segment it reads, and which keys of a block each query row may see.
// No CUDA-only syntax.
#pragma once

#include "device/attention/attn_params.hpp"

namespace mk::attn::detail {

struct Unit {
  int32_t b, h, hkv;
  int32_t s0;    // first query token of the tile in Q
  int32_t rows;  // valid query rows (<= kBlockM)
  int32_t pos0;  // global position of the first query row
};

// The one-GPU op's unit order (src/ops/attention/attn_host.cpp). Head-major
// (all CTAs on one head's query tiles) reads each K/V block from DRAM about
// once; tile-major (one query tile of every head, latest first) spreads the
// CTAs over the heads, so a block is read by ~num_compute / (batch x
// kv_heads) CTAs at once and otherwise comes from DRAM again, but under a
// causal mask it runs the heaviest tiles first (the CTAs walk units
// statically: better balance). Measured on H200 (bench/results/
// attention-order-20261201.md): head-major is 0.98-1.20x for every
// non-causal shape and 1.00-1.10x for causal MHA, but 0.86-0.96x for causal
// GQA at B=4 (tile-major kept there).
MK_HD int32_t default_head_major(int32_t causal, int32_t heads, int32_t kv_heads) {
  return !causal || kv_heads == heads ? 1 : 0;
}

MK_HD Unit unit_of(const AttnParams& p, int32_t u) {
  const int32_t bh_n = p.batch * p.heads;
  int32_t bh, t;
  if (p.head_major) {
    bh = u / p.q_tiles;
    t = p.q_tiles - 1 - u % p.q_tiles;
  } else {
    t = p.q_tiles - 1 - u / bh_n;
    bh = u % bh_n;
  }
  Unit x;
  x.b = bh / p.heads;
  x.h = bh % p.heads;
  x.hkv = x.h / (p.heads / p.kv_heads);
  const int sg = (p.n_qsegs > 1 && t >= p.qseg[1].tile0) ? 1 : 0;
  const QSeg& q = p.qseg[sg];
  const int32_t i = t - q.tile0;
  x.s0 = q.s0 + i * kBlockM;
  x.rows = q.len - i * kBlockM < kBlockM ? q.len - i * kBlockM : kBlockM;
  x.pos0 = q.pos0 + i * kBlockM;
  return x;
}

// Key blocks (of p.block_n keys) of segment g that unit u reads: all, or under a causal mask
// those with a key at a position <= the tile's last query.
MK_HD int seg_blocks(const AttnParams& p, const KvSeg& g, const Unit& u) {
  int n = (g.len + p.block_n - 1) / p.block_n;
  if (p.causal) {
    const int32_t reach = u.pos0 + u.rows - g.pos0;  // keys of g at positions <= the last query
    if (reach <= 0) return 0;
    const int32_t nr = (reach + p.block_n - 1) / p.block_n;
    if (nr < n) n = nr;
  }
  return n;
}

MK_HD int unit_blocks(const AttnParams& p, const Unit& u) {
  int n = 0;
  for (int g = 0; g < p.n_kvsegs; ++g) n += seg_blocks(p, p.kvseg[g], u);
  return n;
}

// The last key column (within block j of segment g) that query row `row` of
// unit u may see: keys past the segment's end are masked, and under a causal
// mask keys at positions after the query's. -1 or less: none.
MK_HD int32_t last_visible_key(const AttnParams& p, const Unit& u, const KvSeg& g, int j, int row) {
  const int32_t kvalid = g.len - j * p.block_n;
  const int32_t diag = u.pos0 + row - (g.pos0 + j * p.block_n);  // key column at the query's position
  return p.causal && diag < kvalid - 1 ? diag : kvalid - 1;
}

}  // namespace mk::attn::detail
