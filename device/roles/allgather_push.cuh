// mkernel: the communication roles of the tensor-parallel all-gather (AG+GEMM
// and the standalone AllGather), inside a node and across nodes.
//
// Gathered buffer (symmetric, [W * m_local x k], rows of global rank s at
// s * m_local): every rank's copy ends up holding every rank's rows.
//
// IntraComm (CTAs [0, ncta), thread 0 each; the ncta parts of the items
// are claimed at run time, allgather_push): pushes row chunks over NVLink
// into the gathered buffers of the node's ranks and sets the destination's
// arrival signal of that chunk to the call's epoch. Sources: this rank's own
// rows (from a_local; into its own buffer too unless skip_self), then, on
// several nodes, the rows of this rank's rail peers (same local rank on the
// other nodes), which arrive over the network into this rank's buffer and
// are forwarded to the rest of the node once their signal is seen. So each
// row block crosses the network once per node and fans out over NVLink.
//
// InterSend (thread 128 of IntraComm CTA 0, several nodes only): puts each
// own chunk, once it is in this rank's gathered buffer (the network reads
// registered memory), to every rail peer, with its arrival signal.
//
// The Compute role of a destination waits on the arrival signals before its
// TMA loads the rows (GEMM engine load hook, LoadWait::RowSignal).
//
// NOTES:
// - Buffer reuse without host synchronisation: at entry each rank sets its
//   "entered call e" signal (index: its global rank) in the pool of every
//   rank that writes into it (node peers over NVLink, rail peers over the
//   network); a writer writes into rank d only after seeing d's entry signal
//   for this epoch. Kernels of one plan are stream-ordered, so a rank that
//   entered call e has finished reading its gathered buffer for call e-1.
// - The network reads this rank's own rows from its gathered buffer after
//   the kernel's stores; InterSend flushes its queue before the kernel ends,
//   since the next call's own-row copy would overwrite them.
// - Chunks go out with the bulk (TMA) copier from one thread per CTA; after
//   BulkCopier::copy returns, its stores have completed, so the release signal that
//   follows orders them for the destination. Rows that arrived from the
//   network are read by the bulk copier (async proxy) after a proxy fence.
#pragma once

#include "../bulk_copy.cuh"
#include "../net/net.cuh"
#include "claims.hpp"
#include "../signals.cuh"

namespace mk::roles {

// Failed waits here report without a function call: this role shares its
// kernel with the GEMM engine (device/signals.cuh, Report).
constexpr dev::Report kReport = dev::Report::Quiet;
constexpr int kMaxNodes = 16;

struct AllGatherPush {
  const void* a_local;            // [m_local x k] bf16, this rank's rows
  void* gathered[kMaxLocalRanks]; // every node rank's gathered buffer (peer mappings), by local rank
  int64_t m_local;
  int64_t row_bytes;              // k * 2
  int64_t rows_per_chunk;         // divides m_local
  int32_t rank;                   // global
  int32_t local_rank;
  int32_t local_size;
  int32_t node;
  int32_t num_nodes;
  int32_t local_ranks[kMaxLocalRanks];  // global rank of each local rank of this node
  int32_t rail[kMaxNodes];              // global rank of this local rank on each node
  int32_t sig_entry;              // pool index: + global rank that entered
  int32_t sig_arrival;            // pool index: + source global rank * chunks + chunk
  int32_t skip_self;              // 1: no own-row copy into this rank's buffer (the GEMM reads a_local directly)
  int32_t wait_incoming;          // 1: also wait until every rank's rows arrived here (no Compute role waits)
  const net::NetCtx* netctx;      // device memory; several nodes only
  int32_t net_region;             // the gathered buffer's region id
  int32_t net_queue;
};

// The network part (one thread): entry to the rail peers, then every own
// chunk to every rail peer as soon as it is in the gathered buffer.
__device__ __forceinline__ void allgather_inter_send(const DeviceCtx& ctx, const AllGatherPush& g, uint64_t epoch) {
  const int32_t role = static_cast<int32_t>(Role::InterSend);
  const net::NetCtx& nc = *g.netctx;
  const int nn = g.num_nodes;
  for (int j = 1; j < nn; ++j)
    net::signal<kReport>(nc, ctx, g.net_queue, g.rail[(g.node + j) % nn], net::SigOp::Set, g.sig_entry + g.rank,
                         epoch);
  for (int j = 1; j < nn; ++j) {
    const int p = g.rail[(g.node + j) % nn];
    dev::wait_ge<dev::Scope::Sys, kReport>(ctx, ctx.signals + g.sig_entry + p, epoch,
                                           dev::WaitSite{role, p, g.sig_entry + p});
  }
  const int64_t chunks = g.m_local / g.rows_per_chunk;
  const int64_t chunk_bytes = g.rows_per_chunk * g.row_bytes;
  for (int64_t c = 0; c < chunks; ++c) {
    const int32_t sig = g.sig_arrival + static_cast<int32_t>(int64_t(g.rank) * chunks + c);
    dev::wait_ge<dev::Scope::Sys, kReport>(ctx, ctx.signals + sig, epoch, dev::WaitSite{role, g.rank, sig});
    const uint64_t off = static_cast<uint64_t>(int64_t(g.rank) * g.m_local * g.row_bytes + c * chunk_bytes);
    for (int j = 1; j < nn; ++j)
      net::put<kReport>(nc, ctx, g.net_queue, g.rail[(g.node + j) % nn], g.net_region, off, off,
                        static_cast<uint64_t>(chunk_bytes), net::SigOp::Set, sig, epoch);
  }
  net::quiet<kReport>(nc, ctx, g.net_queue);
}

// Claim `v` of the push's ncta (one node) or 2 ncta (several) claims, by
// thread 0 of an IntraComm CTA: part v of the own items (v < ncta) or part
// v - ncta of the forwarded ones. Order: own rows first (own buffer unless skipped, then the ring
// predecessors r-1, r-2, ...: local rank d's rotated GEMM wants d+1's rows
// right after its own, and d+1 sends to d first); then the rows that came
// over the network, node by node.
__device__ __forceinline__ void allgather_push_part(const DeviceCtx& ctx, const AllGatherPush& g, uint64_t epoch,
                                                    dev::BulkCopier<>& copier, int v, int ncta) {
  const int32_t role = static_cast<int32_t>(Role::IntraComm);
  const int w = g.local_size, r = g.local_rank;
  if (v == 0)
    for (int d = 0; d < w; ++d)
      if (d != r) dev::signal_set(dev::peer_signal(ctx, d, g.sig_entry + g.rank), epoch);
  const int64_t chunks = g.m_local / g.rows_per_chunk;
  const int64_t chunk_bytes = g.rows_per_chunk * g.row_bytes;
  const int first = g.skip_self ? 1 : 0;
  const int64_t own_dests = w - first;  // destinations of own rows; rows from the network: w - 1
  const int64_t items = (own_dests + int64_t(g.num_nodes - 1) * (w - 1)) * chunks;
  const PartRange part = own_first_part(own_dests * chunks, items, ncta, v);
  for (int64_t item = part.first; item < part.end; item += part.stride) {
    const int64_t c = item % chunks;
    int64_t q = item / chunks;
    int j = 0;  // source: 0 = own rows, j = the rail peer j nodes on
    int d;
    if (q < own_dests) {
      d = static_cast<int>(((r - first - q) % w + w) % w);
    } else {
      q -= own_dests;
      j = 1 + static_cast<int>(q / (w - 1));
      d = static_cast<int>(((r - 1 - q % (w - 1)) % w + w) % w);
    }
    const int src = j == 0 ? g.rank : g.rail[(g.node + j) % g.num_nodes];
    const int64_t src_row_off = int64_t(src) * g.m_local * g.row_bytes + c * chunk_bytes;
    const int32_t sig = g.sig_arrival + static_cast<int32_t>(int64_t(src) * chunks + c);
    if (j != 0) {  // forwarded: wait until the network delivered the chunk here
      dev::wait_ge<dev::Scope::Sys, kReport>(ctx, ctx.signals + sig, epoch, dev::WaitSite{role, src, sig});
      asm volatile("fence.proxy.async.global;" ::: "memory");
    }
    if (d != r) {
      const int dr = g.local_ranks[d];
      dev::wait_ge<dev::Scope::Sys, kReport>(ctx, ctx.signals + g.sig_entry + dr, epoch,
                                             dev::WaitSite{role, dr, g.sig_entry + dr});
    }
    const char* from = j == 0 ? static_cast<const char*>(g.a_local) + c * chunk_bytes
                              : static_cast<const char*>(g.gathered[r]) + src_row_off;
    char* to = static_cast<char*>(g.gathered[d]) + src_row_off;
    copier.copy<kReport>(ctx, to, from, static_cast<size_t>(chunk_bytes), 0, 1, role);
    dev::signal_set(dev::peer_signal(ctx, d, sig), epoch);
  }
}

// CTA `cta` of `ncta` IntraComm CTAs. Thread 0 claims the items' parts from
// `claim` (a per-call counter back to 0 after the launch:
// dev::DeviceEpoch::items) until none is left, so the CTAs that got an SM
// push every part when others have none yet (SMs held by another kernel or
// an MPS client): no resident CTA waits on a part held by a CTA without an
// SM. Every own part is claimed before any forwarded part: a forwarded item
// waits on the rail peer's InterSend, which waits on that rank's own items,
// so a running CTA blocked on one must not hold an own part unclaimed (a
// cycle across nodes). InterSend stays on CTA 0, the first made resident.
__device__ __forceinline__ void allgather_push(const DeviceCtx& ctx, const AllGatherPush& g, uint64_t epoch,
                                               char* smem, int cta, int ncta, unsigned long long* claim) {
  const int32_t role = static_cast<int32_t>(Role::IntraComm);
  if (cta == 0 && threadIdx.x == 128 && g.num_nodes > 1) allgather_inter_send(ctx, g, epoch);
  if (threadIdx.x != 0) return;
  const int claims = g.num_nodes > 1 ? 2 * ncta : ncta;
  {
    dev::BulkCopier<> copier(smem);  // ended before the CTA's shared memory goes to compute
    for (int v; (v = static_cast<int>(atomicAdd(claim, 1ull))) < claims;)
      allgather_push_part(ctx, g, epoch, copier, v, ncta);
  }
  // Standalone all-gather: the launch may end (and the host copy out of the
  // gathered buffer start) only once every rank's rows are here (the waits
  // hold up no one: they stay with the CTAs' indices).
  const int w = g.local_size;
  const int64_t chunks = g.m_local / g.rows_per_chunk;
  if (g.wait_incoming) {
    const int world = w * g.num_nodes;
    for (int64_t item = cta; item < int64_t(world - 1) * chunks; item += ncta) {
      const int src = static_cast<int>((g.rank + 1 + item / chunks) % world);
      const int32_t sig = g.sig_arrival + static_cast<int32_t>(int64_t(src) * chunks + item % chunks);
      dev::wait_ge<dev::Scope::Sys, kReport>(ctx, ctx.signals + sig, epoch, dev::WaitSite{role, src, sig});
    }
  }
}

}  // namespace mk::roles
