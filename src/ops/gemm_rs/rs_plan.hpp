// mkernel: the reduce-scatter half shared by GemmRs and GemmAr: checks,
// the GEMM's tile walk and epilogue hooks, and the standalone roles'
// parameters, for the two-level layout of device/roles/rs_layout.hpp.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "device/gemm/gemm_params.hpp"
#include "device/roles/reduce_scatter.cuh"
#include "mkernel/communicator.hpp"
#include "mkernel/error.hpp"
#include "mkernel/network.hpp"
#include "mkernel/symmetric.hpp"
#include "src/ops/ag_gemm/plan_args.hpp"
#include "src/ops/ag_gemm/tp_plan.hpp"
#include "src/ops/gemm/gemm_host.hpp"
#include "src/runtime/reported_wait.hpp"

namespace mk::tp {

// The standalone collectives (reduce_scatter(), all_reduce()) have the GPU
// to themselves: a grid of kRsPushCtas (16 saturated NVLink with the bulk
// copier when pushing was a role of its own) + the Reduce CTAs (16 by
// default); every CTA takes push and reduce items in one claim order
// (device/roles/reduce_scatter.cuh rs_claimed).
constexpr int kRsPushCtas = 16;
constexpr int kRsDefaultReduceCtas = 16;

// The plans' shared option checks (the whole grid: tp::check_grid): the asynchronous
// epilogue (on unless the transport runs kernels on this GPU) and the
// standalone Reduce CTAs (`extra` more CTAs beside those, all
// leaving such a transport its SMs: tp::network_free_sms).
inline bool rs_async_store(const char* op, int opt, bool net_kernels) {
  if (opt < -1 || opt > 1 || (opt == 1 && net_kernels))
    fail(op, ": async_store must be -1, 0 or 1 (1 not next to a transport that runs kernels on this GPU; got ", opt,
         ")");
  return opt == -1 ? !net_kernels : opt == 1;
}
inline bool rs_own_tma(const char* op, int opt) {
  if (opt < -1 || opt > 1) fail(op, ": own_tma_store must be -1, 0 or 1 (got ", opt, ")");
  return opt != 0;
}
// The default (opt 0) is fitted to the SMs there are: kRsDefaultReduceCtas or fewer, and 0 where even one does
// not fit (the standalone collective then refuses at its call: rs_check_reduce_room; run() is not concerned; the
// plans put "no room" in their plan check, so that it is alike on every rank).
// An explicit count that does not fit fails here.
inline int rs_reduce_ctas(const char* op, int opt, int sms, int free_sms, int extra) {
  const int max_reduce = sms - free_sms - kRsPushCtas - extra;
  if (opt == 0) return std::max(0, std::min(kRsDefaultReduceCtas, max_reduce));
  if (opt < 1 || opt > max_reduce)
    fail(op, ": num_reduce_ctas must be in [1, ", max_reduce, "] (got ", opt, "; ", sms, " SMs, ", free_sms,
         " left to the network's kernels, ", kRsPushCtas + extra, " taken by the collective's other CTAs)");
  return opt;
}
// A standalone collective's call on a plan whose default left it no Reduce CTA (rs_reduce_ctas).
inline void rs_check_reduce_room(const char* call, int num_reduce, int extra) {
  if (num_reduce == 0)
    fail(call, ": its grid needs ", kRsPushCtas + 1 + extra, " CTAs beside the SMs left to the network's kernels ",
         "(MK_NET_FREE_SMS), more than this GPU offers (", gemm::num_sms(), " SMs; under MPS, the client's share)");
}

// run()'s pointers: out (out_bytes) 16-byte aligned and apart from a and b.
inline void rs_check_run_pointers(const char* op, const void* a, int64_t a_bytes, const void* b, int64_t b_bytes,
                                  const void* out, int64_t out_bytes) {
  if (!out || !aligned16(out)) fail(op, ": out must be a 16-byte aligned device pointer (got ", out, ")");
  if (!a || !b || !aligned16(a) || !aligned16(b))
    fail(op, ": a and b must be 16-byte aligned device pointers (got a=", a, " b=", b, ")");
  if (overlap(out, out_bytes, a, a_bytes) || overlap(out, out_bytes, b, b_bytes)) fail(op, ": out overlaps a or b");
}

// Row-blocks of one rank's share of m rows (the last one partial when m /
// world is not a multiple of the tile height: sched::TileSchedParams::share_rows).
inline int64_t rs_share_blocks(int64_t m, int world) { return (m / world + gemm::kBlockM - 1) / gemm::kBlockM; }

// What a GEMM+RS-style plan holds (owned by the plan object).
struct RsPlan {
  int64_t m = 0, n = 0, k = 0;
  int sig_entry = 0, sig_local = 0, sig_net = 0;
  int swizzle = 1;
  int64_t slot_elems = 0;  // bf16 elements per staging slot: one share, R x n in whole GEMM tiles
  SymmetricBuffer* staging = nullptr;
  uint64_t* epoch_counter = nullptr;  // [0] epoch, [1] finished CTAs, [2] tile counter, [3] second work counter
  uint64_t* net_rb_count = nullptr;   // device: tiles stored per row-block (network puts)
  const net::NetCtx* netctx = nullptr;
  int net_region = 0;
  SignalLease signals;  // the signal words above (and the caller's extra ones), given back by rs_free_plan
  std::string check;    // what the plan check compares (rs_reserve_plan; exchanged by the caller: tp::PlanArgs)
};

// Shape checks of both ops (before anything is allocated).
inline void rs_check_shape(const Topology& t, const char* op, int64_t m, int64_t n, int64_t k_local) {
  if (n < 64 || n % 64) fail(op, ": n must be a positive multiple of 64 (got ", n, ")");
  if (k_local < 64 || k_local % 64) fail(op, ": k_local must be a positive multiple of 64 (got ", k_local, ")");
  if (m < t.world || m % t.world)
    fail(op, ": m (", m, ") must split into ", t.world, " equal row blocks (a multiple of the ", t.world,
         " ranks, at least one row each)");
  check_dims_int32(op, m, n, k_local);
  check_topology(t, op, roles::kMaxRsRanks);
  if (t.world > roles::kMaxRsRanks) fail(op, ": at most ", roles::kMaxRsRanks, " ranks (got ", t.world, ")");
}

// Reserves signals (entry, NVLink and network arrivals, then `extra_sig`
// per global row-block) as a step of `args` (skipped when the constructor's
// own checks failed), and sets what the plan check compares (RsPlan::check:
// the caller exchanges it, args.exchange, after its local memory,
// rs_alloc_counters, and before anything collective, rs_alloc_staging;
// undo_on_throw says why).
inline RsPlan rs_reserve_plan(Communicator& comm, PlanArgs& args, const char* op, int64_t m, int64_t n,
                              int64_t k_local, int swizzle_opt, int extra_sig, int* extra_sig_index,
                              const std::string& variant = "") {
  const Topology& t = comm.topology();
  RsPlan p;
  std::string extra;
  args.run([&] {  // (skipped when the constructor's own checks failed: then only the caller's exchange)
    p.m = m;
    p.n = n;
    p.k = k_local;
    const int64_t share_blocks = rs_share_blocks(m, t.world), total_blocks = share_blocks * t.world;
    if (swizzle_opt < 0 || (swizzle_opt && share_blocks % swizzle_opt))
      fail(op, ": swizzle must be 0 or divide the ", share_blocks, " row-blocks of a share (got ", swizzle_opt, ")");
    p.swizzle = swizzle_opt ? swizzle_opt : rs_swizzle(share_blocks, rs_swizzle_cap(t.num_nodes, share_blocks));
    const rs::Layout lay{t.num_nodes, t.local_size};
    p.sig_entry = p.signals.take(comm, t.world);
    p.sig_local = p.signals.take(comm, static_cast<int>(std::max(1, lay.local_sources()) * total_blocks));
    p.sig_net = p.signals.take(comm, static_cast<int>(std::max(1, lay.net_sources()) * total_blocks));
    if (extra_sig > 0) {
      *extra_sig_index = p.signals.take(comm, static_cast<int>(extra_sig * total_blocks));
      extra = cat(", ", *extra_sig_index);
    }
    const int64_t n_tiles = (n + gemm::kBlockN - 1) / gemm::kBlockN;
    p.slot_elems = share_blocks * gemm::kBlockM * n_tiles * gemm::kBlockN;
  });
  // The plan check compares the walk (swizzle) and the op's variant too:
  // ranks walking different orders could each wait for a tile the other has
  // not claimed.
  p.check = cat(m, "x", n, "x", k_local, " (swizzle ", p.swizzle, variant, ", signals ", p.sig_entry, ", ", p.sig_local,
                ", ", p.sig_net, extra, ")");
  return p;
}

// Staging bytes of a reserved plan: the layout's slots + extra_slots.
inline size_t rs_staging_bytes(const Topology& t, const RsPlan& p, int extra_slots) {
  const rs::Layout lay{t.num_nodes, t.local_size};
  return static_cast<size_t>(std::max(1, lay.num_slots() + extra_slots)) * static_cast<size_t>(p.slot_elems) * 2;
}

// This rank's device counters (epoch, and across nodes the per-row-block
// counts), zeroed: this rank's memory alone.
inline void rs_alloc_counters(const Topology& t, RsPlan& p) {
  MK_CUDA_CHECK(cudaMalloc(&p.epoch_counter, 4 * sizeof(uint64_t)));
  MK_CUDA_CHECK(cudaMemset(p.epoch_counter, 0, 4 * sizeof(uint64_t)));
  if (t.num_nodes > 1) {
    const size_t total_blocks = static_cast<size_t>(rs_share_blocks(p.m, t.world) * t.world);
    MK_CUDA_CHECK(cudaMalloc(&p.net_rb_count, total_blocks * sizeof(uint64_t)));
    MK_CUDA_CHECK(cudaMemset(p.net_rb_count, 0, total_blocks * sizeof(uint64_t)));
  }
}

// Collective: the staging buffer (rs_staging_bytes) and, across nodes, its
// registration. staging = false (a plan whose calls never launch the fused
// kernel: a one-rank plan on the plain path, tp::single_rank): none.
inline void rs_alloc_staging(Communicator& comm, RsPlan& p, int extra_slots, bool staging) {
  const Topology& t = comm.topology();
  if (staging) p.staging = &comm.alloc_symmetric(rs_staging_bytes(t, p, extra_slots));
  if (t.num_nodes > 1) {  // (several ranks: always staging)
    Network& net = comm.network();
    p.net_region = net.register_buffer(*p.staging);
    p.netctx = net.device_ctx_ptr();
  }
}

inline void rs_free_plan(Communicator& comm, RsPlan& p) noexcept;

// rs_reserve_plan, the counters, the plan check, then the staging; the
// memory is given back if a step throws (the signal words too when the plan
// check fails, on every rank alike; they stay reserved when a later step
// throws, as for any plan failing after its check). The caller synchronises
// before the first launch.
inline RsPlan rs_make_plan(Communicator& comm, const char* op, int64_t m, int64_t n, int64_t k_local, int swizzle_opt,
                           int extra_slots, int extra_sig, int* extra_sig_index, const std::string& variant = "",
                           bool staging = true) {
  PlanArgs args(comm, op, roles::kMaxRsRanks);
  RsPlan p = rs_reserve_plan(comm, args, op, m, n, k_local, swizzle_opt, extra_sig, extra_sig_index, variant);
  undo_on_throw([&] {
    args.run([&] {
      rs_alloc_counters(comm.topology(), p);
      // (an error of the memsets, or one left pending, in the check too)
      MK_DEVICE_SYNC(cat("rank ", comm.rank(), ": ", op, " plan setup"));
    });
    args.exchange(p.signals, p.check, "m x n x k_local");
    rs_alloc_staging(comm, p, extra_slots, staging);
  }, [&] { rs_free_plan(comm, p); });
  return p;
}

inline void rs_free_plan(Communicator& comm, RsPlan& p) noexcept {
  release_shared(comm, p.net_region, p.staging, p.signals);
  if (p.epoch_counter) teardown_call(cudaFree(p.epoch_counter), "a reduce-scatter plan's device counters");
  if (p.net_rb_count) teardown_call(cudaFree(p.net_rb_count), "a reduce-scatter plan's network counters");
  p = RsPlan{};  // its signals go back now (unless kept above): after free_symmetric's exchange no kernel uses them
}

// The fused GEMM's parameters: shares in the layout's walk order, tiles of
// other ranks' shares stored into (or, aggregated, sent to) their owners'
// staging slots, own tiles summed with every source, final rows into out.
inline gemm::GemmParams rs_gemm_params(const RsPlan& pl, const Topology& t, const DeviceCtx& ctx, const void* a,
                                       const void* b, void* out, int num_compute, bool async) {
  const rs::Layout lay{t.num_nodes, t.local_size};  // staging slots, walk order (rs_layout.hpp)
  const int64_t rows = pl.m / t.world;
  gemm::GemmParams gp = gemm::make_params(
      gemm::Operands{.a = a, .b = b, .out = pl.staging->local, .m = pl.m, .n = pl.n, .k = pl.k}, num_compute);
  // Shares in the layout's walk order (rs_layout.hpp); swizzle groups
  // inside a share (tp::rs_swizzle).
  const int64_t blocks = rs_share_blocks(pl.m, t.world), total_blocks = blocks * t.world;
  gp.sched.order = sched::TileOrder::SharePermuted;
  gp.sched.share_blocks = static_cast<int32_t>(blocks);
  gp.sched.m_blocks = static_cast<int32_t>(total_blocks);
  if (rows % gemm::kBlockM) gp.sched.share_rows = static_cast<int32_t>(rows);  // ragged shares
  for (int i = 0; i < t.world; ++i) {
    const int s = lay.share_at(i, t.node, t.local_rank);
    gp.sched.share_order[i] = static_cast<int8_t>(t.rank_at(s / t.local_size, s % t.local_size));
  }
  gp.sched.swizzle = pl.swizzle;
  const size_t slot_bytes = size_t(pl.slot_elems) * 2;
  char* mine = static_cast<char*>(pl.staging->local);
  for (int d = 0; d < t.world; ++d) {
    const int dn = t.node_of[d], dl = t.local_rank_of[d];
    if (dl != t.local_rank) {  // a node peer aggregates (or owns) this share: its NVLink receive slot
      gp.epi.out[d] = static_cast<char*>(pl.staging->peer[dl]) + lay.local_slot(t.local_rank, dl, dn) * slot_bytes;
      gp.epi.signals[d] = ctx.peer_signals[dl] + pl.sig_local + rs::compact(t.local_rank, dl) * total_blocks;
      continue;
    }
    // This rank's local index: add the node peers' tiles ...
    if (t.local_size > 1) gp.epi.own_mask |= 1u << d;
    gp.epi.own_dst_off[d] = int64_t(dn) * pl.slot_elems;
    if (d == t.rank) {  // ... and the other nodes' sums: the final rows
      gp.epi.out[d] = mine;  // not written (own_final)
      gp.epi.own_mask |= 1u << d;
      continue;
    }
    // ... then send the node's sum to the owner (rail peer).
    const size_t send = lay.send_slot(dn, t.node) * slot_bytes;
    gp.epi.out[d] = mine + send;
    gp.epi.net |= 1u << d;
    gp.epi.net_peer[d] = d;
    gp.epi.net_src_off[d] = send;
    gp.epi.net_dst_off[d] = lay.net_recv_slot(t.node, dn) * slot_bytes;
    gp.epi.net_sig_base[d] = pl.sig_net + static_cast<int32_t>(rs::compact(t.node, dn) * total_blocks);
  }
  gp.epi.layout = gemm::OutLayout::FragMajor;  // partial tiles read only by the owner reduce
  gp.epi.rows_per_dest = rows;
  gp.epi.signal = gemm::EpiSignal::PerRowBlock;
  gp.epi.sig_delta = 1;
  gp.epi.net_region = pl.net_region;
  gp.netctx = pl.netctx;
  gp.epi.net_rb_count = pl.net_rb_count;  // one put per row-block
  gp.epi.own_final = t.rank;
  gp.epi.own_nsrc = lay.local_sources();
  gp.epi.own_slots = static_cast<const uint16_t*>(pl.staging->local);
  gp.epi.own_src_stride = int64_t(t.num_nodes) * pl.slot_elems;
  gp.epi.own_signals = ctx.signals + pl.sig_local;
  gp.epi.own_net_nsrc = lay.net_sources();
  gp.epi.own_net_slots =
      static_cast<const uint16_t*>(pl.staging->local) + int64_t(lay.local_sources()) * t.num_nodes * pl.slot_elems;
  gp.epi.own_net_stride = pl.slot_elems;
  gp.epi.own_net_signals = ctx.signals + pl.sig_net;
  gp.epi.own_sig_stride = total_blocks;
  gp.epi.own_expect = static_cast<uint64_t>((pl.n + gemm::kBlockN - 1) / gemm::kBlockN);
  for (int c = 0; c < lay.local_sources(); ++c)  // (reports: compact source c's rank; over the network the rail peer)
    gp.epi.own_src_rank[c] = t.rank_at(t.node, c < t.local_rank ? c : c + 1);
  for (int c = 0; c < lay.net_sources(); ++c)
    gp.epi.own_net_src_rank[c] = t.rank_at(c < t.node ? c : c + 1, t.local_rank);
  gp.epi.own_out = out;
  gp.epi.own_ldo = pl.n;
  gp.load.start_signals = ctx.signals + pl.sig_entry;  // every owner entered this call
  gp.load.num_start = t.world;
  gp.load.epoch_counter = pl.epoch_counter;
  // Tiles from a dynamic queue: a tile that waits was claimed after every
  // tile it waits for was claimed (walk order), so no CTA waits on a CTA
  // that is not resident.
  gp.tile_counter = pl.epoch_counter + 2;
  // Tiles for other ranks (NVLink receive slots, send slots) leave through
  // the storer's bulk copies while the next tile computes; not next to a
  // transport that runs kernels on this GPU (kSmemBytesAsync leaves them
  // no room beside a CTA: gemm_params.hpp NOTES).
  gp.epi.async_store = async ? 1 : 0;
  gp.has_ctx = 1;
  gp.ctx = ctx;
  return gp;
}

// The standalone roles' parameters (push and reduce).
inline roles::ReduceScatter rs_role_params(const RsPlan& pl, const Topology& t, const void* x, void* out) {
  const rs::Layout lay{t.num_nodes, t.local_size};
  roles::ReduceScatter rs{};
  for (int d = 0; d < t.local_size; ++d) rs.staging[d] = pl.staging->peer[d];
  for (int s = 0; s < t.world; ++s) {
    rs.rank_at[s] = t.rank_at(s / t.local_size, s % t.local_size);
    rs.walk[s] = static_cast<int8_t>(lay.share_at(s, t.node, t.local_rank));
  }
  rs.input = x;
  rs.out = out;
  rs.rows = pl.m / t.world;
  rs.n = pl.n;
  rs.row_block = gemm::kBlockM;
  rs.slot_elems = pl.slot_elems;
  rs.rank = t.rank;
  rs.world = t.world;
  rs.node = t.node;
  rs.num_nodes = t.num_nodes;
  rs.local_rank = t.local_rank;
  rs.local_size = t.local_size;
  rs.sig_entry = pl.sig_entry;
  rs.sig_local = pl.sig_local;
  rs.sig_net = pl.sig_net;
  rs.netctx = pl.netctx;
  rs.net_region = pl.net_region;
  rs.net_queue = 0;
  // The GEMM adds once per tile (n_blocks per row-block), the standalone push
  // once per row-block by the same amount: counts stay in step whichever
  // entry point each call of the plan uses.
  rs.adds_per_block = static_cast<uint64_t>((pl.n + gemm::kBlockN - 1) / gemm::kBlockN);
  rs.parts = rs_parts(static_cast<int64_t>(rs.adds_per_block), gemm::kBlockM * pl.n / 8);
  return rs;
}

}  // namespace mk::tp
