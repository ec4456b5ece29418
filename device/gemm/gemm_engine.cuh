// mkernel: the Hopper GEMM engine (TMA + WGMMA, persistent, role-aware).
//
// Contract (DESIGN.md §3): a fused kernel gives the engine CTAs
// [0, p.num_compute) of its grid; each calls gemm::run_compute(p, smem)
// with kThreads threads and kSmemBytes of dynamic shared memory
// (kSmemBytesAsync with EpilogueHook::async_store or tma_store). Inside a CTA:
//   warpgroup 0      producer: one thread walks the tile scheduler, waits
//                    on the load hook, issues TMA loads into a kStages ring
//                    (full/empty mbarriers); the warpgroup gives up registers.
//   warpgroups 1..2  consumers: wgmma m64n256k16 over 64 rows each, then
//                    the epilogue hook (store / add, local or peer, signal,
//                    network put) straight from registers, or staged in
//                    shared memory for a bulk copy / TMA store.
// The producer runs ahead into the next tile while consumers store, so the
// epilogue overlaps the next tile's loads. The CTA's shared-memory layout,
// bounded waits and tile geometry are in device/gemm/engine_base.cuh, the
// epilogues in device/gemm/epilogue.cuh; this file holds the producer, the
// MMA loop, the consumer's dispatch and run_compute.
//
// NOTES: producer and consumers walk the same StaticSchedule, or (dynamic
// tile queue, GemmParams::tile_counter) the producer claims each tile and
// passes its index through a shared-memory ring with the tile's first
// stage; only the producer waits for ArrivalQueue slots, consumers read the slot's m-block
// after its data arrived (so it was published). Every mbarrier wait is
// bounded by p.timeout_ns and reports which role waited for which stage.
// Tried and dropped: 2-CTA clusters sharing the B tile by TMA multicast
// (each CTA loads half, both CTAs' consumers release each stage;
// tools/wip/cta-pairs.patch). Correct; with the partner's empty barrier
// arrived on at cluster scope ptxas fenced every release (MEMBAR.ALL.GPU,
// 0.80x); at CTA scope 0.98-1.00x of the engine without pairs: halving B's
// L2 reads buys nothing; the K loop already runs at the tensor peak per
// clock (1024 cycles per 128 x 256 x 64 step, H200), and ~8000 cycles per
// tile outside it were the gap (bench/results/gemm-cta-pairs-20261202.md);
// ~4000 since the stmatrix epilogue (gemm-epilogue-20261202.md).
#pragma once

#include "engine_base.cuh"
#include "epilogue.cuh"
#include "../trace.cuh"

namespace mk::gemm {

namespace detail {

// ---- producer ----------------------------------------------------------------

__device__ __forceinline__ void wait_before_load(const GemmParams& p, const TileRows& r) {
  if (p.load.kind != LoadWait::RowSignal) return;
  const uint64_t expected =
      p.load.epoch_counter ? *reinterpret_cast<volatile const uint64_t*>(p.load.epoch_counter) + 1 : p.load.expected;
  const int64_t last = (r.row0 + kBlockM < r.row_end ? r.row0 + kBlockM : r.row_end) - 1;
  for (int64_t s = r.row0 / p.load.rows_per_signal; s <= last / p.load.rows_per_signal; ++s)
    wait_signal(p, p.load.signals + s, expected,
                p.load.peer_of_signal_div ? static_cast<int>(s / p.load.peer_of_signal_div) : -1);
}

// Owner-reduce tiles (EpilogueHook::own_mask) read every source's partial
// tile (64 KB, contiguous: FragMajor) in their epilogue. The producer asks
// L2 for them once it has issued the tile's last loads (the consumers are
// then up to kStages K blocks, a few us, from their epilogue): read from HBM
// by the consumers' few outstanding loads, the adds took ~18 us per tile
// (trace of the 1x2 GEMM+RS, M=4096, with TileMajor sources then; asking
// 8-64 K blocks earlier changed nothing: gemm-owner-fragmajor-20261201.md). L2 is where NVLink writes into this
// GPU land, so lines fetched before a source's signal stay coherent.
// own_tile_key: the tile's destination and offset among d's tiles packed
// in one word (-1: not an owner-reduce tile); one register lives across
// the K loop (more spilled the producer's 56).
__device__ __forceinline__ int64_t own_tile_key(const GemmParams& p, const sched::Tile& t, const TileRows& r) {
  if (!p.epi.own_mask) return -1;
  const int d = static_cast<int>(r.row0 / p.epi.rows_per_dest);
  if (!((p.epi.own_mask >> d) & 1u)) return -1;
  return dest_tile_id(p, t, d) * kMaxDests + d;
}
__device__ __forceinline__ void prefetch_own_sources(const GemmParams& p, int64_t key) {
  if (key < 0) return;
  const EpilogueHook& e = p.epi;
  const int d = static_cast<int>(key % kMaxDests);
  const int64_t off = (key / kMaxDests) * (kBlockM * kBlockN);
  for (int s = 0; s < e.own_nsrc; ++s)
    dev::sm90::prefetch_l2(e.own_slots + s * e.own_src_stride + e.own_dst_off[d] + off, kBlockM * kBlockN * 2);
  if (d != e.own_final) return;
  for (int s = 0; s < e.own_net_nsrc; ++s)
    dev::sm90::prefetch_l2(e.own_net_slots + s * e.own_net_stride + off, kBlockM * kBlockN * 2);
}

__device__ __forceinline__ void producer(const GemmParams& p, const Smem& s, int cta) {
  PipeState st;
  sched::StaticSchedule it(p.sched, cta, p.num_compute);
  it.end = total_units(p);
  const int64_t total = it.end;
  int64_t w;
  for (int64_t seq = 0;; ++seq) {
    if (p.tile_counter) {  // dynamic: claim, hand the index to the consumers with the tile's first stage
      const int64_t c = static_cast<int64_t>(atomicAdd(reinterpret_cast<unsigned long long*>(p.tile_counter), 1ull));
      w = c < total ? c : -1;
      s.ring[seq % kRing] = w;
      if (w < 0) {  // the end, as a stage with no data
        mbar_wait(p, &s.empty[st.stage], st.phase ^ 1u, st.stage);
        dev::sm90::mbar_arrive(&s.full[st.stage]);
        break;
      }
    } else if (!it.get_next(&w)) {
      break;
    }
    const WorkUnit un = work_unit(p, w);
    const sched::Tile t = next_tile(p, un.tile, true);
    const TileRows r = tile_rows(p, t);
    // Rows from the second source need no wait (they are local input).
    const bool second = r.row0 >= p.a2_row_lo && r.row0 + kBlockM <= p.a2_row_hi;
    const CUtensorMap* map_a = second ? &p.tma_a2 : &p.tma_a;
    const int32_t arow = second ? r.row0 - p.a2_row_lo : r.row0;
    if (p.load.kind != LoadWait::None && !second) {
      wait_before_load(p, r);
      dev::sm90::fence_proxy_async_global();  // the rows we waited for are read by TMA
    }
    const int32_t brow = t.group * p.n + t.n_blk * kBlockN;
    const KRange kr = k_range(p, un);
    const int64_t own_key = own_tile_key(p, t, r);
    for (int kb = kr.begin; kb < kr.end; ++kb) {
      mbar_wait(p, &s.empty[st.stage], st.phase ^ 1u, st.stage);
      dev::sm90::mbar_arrive_expect_tx(&s.full[st.stage], kStageBytes);
      dev::sm90::tma_load_2d(s.a + st.stage * kStageBytesA, map_a, &s.full[st.stage], kb * kBlockK, arow);
      dev::sm90::tma_load_2d(s.b + st.stage * kStageBytesB, &p.tma_b, &s.full[st.stage], kb * kBlockK, brow);
      st.advance();
    }
    prefetch_own_sources(p, own_key);
  }
}

// ---- consumer ----------------------------------------------------------------

// acc = A rows [64 wg, 64 wg + 64) of the tile times B^T over the K
// blocks of work unit w (the whole of K, or one part of a split tile).
// held: the stage the previous tile's TMA-store epilogue (or owner-final TMA stores, own_tma_store) staged its
// boxes in (-1: none), handed back once its boxes were read out, under this tile's first MMAs; hold: keep this
// tile's last stage for its epilogue (TMA-store, owner-final TMA and async epilogues; in the async one warpgroup 1
// and the storer hand it back).
__device__ __forceinline__ void mma_tile(const GemmParams& p, const Smem& s, PipeState& st, int wg, int64_t w,
                                         float (&acc)[128], int& held, bool hold) {
  const bool leader = (threadIdx.x % 128) == 0;
  const KRange kr = k_range(p, work_unit(p, w));
  const int kblocks = kr.end - kr.begin;
  int prev = -1;
  for (int kb = 0; kb < kblocks; ++kb) {
    mbar_wait(p, &s.full[st.stage], st.phase, st.stage);
    const uint8_t* a = s.a + st.stage * kStageBytesA + wg * (64 * kBlockK * 2);
    const uint8_t* b = s.b + st.stage * kStageBytesB;
    const uint64_t da = dev::sm90::wgmma_desc_sw128(a);
    const uint64_t db = dev::sm90::wgmma_desc_sw128(b);
    dev::sm90::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBlockK / 16; ++kk)  // 16 bf16 = 32 bytes = 2 descriptor units per step
      dev::sm90::wgmma_m64n256k16_bf16(acc, da + 2 * kk, db + 2 * kk, (kb | kk) != 0);
    dev::sm90::wgmma_commit();
    if (kb == 0 && held >= 0) {
      if (leader) {
        dev::bulk_wait_read<0>();  // the previous tile's boxes read out of the held stage
        dev::sm90::mbar_arrive(&s.empty[held]);
      }
      held = -1;
    }
    dev::sm90::wgmma_wait<1>();  // the previous stage's MMAs are done: hand it back
    if (prev >= 0 && leader) dev::sm90::mbar_arrive(&s.empty[prev]);
    prev = st.stage;
    st.advance();
  }
  dev::sm90::wgmma_wait<0>();
  if (hold)
    held = prev;
  else if (prev >= 0 && leader)
    dev::sm90::mbar_arrive(&s.empty[prev]);
  dev::sm90::fence_operands(acc);
}

// A held stage whose tile goes out through none of the TMA store, the owner-final TMA stores and the async
// epilogue: handed back at once.
__device__ __forceinline__ void release_held(const Smem& s, int& held) {
  if (held >= 0 && threadIdx.x % 128 == 0) dev::sm90::mbar_arrive(&s.empty[held]);
  held = -1;
}

template <bool kAsyncEpi, bool kTmaStore>
__device__ __forceinline__ void consumer(const GemmParams& p, const Smem& s, int cta, int wg) {
  // Start signals (LoadHook::start_signals) gate the epilogue's first store;
  // waited here, by the consumers (the producer's 56 registers would spill,
  // and loading early is harmless).
  if (p.load.num_start > 0) {
    if (threadIdx.x == 128) {
      const uint64_t expected = p.load.epoch_counter
                                    ? *reinterpret_cast<volatile const uint64_t*>(p.load.epoch_counter) + 1
                                    : p.load.expected;
      for (int i = 0; i < p.load.num_start; ++i) wait_signal(p, p.load.start_signals + i, expected, i);
    }
    dev::sm90::named_sync(1, 128 * kConsumerWarpgroups);
  }
  PipeState st;
  float acc[128];
  sched::StaticSchedule it(p.sched, cta, p.num_compute);
  it.end = total_units(p);
  int64_t w;
  uint32_t async_tiles = 0;
  int held = -1;  // see mma_tile
  const bool own_tma = kAsyncEpi && p.epi.own_tma;  // owner-final tiles by TMA from the held stage
  const bool hold = (kTmaStore && p.epi.tma_store) || (kAsyncEpi && p.epi.async_store) || own_tma;
  for (int64_t seq = 0;; ++seq) {
    if (p.tile_counter) {  // the index came with the tile's first stage (release/acquire via the mbarrier)
      mbar_wait(p, &s.full[st.stage], st.phase, st.stage);
      w = *reinterpret_cast<volatile const int64_t*>(s.ring + seq % kRing);
    } else if (!it.get_next(&w)) {
      w = -1;
    }
    if (w < 0) {
      if (threadIdx.x == 128) dev::trace(p.trace, static_cast<int>(blockIdx.x) - p.trace.first, dev::TraceKind::CtaEnd, 0);
      break;
    }
    if (threadIdx.x == 128) dev::trace(p.trace, static_cast<int>(blockIdx.x) - p.trace.first, dev::TraceKind::UnitBegin, static_cast<uint32_t>(w));
    mma_tile(p, s, st, wg, w, acc, held, hold);
    if (threadIdx.x == 128) dev::trace(p.trace, static_cast<int>(blockIdx.x) - p.trace.first, dev::TraceKind::UnitMmaDone, static_cast<uint32_t>(w));
    int64_t tw = w;  // the tile of unit w (with split tiles, not w itself)
    if (p.split_tiles) {  // an earlier part of a split tile stops here; the last adds them and goes on
      const WorkUnit un = work_unit(p, w);
      tw = un.tile;
      if (un.part >= 0) {
        if (un.part < p.split_parts - 1) {
          release_held(s, held);
          split_store(p, un.split, un.part, wg, acc);
          continue;
        }
        split_gather(p, un.split, wg, acc);
      }
    }
    const sched::Tile t = next_tile(p, tw, false);
    const TileRows r = tile_rows(p, t);
    if (p.epi.own_mask) {
      const int d = static_cast<int>(r.row0 / p.epi.rows_per_dest);
      if ((p.epi.own_mask >> d) & 1u) {
        // An aggregator's tile goes on to the staged epilogue; a final one keeps the stage for its TMA stores.
        if (d == p.epi.own_final && !own_tma) release_held(s, held);
        if (p.epi.bcast_n) bcast_partial(p, t, wg, acc);  // one-shot all-reduce: peers get the partial first
        own_accumulate(p, t, wg, d, acc);
        if (d == p.epi.own_final) {  // final rows: published only for an all-reduce
          if (own_tma)
            own_tma_store(p, s, t, r, wg, held, acc);  // the stage goes back at the next tile's first MMAs
          else
            own_store(p, t, r, wg, acc);
          if (p.epi.fin_publish) publish_final(p, t, r, own_tma);
          continue;
        }
      }
    }
    if (kTmaStore && p.epi.tma_store) {  // staged per warpgroup, written by TMA while the next tile computes
      tma_store_tile(p, s, t, r, wg, held, acc);
      continue;
    }
    if (kAsyncEpi && p.epi.async_store) {  // staged (the held stage and the area); the storer copies it out
      epi_stage_held(p, s, async_tiles, wg, tw, held, acc);
      held = -1;  // handed back by warpgroup 1 and the storer
      ++async_tiles;
      continue;
    }
    release_held(s, held);
    // FragMajor partial tiles only in kernels built with the asynchronous
    // epilogue (GEMM+RS / GEMM+AR; the standalone and AG kernels spilled
    // 8 bytes with this path): the standalone gemm::launch takes FragMajor
    // only where every tile is an owner-final tile, the AG plan never sets it.
    if (kAsyncEpi && p.epi.layout == OutLayout::FragMajor)
      store_tile_frag(p, t, r, wg, acc);
    else
      store_tile(p, t, r, wg, acc);
    publish_tile(p, t, r);
  }
  if (kAsyncEpi && p.epi.async_store) epi_finish(s, async_tiles);
  if (((kTmaStore && p.epi.tma_store) || own_tma) && threadIdx.x % 128 == 0) dev::bulk_wait_all();  // before the end
  release_held(s, held);
}

}  // namespace detail

// Compute role body: CTA `cta` of p.num_compute, kThreads threads,
// kSmemBytes of dynamic shared memory at `smem`. kAsyncEpi: the kernel
// supports EpilogueHook::async_store (a storer thread in the producer
// warpgroup; kernels that never use it leave it out: its code pushed the
// AG kernel's registers into spills). kTmaStore: the kernel supports
// EpilogueHook::tma_store (no extra thread; kSmemBytesAsync).
template <bool kAsyncEpi = false, bool kTmaStore = false>
__device__ __forceinline__ void run_compute(const GemmParams& p, uint8_t* smem, int cta) {
  const detail::Smem s = detail::carve(smem);
  const int wg = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    for (int i = 0; i < kStages; ++i) {
      dev::sm90::mbar_init(&s.full[i], 1);
      dev::sm90::mbar_init(&s.empty[i], kConsumerWarpgroups);
    }
    dev::sm90::mbar_init(s.epi_full, 128 * kConsumerWarpgroups);
    dev::sm90::mbar_init(&s.epi_empty[0], 1);
    s.epi_tile[0] = s.epi_tile[1] = 0;  // not the end mark (-1): the storer polls them (epilogue.cuh storer_wait)
    dev::sm90::mbar_fence_init();
    dev::sm90::tma_prefetch_desc(&p.tma_a);
    dev::sm90::tma_prefetch_desc(&p.tma_b);
    if (p.a2_row_hi > p.a2_row_lo) dev::sm90::tma_prefetch_desc(&p.tma_a2);
    if (p.epi.tma_store || p.epi.own_tma) dev::sm90::tma_prefetch_desc(&p.tma_out);
    if (p.epi.own_tma == 2) dev::sm90::tma_prefetch_desc(&p.tma_out2);
  }
  __syncthreads();
  if (threadIdx.x == 0) dev::trace(p.trace, static_cast<int>(blockIdx.x) - p.trace.first, dev::TraceKind::CtaStart, 0);
  if (wg == 0) {
    dev::sm90::regs_dealloc<56>();
    if (threadIdx.x == 0) detail::producer(p, s, cta);
    if (kAsyncEpi && threadIdx.x == 32 && p.epi.async_store) detail::storer(p, s);
  } else {
    dev::sm90::regs_alloc<224>();
    detail::consumer<kAsyncEpi, kTmaStore>(p, s, cta, wg - 1);
  }
}

}  // namespace mk::gemm
