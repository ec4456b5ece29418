// mkernel: the attention engine's plain-old-data contract (host fills it,
// device/attention/attn_engine.cuh runs it). No CUDA-only syntax: host .cpp
// files include it.
//
// The engine computes, for every (batch b, query head h, query tile), the
// softmax attention of its queries over a list of key/value segments,
// online in fp32 (FlashAttention's rescaling), and writes O (bf16) and the
// log-sum-exp (fp32, natural log). A segment is a run of consecutive tokens
// of one K/V source (the caller's own K/V, or a slot of the ring op's
// gather buffer) with the global position of its first token, so the same
// engine serves one GPU (one segment), and ring attention with zigzag
// shards (two query segments, two key segments per shard), with the causal
// mask decided by global positions. A segment can wait for a signal before
// its first block is loaded (K/V still arriving from another rank).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "../ctx.hpp"
#include "../trace.hpp"

namespace mk::attn {

constexpr int kBlockM = 128;  // query rows per tile (two consumer warpgroups of 64)
// Keys per block (the kernel's template argument BN, and AttnParams::block_n):
// 176 for the one-GPU op (FlashAttention-3's block at D = 128: more keys per
// softmax step; 1.01-1.08x over 128 at S >= 4k, bench/results/
// attention-bn176-20261201.md). Kernels that run a side role in the
// producer warpgroup (the ring op, block_n_side): 176 at D = 128 too since
// 2026-12-02, the side role within the producer's 56 registers (attn_engine
// .cuh, Regs; device/roles/kv_push.cuh says what its copy loop must avoid;
// before, 88 / 208 registers and 144-key blocks: bench/results/ring-engine-
// 176-20261202.md). 128 at D = 64 (where 144 was 0.94-0.98x of 128).
constexpr int kBlockNOneGpu = 176;
constexpr int block_n_side(int head_dim) { return head_dim == 128 ? 176 : 128; }
constexpr int kThreads = 384;  // producer warpgroup + two consumer warpgroups
constexpr int kMaxQSegs = 2;
constexpr int kMaxKvSegs = 32;  // 2 per shard: 16 ranks with zigzag
constexpr int kMaxKvMaps = 2;

// Shared-memory geometry per head dimension (64 or 128) and key block (128,
// 144 or 176). A stage holds a K block and a V block (with barriers of their
// own: K's stage is free once S is computed, V's once P V is); Q holds one
// tile. Boxes are 64 columns (128 bytes, TMA's 128-byte swizzle) x 128 rows
// (Q) or BN rows (K, V).
template <int D, int BN>
struct Geom {
  static_assert(BN == 128 || BN == 144 || BN == 176, "128-, 144- or 176-key blocks");
  static constexpr int kBoxes = D / 64;
  static constexpr int kBoxBytes = 128 * 128;  // a Q box
  static constexpr int kQBytes = kBoxes * kBoxBytes;
  static constexpr int kKvBoxBytes = BN * 128;
  static constexpr int kKvBytes = kBoxes * kKvBoxBytes;  // one K (or V) block
  // D = 128: three 128-key stages (the engine issues S of block i+1 with P V
  // of block i, attn_engine.cuh, so the producer needs a stage ahead of
  // both); two of 144 or 176 keys fit, and suffice because K's half of a
  // stage is freed one P V earlier than V's. D = 64: four (with 176 keys
  // 1.01-1.05x over three, bench/results/attention-bn176-20261201.md).
  static constexpr int kStages = D == 128 ? (BN > 128 ? 2 : 3) : 4;
  static constexpr int kSmemBytes = 1024 + kQBytes + kStages * 2 * kKvBytes + 256;
  // The 256-byte barrier area (attn_engine.cuh carve): q_full, q_empty, 4 per
  // stage, the Q ring, the failed, done and side words.
  static_assert(8 * (2 + 4 * kStages) + 8 + 4 + 4 + 4 <= 256, "barrier area");
  static_assert(kSmemBytes <= 227 * 1024, "more dynamic shared memory than an sm_90 CTA may have");
};

// A run of query tokens [s0, s0 + len) of Q (and O, LSE), global positions
// pos0.. (< 2^30). tile0: index of its first tile among all query tiles.
struct QSeg {
  int32_t s0;
  int32_t len;
  int32_t pos0;
  int32_t tile0;
};

// A run of key/value tokens [s0, s0 + len) of K/V map `map`, batch
// coordinate b + batch_off, global positions pos0.. . sig >= 0: before the
// first block, wait until signals[sig + b * kv_heads + hkv] >= the call's
// expected value (the chunk arrived); -1: no wait.
struct KvSeg {
  int32_t map;
  int32_t batch_off;
  int32_t s0;
  int32_t len;
  int32_t pos0;
  int32_t sig;
};

struct AttnParams {
  // 4-D tensor maps, 128-byte swizzle, boxes of 64 x 128 tokens (q) or 64 x block_n (k, v):
  //   q: dims {D, heads, S_q, batch}, coordinates (d0, h, s, b)
  //   k/v[i]: kv_seq_dim[i] == 2: dims {D, kv_heads, S, batches}, coords (d0, hkv, s, b)
  //           kv_seq_dim[i] == 1: dims {D, S, kv_heads, batches}, coords (d0, s, hkv, b)
  CUtensorMap q;
  CUtensorMap k[kMaxKvMaps];
  CUtensorMap v[kMaxKvMaps];
  int32_t kv_seq_dim[kMaxKvMaps];

  void* o;        // bf16 [batch, S_q, heads, D] (token rows, head-major inside)
  float* lse;     // fp32 [batch, heads, S_q]
  int32_t batch;
  int32_t heads;
  int32_t kv_heads;  // divides heads (GQA: query head h reads kv head h / (heads / kv_heads))
  int32_t s_q;       // tokens of Q / O per batch
  int32_t head_dim;  // 64 or 128 (the kernel's template argument)
  int32_t causal;    // mask keys at positions > the query's
  float scale_log2;  // softmax scale * log2(e)

  int32_t n_qsegs;
  int32_t n_kvsegs;
  int32_t q_tiles;  // query tiles over all segments
  QSeg qseg[kMaxQSegs];
  KvSeg kvseg[kMaxKvSegs];

  // Work units (batch, head, query tile): claimed from *unit_counter (an
  // atomic counter, 0 at launch: late CTAs, e.g. communication CTAs that
  // finished, take what is left) or, without it, walked by CTA c as c,
  // c + n, ... Order: the batch x heads heads (b * heads + h) in groups of
  // group_heads, group by group; inside a group one query tile of each head
  // at a time, latest positions (heaviest under a causal mask) first.
  // group_heads = 1 is head-major (the tiles of a head together: K/V pushed
  // head by head arrive in this order, and the CTAs share one head's K/V in
  // L2); >= batch x heads is tile-major. default_group_heads
  // (attn_walk.hpp) picks for the one-GPU op.
  int32_t num_compute;
  int32_t group_heads;
  uint64_t* unit_counter;

  // Signals of segments with sig >= 0, and the value they wait for:
  // (*epoch_counter + 1) * sig_mult if epoch_counter, else expected.
  const uint64_t* signals;
  const uint64_t* epoch_counter;
  uint64_t expected;
  uint64_t sig_mult;

  uint64_t timeout_ns;
  int32_t has_ctx;  // ctx valid: failures are recorded for the host
  int32_t block_n;  // keys per block: the kernel's BN (kBlockNOneGpu, block_n_side), K/V maps' box rows
  DeviceCtx ctx;
  dev::TraceBuf trace;  // optional event log (device/trace.hpp): chunk waits
};

}  // namespace mk::attn
