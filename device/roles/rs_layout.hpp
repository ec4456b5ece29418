// mkernel: where the tensor-parallel reduce-scatter (GEMM+RS and the
// standalone ReduceScatter) keeps partial sums, on N nodes of L GPUs each.
// Plain functions shared by host and device (CPU-tested:
// tests/cpu/test_rs_layout.cpp).
//
// Rank (n, l) owns share d = its global rank: rows [d R, (d+1) R) of the
// result (R = M / W). Two levels (the fewest bytes on the network):
//  1. Inside the node: rank (n, l) sends its partial rows of every share
//     (n', l'), l' != l, over NVLink to its node peer l' (the "aggregator"
//     of the shares of local index l' on every node).
//  2. The aggregator (n, l) sums its own partial rows of share (n', l) with
//     the L - 1 node peers' and, for n' != n, sends the node's sum across
//     the network to its rail peer (n', l) (same local index): each GPU
//     sends only its 1/L share of the node's partial rows, once per other
//     node.
//  3. The owner (n, l) adds its own partial rows, the L - 1 node peers' and
//     the N - 1 rail peers' node sums.
// One node (N = 1) is the one-level reduce-scatter over NVLink; one GPU per
// node (L = 1) sends every share straight to its owner over the network.
//
// Staging buffer (symmetric, the same layout on every rank), in slots of
// slot_elems bf16 (one share: R x n in whole GEMM tiles):
//   [0, (L-1) N)                 NVLink receive: from node peer l' (compact
//                                index j = l' < l ? l' : l' - 1), the share
//                                of node n' at slot j N + n'
//   [(L-1) N, (L-1) N + N-1)     network receive: the node sum of share
//                                (n, l) from node n' (compact index)
//   [(L-1) N + N-1, ... + N-1)   network send: this rank's node sum of share
//                                (n', l), n' != n (compact index)
// Signals (pool indices, one per source and global row-block, one add per
// GEMM tile of the row-block or n_blocks at once): NVLink arrivals at
// sig_local + j * blocks + row-block, network arrivals at sig_net + j' *
// blocks + row-block.
//
// The order each rank walks its shares (every wait comes after what it
// waits for, on every rank, so a walk in this order cannot deadlock when
// every CTA is resident): (1) shares the node peers aggregate for other
// nodes, (2) the shares this rank aggregates for other nodes, (3) the node
// peers' own shares, (4) its own share.
#pragma once

#include <cstdint>

#include "../ctx.hpp"

namespace mk::rs {

// Index of source `src` among the n - 1 sources other than `self`.
MK_HD int compact(int src, int self) { return src < self ? src : src - 1; }

struct Layout {
  int32_t nodes = 1;  // N
  int32_t local = 1;  // L

  MK_HD int num_slots() const { return (local - 1) * nodes + 2 * (nodes - 1); }
  // NVLink receive slot of aggregator `dst_local` for the share of node
  // `share_node` sent by node peer `src_local`.
  MK_HD int local_slot(int src_local, int dst_local, int share_node) const {
    return compact(src_local, dst_local) * nodes + share_node;
  }
  // Network receive slot of the owner on node `dst_node` for the node sum
  // from node `src_node`.
  MK_HD int net_recv_slot(int src_node, int dst_node) const {
    return (local - 1) * nodes + compact(src_node, dst_node);
  }
  // This rank's (on node `self_node`) send slot for the share of node `dst_node`.
  MK_HD int send_slot(int dst_node, int self_node) const {
    return (local - 1) * nodes + (nodes - 1) + compact(dst_node, self_node);
  }
  // Signals per row-block of the whole problem: NVLink sources, then network sources.
  MK_HD int local_sources() const { return local - 1; }
  MK_HD int net_sources() const { return nodes - 1; }

  // Walk position class of share (sn, sl) for rank (n, l): 1..4 as above.
  MK_HD int share_class(int sn, int sl, int n, int l) const {
    if (sl != l) return sn != n ? 1 : 3;
    return sn != n ? 2 : 4;
  }
  // The i-th share (as node * L + local) rank (n, l) walks: classes in
  // order; inside a class, nodes from n + 1 on, local ranks from l + 1 on
  // (ranks do not all start on the same destination).
  MK_HD int share_at(int i, int n, int l) const {
    int seen = 0;
    for (int c = 1; c <= 4; ++c)
      for (int dn = 1; dn <= nodes; ++dn)
        for (int dl = 1; dl <= local; ++dl) {
          const int sn = (n + dn) % nodes, sl = (l + dl) % local;
          if (share_class(sn, sl, n, l) != c) continue;
          if (seen++ == i) return sn * local + sl;
        }
    return -1;
  }
};

// The standalone collective's claim order (device/roles/reduce_scatter.cuh
// rs_claimed: every CTA takes the next claim of one counter). Claim 0
// announces the rank's entry; then, round by round, the push items of
// row-block r (while r < blocks) and the reduce items of row-block r - lag
// (once r >= lag): first the sums of the other nodes' shares this rank
// aggregates, then the own share's pieces. Every item waits only on items
// earlier in this order or in the same order of other ranks (a push on
// the peer's claim 0; a sum on the node peers' pushes of its row-block; an
// own piece on those and on the other nodes' sums of its row-block, which
// are earlier items there; a sum of another node's share also on that
// rank's claim 0, its entry), so one resident CTA per rank finishes the
// call (simulated: tests/cpu/test_rs_layout.cpp); `lag` rounds between a
// row-block's pushes and its sums let the peers' pushes land first.
struct Claim {
  enum Kind : int32_t { Announce, Push, Reduce, None };
  Kind kind = None;
  int64_t block = 0;  // row-block of the share
  int64_t k = 0;      // push: share in walk order * parts + piece; reduce: other node's share (< N - 1), else N - 1 + piece
};
struct ClaimOrder {
  int64_t blocks = 0;
  int64_t pushes = 0;   // per row-block: (L - 1) N shares x parts
  int64_t reduces = 0;  // per row-block: N - 1 sums + parts own pieces
  int64_t lag = 0;

  MK_HD int64_t total() const { return 1 + blocks * (pushes + reduces); }
  MK_HD Claim at(int64_t c) const {
    if (c == 0) return Claim{Claim::Announce, 0, 0};
    c -= 1;
    const int64_t lg = lag < blocks ? lag : blocks;
    if (c < lg * pushes) return Claim{Claim::Push, c / pushes, c % pushes};  // rounds of pushes only
    c -= lg * pushes;
    const int64_t both = pushes + reduces;
    if (c < (blocks - lg) * both) {
      const int64_t r = lg + c / both, o = c % both;
      return o < pushes ? Claim{Claim::Push, r, o} : Claim{Claim::Reduce, r - lg, o - pushes};
    }
    c -= (blocks - lg) * both;
    if (c < lg * reduces) return Claim{Claim::Reduce, blocks - lg + c / reduces, c % reduces};  // the last sums
    return Claim{};
  }
};

// Rounds between a row-block's pushes and its sums (ClaimOrder::lag): the
// peers' pushes have mostly landed by then (not measured against 0 or 1).
constexpr int64_t kClaimLag = 2;

// The order of a standalone call on N nodes of L GPUs: `blocks` row-blocks
// per share, each pushed and summed in `parts` pieces.
MK_HD ClaimOrder standalone_order(int64_t blocks, int nodes, int local, int64_t parts, int64_t lag = kClaimLag) {
  return ClaimOrder{blocks, int64_t(local - 1) * nodes * parts, int64_t(nodes - 1) + parts, lag};
}

}  // namespace mk::rs
