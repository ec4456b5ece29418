// mkernel: tile schedulers for the persistent GEMM engine (DESIGN.md §3).
// A scheduler turns a linear work index into the next output tile, in an
// order chosen for the fused op; the kernel body never computes tile order
// itself. Host and device share this code (tested on the CPU).
//
// Work distribution: the compute role has `ncta` CTAs (any number, decided
// at run time); CTA c takes work indices c, c + ncta, c + 2 ncta, ... in
// every order (StaticSchedule). In ArrivalQueue the index's row-block is the
// one that arrived in that slot, so tiles still start in arrival order.
//
// Orders (TileOrder):
//   RowMajor      m-block major, n-block minor.
//   Swizzled      groups of `swizzle` m-blocks walked column by column, so
//                 tiles in flight at once share A row-blocks and B col-blocks
//                 (L2 reuse).
//   RankRotated   Swizzled over m-blocks rotated to start at `rotate_mblk`
//                 (e.g. the first row-block of this rank's local data, so
//                 compute starts on what is already here); swizzle 1 walks
//                 the rotated rows in row-major order.
//   SharePermuted the m-blocks form shares of `share_blocks` (one per
//                 rank); shares are walked in the order share_order[0..],
//                 Swizzled inside (swizzle must divide share_blocks, so no
//                 group straddles two shares). RankRotated is the case of
//                 a rotation; this one serves orders a rotation cannot
//                 (the two-level reduce-scatter, device/roles/rs_layout.hpp).
//                 With share_interleave, the shares' swizzle groups are
//                 interleaved: group 0 of every share (in share_order),
//                 then group 1, ..., except that the last share of the
//                 order lags `share_lag` groups behind the others (the
//                 GEMM+AllReduce walk: owners finish rows all along, and
//                 a share's own group comes a group after the partial
//                 tiles it adds were computed on the other ranks).
//   ArrivalQueue  m-blocks in the order they arrive: work index w belongs to
//                 arrival slot w / n_blocks; the slot's m-block is read from
//                 `arrival[]` once its producer published it (bounded wait
//                 on the device; see the GEMM engine).
//   Grouped       several problems (experts) with their own M share one
//                 launch: `group_tile_start[g]` is the prefix sum of tiles
//                 of groups < g (empty groups have no tiles), tiles inside a
//                 group are RowMajor.
#pragma once

#include <cstdint>

#include "../ctx.hpp"

namespace mk::sched {

enum class TileOrder : int32_t {
  RowMajor = 0,
  Swizzled = 1,
  RankRotated = 2,
  ArrivalQueue = 3,
  Grouped = 4,
  SharePermuted = 5
};

constexpr int kMaxShares = 16;

struct Tile {
  int32_t group = 0;   // problem index (Grouped), else 0
  int32_t m_blk = 0;   // row-block of the output (within its group)
  int32_t n_blk = 0;   // column-block of the output
};

struct TileSchedParams {
  TileOrder order = TileOrder::RowMajor;
  int32_t m_blocks = 0;        // row-blocks (non-grouped)
  int32_t n_blocks = 0;        // column-blocks (all modes)
  int32_t swizzle = 1;         // Swizzled: m-blocks per group (>= 1)
  int32_t rotate_mblk = 0;     // RankRotated: first m-block
  int32_t share_blocks = 0;    // SharePermuted: m-blocks per share
  int8_t share_order[kMaxShares] = {};  // SharePermuted: the i-th share walked
  int32_t share_interleave = 0;         // SharePermuted: 1 interleaves the shares' groups (see above)
  int32_t share_lag = 0;                // ... the last share lags this many groups (0 <= lag <= groups per share)
  // SharePermuted: rows per share when they are not a multiple of the tile
  // height (0: share_blocks whole row-blocks). Share s then holds rows
  // [s share_rows, (s + 1) share_rows) in share_blocks row-blocks, the
  // last one partial; a tile never straddles two shares (the GEMM engine
  // computes the rows past its share and stores none of them).
  int32_t share_rows = 0;
  const int32_t* arrival = nullptr;           // ArrivalQueue: m-block of arrival slot i
  int32_t num_groups = 0;                     // Grouped
  const int64_t* group_tile_start = nullptr;  // Grouped: num_groups + 1 prefix sums of tiles
};

MK_HD int64_t total_tiles(const TileSchedParams& p) {
  if (p.order == TileOrder::Grouped) return p.num_groups > 0 ? p.group_tile_start[p.num_groups] : 0;
  return int64_t(p.m_blocks) * p.n_blocks;
}

// m-blocks of group g (Grouped); the caller knows each group's M.
MK_HD int32_t group_of(const TileSchedParams& p, int64_t w) {
  // Largest g with group_tile_start[g] <= w (skips empty groups).
  int32_t lo = 0, hi = p.num_groups - 1;
  while (lo < hi) {
    const int32_t mid = (lo + hi + 1) / 2;
    if (p.group_tile_start[mid] <= w)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// Groups of `swizzle` m-blocks (the last one may be shorter), each walked
// column by column; swizzle 1 is row-major.
MK_HD Tile swizzled_tile(const TileSchedParams& p, int64_t w) {
  Tile t;
  const int64_t n = p.n_blocks;
  const int64_t s = p.swizzle < 1 ? 1 : p.swizzle;
  const int64_t per_group = s * n;
  const int64_t g = w / per_group;
  const int64_t first_m = g * s;
  const int64_t rows = (p.m_blocks - first_m) < s ? (p.m_blocks - first_m) : s;
  const int64_t r = w - g * per_group;  // offset inside the group (rows * n tiles)
  t.m_blk = static_cast<int32_t>(first_m + r % rows);
  t.n_blk = static_cast<int32_t>(r / rows);
  return t;
}

// SharePermuted with share_interleave: the m-block of position `pos` of
// the Swizzled walk (whose groups, of `swizzle` m-blocks, are numbered in
// walk order). With W shares of G groups and lag l, the walk is l steps of
// the first W - 1 shares' groups, then G - l steps of all W shares (the
// last share at group step - l), then l steps of the last share alone.
MK_HD int32_t interleaved_mblk(const TileSchedParams& p, int32_t pos) {
  const int32_t sw = p.swizzle < 1 ? 1 : p.swizzle;
  const int32_t W = p.m_blocks / p.share_blocks, G = p.share_blocks / sw;
  const int32_t lag = p.share_lag < 0 ? 0 : (p.share_lag > G ? G : p.share_lag);
  const int32_t q = pos / sw, in = pos % sw;  // walk group, m-block inside it
  const int32_t head = lag * (W - 1), body = head + (G - lag) * W;
  int32_t i, g;
  if (q < head) {
    i = q % (W - 1);
    g = q / (W - 1);
  } else if (q < body) {
    const int32_t x = q - head, step = lag + x / W;
    i = x % W;
    g = i == W - 1 ? step - lag : step;
  } else {
    i = W - 1;
    g = G - lag + (q - body);
  }
  return p.share_order[i] * p.share_blocks + g * sw + in;
}

// Tile of work index w in [0, total_tiles). For ArrivalQueue, `arrival[w /
// n_blocks]` must already be published (the caller waited for it).
MK_HD Tile tile_of(const TileSchedParams& p, int64_t w) {
  Tile t;
  const int64_t n = p.n_blocks;
  switch (p.order) {
    case TileOrder::RowMajor:
      t.m_blk = static_cast<int32_t>(w / n);
      t.n_blk = static_cast<int32_t>(w % n);
      break;
    case TileOrder::Swizzled:
      t = swizzled_tile(p, w);
      break;
    case TileOrder::RankRotated: {
      // The Swizzled walk over m-blocks renumbered to start at rotate_mblk.
      t = swizzled_tile(p, w);
      t.m_blk = static_cast<int32_t>((t.m_blk + p.rotate_mblk) % p.m_blocks);
      break;
    }
    case TileOrder::SharePermuted: {
      t = swizzled_tile(p, w);
      if (p.share_interleave) {
        t.m_blk = interleaved_mblk(p, t.m_blk);
        break;
      }
      const int32_t i = t.m_blk / p.share_blocks;
      t.m_blk = p.share_order[i] * p.share_blocks + t.m_blk % p.share_blocks;
      break;
    }
    case TileOrder::ArrivalQueue:
      t.m_blk = p.arrival[w / n];
      t.n_blk = static_cast<int32_t>(w % n);
      break;
    case TileOrder::Grouped: {
      t.group = group_of(p, w);
      const int64_t r = w - p.group_tile_start[t.group];
      t.m_blk = static_cast<int32_t>(r / n);
      t.n_blk = static_cast<int32_t>(r % n);
      break;
    }
  }
  return t;
}

// Static persistent iteration: CTA `cta` of `ncta` visits w = cta, cta + ncta, ...
struct StaticSchedule {
  int64_t next;
  int64_t stride;
  int64_t end;
  MK_HD StaticSchedule(const TileSchedParams& p, int cta, int ncta) : next(cta), stride(ncta), end(total_tiles(p)) {}
  MK_HD bool get_next(int64_t* w) {
    if (next >= end) return false;
    *w = next;
    next += stride;
    return true;
  }
};

// Host helper for Grouped: fills prefix sums of tiles from per-group M.
inline int64_t build_group_tiles(const int32_t* m_per_group, int32_t num_groups, int32_t block_m, int32_t n_blocks,
                                 int64_t* group_tile_start) {
  int64_t acc = 0;
  for (int32_t g = 0; g < num_groups; ++g) {
    group_tile_start[g] = acc;
    acc += (int64_t(m_per_group[g]) + block_m - 1) / block_m * n_blocks;  // (int64 first: m near 2^31)
  }
  group_tile_start[num_groups] = acc;
  return acc;
}

}  // namespace mk::sched
