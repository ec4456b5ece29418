// mkernel: the plain-data contract of the GEMM engine (DESIGN.md §3, §8).
// Host code fills GemmParams once (src/ops/gemm/gemm_host.cpp); fused ops
// embed it in their own params and call the engine from their Compute role.
//
//   out[M x N] (bf16) = A[M x K] (bf16, row-major) * B[N x K]^T (bf16, the
//   torch.nn.Linear weight layout), fp32 accumulation.
//
// Grouped mode: G problems share one launch; group g owns rows
// [group_row_start[g], group_row_start[g+1]) of A and out, and rows
// [g N, (g+1) N) of B (experts stored [G, N, K]).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "../ctx.hpp"
#include "../net/net_ctx.hpp"
#include "../sched/tile_scheduler.hpp"
#include "../trace.hpp"

namespace mk::gemm {

// One tile configuration, chosen for H200 (see bench/results gemm runs):
// 128x256 output tiles computed by two consumer warpgroups (64 rows each,
// wgmma m64n256k16), one producer warpgroup issuing TMA, 4 pipeline stages
// of 64-deep K slices (48 KB each).
constexpr int kBlockM = 128;
constexpr int kBlockN = 256;
// The largest m, n x groups and k a launch takes (host checks: make_params, the TP plans): int32 index math on
// the device, with room for a last block's start plus its size.
constexpr int64_t kMaxDim = (int64_t(1) << 31) - kBlockN;
constexpr int kBlockK = 64;
constexpr int kStages = 4;
constexpr int kMaxSplitParts = 8;  // GemmParams::split_parts
constexpr int kConsumerWarpgroups = 2;
constexpr int kThreads = 128 * (1 + kConsumerWarpgroups);
constexpr uint32_t kStageBytesA = kBlockM * kBlockK * 2;
constexpr uint32_t kStageBytesB = kBlockN * kBlockK * 2;
constexpr uint32_t kStageBytes = kStageBytesA + kStageBytesB;
constexpr size_t kSmemBytes = size_t(kStages) * kStageBytes + 1024 /* alignment */ + 256 /* barriers, tile ring */;
// Asynchronous and TMA-store epilogues (EpilogueHook::async_store,
// tma_store): a 64 x 256 bf16 buffer after the barriers (async: one
// warpgroup's half tile for the storer's bulk copy; TMA store: its second
// half holds two of warpgroup 1's four 64 x 64 boxes in the 128-byte swizzle,
// from the next 1024-byte boundary on, 768 bytes later; the other six boxes
// are in the tile's last pipeline stage: epilogue.cuh); launches that use
// them ask for kSmemBytesAsync.
// NOTES: the plain size leaves ~31 KB of shared memory (and 1024
// registers) on each SM beside a persistent CTA, room for a transport's
// small kernels (emu signal adds, runtime copies); the async size leaves
// none. GEMM+RS keeps the storer's epilogue off next to such transports (a
// precaution, not measured); AgGemm's TMA stores run next to them (the
// grid leaves them MK_NET_FREE_SMS SMs; 2x1 emu tests and benchmark of 2026-11-30 14:41).
constexpr uint32_t kEpiBytes = 64 * kBlockN * 2;
// A warpgroup's 64 rows go out in kBlockN / kTmaStoreCols boxes of 128
// bytes a row (the widest box the 128-byte swizzle takes).
constexpr int kTmaStoreCols = 64;
constexpr uint32_t kTmaBoxBytes = 64 * kTmaStoreCols * 2;
constexpr size_t kSmemBytesAsync = kSmemBytes + (1024 - 256) /* TMA boxes aligned */ + kEpiBytes;
static_assert(kSmemBytesAsync <= 232448, "over the 227 KB of shared memory a Hopper CTA may use");
static_assert(kStageBytesA % 1024 == 0 && kStageBytesB % 1024 == 0, "stages must keep 1024-byte alignment");

// Wait-before-load hook: the producer waits before loading A rows that
// arrive from elsewhere.
enum class LoadWait : int32_t {
  None = 0,
  // Rows [r * rows_per_signal, (r+1) * rows_per_signal) of A (global row
  // index) are ready once signals[r] >= expected; a tile waits for every
  // signal its rows touch.
  RowSignal = 1,
  // ArrivalQueue order: arrival slot s is published once
  // *arrival_count >= arrival_base + s + 1 (sched.arrival[s] holds its m-block).
  ArrivalCount = 2,
};

struct LoadHook {
  LoadWait kind = LoadWait::None;
  const uint64_t* signals = nullptr;
  int64_t rows_per_signal = 0;
  uint64_t expected = 0;
  // When set, RowSignal waits for *epoch_counter + 1 instead of `expected`
  // (device/epoch.cuh: the launch's epoch, also under CUDA-graph replay).
  const uint64_t* epoch_counter = nullptr;
  const uint64_t* arrival_count = nullptr;
  uint64_t arrival_base = 0;
  int32_t peer_of_signal_div = 0;  // diagnostics: peer = signal index / this (0: unknown)
  // Before the epilogue's first store, the consumers wait until
  // start_signals[i] >= the launch's epoch (epoch_counter + 1, else
  // `expected`) for i < num_start: e.g. every destination rank entered this
  // call, so the epilogue may overwrite buffers they read in the previous
  // one. Diagnostics name i as the peer.
  const uint64_t* start_signals = nullptr;
  int32_t num_start = 0;
};

enum class EpiOp : int32_t {
  Store = 0,    // out = acc
  AddBf16 = 1,  // out (bf16) += acc (red.relaxed.sys.global.add.noftz.bf16x2)
  AddF32 = 2,   // out (fp32) += acc (red.relaxed.sys.global.add.v2.f32): partial sums kept in fp32, local or peer
};

enum class OutLayout : int32_t {
  RowMajor = 0,   // element (r, c) at out[r * ldo + c]
  TileMajor = 1,  // tile t (TileId) contiguous: out[t * kBlockM * kBlockN + r_in_tile * kBlockN + c_in_tile];
                  // with rows_per_dest, t counts tiles from the first of out[d]
  FragMajor = 2,  // as TileMajor, tile by tile (64 KB each, bf16 Store only), but inside a tile in the
                  // consumers' fragment order: warpgroup wg's 64 rows fill bytes [wg, wg + 1) * 32 KB, in
                  // which thread i of the warpgroup keeps its acc[8 u .. 8 u + 7] (bf16) as the 16-byte
                  // chunk at (128 u + i) * 16. Partial tiles that only the engine's owner reduce reads
                  // (GEMM+RS / GEMM+AR staging): both sides move whole 16-byte chunks, coalesced, with
                  // no lane shuffles (TileMajor's 16-byte row pieces needed a 4x4 transpose per chunk)
};

enum class EpiSignal : int32_t {
  None = 0,
  PerTile = 1,      // signals[dest][sig_base + tile id] += sig_delta
  PerRowBlock = 2,  // signals[dest][sig_base + row-block id] += sig_delta (n_blocks adds complete a row-block)
};

constexpr int kMaxDests = kMaxLocalRanks;

// Epilogue hooks. Rows go to destination d = row / rows_per_dest (0: all
// to destination 0), at row - d * rows_per_dest of out[d]; out[d] may be a
// peer GPU's buffer (NVLink, through the symmetric heap's mappings).
struct EpilogueHook {
  EpiOp op = EpiOp::Store;
  OutLayout layout = OutLayout::RowMajor;
  void* out[kMaxDests] = {};
  int64_t ldo = 0;  // elements (RowMajor)
  int64_t rows_per_dest = 0;
  EpiSignal signal = EpiSignal::None;
  uint64_t* signals[kMaxDests] = {};
  int64_t sig_base = 0;
  uint64_t sig_delta = 1;
  // Network: destinations whose bit is set in `net` are other nodes' ranks:
  // their rows are stored TileMajor / FragMajor into out[d] (this rank's send buffer, in
  // a registered region at net_src_off[d]), then the whole tile goes in one
  // put to rank net_peer[d] at net_dst_off[d] (+ the tile's offset), with a
  // signal Add sig_delta on net_sig_base[d] + tile/row-block id per `signal`.
  uint32_t net = 0;
  int32_t net_region = 0;
  int32_t net_queue = 0;
  int32_t net_peer[kMaxDests] = {};
  uint64_t net_src_off[kMaxDests] = {};
  uint64_t net_dst_off[kMaxDests] = {};
  int32_t net_sig_base[kMaxDests] = {};
  // Optional (PerRowBlock): one put per row-block instead of per tile. Each
  // tile adds 1 to net_rb_count[row-block id] (this GPU's memory, zeroed
  // once, counts kept across calls); the tile that completes the row-block
  // sends all its n_blocks tiles (contiguous, tile by tile) with one signal add
  // of n_blocks * sig_delta. Fewer, larger messages for the NIC.
  uint64_t* net_rb_count = nullptr;
  // Reduce-scatter owner / aggregator (device/roles/rs_layout.hpp): the
  // consumers of a tile of a destination d with bit d in own_mask first wait
  // until each source signalled the tile's row-block, then add the sources'
  // partial tiles (bf16, FragMajor, tile index counted from d's first row)
  // to the accumulator:
  //   NVLink sources s < own_nsrc: data at own_slots + s * own_src_stride +
  //     own_dst_off[d], signal own_signals[s * own_sig_stride + row-block];
  //   network sources s < own_net_nsrc, only for d == own_final: data at
  //     own_net_slots + s * own_net_stride, signal own_net_signals[s *
  //     own_sig_stride + row-block];
  // each signal must reach epoch * own_expect (epoch from
  // load.epoch_counter). Then d == own_final stores the bf16 sum RowMajor
  // into own_out (own_ldo), rows counted from d's first row; any other d is
  // stored and published as usual (the node's sum of another node's share,
  // sent over the network).
  // Asynchronous stores (FragMajor, whole tiles): consumers stage
  // each half tile in shared memory and go on to the next tile's MMAs; a
  // storer thread copies it out with the bulk copier (over NVLink to a
  // peer, or into this rank's send buffer), waits for the writes, then
  // signals / puts (publish). Owner-reduce final tiles: own_tma below.
  // The writes overlap compute instead of stalling the tensor cores (a
  // wave of 132 tiles writing 8 MB over NVLink at once).
  int32_t async_store = 0;
  // TMA stores (RowMajor Store epilogue only, kernels built with it): each
  // consumer warpgroup stages its 64 rows as four 64 x 64 boxes in the
  // tile's last pipeline stage (held past the MMAs) and the epilogue area
  // (epilogue.cuh), and one of its threads writes them with TMA tensor
  // stores through GemmParams::tma_out (which clips rows and columns
  // outside the matrix), then goes on to the next tile while the copy
  // drains; the stage goes back to the producer once the copy read it.
  // Plain stores from registers took ~4 us per 128 x 256 tile with every
  // CTA storing at once (trace of 2026-11-30).
  int32_t tma_store = 0;
  // Owner-final tiles by TMA stores (own_tma = 1 or 2; kernels built with the asynchronous epilogue, i.e.
  // GEMM+RS / GEMM+AR): the final rows are staged in the tile's last pipeline stage, held past the MMAs
  // (warpgroup 0's four 64 x 64 boxes in its B part, warpgroup 1's in its A part, two at a time: the
  // epilogue area belongs to the storer), and written by GemmParams::tma_out ([rows_per_dest x n] at
  // own_out, row stride own_ldo) and, with own_tma = 2, by tma_out2 too (the same rows into a second
  // buffer: GEMM+AR's out, which then needs no gather of the own share). See gemm::use_own_tma.
  int32_t own_tma = 0;
  uint32_t own_mask = 0;
  int32_t own_final = -1;
  int32_t own_nsrc = 0;
  int32_t own_net_nsrc = 0;
  const uint16_t* own_slots = nullptr;
  int64_t own_src_stride = 0;  // elements
  int64_t own_dst_off[kMaxDests] = {};  // elements
  const uint16_t* own_net_slots = nullptr;
  int64_t own_net_stride = 0;  // elements
  const uint64_t* own_signals = nullptr;
  const uint64_t* own_net_signals = nullptr;
  int64_t own_sig_stride = 0;
  uint64_t own_expect = 0;
  // For reports only: the global rank that signals NVLink source s and network source s (a wait past its bound
  // names it; the source indices are compact: rs::compact).
  int32_t own_src_rank[kMaxDests] = {};
  int32_t own_net_src_rank[kMaxDests] = {};
  void* own_out = nullptr;
  int64_t own_ldo = 0;
  // GEMM+AllReduce (fin_publish = 1): once the final rows of a tile are in
  // own_out (RowMajor, own_ldo == n, a buffer of the registered region
  // net_region at fin_src_off), this rank's signal fin_sig (pool index) +
  // row-block id grows by 1 (n_blocks adds complete a row-block); across
  // nodes the tile completing a row-block (count in fin_rb_count, indexed
  // like net_rb_count) also puts the row-block's rows, contiguous, to rank
  // fin_net_peer[i] (i < fin_net_n) at fin_net_dst_off[i] + their offset in
  // own_out, with a signal add of n_blocks on its fin_sig + row-block id.
  // One-shot all-reduce (bcast_n > 0; owner-reduce tiles of own_final):
  // before its owner reduce, a tile's partial goes to bcast_n node peers,
  // FragMajor at bcast_out[i] + its tile offset (tile id counted from
  // own_final's first row), then bcast_sig[i] + that id grows by 1. With
  // own_per_tile the owner reduce waits per tile (signal index: the tile
  // id, expecting epoch * own_expect) instead of per row-block.
  int32_t bcast_n = 0;
  int32_t own_per_tile = 0;
  void* bcast_out[kMaxDests] = {};
  uint64_t* bcast_sig[kMaxDests] = {};
  int32_t fin_publish = 0;
  int32_t fin_sig = 0;
  int32_t fin_net_n = 0;
  uint64_t* fin_rb_count = nullptr;
  uint64_t fin_src_off = 0;
  int32_t fin_net_peer[kMaxDests] = {};
  uint64_t fin_net_dst_off[kMaxDests] = {};
};

// Which CTAs of the launch compute: [0, num_compute). The rest run the
// launch's other roles (the Test role in the standalone GEMM).
struct GemmParams {
  CUtensorMap tma_a;  // [M_total, K], box kBlockK x kBlockM, 128-byte swizzle
  CUtensorMap tma_b;  // [G * N, K], box kBlockK x kBlockN, 128-byte swizzle
  // Optional second source of A rows: tiles whose rows all lie in
  // [a2_row_lo, a2_row_hi) load them from tma_a2 (row - a2_row_lo) and do not
  // wait on the load hook (e.g. a rank's own rows, straight from its input,
  // while the other rows arrive in the gathered buffer). Empty range: none.
  CUtensorMap tma_a2;
  CUtensorMap tma_out;  // EpilogueHook::tma_store: out [m x n] bf16, row stride ldo, box kTmaStoreCols x 64, SW128
                        // (EpilogueHook::own_tma: own_out [rows_per_dest x n], row stride own_ldo)
  CUtensorMap tma_out2;  // EpilogueHook::own_tma == 2: the second buffer of the own final rows, as tma_out
  int32_t a2_row_lo = 0;
  int32_t a2_row_hi = 0;
  int32_t m = 0;      // rows of A / out (grouped: total)
  int32_t n = 0;
  int32_t k = 0;
  int32_t num_compute = 0;
  const int32_t* group_row_start = nullptr;  // Grouped: num_groups + 1 prefix sums of rows (device)
  sched::TileSchedParams sched;              // order, blocks, grouped tile prefix sums
  LoadHook load;
  EpilogueHook epi;
  // Dynamic tile queue (optional): the producer of every Compute CTA
  // claims the next work index with an atomic add on *tile_counter (device,
  // 0 at the launch's start: the launch's last CTA resets it, see
  // dev::DeviceEpoch::tiles) instead of walking a static stride. CTAs may
  // then join late (finished communication CTAs call run_compute too), and
  // a CTA never waits for a tile that a CTA not yet resident holds.
  uint64_t* tile_counter = nullptr;
  // Split tiles (optional; needs tile_counter, load.epoch_counter and the
  // RowMajor Store epilogue, plain or TMA): the first split_tiles tiles of
  // the walk are each computed as split_parts parts of K by as many work
  // units, so that the waves come out even (448 tiles on 132 SMs: 4 waves
  // for 3.4 of work; with 52 tiles in halves, 3.5; in fifths, 3.4). Work
  // units: parts 0 .. P-2 of tiles [0, S) first (part by part), then tiles
  // [S, T) whole, then the last parts of tiles [0, S). Each earlier part
  // stores its fp32 accumulators in split_ws (per split tile, part and
  // consumer warpgroup, 64 x 256 floats) and sets its flag (split_flags,
  // same index) to the launch's epoch; the last part, a wave or more later,
  // waits until every earlier part's flag reached it (bounded), adds the earlier parts
  // onto its accumulators and writes the tile like any other
  // (device/gemm/epilogue.cuh split_gather). Earlier parts come before every
  // last part and wait for nothing later, so no unit waits for one that
  // has not started.
  int32_t split_tiles = 0;
  int32_t split_parts = 2;          // 2 .. kMaxSplitParts (and at most the K blocks)
  // 1: the split tiles are the walk's LAST split_tiles tiles, and the units
  // are tiles [0, T - S) whole, then the earlier parts, then the last parts
  // (split index = tile - (T - S)). For a walk whose waiting tiles come
  // last (GEMM+RS: the owner's final tiles, which wait for other ranks'
  // partial tiles while no tile waits for them): an earlier part waits for
  // nothing and a last part only for earlier parts claimed before it, so
  // the order stays deadlock-free; their epilogue may then be any
  // (validate_hooks: the owner's final tiles only).
  int32_t split_last = 0;
  float* split_ws = nullptr;        // split_tiles x (split_parts - 1) x 2 warpgroups x 64 x 256 floats
  uint64_t* split_flags = nullptr;  // split_tiles x (split_parts - 1) x 2 warpgroups, zero before the first launch
  uint64_t timeout_ns = 0;
  int32_t has_ctx = 0;  // ctx below is a communicator's (waits report through it)
  DeviceCtx ctx;
  const net::NetCtx* netctx = nullptr;  // device memory; for epi.net (kept out of the launch parameters: 1.3 KB)
  dev::TraceBuf trace{};                 // optional event log, indexed by CTA, blockIdx.x - trace.first (device/trace.hpp); off: null
};

// Work units of a launch (split tiles: split_parts each) and the tile and
// K part of unit u (part -1: whole tile; 0 .. split_parts - 1: that part
// of split tile `split`, which is also its tile index). 32-bit division
// (cheaper than 64-bit; unit counts stay far below 2^31: split tiles are
// fewer than the CTAs).
struct WorkUnit {
  int64_t tile;
  int32_t part;
  int32_t split;
};
MK_HD int64_t total_units(const GemmParams& p) {
  return sched::total_tiles(p.sched) + int64_t(p.split_tiles) * (p.split_tiles ? p.split_parts - 1 : 0);
}
MK_HD WorkUnit work_unit(const GemmParams& p, int64_t u) {
  // Units: w0 whole tiles (split_last: every unsplit tile; else none), the
  // earlier parts of split tiles [w0, w0 + s), the remaining whole tiles,
  // the last parts. One formula for both orders.
  const int64_t tiles = sched::total_tiles(p.sched);
  const int32_t s = p.split_tiles;
  const int64_t w0 = p.split_last ? tiles - s : 0;
  if (u < w0) return WorkUnit{u, -1, -1};
  u -= w0;
  const int64_t early = s ? int64_t(s) * (p.split_parts - 1) : 0;
  if (u < early) {
    const int32_t v = static_cast<int32_t>(u);
    return WorkUnit{w0 + v % s, v / s, v % s};
  }
  const int64_t rest = tiles - s - w0;  // whole tiles after the earlier parts
  if (u < early + rest) return WorkUnit{u - early + s, -1, -1};
  const int32_t i = static_cast<int32_t>(u - early - rest);
  return WorkUnit{w0 + i, p.split_parts - 1, i};
}

// K blocks [begin, end) of a work unit: all of K, or part p of P of a
// split tile (K blocks kblocks p / P to kblocks (p + 1) / P).
struct KRange {
  int32_t begin, end;
};
MK_HD KRange k_range(const GemmParams& p, const WorkUnit& u) {
  const int32_t kblocks = p.k / kBlockK;
  if (u.part < 0) return KRange{0, kblocks};
  return KRange{kblocks * u.part / p.split_parts, kblocks * (u.part + 1) / p.split_parts};
}

// Identity of a tile independent of the order it is computed in (signals,
// TileMajor / FragMajor offsets): the RowMajor index within the whole problem.
MK_HD int64_t tile_id(const sched::TileSchedParams& s, const sched::Tile& t) {
  const int64_t g0 = s.order == sched::TileOrder::Grouped ? s.group_tile_start[t.group] : 0;
  return g0 + int64_t(t.m_blk) * s.n_blocks + t.n_blk;
}

// Row-block id: m-blocks of earlier groups come first.
MK_HD int64_t row_block_id(const sched::TileSchedParams& s, const sched::Tile& t) {
  const int64_t g0 = s.order == sched::TileOrder::Grouped ? s.group_tile_start[t.group] / s.n_blocks : 0;
  return g0 + t.m_blk;
}

}  // namespace mk::gemm
