// mkernel: the communication roles of ring attention: every rank's K and V
// reach every rank, head by head, while the attention engine computes.
//
// Gathered buffer (symmetric) of every rank: slot s (global rank s) holds
// rank s's K and V head-major, [batch][kv_heads][2 (K, V)][s_local][D], so
// that one chunk (b, hkv) = K and V of one KV head is contiguous. The
// engine walks query heads in order and waits on a chunk's arrival signal
// only when it reaches that head: the first heads arrive first.
//
// Who runs it: warps 1..3 of the attention engine's producer warpgroup
// (kPushThreads threads, idle otherwise: only one producer thread issues
// TMA) in CTAs [0, ncta), beside the engine, so no SM leaves the compute.
// They sync among themselves on named barrier kPushBarrier only.
//
// IntraComm (the other parts, kv_push): items are (chunk, destination).
// Own chunks are read from the caller's K and V ([batch, s_local, kv_heads,
// D]: 2 D bytes per token, strided) and written contiguously into the
// destination's slot over NVLink (16-byte stores, several in flight per
// thread); destinations are the node's other ranks, and this rank's own
// slot when the network sends from it (several nodes). Then, on several
// nodes, the chunks that rail peers sent over the network into this rank's
// slots are forwarded to the node's other ranks once their signal is seen
// (the same copy loop, contiguous source). Each chunk's arrival signal in the
// destination's pool is set to the call's epoch after its bytes.
//
// InterSend (the first push thread of the CTA that takes claim 0, several
// nodes; that CTA's push threads do nothing else, since items synchronise
// them all; kv_push: parts are claimed at run time): entry
// signals to the rail peers, then each own chunk, once it is in this rank's
// slot, to every rail peer, with its arrival signal; the queue is flushed
// before the kernel ends.
//
// NOTES: buffer reuse without host synchronisation works as in the
// tensor-parallel all-gather (device/roles/allgather_push.cuh): a writer
// writes into rank d only after seeing d's entry signal for this epoch,
// which d sets when its kernel starts (its previous call has finished
// reading). Failed waits report without a function call (this role shares
// its kernel with the attention engine).
#pragma once

#include "../gemm/sm90.cuh"
#include "kv_items.hpp"
#include "../net/net.cuh"
#include "../signals.cuh"
#include "../trace.cuh"

namespace mk::roles {

constexpr int kKvMaxNodes = 16;
constexpr int kPushThreads = 96;  // warps 1..3 of the producer warpgroup
constexpr int kPushThread0 = 32;  // threadIdx.x of the first
constexpr uint32_t kPushBarrier = 8;

struct KvPush {
  const void* k;  // this rank's K, V: [batch, s_local, kv_heads, head_dim] bf16
  const void* v;
  void* gathered[kMaxLocalRanks];  // every node rank's gathered buffer (peer mappings), by local rank
  int32_t batch, s_local, kv_heads, head_dim;
  int32_t rank, local_rank, local_size, node, num_nodes;
  int32_t local_ranks[kMaxLocalRanks];  // global rank of each local rank of this node
  int32_t rail[kKvMaxNodes];            // global rank of this local rank on each node
  int32_t sig_entry;    // pool index: + global rank that entered
  int32_t sig_arrival;  // pool index: + source global rank * chunks + chunk (chunk = b * kv_heads + hkv)
  int32_t own_to_self;  // 1: own chunks also into this rank's slot (the network's source)
  int32_t pieces;       // a chunk moves as this many pieces (kv_pieces), one item each; its arrival
                        // signal counts them: call e's chunk is complete at e * pieces
  const net::NetCtx* netctx;
  int32_t net_region;  // the gathered buffer's region id
  int32_t net_queue;
  dev::TraceBuf trace;  // optional event log (device/trace.hpp): pushes, puts
};

__device__ __forceinline__ int64_t kv_chunk_bytes(const KvPush& g) {
  return int64_t(2) * g.s_local * g.head_dim * 2;
}
__device__ __forceinline__ int64_t kv_slot_bytes(const KvPush& g) {
  return int64_t(g.batch) * g.kv_heads * kv_chunk_bytes(g);
}

// 16-byte units [lo, hi) of chunk c = (b, hkv) (K's s_local x D, then V's)
// into `to` (the chunk's slot position), by the push threads (t = 0 ..
// kPushThreads - 1): from the caller's K and V (own: token rows src_row
// bytes apart) or from a slot of this rank's gathered buffer (forwarded:
// contiguous, `slot` non-null). lo is a token row's first unit (kv_push's
// pieces are whole rows), so a thread copies the same 16-byte column of
// every (kPushThreads / units per row)-th row, by a pointer step. Each
// thread fences its stores, then the push threads sync.
// NOTES: this loop shares the producer warpgroup's 56 registers (ring
// kernel, 176-key blocks), and its form decides more than its own speed:
// with 4 loads in flight per thread (the loop until 2026-12-02), 2, a 64-bit
// division, or the chunk's source offset held across the K and V parts,
// ptxas moved the consumers' per-block bookkeeping off the uniform datapath
// and the ring kernel ran 4-6% slower at one rank (bench/results/
// ring-engine-176-20261202.md). tools/check_uniform_loop.py (in
// tools/check_ptxas.sh, a CPU test) fails when that happens. One load in
// flight per thread moves a quarter of what 4 did per CTA; the pieces are
// smaller to match (kv_pieces).
__device__ __forceinline__ void kv_copy_piece(const KvPush& g, int64_t c, const char* slot, char* to, int64_t lo,
                                              int64_t hi, int t) {
  const int ci = static_cast<int>(c);  // < 2^30 (the plan checks world x chunks)
  const int b = ci / g.kv_heads, hkv = ci - b * g.kv_heads;
  const int sh = g.head_dim == 128 ? 4 : 3;  // log2 of the 16-byte units per token
  const int64_t src_row = int64_t(g.kv_heads) * g.head_dim * 2;  // bytes between tokens of the caller's K, V
  const int64_t n = int64_t(g.s_local) << sh;  // units of K (and of V)
  uint4* dst = reinterpret_cast<uint4*>(to);
  for (int part = 0; part < 2; ++part) {  // K's units [0, n), V's [n, 2 n)
    const int64_t a0 = part ? (lo > n ? lo : n) : lo, a1 = part ? hi : (hi < n ? hi : n);
    const int64_t u0 = a0 - part * n;  // a row's first unit
    const char* src = slot ? slot + (a0 + t) * 16
                           : static_cast<const char*>(part ? g.v : g.k) +
                                 (int64_t(b) * g.s_local * g.kv_heads + hkv) * g.head_dim * 2 +
                                 ((u0 >> sh) + (t >> sh)) * src_row + (t & ((1 << sh) - 1)) * 16;
    const int64_t step = slot ? kPushThreads * 16 : (kPushThreads >> sh) * src_row;
    for (int64_t i = a0 + t; i < a1; i += kPushThreads, src += step) dst[i] = *reinterpret_cast<const uint4*>(src);
  }
  __threadfence_system();
  dev::sm90::named_sync(kPushBarrier, kPushThreads);
}

// Trace events of one chunk put's stages (tools/ring_trace.py splits the
// time InterSend takes to post a put).
struct PutTrace {
  const dev::TraceBuf& trace;
  int cta;
  uint32_t chunk;
  __device__ __forceinline__ void operator()(net::CmdStep s) const {
    dev::trace(trace, cta,
               s == net::CmdStep::Claimed ? dev::TraceKind::PutClaimed
               : s == net::CmdStep::Room  ? dev::TraceKind::PutRoom
                                          : dev::TraceKind::PutBody,
               chunk);
  }
};

// The network part (one thread): entry to the rail peers, then every own
// chunk to every rail peer as soon as it is in this rank's slot.
__device__ __forceinline__ void kv_inter_send(const DeviceCtx& ctx, const KvPush& g, uint64_t epoch, int cta) {
  constexpr dev::Report R = dev::Report::Quiet;
  const int32_t role = static_cast<int32_t>(Role::InterSend);
  const net::NetCtx& nc = *g.netctx;
  const int nn = g.num_nodes;
  for (int j = 1; j < nn; ++j)
    net::signal<R>(nc, ctx, g.net_queue, g.rail[(g.node + j) % nn], net::SigOp::Set, g.sig_entry + g.rank, epoch);
  for (int j = 1; j < nn; ++j) {
    const int p = g.rail[(g.node + j) % nn];
    dev::wait_ge<dev::Scope::Sys, R>(ctx, ctx.signals + g.sig_entry + p, epoch, dev::WaitSite{role, p, g.sig_entry + p});
  }
  const int64_t chunks = int64_t(g.batch) * g.kv_heads;
  for (int64_t c = 0; c < chunks; ++c) {
    const int32_t sig = g.sig_arrival + static_cast<int32_t>(int64_t(g.rank) * chunks + c);
    dev::wait_ge<dev::Scope::Sys, R>(ctx, ctx.signals + sig, epoch * g.pieces, dev::WaitSite{role, g.rank, sig});
    dev::trace(g.trace, cta, dev::TraceKind::OwnReady, static_cast<uint32_t>(c));
    const uint64_t off = static_cast<uint64_t>(int64_t(g.rank) * kv_slot_bytes(g) + c * kv_chunk_bytes(g));
    const PutTrace step{g.trace, cta, static_cast<uint32_t>(c)};
    for (int j = 1; j < nn; ++j)
      net::put<R>(nc, ctx, g.net_queue, g.rail[(g.node + j) % nn], g.net_region, off, off,
                  static_cast<uint64_t>(kv_chunk_bytes(g)), net::SigOp::Set, sig, epoch * g.pieces, step);
    dev::trace(g.trace, cta, dev::TraceKind::PutPosted, static_cast<uint32_t>(c));
  }
  net::quiet<R>(nc, ctx, g.net_queue);
  dev::trace(g.trace, cta, dev::TraceKind::QuietDone, 0);
}

// Push thread t, in CTA `cta`, running claim `v` (< kv_claims: InterSend,
// or a part of the own or the forwarded items; kv_items.hpp's kv_claim) of
// the push's `ncta` CTAs.
__device__ __forceinline__ void kv_push_part(const DeviceCtx& ctx, const KvPush& g, uint64_t epoch, int cta, int v,
                                             int ncta, int t) {
  constexpr dev::Report R = dev::Report::Quiet;
  const int32_t role = static_cast<int32_t>(Role::IntraComm);
  const int w = g.local_size, r = g.local_rank;
  if (v == 0 && t == 0)
    for (int d = 0; d < w; ++d)
      if (d != r) dev::signal_set(dev::peer_signal(ctx, d, g.sig_entry + g.rank), epoch);
  const int64_t chunks = int64_t(g.batch) * g.kv_heads;
  const int64_t chunk_bytes = kv_chunk_bytes(g), slot_bytes = kv_slot_bytes(g);
  // Own chunks: chunk-major (head 0 to every destination first, every CTA
  // on a piece of it), then the chunks of the rail peers, node by node
  // (kv_item).
  const int64_t units = chunk_bytes / 16, per_piece = kv_piece_units(units, g.pieces, g.head_dim);
  const KvItems its = kv_items(w, r, g.num_nodes, g.own_to_self != 0, chunks, g.pieces);  // device/roles/kv_items.hpp
  const KvClaim claim = kv_claim(its, g.num_nodes, ncta, v);
  if (claim.inter_send) {
    if (t == 0) kv_inter_send(ctx, g, epoch, cta);
    return;
  }
  uint32_t entered = 0;  // destinations whose entry signal this thread (t == 0) saw
  for (int64_t item = claim.first; item < claim.end; item += claim.stride) {
    const KvItem it = kv_item(its, item);
    const int d = it.d, j = it.j;
    const int64_t c = it.c, piece = it.piece;
    const int src = j == 0 ? g.rank : g.rail[(g.node + j) % g.num_nodes];
    const int32_t sig = g.sig_arrival + static_cast<int32_t>(int64_t(src) * chunks + c);
    if (t == 0) {
      if (j != 0)  // forwarded: wait until the network delivered the chunk here
        dev::wait_ge<dev::Scope::Sys, R>(ctx, ctx.signals + sig, epoch * g.pieces, dev::WaitSite{role, src, sig});
      if (d != r && !((entered >> d) & 1u)) {
        const int dr = g.local_ranks[d];
        dev::wait_ge<dev::Scope::Sys, R>(ctx, ctx.signals + g.sig_entry + dr, epoch,
                                         dev::WaitSite{role, dr, g.sig_entry + dr});
        entered |= 1u << d;
      }
    }
    dev::sm90::named_sync(kPushBarrier, kPushThreads);  // t == 0's acquires before every thread's copy
    const int64_t off = int64_t(src) * slot_bytes + c * chunk_bytes;
    const int64_t lo = piece * per_piece, hi = lo + per_piece < units ? lo + per_piece : units;
    kv_copy_piece(g, c, j == 0 ? nullptr : static_cast<const char*>(g.gathered[r]) + off,
                  static_cast<char*>(g.gathered[d]) + off, lo, hi, t);
    if (t == 0) {
      dev::signal_add(dev::peer_signal(ctx, d, sig), 1);  // one piece more
      dev::trace(g.trace, cta, dev::TraceKind::PushDone, static_cast<uint32_t>(c << 8 | d));
    }
  }
}

// Push thread t of CTA `cta`, one of the push's `ncta` CTAs. The parts are
// not tied to CTAs: the push threads of a CTA claim one (t == 0, from
// `claim`, a per-call counter back to 0 after the launch:
// dev::DeviceEpoch::items, broadcast through the shared word `slot`), run
// it, and claim again until none is left (InterSend's CTA stops after it).
// So the CTAs that got an SM take every part when others have none yet
// (SMs held by other kernels or MPS clients): no resident CTA waits on a
// part that a CTA without an SM holds. Own items wait only on entry
// signals; forwarded ones on the network, that is on the rail peer's
// InterSend, which waits on that rank's own items: so every own part is
// claimed (by a running CTA) before any forwarded part, or a running CTA
// blocked on a forwarded item could hold an own part unclaimed elsewhere
// (a cycle across nodes). Across nodes 2 resident CTAs suffice (InterSend,
// claimed first, and one for the parts).
__device__ __forceinline__ void kv_push(const DeviceCtx& ctx, const KvPush& g, uint64_t epoch, int cta, int ncta,
                                        int t, unsigned long long* claim, int32_t* slot) {
  const int claims = kv_claims(g.num_nodes, ncta);
  for (;;) {
    if (t == 0) *reinterpret_cast<volatile int32_t*>(slot) = static_cast<int32_t>(atomicAdd(claim, 1ull));
    dev::sm90::named_sync(kPushBarrier, kPushThreads);
    const int v = *reinterpret_cast<volatile int32_t*>(slot);
    dev::sm90::named_sync(kPushBarrier, kPushThreads);  // every thread read it before t == 0 claims again
    if (v >= claims) return;
    kv_push_part(ctx, g, epoch, cta, v, ncta, t);
    if (g.num_nodes > 1 && v == 0) return;  // InterSend: t == 0 is done, the others cannot run items without it
  }
}

}  // namespace mk::roles
