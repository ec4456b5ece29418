// mkernel: the GEMM engine's epilogues (device/gemm/gemm_engine.cuh runs
// them from its consumer warpgroups): the accumulator fragment's 16-byte
// packing, plain / 16-byte / atomic stores, signals and network puts per
// tile or row-block, the reduce-scatter owner's adds, the TMA-store and
// asynchronous (storer thread) epilogues, and split tiles.
#pragma once

#include "engine_base.cuh"

namespace mk::gemm::detail {

// 16-byte epilogue accesses: quad_transpose (device/fragment.cuh) turns
// wgmma's accumulator layout (lane q of a quad: columns 8 (4g + i) + 2 q of
// 4 consecutive groups) into one whole 8-column group per lane.
using dev::quad_transpose;

// Packs (row half h) of column groups 4g..4g+3 and transposes: lane q then
// holds columns [8 (4g + q), 8 (4g + q) + 8) of its row as one uint4.
__device__ __forceinline__ uint4 quad_pack(const float (&acc)[128], int g, int h) {
  uint32_t v[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) v[i] = dev::sm90::pack_bf16x2(acc[4 * (4 * g + i) + 2 * h], acc[4 * (4 * g + i) + 2 * h + 1]);
  quad_transpose(v);
  return make_uint4(v[0], v[1], v[2], v[3]);
}

// FragMajor (OutLayout::FragMajor): this thread's acc[8 u .. 8 u + 7] as
// bf16, the 16-byte chunk u of its fragment; frag_store writes all 16 at
// `half` (its warpgroup's 32 KB of the tile), chunk u at (128 u + i) * 16
// for thread i of the warpgroup: each warp store covers 512 contiguous
// bytes.
__device__ __forceinline__ uint4 frag_chunk(const float (&acc)[128], int u) {
  using dev::sm90::pack_bf16x2;
  return make_uint4(pack_bf16x2(acc[8 * u], acc[8 * u + 1]), pack_bf16x2(acc[8 * u + 2], acc[8 * u + 3]),
                    pack_bf16x2(acc[8 * u + 4], acc[8 * u + 5]), pack_bf16x2(acc[8 * u + 6], acc[8 * u + 7]));
}
__device__ __forceinline__ void frag_store(char* half, const float (&acc)[128]) {
  uint4* dst = reinterpret_cast<uint4*>(half) + threadIdx.x % 128;
#pragma unroll
  for (int u = 0; u < 16; ++u) dst[128 * u] = frag_chunk(acc, u);
}

// Reduce-scatter owner / aggregator tile of destination d (bit d of
// EpilogueHook::own_mask): acc += the sources' partial tiles. All 256
// consumer threads; thread 128 waits for the row-block's signals first.
// kOwnLoadBatch 16-byte loads in flight per thread (4 registers each,
// beside the 128 accumulators; 4 or 16 changed no register count). Per
// source tile the loads and adds take ~0.4-1.7 us (mkbench gemm_owner;
// 5.3-6.3 at M >= 2048, up to 13 at M = 1024, with TileMajor sources, whose
// row pieces needed a lane transpose per chunk:
// bench/results/gemm-owner-fragmajor-20261201.md).
constexpr int kOwnLoadBatch = 8;
__device__ __forceinline__ void own_accumulate(const GemmParams& p, const sched::Tile& t, int wg, int d,
                                               float (&acc)[128]) {
  const EpilogueHook& e = p.epi;
  const bool final_dest = d == e.own_final;
  const int nnet = final_dest ? e.own_net_nsrc : 0;
  const int64_t rb = e.own_per_tile ? dest_tile_id(p, t, d) : row_block_id(p.sched, t);
  if (threadIdx.x == 128) {
    const uint64_t expect = (*reinterpret_cast<volatile const uint64_t*>(p.load.epoch_counter) + 1) * e.own_expect;
    for (int s = 0; s < e.own_nsrc; ++s)
      wait_signal(p, e.own_signals + s * e.own_sig_stride + rb, expect, e.own_src_rank[s]);
    for (int s = 0; s < nnet; ++s)
      wait_signal(p, e.own_net_signals + s * e.own_sig_stride + rb, expect, e.own_net_src_rank[s]);
  }
  dev::sm90::named_sync(1, 128 * kConsumerWarpgroups);  // the wait (acquire) before every thread's loads
  {
    // One-shot (two ranks): add the bf16 partial the peer received, not the
    // fp32 one, so that both ranks add the same two bf16 values (fp32
    // addition commutes) and store the same bits. Selects, not a branch:
    // accumulator writes under a branch made ptxas serialise every wgmma
    // of the kernel (C7520).
    const bool round = e.bcast_n != 0;
#pragma unroll
    for (int i = 0; i < 128; i += 2) {
      const uint32_t v = dev::sm90::pack_bf16x2(acc[i], acc[i + 1]);
      acc[i] = round ? __uint_as_float(v << 16) : acc[i];
      acc[i + 1] = round ? __uint_as_float(v & 0xFFFF0000u) : acc[i + 1];
    }
  }
  // The sources' tiles are FragMajor: this thread's 16 chunks of each, 16
  // bytes at a stride of 2 KB, unpacked straight onto the accumulators they
  // belong to. Rows past the matrix (or the share) are added too: their
  // sums are never stored.
  const int64_t off = dest_tile_id(p, t, d) * (kBlockM * kBlockN) + wg * (64 * kBlockN);  // elements
  for (int s = 0; s < e.own_nsrc + nnet; ++s) {
    const uint16_t* base = s < e.own_nsrc ? e.own_slots + s * e.own_src_stride + e.own_dst_off[d]
                                          : e.own_net_slots + (s - e.own_nsrc) * e.own_net_stride;
    // L2, not L1: other GPUs (or the network) wrote these during the
    // kernel. validate_hooks: 16-byte aligned slots.
    const uint4* src = reinterpret_cast<const uint4*>(base + off) + threadIdx.x % 128;
#pragma unroll
    for (int u0 = 0; u0 < 16; u0 += kOwnLoadBatch) {
      uint4 x[kOwnLoadBatch];  // issued together: one L2 round trip per batch, not per load
#pragma unroll
      for (int j = 0; j < kOwnLoadBatch; ++j) x[j] = __ldcg(src + 128 * (u0 + j));
#pragma unroll
      for (int j = 0; j < kOwnLoadBatch; ++j) {
        const uint32_t v[4] = {x[j].x, x[j].y, x[j].z, x[j].w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          acc[8 * (u0 + j) + 2 * i] += __uint_as_float(v[i] << 16);
          acc[8 * (u0 + j) + 2 * i + 1] += __uint_as_float(v[i] & 0xFFFF0000u);
        }
      }
    }
  }
}

// Plain bf16 stores of this warpgroup's fragment: rowp[h] is where this
// thread's row (h) starts at the tile's first column (null: row beyond the
// matrix). 16 bytes per lane when every row start of the warp is 16-byte
// aligned (the vote keeps the shuffles uniform), else 4.
__device__ __forceinline__ void store_rows_bf16(char* const (&rowp)[2], const float (&acc)[128], int ncols) {
  const int lane = threadIdx.x % 32;
  bool ok = true;
#pragma unroll
  for (int h = 0; h < 2; ++h) ok = ok && (reinterpret_cast<uintptr_t>(rowp[h]) & 15u) == 0;
  if (__all_sync(0xffffffffu, ok)) {
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int g = 0; g < kBlockN / 32; ++g) {
        if (32 * g >= ncols) break;  // ncols is a multiple of 64: uniform
        const uint4 x = quad_pack(acc, g, h);
        if (rowp[h]) *reinterpret_cast<uint4*>(rowp[h] + (32 * g + 8 * (lane & 3)) * 2) = x;
      }
    return;
  }
  const int c_lane = 2 * (lane % 4);
#pragma unroll
  for (int j = 0; j < kBlockN / 8; ++j) {
    const int c = 8 * j + c_lane;
    if (c >= ncols) break;
#pragma unroll
    for (int h = 0; h < 2; ++h)
      if (rowp[h])
        *reinterpret_cast<uint32_t*>(rowp[h] + c * 2) = dev::sm90::pack_bf16x2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
  }
}

// One-shot all-reduce: this warpgroup's half of the partial tile to every
// node peer (EpilogueHook::bcast_out, FragMajor chunks), then, once both warpgroups stored,
// one signal per peer from one thread.
__device__ __forceinline__ void bcast_partial(const GemmParams& p, const sched::Tile& t, int wg,
                                              const float (&acc)[128]) {
  const EpilogueHook& e = p.epi;
  const int64_t off = dest_tile_id(p, t, e.own_final) * (kBlockM * kBlockN * 2);
  // Chunk by chunk, every peer: packing all 16 chunks once for the peers'
  // loop kept 64 more registers live (ptxas spilled).
  const int i0 = threadIdx.x % 128;
#pragma unroll
  for (int u = 0; u < 16; ++u) {
    const uint4 c = frag_chunk(acc, u);
    for (int i = 0; i < e.bcast_n; ++i)
      reinterpret_cast<uint4*>(static_cast<char*>(e.bcast_out[i]) + off + wg * kEpiBytes)[128 * u + i0] = c;
  }
  __threadfence_system();
  dev::sm90::named_sync(1, 128 * kConsumerWarpgroups);
  if (threadIdx.x == 128)
    for (int i = 0; i < e.bcast_n; ++i) dev::signal_add(e.bcast_sig[i] + off / (kBlockM * kBlockN * 2), 1);
}

// The owner's final rows (own_final): bf16 RowMajor into own_out.
__device__ __forceinline__ void own_store(const GemmParams& p, const sched::Tile& t, const TileRows& r, int wg,
                                          const float (&acc)[128]) {
  const EpilogueHook& e = p.epi;
  const int col0 = t.n_blk * kBlockN;
  const int64_t dest_row0 = int64_t(e.own_final) * e.rows_per_dest;
  char* rowp[2] = {nullptr, nullptr};
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t row = int64_t(r.row0) + frag_row(wg, h);
    if (row < r.row_end) rowp[h] = static_cast<char*>(e.own_out) + ((row - dest_row0) * e.own_ldo + col0) * 2;
  }
  store_rows_bf16(rowp, acc, tile_ncols(p, t));
}

// GEMM+AllReduce: the final rows of a tile are in own_out; signal them
// (and, for a row-block's last tile across nodes, send the row-block to
// the other nodes' rail peers). Every consumer thread fences its stores
// first (node peers read them over NVLink, the NIC reads them for puts);
// after TMA stores (tma: own_tma_store) each warpgroup's leader first
// waits for its stores into own_out to be written (not for the newest
// bulk group, the same boxes into out: own_tma_issue).
__device__ __forceinline__ void publish_final(const GemmParams& p, const sched::Tile& t, const TileRows& r,
                                              bool tma) {
  if (tma && threadIdx.x % 128 == 0) {
    if (p.epi.own_tma == 2)
      dev::bulk_wait<1>();
    else
      dev::bulk_wait_all();
    dev::sm90::fence_proxy_async_global();  // the async proxy's writes before the generic proxy's signal
  }
  // After TMA stores only the two leaders wrote (through their bulk groups): the other 254 threads skip the fence.
  if (!tma || threadIdx.x % 128 == 0) __threadfence_system();
  dev::sm90::named_sync(1, 128 * kConsumerWarpgroups);
  if (threadIdx.x != 128) return;
  const EpilogueHook& e = p.epi;
  const int64_t rb = row_block_id(p.sched, t);
  dev::signal_add(p.ctx.signals + e.fin_sig + rb, 1);
  if (!e.fin_net_n) return;
  const unsigned long long before = atomicAdd(reinterpret_cast<unsigned long long*>(e.fin_rb_count + rb), 1ull);
  if ((before + 1) % static_cast<unsigned long long>(p.sched.n_blocks) != 0) return;
  __threadfence_system();  // the row-block's other tiles (fenced before their adds) before the puts
  const uint64_t row_bytes = uint64_t(e.own_ldo) * 2;
  const uint64_t off = uint64_t(int64_t(r.row0) - int64_t(e.own_final) * e.rows_per_dest) * row_bytes;
  const int32_t rows = r.row_end - r.row0 < kBlockM ? r.row_end - r.row0 : kBlockM;  // a ragged share's last block
  const net::NetCtx& nc = *p.netctx;
  const net::CmdQueue& q = nc.queues[static_cast<unsigned>(e.net_queue) % static_cast<unsigned>(nc.num_queues)];
  for (int i = 0; i < e.fin_net_n; ++i) {
    net::CmdFields f;
    f.op = net::CmdOp::Put;
    f.peer = static_cast<uint32_t>(e.fin_net_peer[i]);
    f.region = static_cast<uint16_t>(e.net_region);
    f.dst_off = e.fin_net_dst_off[i] + off;
    f.src_off = e.fin_src_off + off;
    f.bytes = uint64_t(rows) * row_bytes;
    f.sig_op = static_cast<uint8_t>(net::SigOp::Add);
    f.sig_idx = static_cast<uint32_t>(e.fin_sig + rb);
    f.sig_value = static_cast<uint64_t>(p.sched.n_blocks);
    net::cmdq_push(q, f, OnFullQuiet{p.ctx, q});
  }
}

// Stores (or adds) this warpgroup's 64 x 256 fragment. wgmma's accumulator
// layout: thread l of warp w holds, for column group j (8 columns),
// (row 16 w + l/4 [+8], cols 8 j + 2 (l%4) + {0,1}) in acc[4 j + {0,1} (+2)].
__device__ __forceinline__ void store_tile(const GemmParams& p, const sched::Tile& t, const TileRows& r, int wg,
                                           const float (&acc)[128]) {
  const EpilogueHook& e = p.epi;
  const int lane = threadIdx.x % 32;
  const int col0 = t.n_blk * kBlockN;
  const int ncols = tile_ncols(p, t);
  const int64_t esize = e.op == EpiOp::AddF32 ? 4 : 2;  // bytes per output element
  char* rowp[2] = {nullptr, nullptr};
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int rin = frag_row(wg, h);  // row within the tile
    const int64_t row = int64_t(r.row0) + rin;
    if (row >= r.row_end) continue;
    const int d = e.rows_per_dest ? static_cast<int>(row / e.rows_per_dest) : 0;
    if (e.layout == OutLayout::TileMajor) {
      // rows_per_dest is a multiple of kBlockM here (validate_hooks).
      rowp[h] = static_cast<char*>(e.out[d]) + (dest_tile_id(p, t, d) * (kBlockM * kBlockN) + int64_t(rin) * kBlockN) * esize;
    } else {
      const int64_t lrow = row - int64_t(d) * e.rows_per_dest;
      rowp[h] = static_cast<char*>(e.out[d]) + (lrow * e.ldo + col0) * esize;
    }
  }
  if (e.op == EpiOp::Store) {  // 16-byte stores when aligned (TileMajor always; RowMajor with ldo % 8 == 0)
    store_rows_bf16(rowp, acc, ncols);
    return;
  }
  const int c_lane = 2 * (lane % 4);
#pragma unroll
  for (int j = 0; j < kBlockN / 8; ++j) {
    const int c = 8 * j + c_lane;
    if (c >= ncols) break;  // ncols is a multiple of 64: whole column groups drop out
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (!rowp[h]) continue;
      const float x = acc[4 * j + 2 * h], y = acc[4 * j + 2 * h + 1];
      if (e.op == EpiOp::AddBf16)
        dev::sm90::red_add_bf16x2(rowp[h] + c * 2, dev::sm90::pack_bf16x2(x, y));
      else
        dev::sm90::red_add_f32x2(rowp[h] + c * 4, x, y);
    }
  }
}

// FragMajor output (Store only, validate_hooks): the tile's destination
// (one: rows_per_dest is a multiple of kBlockM) gets this warpgroup's half.
__device__ __forceinline__ void store_tile_frag(const GemmParams& p, const sched::Tile& t, const TileRows& r, int wg,
                                                const float (&acc)[128]) {
  const EpilogueHook& e = p.epi;
  const int d = e.rows_per_dest ? static_cast<int>(r.row0 / e.rows_per_dest) : 0;
  frag_store(static_cast<char*>(e.out[d]) + dest_tile_id(p, t, d) * (kBlockM * kBlockN * 2) + wg * kEpiBytes, acc);
}

// The tile's signal and/or network put, from one thread whose view already
// orders every store of the tile before it.
__device__ __forceinline__ void publish_one(const GemmParams& p, const sched::Tile& t, const TileRows& r) {
  const EpilogueHook& e = p.epi;
  const int64_t id = e.signal == EpiSignal::PerRowBlock ? row_block_id(p.sched, t) : tile_id(p.sched, t);
  const int d = e.rows_per_dest ? static_cast<int>(r.row0 / e.rows_per_dest) : 0;
  if ((e.net >> d) & 1u) {
    const uint64_t tile_bytes = uint64_t(kBlockM) * kBlockN * 2;
    int64_t ltid = dest_tile_id(p, t, d);
    uint64_t tiles = 1;
    if (e.net_rb_count) {  // the row-block's last tile sends the row-block
      const unsigned long long before = atomicAdd(reinterpret_cast<unsigned long long*>(e.net_rb_count + id), 1ull);
      if ((before + 1) % static_cast<unsigned long long>(p.sched.n_blocks) != 0) return;
      __threadfence_system();  // the other tiles' stores (fenced before their adds) before the put
      ltid -= t.n_blk;
      tiles = static_cast<uint64_t>(p.sched.n_blocks);
    }
    const uint64_t bytes = tile_bytes * tiles;
    const uint64_t off = uint64_t(ltid) * tile_bytes;
    net::CmdFields f;
    f.op = net::CmdOp::Put;
    f.peer = static_cast<uint32_t>(e.net_peer[d]);
    f.region = static_cast<uint16_t>(e.net_region);
    f.dst_off = e.net_dst_off[d] + off;
    f.src_off = e.net_src_off[d] + off;
    f.bytes = bytes;
    if (e.signal != EpiSignal::None) {
      f.sig_op = static_cast<uint8_t>(net::SigOp::Add);
      f.sig_idx = static_cast<uint32_t>(e.net_sig_base[d] + id);
      f.sig_value = e.sig_delta * tiles;
    }
    const net::NetCtx& nc = *p.netctx;
    const net::CmdQueue& q = nc.queues[static_cast<unsigned>(e.net_queue) % static_cast<unsigned>(nc.num_queues)];
    net::cmdq_push(q, f, OnFullQuiet{p.ctx, q});
    return;
  }
  dev::signal_add(e.signals[d] + e.sig_base + id, e.sig_delta);
}

// After both consumer warpgroups stored a tile: signal and/or network put,
// from one thread, once every consumer's stores are ordered before it.
__device__ __forceinline__ void publish_tile(const GemmParams& p, const sched::Tile& t, const TileRows& r) {
  const EpilogueHook& e = p.epi;
  if (e.signal == EpiSignal::None && !e.net) return;
  // NOTES: every thread fences its own stores and reductions (possibly
  // posted to a peer GPU) before the barrier; one thread's fence after a
  // barrier does not wait for other threads' outstanding remote reductions.
  __threadfence_system();
  dev::sm90::named_sync(1, 128 * kConsumerWarpgroups);
  if (threadIdx.x == 128) publish_one(p, t, r);
}

// ---- TMA-store epilogue (EpilogueHook::tma_store) ---------------------------------
//
// The warpgroup's 64 rows in kBlockN / kTmaStoreCols = 4 boxes of 64 x 64
// (8 KB each, 1024-byte aligned), all written before any is stored, then
// stored by its first thread in one bulk group. Of the two warpgroups'
// 64 KB, 48 KB are the tile's last pipeline stage, which the consumers
// hold past their MMAs (mma_tile's `hold`: warpgroup 0 stages in its B
// part, warpgroup 1 in its A part), 16 KB the second half of the
// shared-memory epilogue area (warpgroup 1's last two boxes); the stage
// goes back to the producer under the next tile's first MMAs, once the
// boxes were read out. So the epilogue has no wait for an
// earlier box inside the tile and two barriers: the 256-thread one (B is
// read by both warpgroups' MMAs) and the warpgroup's before its stores.
// The producer meanwhile fills the other kStages - 1 stages with the next
// tile. The boxes are in the 128-byte swizzle (16-byte chunk j of row r at
// chunk j ^ (r % 8)).
// NOTES: before 2026-12-02 each warpgroup alternated two 8 KB buffers of
// the epilogue area (a wait for the box two back, two barriers per box:
// ~3000 cycles per tile); 4 buffers per warpgroup there fit only with 3
// stages, which cost the fused plans 2-6% (bench/results/ab-gemm-20261202c.md).
// The accumulators go in with stmatrix: wgmma's fragment of an 8-column
// block (row l / 4 and l / 4 + 8, columns 2 (l % 4) + {0, 1} in lane l) is
// stmatrix's 8 x 8 fragment, so each instruction stores four 8 x 8
// matrices (two column blocks, top and bottom rows of the warp's 16) with
// no lane exchange; a matrix's 8 rows hit 8 different 16-byte bank groups
// (the swizzle). The quad transpose with 16-byte stores it replaced was
// ~7000 cycles per tile on H200; stmatrix through two buffers ~3000
// (tools/wip/gemm-stamps.patch; bench/results/gemm-epilogue-20261202.md;
// the layout checked element by element by tools/wip/stmatrix_sim.py).
static_assert(kBlockN / kTmaStoreCols == 4 && kStageBytesB == 4 * kTmaBoxBytes && kStageBytesA == 2 * kTmaBoxBytes &&
                  kEpiBytes == 4 * kTmaBoxBytes,
              "the TMA-store boxes: warpgroup 0 in B, warpgroup 1 in A and the epilogue area's second half");
__device__ __forceinline__ uint8_t* tma_box(const Smem& s, int held, int wg, int c) {
  if (wg == 0) return s.b + held * kStageBytesB + c * kTmaBoxBytes;
  return c < 2 ? s.a + held * kStageBytesA + c * kTmaBoxBytes : tma_box_base(s) + c * kTmaBoxBytes;
}

// Box c (the tile's columns [64 c, 64 c + 64)) of this warpgroup's 64 rows into the 8 KB buffer at shared
// address `buf`, with stmatrix, in the 128-byte swizzle. c must be a constant after unrolling (it picks
// accumulator registers).
__device__ __forceinline__ void stmatrix_box(uint32_t buf, int c, const float (&acc)[128]) {
  using dev::sm90::pack_bf16x2;
  const int lane = threadIdx.x % 32;
  // Lane l addresses row l % 8 of matrix l / 8: matrices 0 / 1 are the top / bottom 8 rows of the first
  // column block of an instruction, 2 / 3 of the second.
  const int row = ((threadIdx.x % 128) / 32) * 16 + (lane & 7) + 8 * ((lane >> 3) & 1);  // of the warpgroup's 64
  const int blk = lane >> 4;  // 0: the first column block, 1: the second
#pragma unroll
  for (int q = 0; q < kTmaStoreCols / 16; ++q) {  // column blocks j0 = 2 q and j0 + 1 of the box
    const int j = c * (kTmaStoreCols / 8) + 2 * q;  // the first one's 8-column block in the tile
    const int chunk = 2 * q + blk;
    dev::sm90::stmatrix_x4(buf + row * (kTmaStoreCols * 2) + ((chunk ^ (row & 7)) << 4),
                           pack_bf16x2(acc[4 * j], acc[4 * j + 1]), pack_bf16x2(acc[4 * j + 2], acc[4 * j + 3]),
                           pack_bf16x2(acc[4 * j + 4], acc[4 * j + 5]), pack_bf16x2(acc[4 * j + 6], acc[4 * j + 7]));
  }
}

__device__ __forceinline__ void tma_store_tile(const GemmParams& p, const Smem& s, const sched::Tile& t,
                                               const TileRows& r, int wg, int held, const float (&acc)[128]) {
  const bool leader = threadIdx.x % 128 == 0;
  // Both warpgroups' MMAs on the held stage are done; warpgroup 1's leader waited (in mma_tile, before this
  // barrier) for its previous boxes in the epilogue area to be read out.
  dev::sm90::named_sync(1, 128 * kConsumerWarpgroups);
#pragma unroll
  for (int c = 0; c < kBlockN / kTmaStoreCols; ++c) stmatrix_box(dev::sm90::smem_addr(tma_box(s, held, wg, c)), c, acc);
  dev::sm90::fence_proxy_async_shared();  // the TMA (async proxy) reads what every thread wrote
  dev::sm90::named_sync(2 + wg, 128);
  if (leader) {
#pragma unroll
    for (int c = 0; c < kBlockN / kTmaStoreCols; ++c)
      dev::sm90::tma_store_2d(&p.tma_out, tma_box(s, held, wg, c), t.n_blk * kBlockN + c * kTmaStoreCols,
                              r.row0 + wg * 64);
    dev::bulk_commit();
  }
}

// ---- owner-final tiles by TMA (EpilogueHook::own_tma; GEMM+RS / GEMM+AR kernels) --------------------
//
// As the TMA-store epilogue, in the tile's held stage only (the epilogue area is the storer's in these
// kernels): warpgroup 0 stages its four boxes in the B part at once, warpgroup 1 two at a time in the A
// part (16 KB), waiting for its first two to be read out before it writes the last two. The boxes go to
// tma_out (own_out's share rows) and, with own_tma == 2, from the same shared memory to tma_out2. The
// stage goes back to the producer at the next tile's first MMAs (mma_tile), as after tma_store_tile.
// NOTES: until 2026-12-02 these rows left by 16-byte plain stores from the registers (own_store, still
// the path of the standalone kernel and of the one-shot all-reduce); GEMM+AR then copied its own share
// from the staging buffer into out in the gather.
__device__ __forceinline__ uint8_t* own_box(const Smem& s, int held, int wg, int c) {
  return wg == 0 ? s.b + held * kStageBytesB + c * kTmaBoxBytes : s.a + held * kStageBytesA + (c & 1) * kTmaBoxBytes;
}
// The leader's TMA stores of boxes [c0, c1): one bulk group into tma_out, then (own_tma == 2) one into tma_out2,
// so that publish_final can wait for the first alone (bulk_wait<1>: all groups but the newest). That holds only
// while a tma_out2 group is the leader's last commit before publish_final: keep it so.
__device__ __forceinline__ void own_tma_issue(const GemmParams& p, const Smem& s, int held, int wg, int c0, int c1,
                                              int col0, int row) {
  for (int c = c0; c < c1; ++c)
    dev::sm90::tma_store_2d(&p.tma_out, own_box(s, held, wg, c), col0 + c * kTmaStoreCols, row);
  dev::bulk_commit();
  if (p.epi.own_tma != 2) return;
  for (int c = c0; c < c1; ++c)
    dev::sm90::tma_store_2d(&p.tma_out2, own_box(s, held, wg, c), col0 + c * kTmaStoreCols, row);
  dev::bulk_commit();
}
__device__ __forceinline__ void own_tma_store(const GemmParams& p, const Smem& s, const sched::Tile& t,
                                              const TileRows& r, int wg, int held, const float (&acc)[128]) {
  const EpilogueHook& e = p.epi;
  const bool leader = threadIdx.x % 128 == 0;
  const int col0 = t.n_blk * kBlockN;
  const int row = static_cast<int>(int64_t(r.row0) - int64_t(e.own_final) * e.rows_per_dest) + wg * 64;  // in the share
  // No barrier first: the caller ran own_accumulate, whose 256-thread barrier came after both warpgroups'
  // last wgmma wait (the held stage's MMAs are done) and which touches no shared memory.
  if (wg == 0) {
#pragma unroll
    for (int c = 0; c < 4; ++c) stmatrix_box(dev::sm90::smem_addr(own_box(s, held, 0, c)), c, acc);
    dev::sm90::fence_proxy_async_shared();  // the TMA (async proxy) reads what every thread wrote
    dev::sm90::named_sync(2, 128);
    if (leader) own_tma_issue(p, s, held, 0, 0, 4, col0, row);
    return;
  }
#pragma unroll
  for (int c = 0; c < 2; ++c) stmatrix_box(dev::sm90::smem_addr(own_box(s, held, 1, c)), c, acc);
  dev::sm90::fence_proxy_async_shared();
  dev::sm90::named_sync(3, 128);
  if (leader) {
    own_tma_issue(p, s, held, 1, 0, 2, col0, row);
    dev::bulk_wait_read<0>();  // boxes 0 and 1 read out of the A part
  }
  dev::sm90::named_sync(3, 128);
#pragma unroll
  for (int c = 2; c < 4; ++c) stmatrix_box(dev::sm90::smem_addr(own_box(s, held, 1, c)), c, acc);
  dev::sm90::fence_proxy_async_shared();
  dev::sm90::named_sync(3, 128);
  if (leader) own_tma_issue(p, s, held, 1, 2, 4, col0, row);
}

// ---- asynchronous epilogue (EpilogueHook::async_store) -------------------------
//
// Async tile i of this CTA: both consumer warpgroups stage their 64 x 256
// bf16 halves (FragMajor chunks) at once, warpgroup 0 in the B part of the
// tile's last pipeline stage (held past the MMAs: mma_tile's `hold`),
// warpgroup 1 in the epilogue area once the storer read its previous half
// from there, and both arrive on epi_full (256 arrivals a tile). The
// storer copies the two halves to the tile's destination (two bulk
// copies, one group), hands the stage back for warpgroup 0 (warpgroup 1
// gave its share of it back once both warpgroups' MMAs were done) and the
// area to warpgroup 1 once they are read, then waits for the writes and
// publishes. s.epi_tile[i % 2] carries the work index and the stage.
// NOTES: a parity wait only tells the current phase from the one before,
// so each waiter must be at most one phase ahead of its barrier.
// epi_empty[0] completes once per tile (the storer read warpgroup 1's
// half); warpgroup 1 waits at tile i for completion i - 1, having waited
// for i - 2 at tile i - 1, so it is never two behind; the storer waits for
// epi_full's completion i, which needs warpgroup 1's arrival at tile i, after
// its wait for the storer's tile i - 1; the end mark arrives on nothing
// (epi_finish). The slots start at 0 (run_compute), never -1 before it. Before 2026-12-02 the two halves
// shared the epilogue area in turn (warpgroup 1 waited for the storer to
// read warpgroup 0's half: ~4-5 us per tile, bench/results/rs-trace-20261130.md);
// with one shared "empty" barrier then, warpgroup 1 once passed a wait two
// phases early on short-K tiles and overwrote a half before the storer read
// it (wrong sums on H200x2). The slot s.epi_tile[i % 2] is written by
// warpgroup 0 after the tile's 256-thread barrier, when warpgroup 1 has
// seen the storer finish tile i - 2 (its reader).
static_assert(kStageBytesB == kEpiBytes, "warpgroup 0's half fills the held stage's B part");

__device__ __forceinline__ void epi_stage_held(const GemmParams& p, const Smem& s, uint32_t i, int wg, int64_t w,
                                               int held, const float (&acc)[128]) {
  dev::sm90::named_sync(1, 128 * kConsumerWarpgroups);  // both warpgroups' MMAs on the held stage are done
  char* dst;
  if (wg == 1) {
    if (threadIdx.x == 256) dev::sm90::mbar_arrive(&s.empty[held]);  // warpgroup 1 is done with the stage
    if (i > 0) mbar_wait(p, &s.epi_empty[0], (i - 1) & 1u, kStageEpiEmpty);  // its previous half read out of the area
    dst = reinterpret_cast<char*>(s.epi);
  } else {
    if (threadIdx.x == 128) *reinterpret_cast<volatile int64_t*>(s.epi_tile + (i & 1u)) = w * kStages + held;
    dst = reinterpret_cast<char*>(s.b + held * kStageBytesB);
  }
  frag_store(dst, acc);  // the half as it lands (FragMajor): 512 bytes per warp store
  dev::sm90::fence_proxy_async_shared();  // the bulk copy (async proxy) reads what this thread wrote
  dev::sm90::mbar_arrive(s.epi_full);
}

// No more async tiles: the end mark in tile i's slot, with no arrival on
// epi_full (the storer sees it while it waits for phase i: storer_wait). An
// end mark that completed a phase of epi_full could come while the storer
// still waited for phase i - 1's parity, two phases behind: a hang (found
// in review by an exhaustive model of the barriers, 2026-12-02; a wait for
// the storer here instead made ptxas spill 516 bytes in the consumers).
__device__ __forceinline__ void epi_finish(const Smem& s, uint32_t i) {
  dev::sm90::named_sync(1, 128 * kConsumerWarpgroups);  // warpgroup 1 saw tile i - 2 finished (slot i % 2 read)
  if (threadIdx.x == 128) *reinterpret_cast<volatile int64_t*>(s.epi_tile + (i & 1u)) = -1;
}

// The storer's wait for async tile i: true once both halves are staged, false at the end mark.
struct EndMark {
  const volatile int64_t* slot;
  __device__ __forceinline__ bool operator()() const { return *slot < 0; }
};
__device__ __forceinline__ bool storer_wait(const GemmParams& p, const Smem& s, uint32_t i) {
  return dev::engine_mbar_wait_unless(p, s.epi_full, i & 1u, kStageEpiFull,
                                      EndMark{s.epi_tile + (i & 1u)});
}

__device__ __forceinline__ void storer(const GemmParams& p, const Smem& s) {
  const EpilogueHook& e = p.epi;
  for (uint32_t i = 0;; ++i) {
    if (!storer_wait(p, s, i)) break;
    const int64_t v = *reinterpret_cast<volatile const int64_t*>(s.epi_tile + (i & 1u));
    const int64_t w = v / kStages;
    const int stage = static_cast<int>(v % kStages);
    const sched::Tile t = next_tile(p, w, false);
    const TileRows r = tile_rows(p, t);
    const int d = e.rows_per_dest ? static_cast<int>(r.row0 / e.rows_per_dest) : 0;
    char* dst = static_cast<char*>(e.out[d]) + dest_tile_id(p, t, d) * (kBlockM * kBlockN * 2);
    dev::bulk_store(dst, s.b + stage * kStageBytesB, kEpiBytes);
    dev::bulk_store(dst + kEpiBytes, s.epi, kEpiBytes);
    dev::bulk_commit();
    dev::bulk_wait_read<0>();
    dev::sm90::mbar_arrive(&s.empty[stage]);   // warpgroup 0's share of the stage: back to the producer
    dev::sm90::mbar_arrive(&s.epi_empty[0]);   // the area: warpgroup 1's for its next half
    dev::bulk_wait_all();  // both halves written: signal / put
    dev::sm90::fence_proxy_async_global();
    __threadfence_system();
    if (e.signal != EpiSignal::None || e.net) publish_one(p, t, r);
  }
}

// Split tiles (GemmParams::split_tiles, split_parts P): each earlier part
// stores its fp32 accumulators in its slot of split_ws through L2 (no L1:
// another unit on this SM may have read the same slot in an earlier
// launch), then sets its flag to the launch's epoch; the last part waits
// until every earlier part's flag reached it (a flag per part, not a count:
// a plan's launches without compute, e.g. AgGemm::all_gather, move the
// epoch too, which left a count of epoch x (P - 1) forever short: found by
// mkbench ag_gemm's diagnosis), adds the earlier parts' slots onto its
// own accumulators (batched 16-byte loads, as the owner reduce does: no
// register beyond a batch) and the tile is then stored like any other (the
// plain or TMA-store epilogue). Each thread keeps its own values (32 float4
// at a stride of 128 threads: float4 j holds acc[4 j .. 4 j + 3]).
// NOTES: until 2026-12-01 the second of two halves stored its own
// accumulators too and wrote the rows from both slots with 4-byte stores
// (adding onto live accumulators had spilled then).
__device__ __forceinline__ float4* split_slot(const GemmParams& p, int i, int part, int wg) {
  return reinterpret_cast<float4*>(p.split_ws) +
         ((int64_t(i) * (p.split_parts - 1) + part) * kConsumerWarpgroups + wg) * (32 * 128);
}
__device__ __forceinline__ uint64_t* split_flag(const GemmParams& p, int i, int part, int wg) {
  return p.split_flags + (int64_t(i) * (p.split_parts - 1) + part) * kConsumerWarpgroups + wg;
}
__device__ __forceinline__ uint64_t split_epoch(const GemmParams& p) {
  return *reinterpret_cast<volatile const uint64_t*>(p.load.epoch_counter) + 1;
}
__device__ __forceinline__ void split_store(const GemmParams& p, int i, int part, int wg, const float (&acc)[128]) {
  float4* ws = split_slot(p, i, part, wg);
  const int tid = threadIdx.x % 128;
#pragma unroll
  for (int j = 0; j < 32; ++j) __stcg(ws + j * 128 + tid, make_float4(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]));
  dev::sm90::named_sync(2 + wg, 128);
  if (tid == 0) {
    __threadfence();  // cumulative: the warpgroup's stores (ordered by the barrier) before the flag
    dev::st_release<dev::Scope::Gpu>(split_flag(p, i, part, wg), split_epoch(p));
  }
}
constexpr int kSplitLoadBatch = 8;
__device__ __forceinline__ void split_gather(const GemmParams& p, int i, int wg, float (&acc)[128]) {
  const int tid = threadIdx.x % 128;
  if (tid == 0) {
    const uint64_t epoch = split_epoch(p);
    const uint64_t* f = split_flag(p, i, 0, wg);
#pragma unroll 1
    for (int q = 0; q < p.split_parts - 1; ++q) wait_signal(p, f + q * kConsumerWarpgroups, epoch, -1);
  }
  dev::sm90::named_sync(2 + wg, 128);
  for (int q = 0; q < p.split_parts - 1; ++q) {
    const float4* src = split_slot(p, i, q, wg) + tid;
#pragma unroll
    for (int j0 = 0; j0 < 32; j0 += kSplitLoadBatch) {
      float4 x[kSplitLoadBatch];
#pragma unroll
      for (int j = 0; j < kSplitLoadBatch; ++j) x[j] = __ldcg(src + (j0 + j) * 128);
#pragma unroll
      for (int j = 0; j < kSplitLoadBatch; ++j) {
        acc[4 * (j0 + j)] += x[j].x;
        acc[4 * (j0 + j) + 1] += x[j].y;
        acc[4 * (j0 + j) + 2] += x[j].z;
        acc[4 * (j0 + j) + 3] += x[j].w;
      }
    }
  }
}

}  // namespace mk::gemm::detail
