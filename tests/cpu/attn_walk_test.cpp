// The attention engine's walk (device/attention/attn_walk.hpp: units, the key
// blocks a unit reads, the keys each query row sees) on the CPU, over the
// segments the ring op builds (attn::ring_segments): every query of every
// rank sees exactly the keys its mask allows, each once, for zigzag (causal)
// and contiguous shards at several world sizes and lengths that are not
// multiples of the 128-token tiles or of the key blocks (128, 144 and 176 keys); and the one-GPU op's bottom-right causal
// alignment for seq_q != seq_kv; and the one-GPU op's input validation.
// Built when the attention op is.
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "device/attention/attn_walk.hpp"
#include "mkernel/error.hpp"
#include "src/ops/attention/attn_host.hpp"

namespace {

using namespace mk::attn;
using namespace mk::attn::detail;

struct Seen {
  int64_t count = 0, sum = 0, sumsq = 0;
};

// Walks every unit of p (batch = heads = 1) and records, per global query
// position, the global key positions it sees; checks blocks the walk skips
// hold no visible key.
std::vector<Seen> walk(const AttnParams& p, int64_t positions) {
  std::vector<Seen> seen(static_cast<size_t>(positions));
  std::vector<int> rows_seen(static_cast<size_t>(positions), 0);
  for (int32_t w = 0; w < p.batch * p.heads * p.q_tiles; ++w) {
    const Unit u = unit_of(p, w);
    EXPECT_GE(u.rows, 1);
    for (int row = 0; row < u.rows; ++row) ++rows_seen[static_cast<size_t>(u.pos0 + row)];
    for (int g = 0; g < p.n_kvsegs; ++g) {
      const KvSeg& seg = p.kvseg[g];
      const int nb = seg_blocks(p, seg, u);
      const int all = (seg.len + p.block_n - 1) / p.block_n;
      for (int j = 0; j < all; ++j)
        for (int row = 0; row < u.rows; ++row) {
          const int32_t lim = last_visible_key(p, u, seg, j, row);
          if (j >= nb) {  // skipped: nothing visible there
            EXPECT_LT(lim, 0) << "unit " << w << " skips block " << j << " of segment " << g << " but row " << row
                              << " sees key column " << lim;
            continue;
          }
          Seen& s = seen[static_cast<size_t>(u.pos0 + row)];
          for (int col = 0; col <= lim && col < p.block_n; ++col) {
            const int64_t k = seg.pos0 + int64_t(j) * p.block_n + col;
            ++s.count;
            s.sum += k;
            s.sumsq += k * k;
          }
        }
    }
  }
  for (int64_t q = 0; q < positions; ++q)
    EXPECT_LE(rows_seen[static_cast<size_t>(q)], 1) << "query position " << q << " computed twice";
  return seen;
}

// Expected: keys [0, n) (n = number of visible keys from position 0).
void expect_prefix(const Seen& s, int64_t n, int64_t q) {
  const int64_t sum = n * (n - 1) / 2, sumsq = (n - 1) * n * (2 * n - 1) / 6;
  EXPECT_EQ(s.count, n) << "query " << q;
  EXPECT_EQ(s.sum, n > 0 ? sum : 0) << "query " << q;
  EXPECT_EQ(s.sumsq, n > 0 ? sumsq : 0) << "query " << q;
}

AttnParams base(int block_n = 128) {
  AttnParams p{};
  p.block_n = block_n;
  p.batch = 1;
  p.heads = 1;
  p.kv_heads = 1;
  p.group_heads = 1;
  return p;
}

TEST(AttnWalk, RingSegmentsCoverEveryVisiblePairOnce) {
  for (int bn : {128, 144, kBlockNOneGpu})
  for (int world : {1, 2, 3, 4, 8})
    for (int32_t s_local : {130, 256, 300, 1000})
      for (bool causal : {false, true}) {
        SCOPED_TRACE("block " + std::to_string(bn) + " world " + std::to_string(world) + " s_local " +
                     std::to_string(s_local) + (causal ? " causal" : ""));
        const int64_t total = int64_t(world) * s_local;
        std::vector<Seen> all(static_cast<size_t>(total));
        std::vector<int> owner(static_cast<size_t>(total), 0);
        for (int r = 0; r < world; ++r) {
          std::vector<int> order;
          for (int i = 0; i < world; ++i) order.push_back((r + i) % world);
          AttnParams p = base(bn);
          p.causal = causal;
          ring_segments(p, r, world, s_local, causal, order, /*batch=*/3, /*chunks=*/6);
          for (int g = 0; g < p.n_kvsegs; ++g) {  // source mapping
            const int src = order[static_cast<size_t>(g / (causal ? 2 : 1))];
            EXPECT_EQ(p.kvseg[g].map, src == r ? 0 : 1);
            EXPECT_EQ(p.kvseg[g].batch_off, src == r ? 0 : src * 3);
            EXPECT_EQ(p.kvseg[g].sig, src == r ? -1 : src * 6);
          }
          std::vector<Seen> seen = walk(p, total);
          for (int i = 0; i < p.n_qsegs; ++i)
            for (int32_t t = 0; t < p.qseg[i].len; ++t) ++owner[static_cast<size_t>(p.qseg[i].pos0 + t)];
          for (int64_t q = 0; q < total; ++q)
            if (seen[static_cast<size_t>(q)].count) all[static_cast<size_t>(q)] = seen[static_cast<size_t>(q)];
        }
        for (int64_t q = 0; q < total; ++q) {
          EXPECT_EQ(owner[static_cast<size_t>(q)], 1) << "position " << q << " is not held by exactly one rank";
          expect_prefix(all[static_cast<size_t>(q)], causal ? q + 1 : total, q);
        }
      }
}

TEST(AttnWalk, EveryUnitOrderCoversEveryTileOnce) {
  // 8 heads (2 batches x 4): head-major (1), groups that divide 8 or leave a smaller last group (3, 5),
  // tile-major (8, and anything larger).
  for (int32_t gh : {1, 2, 3, 5, 8, 100}) {
    SCOPED_TRACE("group_heads " + std::to_string(gh));
    AttnParams p = base();
    p.batch = 2;
    p.heads = 4;
    p.kv_heads = 2;
    p.group_heads = gh;
    p.n_qsegs = 1;
    p.qseg[0] = QSeg{0, 5 * kBlockM - 3, 0, 0};
    p.q_tiles = 5;
    const int32_t bh_n = p.batch * p.heads, total = bh_n * p.q_tiles;
    const int32_t g = gh < bh_n ? gh : bh_n;
    std::vector<int> seen(static_cast<size_t>(total), 0);
    int32_t prev_bh = -1, bh_changes = 0;
    for (int32_t u = 0; u < total; ++u) {
      const Unit x = unit_of(p, u);
      ASSERT_GE(x.b, 0);
      ASSERT_LT(x.b, p.batch);
      ASSERT_GE(x.h, 0);
      ASSERT_LT(x.h, p.heads);
      EXPECT_EQ(x.hkv, x.h / 2);
      const int32_t tile = x.s0 / kBlockM;
      ASSERT_GE(tile, 0);
      ASSERT_LT(tile, p.q_tiles);
      EXPECT_EQ(x.rows, tile == 4 ? kBlockM - 3 : kBlockM);
      const int32_t bh = x.b * p.heads + x.h;
      ++seen[static_cast<size_t>(bh * p.q_tiles + tile)];
      // Group by group; inside a group tile by tile, latest first, the group's heads in order.
      const int32_t grp = u / (g * p.q_tiles), first = grp * g;
      const int32_t size = bh_n - first < g ? bh_n - first : g;
      const int32_t r = u - grp * g * p.q_tiles;
      EXPECT_EQ(bh, first + r % size) << "unit " << u;
      EXPECT_EQ(tile, p.q_tiles - 1 - r / size) << "unit " << u;
      if (bh != prev_bh) ++bh_changes;
      prev_bh = bh;
    }
    for (int c : seen) EXPECT_EQ(c, 1);
    // Head-major: each head's tiles are consecutive; tile-major: the head changes at every unit.
    if (gh == 1) {
      EXPECT_EQ(bh_changes, bh_n);
    }
    if (gh >= bh_n) {
      EXPECT_EQ(bh_changes, total);
    }
  }
  // A zero group (parameters not set) walks head-major rather than dividing by zero.
  AttnParams p = base();
  p.batch = 1;
  p.heads = 2;
  p.kv_heads = 2;
  p.group_heads = 0;
  p.n_qsegs = 1;
  p.qseg[0] = QSeg{0, 2 * kBlockM, 0, 0};
  p.q_tiles = 2;
  EXPECT_EQ(unit_of(p, 1).h, 0);
  EXPECT_EQ(unit_of(p, 2).h, 1);
}

TEST(AttnWalk, OneGpuUnitOrderRule) {
  const int64_t l2 = 50 << 20;
  // Without a mask: head-major, claimed or not.
  for (int claimed : {0, 1}) {
    EXPECT_EQ(default_group_heads(0, 4, 32, 32, 8192, 128, claimed, l2), 1);
    EXPECT_EQ(default_group_heads(0, 4, 32, 8, 8192, 128, claimed, l2), 1);
  }
  // Causal, walked statically: MHA head-major, GQA tile-major (heaviest first).
  EXPECT_EQ(default_group_heads(1, 4, 32, 32, 8192, 128, 0, l2), 1);
  EXPECT_EQ(default_group_heads(1, 4, 32, 8, 8192, 128, 0, l2), 128);
  // Causal, claimed: tile-major where all K/V fits in 3/4 of L2 (1 MB per KV head at 2k, D = 128).
  EXPECT_EQ(default_group_heads(1, 1, 32, 32, 2048, 128, 1, l2), 32);  // 32 MB
  EXPECT_EQ(default_group_heads(1, 1, 32, 8, 8192, 128, 1, l2), 32);   // 32 MB
  // Otherwise whole KV heads within a quarter of L2 (12.5 MB), the largest group dividing them.
  EXPECT_EQ(default_group_heads(1, 4, 32, 32, 8192, 128, 1, l2), 2);    // 4 MB each: at most 3; 128 heads: 2
  EXPECT_EQ(default_group_heads(1, 4, 32, 8, 8192, 128, 1, l2), 8);     // 2 KV heads x 4 query heads
  EXPECT_EQ(default_group_heads(1, 1, 32, 32, 4096, 128, 1, l2), 4);    // 2 MB each: at most 6; 32: 4
  EXPECT_EQ(default_group_heads(1, 4, 32, 32, 2048, 128, 1, l2), 8);    // at most 12; 128: 8
  EXPECT_EQ(default_group_heads(1, 1, 32, 32, 32768, 128, 1, l2), 1);   // 16 MB each: one
  EXPECT_EQ(default_group_heads(1, 1, 13, 13, 8192, 128, 1, l2), 3);    // 13 is prime: 3 (a last group of 1)
  EXPECT_EQ(default_group_heads(1, 1, 32, 32, 8192, 64, 1, l2), 4);     // D = 64: 2 MB each
  EXPECT_EQ(default_claimed(1), 1);
  EXPECT_EQ(default_claimed(0), 0);
}

TEST(AttnWalk, OneGpuCausalIsBottomRightAligned) {
  for (int bn : {kBlockNOneGpu, 144, 128})
  for (auto [sq, skv] : std::vector<std::pair<int32_t, int32_t>>{{128, 128}, {1500, 700}, {777, 1290}, {1, 517}}) {
    SCOPED_TRACE("block " + std::to_string(bn) + " seq_q " + std::to_string(sq) + " seq_kv " + std::to_string(skv));
    AttnParams p = base(bn);
    p.causal = 1;
    p.n_qsegs = 1;
    p.qseg[0] = QSeg{0, sq, skv - sq, 0};
    p.q_tiles = (sq + kBlockM - 1) / kBlockM;
    p.n_kvsegs = 1;
    p.kvseg[0] = KvSeg{0, 0, 0, skv, 0, -1};
    // Positions: query i at skv - sq + i (may be negative: then no key).
    const int64_t off = sq > skv ? sq - skv : 0;
    std::vector<Seen> seen(static_cast<size_t>(sq));
    for (int32_t w = 0; w < p.q_tiles; ++w) {
      const Unit u = unit_of(p, w);
      for (int j = 0; j < seg_blocks(p, p.kvseg[0], u); ++j)
        for (int row = 0; row < u.rows; ++row) {
          const int32_t lim = last_visible_key(p, u, p.kvseg[0], j, row);
          Seen& s = seen[static_cast<size_t>(u.s0 + row)];
          for (int col = 0; col <= lim && col < p.block_n; ++col) {
            const int64_t k = int64_t(j) * p.block_n + col;
            ++s.count, s.sum += k, s.sumsq += k * k;
          }
        }
    }
    (void)off;
    for (int32_t i = 0; i < sq; ++i) {
      const int64_t n = std::clamp<int64_t>(int64_t(i) + skv - sq + 1, 0, skv);
      expect_prefix(seen[static_cast<size_t>(i)], n, i);
    }
  }
}

TEST(AttnWalk, RingSegmentsRejectBadInput) {
  AttnParams p = base();
  EXPECT_THROW(ring_segments(p, 0, 2, 301, true, {0, 1}, 1, 1), mk::Error);   // zigzag needs even s_local
  EXPECT_THROW(ring_segments(p, 1, 2, 300, true, {0, 1}, 1, 1), mk::Error);   // own rank not first
  EXPECT_THROW(ring_segments(p, 0, 3, 300, false, {0, 1}, 1, 1), mk::Error);  // a rank missing
}

}  // namespace

// Bad calls of the one-GPU op fail with a message naming the problem before
// anything touches a GPU (these run on the CPU machines too).
namespace {

std::string error_of(const mk::AttentionArgs& a) {
  try {
    (void)mk::attn::make_params(a);
  } catch (const mk::Error& e) {
    return e.what();
  }
  return "";
}

mk::AttentionArgs good_args() {
  alignas(16) static char buf[5][4096];  // never dereferenced: validation only
  mk::AttentionArgs a;
  a.q = buf[0], a.k = buf[1], a.v = buf[2], a.out = buf[3], a.lse = reinterpret_cast<float*>(buf[4]);
  a.batch = 1, a.seq_q = 1, a.heads = 4, a.kv_heads = 2, a.head_dim = 128;
  return a;
}

TEST(AttnValidation, BadCallsNameTheProblem) {
  struct Case {
    const char* expect;
    void (*bad)(mk::AttentionArgs&);
  };
  const Case cases[] = {
      {"head_dim must be 64 or 128", [](mk::AttentionArgs& a) { a.head_dim = 96; }},
      {"must divide heads", [](mk::AttentionArgs& a) { a.kv_heads = 3; }},
      {"must be >= 1", [](mk::AttentionArgs& a) { a.batch = 0; }},
      {"must be >= 1", [](mk::AttentionArgs& a) { a.heads = -2; }},
      {"must be < 2^30", [](mk::AttentionArgs& a) { a.heads = int64_t(1) << 31, a.kv_heads = 1; }},
      {"sizes too large", [](mk::AttentionArgs& a) { a.seq_q = int64_t(1) << 31; }},
      {"must be device pointers", [](mk::AttentionArgs& a) { a.lse = nullptr; }},
      {"16-byte aligned (k is at", [](mk::AttentionArgs& a) { a.k = static_cast<const char*>(a.k) + 4; }},
      {"work units must be < 2^30", [](mk::AttentionArgs& a) { a.batch = int64_t(1) << 29, a.seq_q = 1 << 20; }},
      // k and v's bytes wrapped to 0 (2^26 x 2^29 x 2 x 128 x 2 = 2^64), and their pointer checks passed anything
      {"must be < 2^48 bytes a tensor",
       [](mk::AttentionArgs& a) { a.batch = int64_t(1) << 26, a.seq_kv = int64_t(1) << 29, a.heads = 2; }},
      {"must be < 2^48 bytes a tensor",  // 2^29 x 2^11 x 128 x 2 = 2^48, no wrap
       [](mk::AttentionArgs& a) { a.seq_kv = int64_t(1) << 29, a.heads = a.kv_heads = 1 << 11; }},
      {"the workspace overlaps q",
       [](mk::AttentionArgs& a) { a.workspace = const_cast<void*>(a.q), a.workspace_bytes = 8; }},
      {"the workspace overlaps out", [](mk::AttentionArgs& a) { a.workspace = a.out, a.workspace_bytes = 8; }},
      {"the workspace overlaps lse", [](mk::AttentionArgs& a) { a.workspace = a.lse, a.workspace_bytes = 8; }},
      {"scale must be finite", [](mk::AttentionArgs& a) { a.scale = -1.f; }},
      {"scale log2(e) finite", [](mk::AttentionArgs& a) { a.scale = 3e38f; }},  // (base 2: it overflowed to inf)
      {"out overlaps q", [](mk::AttentionArgs& a) { a.out = const_cast<void*>(a.q); }},
  };
  EXPECT_TRUE(mk::attn::scale_ok(0.f) && mk::attn::scale_ok(0.125f) && mk::attn::scale_ok(2e38f));
  EXPECT_FALSE(mk::attn::scale_ok(2.4e38f) || mk::attn::scale_ok(-0.f - 1e-30f) || mk::attn::scale_ok(NAN));
  for (const Case& c : cases) {
    mk::AttentionArgs a = good_args();
    c.bad(a);
    const std::string msg = error_of(a);
    EXPECT_NE(msg.find(c.expect), std::string::npos) << "expected \"" << c.expect << "\", got \"" << msg << "\"";
  }
}

}  // namespace
