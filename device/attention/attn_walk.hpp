// mkernel: the attention engine's walk over work units and key blocks
// (device/attention/attn_engine.cuh runs it on the device; the CPU tests
// run the same code): which query tile a unit is, which key blocks of each
// segment it reads, and which keys of a block each query row may see.
// No CUDA-only syntax.
#pragma once

#include "attn_params.hpp"

namespace mk::attn::detail {

struct Unit {
  int32_t b, h, hkv;
  int32_t s0;    // first query token of the tile in Q
  int32_t rows;  // valid query rows (<= kBlockM)
  int32_t pos0;  // global position of the first query row
};

// The one-GPU op's unit order (src/ops/attention/attn_host.cpp), as heads
// per group (AttnParams::group_heads). Head-major (1: all CTAs on one
// head's query tiles) reads each K/V block from DRAM about once;
// tile-major (all heads in one group: one query tile of every head, latest
// first) spreads the CTAs over the heads, so a block is read by ~num_compute
// / (batch x kv_heads) CTAs at once and otherwise comes from DRAM again, but
// under a causal mask it runs the heaviest tiles first. Measured on H200
// with the units walked statically (bench/results/attention-order-20261201.md):
// head-major is 0.98-1.20x for every non-causal shape and 1.00-1.10x for
// causal MHA, but 0.86-0.96x for causal GQA at B=4, because a static walk of
// head-major's order hands some CTAs more work than others (tile-major kept
// there). With claimed units (default_claimed) under a causal mask
// (bench/results/attention-claim-20261205.md): tile-major where every head's
// K/V fits in three quarters of L2 (l2_bytes; the CTAs then balance like a
// longest-first schedule and K/V stays in L2); otherwise groups of whole KV
// heads whose K/V takes at most a quarter of L2 (one KV head if a single one
// takes more), the largest such group that divides the KV heads over the
// batch (unless that is under half of the largest): a group's heaviest
// tiles come after the previous group's lightest, so a small last
// group would end the call with few CTAs busy.
MK_HD int32_t default_group_heads(int32_t causal, int32_t batch, int32_t heads, int32_t kv_heads, int64_t seq_kv,
                                  int32_t head_dim, int32_t claimed, int64_t l2_bytes) {
  const int32_t all = batch * heads;
  if (!causal) return 1;
  if (!claimed) return kv_heads == heads ? 1 : all;
  const int64_t kv_head_bytes = seq_kv * head_dim * 2 * 2;  // K and V, bf16
  const int64_t kv_all = int64_t(batch) * kv_heads;
  if (kv_head_bytes <= 0 || kv_all * kv_head_bytes <= l2_bytes / 4 * 3) return all;
  int64_t gmax = l2_bytes / 4 / kv_head_bytes;
  if (gmax < 1) gmax = 1;
  int64_t g = gmax;
  for (int64_t d = gmax; d >= 1; --d)
    if (kv_all % d == 0) {
      if (2 * d >= gmax) g = d;
      break;
    }
  return static_cast<int32_t>(g * (heads / kv_heads));  // query heads of whole KV heads
}

// Whether the one-GPU op's CTAs claim units from a counter (MK_ATTN_UNITS=auto):
// under a causal mask units differ in work (a static walk c, c + n, ...
// gives CTA c the tiles of one residue of the tile index: at B=4, S=2k, 32
// heads, head-major, the busiest CTA has 17% more key blocks than the
// mean); without a mask they are equal and the walk is balanced without
// the counter's cost.
MK_HD int32_t default_claimed(int32_t causal) { return causal ? 1 : 0; }

MK_HD Unit unit_of(const AttnParams& p, int32_t u) {
  const int32_t bh_n = p.batch * p.heads;
  const int32_t gh = p.group_heads < 1 ? 1 : p.group_heads < bh_n ? p.group_heads : bh_n;
  const int32_t per_group = gh * p.q_tiles;
  const int32_t g = u / per_group, r = u - g * per_group;
  const int32_t gs = bh_n - g * gh < gh ? bh_n - g * gh : gh;  // the last group may be smaller
  const int32_t t = p.q_tiles - 1 - r / gs;
  const int32_t bh = g * gh + r % gs;
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
