// mkernel: the all-gather half of the tensor-parallel all-reduce (GEMM+AR
// and the standalone AllReduce, src/ops/gemm_ar/): every rank copies every
// share's final rows, as they are finished, into its output (but its own
// where the owner stored them there too: skip_own, GEMM+AR's default).
//
// Where the final rows of share d (owner: global rank d on node dn, local
// index dl) are, seen from rank (n, l), in the staging buffer of node rank
// dl (the slots after the reduce-scatter's, ar_layout below):
//   dn == n: the owner's own final slot (NVLink from the owner, or local);
//   dn != n: the network receive slot for node dn of rank (n, dl), the rail
//            peer of the owner in this node, which received the rows once
//            from the owner (rail-aligned: each share crosses to each node
//            once, then fans out over NVLink).
// Either way the rows are ready when that rank's signal sig_fin + global
// row-block reached epoch * adds_per_block (the owner's epilogue adds one
// per tile, a network put adds the row-block's count with its data).
//
// Work: items (row-block, share, piece) from a dynamic counter, row-block
// major and the own share last in each step (the order owners finish
// them; none of it where the owner wrote it into out itself: skip_own);
// run()'s Gather CTAs take items all along and its compute CTAs join once
// out of tiles; all_reduce()'s CTAs once the reduce-scatter's claims ran
// out. Each item: one thread waits for the signal,
// then copies the piece with the bulk copier.
//
// NOTES: the final and receive slots are rewritten by the next call only
// after every rank that reads them ended its previous kernel (and so its
// gathers): the fused GEMM's consumers wait for every rank's entry signal
// before any store or put; a standalone reduce item writes a final piece
// only after that row-block's arrivals of the new call from every node
// peer and every other node's rail peer (whose node sums waited for their
// own node peers' pushes), so every rank that could read the slot has
// entered the new call, and this rank's previous put to the rail peer
// landed (the rail peer waited for its signal).
#pragma once

#include "../bulk_copy.cuh"
#include "claims.hpp"
#include "reduce_scatter.cuh"
#include "rs_layout.hpp"
#include "../signals.cuh"

namespace mk::roles {

constexpr dev::Report kArReport = dev::Report::Quiet;

// Slots after the reduce-scatter's (rs::Layout::num_slots()) in the
// staging buffer: the final rows of this rank's share, then one network
// receive slot per other node (compact index).
struct ArLayout {
  int32_t nodes = 1;
  MK_HD int final_slot(int rs_slots) const { return rs_slots; }
  MK_HD int recv_slot(int rs_slots, int src_node, int self_node) const {
    return rs_slots + 1 + rs::compact(src_node, self_node);
  }
  MK_HD int extra_slots() const { return nodes; }
};

struct ArGather {
  char* staging[kMaxLocalRanks];  // every node rank's staging buffer, by local rank
  char* out;                      // [W rows x n] bf16, RowMajor
  int64_t rows;                   // per share (the last row-block may be partial)
  int64_t n;
  int64_t row_block;
  int64_t slot_bytes;
  int32_t rs_slots;               // the reduce-scatter's slots before the final ones
  int32_t rank, world, node, local_rank;
  int8_t node_of[kMaxRsRanks];    // of each global rank
  int8_t local_of[kMaxRsRanks];
  int32_t sig_fin;                // pool index: + global row-block
  uint64_t adds_per_block;        // signal adds per row-block per call
  int32_t parts;                  // pieces per row-block (each 16-byte aligned)
  uint64_t* items;                // dynamic item counter (0 at the launch's start)
  int32_t skip_own;               // 1: the own share is in out already (EpilogueHook::own_tma == 2)
};

// The dynamic shared memory it needs: the bulk copier's stages and one slot.
constexpr size_t kArGatherSmem = dev::BulkStages::kSmemBytes + 16;

// Takes items until none is left; all threads of the CTA.
__device__ __forceinline__ void ar_gather(const DeviceCtx& ctx, const ArGather& g, uint64_t epoch,
                                          dev::BulkCopier<>& copier) {
  const int32_t role = static_cast<int32_t>(Role::IntraComm);
  const ArLayout lay{};
  auto* claim = reinterpret_cast<volatile int64_t*>(copier.smem() + dev::BulkStages::kSmemBytes);
  const int64_t blocks = (g.rows + g.row_block - 1) / g.row_block;
  const int shares = g.world - (g.skip_own ? 1 : 0);
  const int64_t total = blocks * shares * g.parts;
  const int64_t block_bytes = g.row_block * g.n * 2, part_bytes = block_bytes / g.parts;
  for (;;) {
    const int64_t item = claim_next(g.items, claim);
    if (item >= total) break;
    const int64_t j = item % g.parts, q = item / g.parts;
    const int64_t b = q / shares;
    const int d = (g.rank + 1 + static_cast<int>(q % shares)) % g.world;  // own share last (or not at all)
    const int dn = g.node_of[d], dl = g.local_of[d];
    const int64_t gb = int64_t(d) * blocks + b;
    const int slot = dn == g.node ? lay.final_slot(g.rs_slots) : lay.recv_slot(g.rs_slots, dn, g.node);
    const char* src = g.staging[dl] + slot * g.slot_bytes + b * block_bytes + j * part_bytes;
    char* dst = g.out + (int64_t(d) * g.rows + b * g.row_block) * g.n * 2 + j * part_bytes;
    // A partial last row-block (rows not a multiple of row_block): its later pieces are short or empty.
    const int64_t left = g.rows - b * g.row_block;
    const int64_t valid = (left < g.row_block ? left : g.row_block) * g.n * 2 - j * part_bytes;
    if (valid <= 0) continue;
    if (threadIdx.x == 0) {
      const int32_t sig = g.sig_fin + static_cast<int32_t>(gb);
      dev::wait_ge<dev::Scope::Sys, kArReport>(ctx, dev::peer_signal(ctx, dl, sig), epoch * g.adds_per_block,
                                               dev::WaitSite{role, d, sig});
      asm volatile("fence.proxy.async.global;" ::: "memory");  // the bulk copy (async proxy) reads what the signal released
    }
    copier.copy<kArReport>(ctx, dst, src, static_cast<size_t>(valid < part_bytes ? valid : part_bytes), 0, 1, role);
  }
}

}  // namespace mk::roles
