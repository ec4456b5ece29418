// mkernel: the roles of the tensor-parallel reduce-scatter (GEMM+RS and the
// standalone ReduceScatter) on N nodes of L GPUs: the two-level reduce and
// staging layout of device/roles/rs_layout.hpp (NVLink to the node peer
// that aggregates a share, the node's sum over the network to the share's
// owner, the owner's final sum).
// - GEMM+RS: the GEMM epilogue writes tiles (FragMajor, one signal add per
//   tile; across nodes one put per row-block; EpiSignal::PerRowBlock) in
//   the walk order of rs_layout.hpp; an aggregator's tiles of another
//   node's share and the owner's own tiles add the sources' tiles to the
//   accumulator first (EpilogueHook::own_mask): no Reduce role, every SM
//   computes.
// - ReduceScatter alone: push items copy input rows to the node peers
//   that aggregate them (RowMajor, one add of n_blocks per row-block);
//   reduce items sum, per row-block of a share this rank aggregates or
//   owns, its own input rows and the arrived partial rows in fp32, and
//   write bf16: into its send slot and one network put for another node's
//   share, into `out` for its own. Every CTA claims items from one counter
//   (rs_claimed) in rs::ClaimOrder: the entry announcement, then round by
//   round a row-block's pushes and the sums of the row-block two before.
//
// NOTES:
// - Buffer reuse without host synchronisation: every rank signals "entered
//   call e" at start (the fused run(): to every rank; the standalone path:
//   to its node peers and its rail peers, the only ones it waits for:
//   rs_announce); a writer waits for that before its first
//   write into d's buffers or its send slot for d (the GEMM consumers' start
//   signals; a push item before its destination; a reduce item before a
//   send). d entered call e => d's previous call ended, so every write of
//   the previous call into d, network puts included, landed (and their
//   send-slot sources were read).
// - Deadlock freedom of GEMM+RS: tiles come from a dynamic queue (an
//   atomic counter) in the walk order of rs_layout.hpp, so every tile a
//   waiting tile depends on (on any rank) precedes it in its rank's walk
//   and was claimed by a CTA that does not wait on it; no CTA needs to be
//   resident for another to finish (tests/cpu/test_rs_layout.cpp simulates
//   the static walk, the stricter case).
// - Deadlock freedom of the standalone collective, the same way
//   (rs::ClaimOrder says why): one resident CTA per rank finishes the
//   call. Until 2026-12-03 push and Reduce CTAs were roles by CTA index,
//   and the all-reduce's push CTAs, done, spun in the gather while its
//   Reduce CTAs had no SM (tests/dist: FinishesWithTwoSmsFree).
// - Entry signals over the network are Sets: a transport must deliver one
//   peer's commands of one queue in order (all of ours do).
// - Every wait reports without a function call (the roles share a kernel
//   with the GEMM engine).
#pragma once

#include "../bulk_copy.cuh"
#include "../gemm/sm90.cuh"
#include "../net/net.cuh"
#include "claims.hpp"
#include "rs_layout.hpp"
#include "../signals.cuh"

namespace mk::roles {

constexpr dev::Report kRsReport = dev::Report::Quiet;
constexpr int kMaxRsRanks = kMaxLocalRanks;

struct ReduceScatter {
  void* staging[kMaxLocalRanks];  // every node rank's staging buffer, by local rank
  const void* input;              // standalone: [M x N] bf16, this rank's full partial result
  void* out;                      // [R x N] bf16, this rank's reduced rows
  int64_t rows;                   // R = M / W (the last row-block of a share may be partial)
  int64_t n;                      // columns (multiple of 64)
  int64_t row_block;              // rows per signal (128: the GEMM tile height)
  int64_t slot_elems;             // bf16 elements per slot (>= rows * n: whole tiles)
  int32_t rank;                   // global
  int32_t world;
  int32_t node, num_nodes, local_rank, local_size;
  int32_t rank_at[kMaxRsRanks];   // global rank of (node, local) at node * local_size + local
  int8_t walk[kMaxRsRanks];       // shares (node * local_size + local) in this rank's walk order (rs::Layout::share_at)
  int32_t sig_entry;              // pool index: + global rank that entered
  int32_t sig_local;              // pool index: + NVLink source j * (M / row_block) + global row-block
  int32_t sig_net;                // pool index: + network source j * (M / row_block) + global row-block
  uint64_t adds_per_block;        // arrivals per (source, row-block) per call: the GEMM's n_blocks
  int32_t parts;                  // standalone: pieces per row-block (divides adds_per_block and the block's vectors)
  const net::NetCtx* netctx;      // device memory; several nodes only
  int32_t net_region;             // the staging buffer's region id
  int32_t net_queue;
  // All-reduce (publish_fin = 1; device/roles/ar_gather.cuh): each piece of
  // the final rows written to `out` (a buffer of region net_region at
  // fin_src_off) adds adds_per_block / parts to this rank's signal sig_fin
  // + global row-block and goes once to each rank fin_net_peer[i] (i <
  // fin_net_n: the other nodes' rail peers) at fin_net_dst_off[i], with the
  // same add on its sig_fin.
  int32_t publish_fin;
  int32_t sig_fin;
  int32_t fin_net_n;
  int32_t fin_net_peer[kMaxRsRanks];
  uint64_t fin_src_off;
  uint64_t fin_net_dst_off[kMaxRsRanks];
};

__device__ __forceinline__ rs::Layout rs_layout(const ReduceScatter& g) { return rs::Layout{g.num_nodes, g.local_size}; }

// Announces this rank's entry into the call (one thread of the grid).
// rail_only (the standalone path, rs_claimed): across nodes only to the rail
// peers, the only remote ranks whose entries it waits for; every network
// signal is then awaited within its call, so none can land after the plan is
// destroyed (bench/results/cross-node-signals-audit-20261204.md: before, the
// non-rail ranks' entries were never awaited, and plans across nodes could
// not give their signal words back).
__device__ __forceinline__ void rs_announce(const DeviceCtx& ctx, const ReduceScatter& g, uint64_t epoch,
                                            bool rail_only = false) {
  for (int s = 0; s < g.world; ++s) {
    const int d = g.rank_at[s], sn = s / g.local_size, sl = s % g.local_size;
    if (sn == g.node)  // own entry too: the GEMM consumers wait for every rank's
      dev::signal_set(dev::peer_signal(ctx, sl, g.sig_entry + g.rank), epoch);
    else if (!rail_only || sl == g.local_rank)
      net::signal<kRsReport>(*g.netctx, ctx, g.net_queue, d, net::SigOp::Set, g.sig_entry + g.rank, epoch);
  }
}

// Rows of row-block b of a share (the last one partial when rows is not a
// multiple of row_block).
__device__ __forceinline__ int64_t rs_block_rows(const ReduceScatter& g, int64_t b) {
  const int64_t left = g.rows - b * g.row_block;
  return left < g.row_block ? left : g.row_block;
}

// The q-th share (node * L + local) of the walk with (want_own) or without
// this rank's local index.
__device__ __forceinline__ int rs_share(const ReduceScatter& g, int q, bool want_own) {
  for (int i = 0; i < g.world; ++i) {
    const int s = g.walk[i];
    if (((s % g.local_size) == g.local_rank) == want_own && q-- == 0) return s;
  }
  return -1;
}

// Standalone push item k of row-block b (rs::ClaimOrder), all threads of
// the CTA: piece k % parts of this rank's input rows of the (k / parts)-th
// share in walk order that another node peer aggregates, into that peer's
// NVLink receive slot (after the peer's entry signal). A row-block goes
// in `parts` pieces (more CTAs busy when row-blocks are few), each adding
// adds_per_block / parts to the arrival count (also a piece past a
// partial last row-block's rows, which copies nothing).
__device__ __forceinline__ void rs_push_item(const DeviceCtx& ctx, const ReduceScatter& g, uint64_t epoch,
                                             dev::BulkCopier<>& copier, int64_t b, int64_t k) {
  const int32_t role = static_cast<int32_t>(Role::IntraComm);
  const rs::Layout lay = rs_layout(g);
  const int64_t blocks = (g.rows + g.row_block - 1) / g.row_block, total_blocks = blocks * g.world;
  const int64_t block_bytes = g.row_block * g.n * 2, slot_bytes = g.slot_elems * 2;
  const int64_t part_bytes = block_bytes / g.parts;
  const int64_t j = k % g.parts;
  const int s = rs_share(g, static_cast<int>(k / g.parts), false);
  const int sn = s / g.local_size, sl = s % g.local_size, d = g.rank_at[s];
  const int peer = g.rank_at[g.node * g.local_size + sl];
  if (threadIdx.x == 0)
    dev::wait_ge<dev::Scope::Sys, kRsReport>(ctx, ctx.signals + g.sig_entry + peer, epoch,
                                             dev::WaitSite{role, peer, g.sig_entry + peer});
  const int64_t gb = int64_t(d) * blocks + b;
  const int64_t valid = rs_block_rows(g, b) * g.n * 2 - j * part_bytes;  // bytes of this piece inside the share
  const char* src = static_cast<const char*>(g.input) + (int64_t(d) * g.rows + b * g.row_block) * g.n * 2 + j * part_bytes;
  char* dst = static_cast<char*>(g.staging[sl]) + lay.local_slot(g.local_rank, sl, sn) * slot_bytes +
              b * block_bytes + j * part_bytes;
  if (valid > 0)
    copier.copy<kRsReport>(ctx, dst, src, static_cast<size_t>(valid < part_bytes ? valid : part_bytes), 0, 1, role);
  if (threadIdx.x == 0) {
    const int32_t sig = g.sig_local + static_cast<int32_t>(rs::compact(g.local_rank, sl) * total_blocks + gb);
    dev::signal_add(dev::peer_signal(ctx, sl, sig), g.adds_per_block / static_cast<uint64_t>(g.parts));
  }
}

// Standalone reduce item k of row-block b (rs::ClaimOrder), all threads
// of the CTA: k < N - 1 the k-th other node's share this rank aggregates
// (the whole row-block: one put), else piece k - (N - 1) of its own
// share. Sources: own input rows, the node peers' rows, for the own share
// the other nodes' sums. Each thread keeps 2 vectors x sources of
// loads in flight (memory-level parallelism: one load at a time ran at ~12
// GB/s per SM).
__device__ __forceinline__ void rs_reduce_item(const DeviceCtx& ctx, const ReduceScatter& g, uint64_t epoch,
                                               char* smem, int64_t b, int64_t k) {
  // kMaxRsRanks entries after the bulk stages and the claim's slot (not in
  // the stages: the next push item's bulk copies, another proxy, fill them).
  const uint4** src_tab = reinterpret_cast<const uint4**>(smem + dev::BulkStages::kSmemBytes + 16);
  const int32_t role = static_cast<int32_t>(Role::Reduce);
  const rs::Layout lay = rs_layout(g);
  const int nloc = g.local_size - 1;
  const int64_t blocks = (g.rows + g.row_block - 1) / g.row_block, total_blocks = blocks * g.world;
  const int64_t vecs = g.row_block * g.n / 8;  // 16-byte vectors (8 bf16) per row-block
  const int64_t block_bytes = g.row_block * g.n * 2, slot_bytes = g.slot_elems * 2;
  constexpr int kU = 2;
  char* mine = static_cast<char*>(g.staging[g.local_rank]);
  const bool piece = k >= g.num_nodes - 1;
  const int64_t j = piece ? k - (g.num_nodes - 1) : 0;
  const int s = piece ? g.node * g.local_size + g.local_rank : rs_share(g, static_cast<int>(k), true);
  const int sn = s / g.local_size, d = g.rank_at[s];
  const bool final_share = d == g.rank;
  // Vectors of this item inside the share's rows (a partial last row-block
  // leaves later pieces short or empty; they still signal).
  const int64_t valid_vecs = rs_block_rows(g, b) * g.n / 8;
  const int64_t v_lo0 = piece ? j * (vecs / g.parts) : 0, v_hi0 = piece ? v_lo0 + vecs / g.parts : vecs;
  const int64_t v_hi = v_hi0 < valid_vecs ? v_hi0 : valid_vecs, v_lo = v_lo0 < v_hi ? v_lo0 : v_hi;
  const int nnet = final_share ? g.num_nodes - 1 : 0;
  const int nsrc = 1 + nloc + nnet;
  const int64_t gb = int64_t(d) * blocks + b;
  const int t = static_cast<int>(threadIdx.x);
  if (t == 0)
    for (int i = 0; i < nsrc; ++i) {
      const char* p = static_cast<const char*>(g.input) + (int64_t(d) * g.rows + b * g.row_block) * g.n * 2;
      if (i >= 1 && i <= nloc) p = mine + ((i - 1) * g.num_nodes + sn) * slot_bytes + b * block_bytes;
      if (i > nloc) p = mine + (int64_t(nloc) * g.num_nodes + (i - 1 - nloc)) * slot_bytes + b * block_bytes;
      src_tab[i] = reinterpret_cast<const uint4*>(p);
    }
  // (a report names the rank that signals: node peer / node of compact index c, rs::compact's inverse)
  auto uncompact = [](int c, int self) { return c < self ? c : c + 1; };
  if (t < nloc) {
    const int32_t sig = g.sig_local + static_cast<int32_t>(t * total_blocks + gb);
    const int from = g.rank_at[g.node * g.local_size + uncompact(t, g.local_rank)];
    dev::wait_ge<dev::Scope::Sys, kRsReport>(ctx, ctx.signals + sig, epoch * g.adds_per_block,
                                             dev::WaitSite{role, from, sig});
  } else if (t < nloc + nnet) {
    const int32_t sig = g.sig_net + static_cast<int32_t>((t - nloc) * total_blocks + gb);
    const int from = g.rank_at[uncompact(t - nloc, g.node) * g.local_size + g.local_rank];  // the rail peer
    dev::wait_ge<dev::Scope::Sys, kRsReport>(ctx, ctx.signals + sig, epoch * g.adds_per_block,
                                             dev::WaitSite{role, from, sig});
  } else if (t == nloc + nnet && !final_share) {  // our send slot and d's receive slot are free
    dev::wait_ge<dev::Scope::Sys, kRsReport>(ctx, ctx.signals + g.sig_entry + d, epoch,
                                             dev::WaitSite{role, d, g.sig_entry + d});
  }
  __syncthreads();  // the waits above (acquire) and the table come before every thread's loads
  // The sources' row-block addresses, in shared memory (kept in registers
  // they pushed the loop below into spills): 0 own input rows, 1..nloc
  // NVLink receive slots, then network receive slots. Written before the
  // barrier above by thread 0 (the previous item's readers passed the
  // barrier at its end).
  const uint4* const* src_base = src_tab;
  char* dst = final_share ? static_cast<char*>(g.out) + b * block_bytes
                          : mine + lay.send_slot(sn, g.node) * slot_bytes + b * block_bytes;
  for (int64_t v0 = v_lo + threadIdx.x; v0 < v_hi; v0 += int64_t(blockDim.x) * kU) {
    uint4 x[kU][kMaxRsRanks];
#pragma unroll
    for (int u = 0; u < kU; ++u)
#pragma unroll
      for (int i = 0; i < kMaxRsRanks; ++i)
        if (i < nsrc && v0 + u * blockDim.x < v_hi)
          // L2, not L1: the rows were written by other GPUs during this kernel.
          x[u][i] = __ldcg(src_base[i] + v0 + u * blockDim.x);
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t v = v0 + u * blockDim.x;
      if (v >= v_hi) break;
      float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll
      for (int i = 0; i < kMaxRsRanks; ++i) {
        if (i >= nsrc) break;
        const uint32_t words[4] = {x[u][i].x, x[u][i].y, x[u][i].z, x[u][i].w};
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          acc[2 * k] += __uint_as_float(words[k] << 16);
          acc[2 * k + 1] += __uint_as_float(words[k] & 0xFFFF0000u);
        }
      }
      // Rounded to nearest even by the hardware, as the fused epilogue's (a NaN stays a NaN: the rounding by
      // integer adds made CUDA's canonical NaN, 0x7FFFFFFF, a signed zero).
      uint32_t ow[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) ow[k] = dev::sm90::pack_bf16x2(acc[2 * k], acc[2 * k + 1]);
      reinterpret_cast<uint4*>(dst)[v] = make_uint4(ow[0], ow[1], ow[2], ow[3]);
    }
  }
  if (final_share && g.publish_fin) {  // all-reduce: the piece is final; signal it, send it to the other nodes
    __threadfence_system();
    __syncthreads();
    if (threadIdx.x == 0) {
      const uint64_t add = g.adds_per_block / static_cast<uint64_t>(g.parts);
      const uint64_t off = static_cast<uint64_t>(b * block_bytes + v_lo * 16);
      dev::signal_add(ctx.signals + g.sig_fin + gb, add);
      for (int i = 0; i < g.fin_net_n; ++i) {
        if (v_hi > v_lo)
          net::put<kRsReport, Role::Reduce>(*g.netctx, ctx, g.net_queue, g.fin_net_peer[i], g.net_region,
                                            g.fin_net_dst_off[i] + off, g.fin_src_off + off,
                                            static_cast<uint64_t>((v_hi - v_lo) * 16), net::SigOp::Add,
                                            g.sig_fin + static_cast<int32_t>(gb), add);
        else  // an empty piece past a partial row-block: its count alone
          net::signal<kRsReport, Role::Reduce>(*g.netctx, ctx, g.net_queue, g.fin_net_peer[i], net::SigOp::Add,
                                               g.sig_fin + static_cast<int32_t>(gb), add);
      }
    }
  }
  if (!final_share) {  // the node's sum of d's row-block: one put, once every thread's stores are visible
    __threadfence_system();
    __syncthreads();
    if (threadIdx.x == 0) {
      const int64_t off_in_slot = b * block_bytes;
      net::put<kRsReport, Role::Reduce>(
          *g.netctx, ctx, g.net_queue, d, g.net_region,
          /*dst_off=*/static_cast<uint64_t>(lay.net_recv_slot(g.node, sn) * slot_bytes + off_in_slot),
          /*src_off=*/static_cast<uint64_t>(lay.send_slot(sn, g.node) * slot_bytes + off_in_slot),
          static_cast<uint64_t>(rs_block_rows(g, b) * g.n * 2), net::SigOp::Add,
          g.sig_net + static_cast<int32_t>(rs::compact(g.node, sn) * total_blocks + gb), g.adds_per_block);
    }
  }
  __syncthreads();  // the next item's waits come after this item's loads
}

__device__ __forceinline__ rs::ClaimOrder rs_claim_order(const ReduceScatter& g) {
  return rs::standalone_order((g.rows + g.row_block - 1) / g.row_block, g.num_nodes, g.local_size, g.parts);
}

// The standalone collective: claims from `counter` (0 at the launch's
// start: DeviceEpoch::tiles, which only the fused GEMM uses otherwise) in
// rs::ClaimOrder until none is left. All threads of the CTA; the copier's
// shared memory holds its stages, then the claim's slot, then
// rs_reduce_item's source table.
constexpr size_t kRsClaimedSmem = dev::BulkStages::kSmemBytes + 16 + kMaxRsRanks * sizeof(void*);
__device__ __forceinline__ void rs_claimed(const DeviceCtx& ctx, const ReduceScatter& g, uint64_t epoch,
                                           dev::BulkCopier<>& copier, uint64_t* counter) {
  char* smem = copier.smem();
  auto* slot = reinterpret_cast<volatile int64_t*>(smem + dev::BulkStages::kSmemBytes);
  const rs::ClaimOrder order = rs_claim_order(g);
  const int64_t total = order.total();
  for (;;) {
    const int64_t c = claim_next(counter, slot);
    if (c >= total) break;
    const rs::Claim w = order.at(c);
    if (w.kind == rs::Claim::Announce) {
      if (threadIdx.x == 0) rs_announce(ctx, g, epoch, true);
    } else if (w.kind == rs::Claim::Push) {
      rs_push_item(ctx, g, epoch, copier, w.block, w.k);
    } else if (w.kind == rs::Claim::Reduce) {
      rs_reduce_item(ctx, g, epoch, smem, w.block, w.k);
    }
  }
}

}  // namespace mk::roles
