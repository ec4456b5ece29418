// mkernel: the GEMM engine's shared pieces (device/gemm/gemm_engine.cuh):
// shared-memory layout of a CTA, bounded waits on mbarriers and signals,
// the pipeline state, and the geometry of a tile (its rows, columns,
// fragment rows, index at its destination, the tile of a work index).
// Header-only; the engine and its epilogues (device/gemm/epilogue.cuh)
// include it.
#pragma once

#include "../bounded_wait.cuh"
#include "../bulk_copy.cuh"
#include "../fragment.cuh"
#include "gemm_params.hpp"
#include "sm90.cuh"
#include "../net/net.cuh"
#include "../signals.cuh"

namespace mk::gemm::detail {

// Work indices handed from the producer to the consumers (dynamic tile
// queue): slot seq % kRing holds the seq-th tile's index (-1: no more).
// The producer runs at most kStages stages (>= 1 per tile) ahead of the
// consumers, so kRing > kStages + 1 slots are never overwritten unread.
constexpr int kRing = 8;
static_assert(kRing > kStages + 1, "tile ring too short");
static_assert(kStages >= 2, "the TMA-store epilogue holds one stage past a tile's MMAs (gemm_engine.cuh mma_tile)");

struct Smem {
  uint8_t* a;      // kStages x kStageBytesA
  uint8_t* b;      // kStages x kStageBytesB
  uint8_t* epi;    // kEpiBytes: a half tile for the storer (async_store; kSmemBytesAsync launches); two of the
                   // TMA store's boxes 16 KB past its next 1024-byte boundary (tma_box_base; epilogue.cuh)
  uint64_t* full;  // kStages
  uint64_t* empty; // kStages
  int64_t* ring;   // kRing
  uint64_t* epi_full;   // both consumer warpgroups staged their halves (256 arrivals; epilogue.cuh async)
  uint64_t* epi_empty;  // [0]: the storer read warpgroup 1's half out of s.epi (1 arrival); [1] unused
  int64_t* epi_tile;    // [2]: async tile i's work index x kStages + held stage at [i % 2] (-1: no more)
};

// The barriers, tile ring and epilogue words fit in the 256 bytes before s.epi.
static_assert(2 * kStages * 8 + kRing * 8 + 8 + 2 * 8 + 2 * 8 <= 256, "carve: barrier area overflows into s.epi");

__device__ __forceinline__ Smem carve(uint8_t* raw) {
  const uint32_t base = dev::sm90::smem_addr(raw);
  uint8_t* p = raw + ((1024u - (base & 1023u)) & 1023u);
  Smem s;
  s.a = p;
  s.b = p + kStages * kStageBytesA;
  s.full = reinterpret_cast<uint64_t*>(p + kStages * kStageBytes);
  s.epi = p + kStages * kStageBytes + 256;  // past the barriers: only in kSmemBytesAsync launches
  s.empty = s.full + kStages;
  s.ring = reinterpret_cast<int64_t*>(s.empty + kStages);
  s.epi_full = reinterpret_cast<uint64_t*>(s.ring + kRing);
  s.epi_empty = s.epi_full + 1;
  s.epi_tile = reinterpret_cast<int64_t*>(s.epi_empty + 2);
  return s;
}
// The TMA store's boxes (128-byte swizzle: 1024-byte aligned): s.epi
// rounded up, i.e. 768 bytes on (kSmemBytesAsync has room for it).
__device__ __forceinline__ uint8_t* tma_box_base(const Smem& s) {
  return s.epi + ((1024u - (dev::sm90::smem_addr(s.epi) & 1023u)) & 1023u);
}

// Bounded waits (device/bounded_wait.cuh): on this CTA's pipeline
// (`stage` reported) and on signal words.
__device__ __forceinline__ void give_up(const GemmParams& p, int peer, const uint64_t* sig, uint64_t expected,
                                        uint64_t seen, uint64_t waited) {
  dev::engine_give_up(p, peer, sig, expected, seen, waited);
}
__device__ __forceinline__ void mbar_wait(const GemmParams& p, uint64_t* bar, uint32_t parity, int stage) {
  dev::engine_mbar_wait(p, bar, parity, stage);
}
__device__ __forceinline__ void wait_signal(const GemmParams& p, const uint64_t* sig, uint64_t expected, int peer) {
  dev::engine_wait_signal(p, sig, expected, peer);
}

// A full command queue in the epilogue: bounded, call-free (see above), reported as a Compute CTA's wait.
using OnFullQuiet = net::detail::OnFullDevice<dev::Report::Quiet, Role::Compute>;

struct PipeState {
  int stage = 0;
  uint32_t phase = 0;
  __device__ __forceinline__ void advance() {
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1u;
    }
  }
};

// Rows [row0, row_end) of A for a tile (grouped: of its group).
struct TileRows {
  int32_t row0;     // first row of the tile in A / out
  int32_t row_end;  // one past the group's (or matrix's) last row
};

__device__ __forceinline__ TileRows tile_rows(const GemmParams& p, const sched::Tile& t) {
  if (p.sched.order == sched::TileOrder::Grouped) {
    const int32_t g0 = p.group_row_start[t.group];
    return TileRows{g0 + t.m_blk * kBlockM, p.group_row_start[t.group + 1]};
  }
  if (p.sched.share_rows > 0) {  // ragged shares (TileSchedParams::share_rows): a tile ends with its share
    const int32_t sh = t.m_blk / p.sched.share_blocks;
    const int32_t r0 = sh * p.sched.share_rows;
    return TileRows{r0 + (t.m_blk - sh * p.sched.share_blocks) * kBlockM, r0 + p.sched.share_rows};
  }
  return TileRows{t.m_blk * kBlockM, p.m};
}

// Fragment geometry shared by every epilogue path. wgmma's accumulator
// layout: thread l of warp w of consumer warpgroup wg holds rows
// 64 wg + 16 w + l/4 (+ 8 for h = 1) of the tile; frag_row is that row.
__device__ __forceinline__ int frag_row(int wg, int h) {
  return wg * 64 + ((threadIdx.x % 128) / 32) * 16 + (threadIdx.x % 32) / 4 + 8 * h;
}
// Columns of tile t inside the matrix (a multiple of 64).
__device__ __forceinline__ int tile_ncols(const GemmParams& p, const sched::Tile& t) {
  const int col0 = t.n_blk * kBlockN;
  return p.n - col0 < kBlockN ? p.n - col0 : kBlockN;
}
// Index of tile t among the TileMajor / FragMajor tiles of destination d (whose rows
// start at d rows_per_dest, a multiple of kBlockM, or, with ragged shares,
// at its share's first row-block).
__device__ __forceinline__ int64_t dest_tile_id(const GemmParams& p, const sched::Tile& t, int d) {
  const int64_t blocks = p.sched.share_rows > 0 ? p.sched.share_blocks : p.epi.rows_per_dest / kBlockM;
  return tile_id(p.sched, t) - int64_t(d) * blocks * p.sched.n_blocks;
}

// Tile of work index w (ArrivalQueue: the producer first waits until the
// index's arrival slot was published).
__device__ __forceinline__ sched::Tile next_tile(const GemmParams& p, int64_t w, bool producer) {
  if (p.sched.order == sched::TileOrder::ArrivalQueue) {
    const int64_t slot = w / p.sched.n_blocks;
    if (producer) wait_signal(p, p.load.arrival_count, p.load.arrival_base + slot + 1, -1);
    sched::Tile t;
    t.m_blk = *reinterpret_cast<const volatile int32_t*>(p.sched.arrival + slot);
    t.n_blk = static_cast<int32_t>(w % p.sched.n_blocks);
    return t;
  }
  return sched::tile_of(p.sched, w);
}

}  // namespace mk::gemm::detail
