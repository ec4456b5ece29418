// The ring-attention K/V push's work items (device/roles/kv_items.hpp) over
// whole topologies (nodes x ranks per node), on the CPU: with the network's
// rail puts (each rank's own chunks to the same local rank of every other
// node), every piece of every chunk of every rank reaches every other rank's
// slot exactly once, each forwarded piece is forwarded by a rank that
// received it over the network, and the own slot is filled exactly when the
// network sends from it. The pieces of a chunk cover it once, each from a
// token row's start. Built when the attention op is.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "device/roles/kv_items.hpp"

namespace {

using mk::roles::KvItem;
using mk::roles::KvItems;
using mk::roles::kv_item;
using mk::roles::kv_items;

TEST(KvItems, EveryPieceReachesEveryRankOnce) {
  for (int nodes : {1, 2, 3, 4})
    for (int w : {1, 2, 4, 8})
      for (int64_t chunks : {1, 6})
        for (int64_t pieces : {1, 3}) {
          if (nodes * w < 2) continue;
          SCOPED_TRACE(std::to_string(nodes) + " nodes x " + std::to_string(w) + " ranks, " + std::to_string(chunks) +
                       " chunks of " + std::to_string(pieces) + " pieces");
          const int world = nodes * w;
          auto rank_of = [&](int node, int local) { return node * w + local; };
          // writes[(dest, src, chunk, piece)] = how many times that piece landed in dest's slot src.
          std::map<std::tuple<int, int, int64_t, int64_t>, int> writes;
          for (int s = 0; s < world; ++s) {
            const int node = s / w, r = s % w;
            const KvItems x = kv_items(w, r, nodes, nodes > 1, chunks, pieces);
            for (int64_t item = 0; item < x.items; ++item) {
              const KvItem it = kv_item(x, item);
              ASSERT_GE(it.d, 0);
              ASSERT_LT(it.d, w);
              ASSERT_GE(it.c, 0);
              ASSERT_LT(it.c, chunks);
              ASSERT_GE(it.piece, 0);
              ASSERT_LT(it.piece, pieces);
              ASSERT_GE(it.j, 0);
              ASSERT_LT(it.j, nodes);
              const int src = it.j == 0 ? s : rank_of((node + it.j) % nodes, r);  // the rail peer j nodes on
              if (it.j != 0) {
                EXPECT_NE(it.d, r) << "a forwarded piece goes back to the forwarder";
              }
              ++writes[{rank_of(node, it.d), src, it.c, it.piece}];
            }
            // The network: own chunks, whole, from the own slot to every rail peer.
            if (nodes > 1)
              for (int j = 1; j < nodes; ++j)
                for (int64_t c = 0; c < chunks; ++c)
                  for (int64_t p = 0; p < pieces; ++p) ++writes[{rank_of((node + j) % nodes, r), s, c, p}];
          }
          for (int d = 0; d < world; ++d)
            for (int s = 0; s < world; ++s)
              for (int64_t c = 0; c < chunks; ++c)
                for (int64_t p = 0; p < pieces; ++p) {
                  const auto key = std::make_tuple(d, s, c, p);
                  const int n = writes.count(key) ? writes[key] : 0;
                  // Own slot: written (once) only as the network's source.
                  const int want = d == s ? (nodes > 1 ? 1 : 0) : 1;
                  EXPECT_EQ(n, want) << "rank " << d << " slot " << s << " chunk " << c << " piece " << p;
                }
        }
}

TEST(KvItems, OwnChunksGoOutChunkMajor) {
  // The first items carry chunk 0 to every destination (the engine reads head 0 first).
  const KvItems x = kv_items(4, 1, 2, true, 5, 2);
  for (int64_t item = 0; item < int64_t(x.own_dests) * x.pieces; ++item) EXPECT_EQ(kv_item(x, item).c, 0);
  EXPECT_EQ(kv_item(x, int64_t(x.own_dests) * x.pieces).c, 1);
}

// Every chunk size of the ring op's shapes (2 x s_local x head_dim bf16): the pieces cover its units exactly once,
// each starts at a token row (kv_copy_piece walks one 16-byte column per thread), K's end (V's start) is a row
// start, and no piece holds more than 16 KB plus a row.
TEST(KvItems, PiecesAreWholeRowsAndCoverTheChunkOnce) {
  using mk::roles::kv_piece_units;
  using mk::roles::kv_pieces;
  for (int32_t d : {64, 128})
    for (int64_t s_local : {1, 2, 3, 63, 64, 65, 130, 777, 1000, 1554, 2048, 4095, 8192, 32768}) {
      SCOPED_TRACE("head_dim " + std::to_string(d) + ", s_local " + std::to_string(s_local));
      const int64_t bytes = 2 * s_local * d * 2, units = bytes / 16, row = d / 8, n = s_local * row;
      const int64_t pieces = kv_pieces(bytes), per = kv_piece_units(units, pieces, d);
      ASSERT_GE(pieces, 1);
      EXPECT_EQ(per % row, 0) << "pieces of whole rows";
      EXPECT_EQ(n % row, 0) << "V starts at a row";
      EXPECT_LE(per * 16, 16384 + row * 16) << "a piece of at most 16 KB and a row";
      std::vector<int> covered(static_cast<size_t>(units), 0);
      for (int64_t p = 0; p < pieces; ++p) {
        const int64_t lo = p * per, hi = lo + per < units ? lo + per : units;
        if (lo >= units) continue;  // empty: the rounding's last pieces
        EXPECT_EQ(lo % row, 0) << "piece " << p << " starts inside a row";
        for (int64_t u = lo; u < hi; ++u) ++covered[static_cast<size_t>(u)];
      }
      for (int64_t u = 0; u < units; ++u) ASSERT_EQ(covered[static_cast<size_t>(u)], 1) << "unit " << u;
    }
}

}  // namespace

// The push's claims (kv_claim, claimed at run time by the CTAs that run):
// together they cover every item once, InterSend is claim 0 across nodes,
// and every claim of own items comes before any claim of forwarded items
// (a running CTA blocked on a forwarded item then never holds an own part
// unclaimed elsewhere: device/roles/kv_push.cuh).
namespace {
TEST(KvItems, ClaimsCoverEveryItemOnceOwnPartsFirst) {
  using mk::roles::kv_claim;
  using mk::roles::kv_claims;
  for (int nodes : {1, 2, 3})
    for (int w : {1, 2, 4})
      for (int ncta : {2, 3, 7, 132})
        for (int64_t pieces : {1, 5}) {
          if (nodes * w < 2) continue;
          const KvItems x = kv_items(w, 0, nodes, nodes > 1, 6, pieces);
          SCOPED_TRACE(std::to_string(nodes) + " nodes x " + std::to_string(w) + ", " + std::to_string(ncta) +
                       " CTAs, " + std::to_string(pieces) + " pieces");
          std::vector<int> seen(static_cast<size_t>(x.items), 0);
          int inter_sends = 0;
          bool forwarded_claimed = false;
          for (int v = 0; v < kv_claims(nodes, ncta); ++v) {
            const auto k = kv_claim(x, nodes, ncta, v);
            if (k.inter_send) {
              EXPECT_EQ(v, 0);
              ++inter_sends;
              continue;
            }
            const bool fwd = k.first >= x.own_items && k.end == x.items && x.items > x.own_items;
            if (fwd) forwarded_claimed = true;
            else EXPECT_FALSE(forwarded_claimed) << "claim " << v << " of own items after a forwarded one";
            for (int64_t i = k.first; i < k.end; i += k.stride) {
              ASSERT_LT(i, x.items);
              EXPECT_EQ(kv_item(x, i).j != 0, fwd) << "item " << i << " in claim " << v;
              ++seen[static_cast<size_t>(i)];
            }
          }
          EXPECT_EQ(inter_sends, nodes > 1 ? 1 : 0);
          for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << "item " << i;
        }
}
}  // namespace

// The parts both pushes claim (own_first_part, device/roles/claims.hpp;
// AllGather+GEMM's uses it directly): 2 nparts parts cover every item once,
// the first nparts only own items, the rest only forwarded ones.
TEST(KvItems, OwnFirstPartsCoverEveryItemOnce) {
  for (int64_t own : {0, 1, 5, 16})
    for (int64_t fwd : {0, 3, 16})
      for (int nparts : {1, 2, 7}) {
        std::vector<int> seen(static_cast<size_t>(own + fwd), 0);
        for (int q = 0; q < 2 * nparts; ++q) {
          const mk::roles::PartRange p = mk::roles::own_first_part(own, own + fwd, nparts, q);
          for (int64_t i = p.first; i < p.end; i += p.stride) {
            EXPECT_EQ(i < own, q < nparts) << "part " << q << " item " << i;
            ++seen[static_cast<size_t>(i)];
          }
        }
        for (int64_t i = 0; i < own + fwd; ++i) ASSERT_EQ(seen[static_cast<size_t>(i)], 1) << "item " << i;
      }
}
