// The two-level reduce-scatter layout and walk (device/roles/rs_layout.hpp)
// on every topology of up to 8 ranks: slots never collide, the walk visits
// every share once in class order, and a simulation of GEMM+RS's persistent
// CTAs (static tile walk, waits as the engine's owner reduce does them)
// always finishes, as does one of the standalone collective's claim order
// with one resident CTA per rank.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "device/roles/rs_layout.hpp"
#include "device/sched/tile_scheduler.hpp"
#include "src/ops/ag_gemm/tp_plan.hpp"

using namespace mk;

namespace {

struct Topo {
  int nodes, local;
};

std::vector<Topo> topologies() {
  std::vector<Topo> t;
  for (int n = 1; n <= 8; ++n)
    for (int l = 1; n * l <= 8; ++l) t.push_back({n, l});
  return t;
}

}  // namespace

TEST(RsLayout, SlotsOfOneRankNeverCollide) {
  for (Topo tp : topologies()) {
    const rs::Layout lay{tp.nodes, tp.local};
    for (int n = 0; n < tp.nodes; ++n)
      for (int l = 0; l < tp.local; ++l) {
        std::set<int> used;
        auto use = [&](int s) {
          ASSERT_GE(s, 0);
          ASSERT_LT(s, lay.num_slots()) << tp.nodes << "x" << tp.local;
          ASSERT_TRUE(used.insert(s).second) << tp.nodes << "x" << tp.local << " slot " << s;
        };
        for (int src = 0; src < tp.local; ++src)  // NVLink receive: from each node peer, each node's share
          if (src != l)
            for (int sn = 0; sn < tp.nodes; ++sn) use(lay.local_slot(src, l, sn));
        for (int sn = 0; sn < tp.nodes; ++sn)
          if (sn != n) {
            use(lay.net_recv_slot(sn, n));
            use(lay.send_slot(sn, n));
          }
        EXPECT_EQ(static_cast<int>(used.size()), lay.num_slots()) << "no unused slots";
      }
  }
  // One node: L - 1 receive slots; one GPU per node: N - 1 receive + N - 1 send.
  EXPECT_EQ((rs::Layout{1, 8}.num_slots()), 7);
  EXPECT_EQ((rs::Layout{4, 1}.num_slots()), 6);
  EXPECT_EQ((rs::Layout{2, 2}.num_slots()), 2 + 2);  // one node peer x 2 nodes, 1 receive + 1 send
}

TEST(RsLayout, WalkVisitsEveryShareOnceInClassOrder) {
  for (Topo tp : topologies()) {
    const rs::Layout lay{tp.nodes, tp.local};
    for (int n = 0; n < tp.nodes; ++n)
      for (int l = 0; l < tp.local; ++l) {
        std::set<int> seen;
        int last_class = 0;
        for (int i = 0; i < tp.nodes * tp.local; ++i) {
          const int s = lay.share_at(i, n, l);
          ASSERT_GE(s, 0);
          ASSERT_TRUE(seen.insert(s).second);
          const int c = lay.share_class(s / tp.local, s % tp.local, n, l);
          ASSERT_GE(c, last_class);
          last_class = c;
        }
        EXPECT_EQ(lay.share_at(tp.nodes * tp.local - 1, n, l), n * tp.local + l) << "own share last";
        EXPECT_EQ(lay.share_at(tp.nodes * tp.local, n, l), -1);
      }
  }
}

// Every rank's CTAs walk their tiles (SharePermuted, StaticSchedule) in
// order; a tile of a share with this rank's local index waits, like the
// engine's owner reduce, until each node peer finished the row-block (and,
// for the own share, each rail peer): the simulation must finish with no
// CTA stuck, whatever the CTA count.
TEST(RsLayout, GemmRsWalkNeverDeadlocks) {
  using namespace mk::sched;
  for (Topo tp : topologies())
    for (int blocks : {1, 2, 3, 5})
      for (int ctas : {1, 2, 3, 7}) {
        const int w = tp.nodes * tp.local, nb = 3, mb = w * blocks;
        const rs::Layout lay{tp.nodes, tp.local};
        // done[rank][row-block] tiles finished
        std::vector<std::vector<int>> done(w, std::vector<int>(mb, 0));
        std::vector<TileSchedParams> ps(w);
        std::vector<std::vector<StaticSchedule>> its;
        std::vector<std::vector<int64_t>> cur(w, std::vector<int64_t>(ctas, -1));
        for (int r = 0; r < w; ++r) {
          TileSchedParams& p = ps[r];
          p.order = TileOrder::SharePermuted;
          p.m_blocks = mb;
          p.n_blocks = nb;
          p.share_blocks = blocks;
          p.swizzle = tp::rs_swizzle(blocks, tp::rs_swizzle_cap(tp.nodes, blocks));  // as GemmRs plans it
          for (int i = 0; i < w; ++i)
            p.share_order[i] = static_cast<int8_t>(lay.share_at(i, r / tp.local, r % tp.local));
          std::vector<StaticSchedule> v;
          for (int c = 0; c < ctas; ++c) v.emplace_back(p, c, ctas);
          its.push_back(v);
          for (int c = 0; c < ctas; ++c)
            if (!its[r][c].get_next(&cur[r][c])) cur[r][c] = -1;
        }
        auto ready = [&](int r, const Tile& t) {
          const int n = r / tp.local, l = r % tp.local;
          const int d = t.m_blk / blocks, dl = d % tp.local;
          if (dl != l) return true;  // pushed to a node peer: no wait
          for (int pl = 0; pl < tp.local; ++pl)
            if (pl != l && done[n * tp.local + pl][t.m_blk] < nb) return false;
          if (d == r)
            for (int pn = 0; pn < tp.nodes; ++pn)
              if (pn != n && done[pn * tp.local + l][t.m_blk] < nb) return false;
          return true;
        };
        bool progress = true;
        while (progress) {
          progress = false;
          for (int r = 0; r < w; ++r)
            for (int c = 0; c < ctas; ++c) {
              if (cur[r][c] < 0) continue;
              const Tile t = tile_of(ps[r], cur[r][c]);
              if (!ready(r, t)) continue;
              ++done[r][t.m_blk];
              if (!its[r][c].get_next(&cur[r][c])) cur[r][c] = -1;
              progress = true;
            }
        }
        for (int r = 0; r < w; ++r)
          for (int c = 0; c < ctas; ++c)
            ASSERT_EQ(cur[r][c], -1) << tp.nodes << "x" << tp.local << " blocks " << blocks << " ctas " << ctas
                                     << ": rank " << r << " CTA " << c << " stuck";
      }
}

TEST(RsLayout, SwizzleGroupsStayInsideAShareAndAreCappedAcrossNodes) {
  for (int64_t blocks = 1; blocks <= 64; ++blocks)
    for (int64_t cap : {2, 8}) {
      const int sw = tp::rs_swizzle(blocks, cap);
      ASSERT_GE(sw, 1);
      ASSERT_LE(sw, cap);
      ASSERT_EQ(blocks % sw, 0) << blocks << " " << cap;
    }
  EXPECT_EQ(tp::rs_swizzle(8), 8);
  EXPECT_EQ(tp::rs_swizzle(8, 2), 2);  // 2x1, M = 2048: four groups, puts spread over the walk
  EXPECT_EQ(tp::rs_swizzle(12), 6);
  EXPECT_EQ(tp::rs_swizzle(7, 2), 1);
  // The cap: small shares across nodes only.
  EXPECT_EQ(tp::rs_swizzle_cap(2, 8), 2);   // 2x1, M = 2048
  EXPECT_EQ(tp::rs_swizzle_cap(2, 16), 8);  // 2x1, M = 4096
  EXPECT_EQ(tp::rs_swizzle_cap(1, 4), 8);   // one node
}

TEST(RsLayout, StandalonePiecesDivideTheCountsAndTheVectors) {
  for (int64_t n = 64; n <= 16384; n += 64) {
    const int64_t adds = (n + 255) / 256, vecs = 128 * n / 8;
    const int p = tp::rs_parts(adds, vecs);
    ASSERT_GE(p, 1);
    ASSERT_LE(p, 8);
    ASSERT_EQ(adds % p, 0) << n;
    ASSERT_EQ(vecs % p, 0) << n;
  }
  EXPECT_EQ(tp::rs_parts(32, 128 * 8192 / 8), 8);  // hidden 8192: 8 pieces of 256 KB
  EXPECT_EQ(tp::rs_parts(3, 128 * 768 / 8), 3);
  EXPECT_EQ(tp::rs_parts(1, 128 * 64 / 8), 1);
}

// Bytes per GPU the benchmarks report: the flat cases match the one-level
// formulas ((W-1)/W on one node, all of it on the network with one GPU per
// node); in between, the network carries only 1/L of the flat amount.
TEST(RsLayout, BytesPerGpuFollowTheTwoLevels) {
  const int64_t m = 16384, n = 8192, k = 8192;
  auto rs = [&](int nn, int l) { return tp::rs_bytes_per_gpu(nn, l, m, n); };
  auto ag = [&](int nn, int l) { return tp::ag_bytes_per_gpu(nn, l, m / (nn * l), k); };
  EXPECT_DOUBLE_EQ(rs(1, 2).nvlink, double(m) * n * 2 / 2);
  EXPECT_DOUBLE_EQ(rs(1, 2).network, 0);
  EXPECT_DOUBLE_EQ(rs(2, 1).network, double(m) * n * 2 / 2);
  EXPECT_DOUBLE_EQ(rs(2, 1).nvlink, 0);
  EXPECT_DOUBLE_EQ(rs(2, 4).network, double(m) * n * 2 / 8);          // (N-1)/(N L)
  EXPECT_DOUBLE_EQ(rs(2, 4).nvlink, double(m) * n * 2 * 3 / 4);       // (L-1)/L
  EXPECT_DOUBLE_EQ(ag(1, 8).nvlink, 7.0 * (m / 8) * k * 2);
  EXPECT_DOUBLE_EQ(ag(2, 1).network, double(m / 2) * k * 2);
  EXPECT_DOUBLE_EQ(ag(2, 4).network, double(m / 8) * k * 2);          // own rows once to the other node
  EXPECT_DOUBLE_EQ(ag(2, 4).nvlink, 3.0 * 2 * (m / 8) * k * 2);       // own + forwarded rows to 3 peers
  for (int nn = 1; nn <= 8; ++nn)
    for (int l = 1; nn * l <= 8; ++l) {
      const double flat = double(nn * l - 1) / (nn * l) * double(m) * n * 2;  // one-level RS, all on one link kind
      EXPECT_NEAR(rs(nn, l).nvlink + rs(nn, l).network, flat, 1.0) << nn << "x" << l;
    }
}

namespace {

// Shares rank (n, l) claims for, in walk order: pushes (other local
// index) or sums (own local index, other nodes), as reduce_scatter.cuh's
// rs_share picks them.
int walk_share(const rs::Layout& lay, int n, int l, int q, bool own_local) {
  for (int i = 0; i < lay.nodes * lay.local; ++i) {
    const int s = lay.share_at(i, n, l);
    if (((s % lay.local) == l) == own_local && q-- == 0) return s;
  }
  return -1;
}

// Simulates the standalone reduce-scatter: `ctas` resident CTAs per rank,
// each taking the next claim of its rank's counter and holding it until
// what it waits on (as rs_push_item / rs_reduce_item wait) is done.
// `claim(rank, c)` is the order; returns the ranks' unfinished claims.
template <class Order>
std::string simulate_standalone(Topo tp, int64_t blocks, int64_t parts, int ctas, int64_t total, Order claim) {
  const int w = tp.nodes * tp.local;
  const rs::Layout lay{tp.nodes, tp.local};
  // pushed[dst rank][share][block]: pieces arrived from node peers; summed[share][block]: node sums arrived
  // at the owner; announced[rank].
  std::vector<std::vector<std::vector<int>>> pushed(w, std::vector<std::vector<int>>(w, std::vector<int>(blocks)));
  std::vector<std::vector<int>> summed(w, std::vector<int>(blocks));
  std::vector<int> announced(w), next(w, 0);
  std::vector<std::vector<int64_t>> cur(w, std::vector<int64_t>(ctas, -1));
  auto take = [&](int r, int c) { cur[r][c] = next[r] < total ? next[r]++ : -1; };
  for (int r = 0; r < w; ++r)
    for (int c = 0; c < ctas; ++c) take(r, c);
  auto step = [&](int r, rs::Claim k) {  // true: done (its effects applied)
    const int n = r / tp.local, l = r % tp.local;
    if (k.kind == rs::Claim::Announce) return announced[r] = 1, true;
    if (k.kind == rs::Claim::Push) {
      const int s = walk_share(lay, n, l, static_cast<int>(k.k / parts), false);
      const int peer = n * tp.local + s % tp.local;
      if (!announced[peer]) return false;
      ++pushed[peer][s][k.block];
      return true;
    }
    const bool own = k.k >= tp.nodes - 1;
    const int s = own ? r : walk_share(lay, n, l, static_cast<int>(k.k), true);
    if (pushed[r][s][k.block] < (tp.local - 1) * parts) return false;  // every node peer's pieces of the row-block
    if (own) return summed[r][k.block] >= tp.nodes - 1;                  // every other node's sum of it
    if (!announced[s]) return false;  // the destination entered the call: its slot is free
    ++summed[s][k.block];
    return true;
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < w; ++r)
      for (int c = 0; c < ctas; ++c)
        if (cur[r][c] >= 0 && step(r, claim(r, cur[r][c]))) take(r, c), progress = true;
  }
  std::string stuck;
  for (int r = 0; r < w; ++r)
    for (int c = 0; c < ctas; ++c)
      if (cur[r][c] >= 0) stuck += " rank " + std::to_string(r) + " claim " + std::to_string(cur[r][c]);
  return stuck;
}

}  // namespace

// Every claim of the standalone order once: the announcement first, each
// push and sum of every row-block once, and a row-block's sums `lag`
// rounds after its pushes (never before).
TEST(RsLayout, StandaloneClaimOrderCoversEveryItemOnce) {
  for (int64_t blocks : {1, 2, 5})
    for (int64_t pushes : {0, 3, 8})
      for (int64_t reduces : {1, 4, 9})
        for (int64_t lag : {0, 1, 2, 7}) {
          const rs::ClaimOrder o{blocks, pushes, reduces, lag};
          std::set<std::tuple<int, int64_t, int64_t>> seen;
          std::vector<int64_t> last_push(blocks, -1), first_reduce(blocks, -1);
          ASSERT_EQ(o.at(0).kind, rs::Claim::Announce);
          for (int64_t c = 1; c < o.total(); ++c) {
            const rs::Claim k = o.at(c);
            ASSERT_TRUE(k.kind == rs::Claim::Push || k.kind == rs::Claim::Reduce) << c;
            ASSERT_GE(k.block, 0);
            ASSERT_LT(k.block, blocks);
            ASSERT_LT(k.k, k.kind == rs::Claim::Push ? pushes : reduces);
            ASSERT_TRUE(seen.insert({k.kind, k.block, k.k}).second) << "claim " << c << " twice";
            if (k.kind == rs::Claim::Push) last_push[k.block] = c;
            if (k.kind == rs::Claim::Reduce && first_reduce[k.block] < 0) first_reduce[k.block] = c;
          }
          EXPECT_EQ(static_cast<int64_t>(seen.size()), blocks * (pushes + reduces));
          EXPECT_EQ(o.at(o.total()).kind, rs::Claim::None);
          for (int64_t b = 0; b < blocks; ++b) EXPECT_GT(first_reduce[b], last_push[b]) << "row-block " << b;
        }
}

// The standalone collective with one (or a few) resident CTAs per rank
// finishes on every topology; the simulation does catch a deadlock: sums
// claimed before the pushes never finish with one CTA per rank.
TEST(RsLayout, StandaloneClaimsFinishOnOneResidentCta) {
  for (Topo tp : topologies())
    for (int64_t blocks : {1, 2, 3, 5})
      for (int64_t parts : {1, 2, 8})
        for (int ctas : {1, 2, 5})
          for (int64_t lag : {int64_t(0), int64_t(1), rs::kClaimLag, int64_t(7)}) {  // the kernel's: kClaimLag
            const rs::ClaimOrder o = rs::standalone_order(blocks, tp.nodes, tp.local, parts, lag);
            const std::string stuck =
                simulate_standalone(tp, blocks, parts, ctas, o.total(), [&](int, int64_t c) { return o.at(c); });
            ASSERT_EQ(stuck, "") << tp.nodes << "x" << tp.local << " blocks " << blocks << " parts " << parts
                                 << " ctas " << ctas << " lag " << lag;
          }
  const Topo tp{1, 2};
  const int64_t blocks = 2, parts = 2;
  const rs::ClaimOrder o = rs::standalone_order(blocks, tp.nodes, tp.local, parts);
  const int64_t sums = blocks * o.reduces;
  auto sums_first = [&](int, int64_t c) {  // announce, every sum, then every push
    if (c == 0) return o.at(0);
    if (c <= sums) return rs::Claim{rs::Claim::Reduce, (c - 1) / o.reduces, (c - 1) % o.reduces};
    return rs::Claim{rs::Claim::Push, (c - 1 - sums) / o.pushes, (c - 1 - sums) % o.pushes};
  };
  EXPECT_NE(simulate_standalone(tp, blocks, parts, 1, o.total(), sums_first), "");
}
