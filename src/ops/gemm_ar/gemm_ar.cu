// mkernel: GEMM + AllReduce (include/mkernel/tp.hpp), one persistent
// kernel, on N nodes of L GPUs: the two-level reduce-scatter of GemmRs
// (device/roles/rs_layout.hpp) with the owners' final rows published as
// they are finished, and the all-gather of device/roles/ar_gather.cuh.
// - run(): CTAs [0, num_compute) compute (the GEMM engine), the rest
//   Gather; the compute walks as GEMM+RS does, across nodes by default with the shares' row-block groups
//   interleaved (GemmArOptions::interleave, tp::ar_interleave; sched::TileSchedParams::share_interleave; on one
//   node the own share last): owner tiles store their
//   final rows into the staging buffer's final slot (by TMA, and from the
//   same shared memory into out: the gather skips the own share) and
//   signal them (and
//   send each finished row-block once to every other node's rail peer);
//   compute CTAs that run out of tiles join the gather.
// - all_reduce(): every CTA takes the standalone reduce-scatter's items
//   from one counter (push, then reduce: the reduce items publish the final
//   rows the same way; device/roles/reduce_scatter.cuh rs_claimed), then
//   gathers.
// Every rank copies the owners' bf16 rows: the results agree bit for bit.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <limits>
#include <string>

#include "device/epoch.cuh"
#include "device/net/agent.cuh"
#include "device/gemm/gemm_engine.cuh"
#include "device/roles/ar_gather.cuh"
#include "device/roles/reduce_scatter.cuh"
#include "mkernel/error.hpp"
#include "mkernel/gemm.hpp"
#include "mkernel/mkernel.hpp"
#include "mkernel/network.hpp"
#include "mkernel/tp.hpp"
#include "src/ops/ag_gemm/tp_plan.hpp"
#include "src/ops/gemm/gemm_host.hpp"
#include "src/ops/gemm_rs/rs_plan.hpp"
#include "src/runtime/device_pointer.hpp"
#include "src/runtime/reported_wait.hpp"

namespace mk {

namespace {

constexpr int kGatherParts = 32;  // pieces per row-block (64 KB at n = 8192): many CTAs share the last row-blocks

// NOTES: fused, the compute CTAs take the lowest indices, which the hardware
// makes resident first: every Gather CTA waits on compute (this rank's and
// its peers'), so if SMs are scarce (another kernel or MPS client holds the
// rest) the CTAs left out must be Gather CTAs, whose items the resident
// CTAs take once their tiles are done. With Gather first, a grid short of
// SMs held spinning Gather CTAs while no compute CTA ran: a hang under MPS
// (bench/results/mps-two-ranks-one-gpu-20261202.md; the FinishesWith* tests, tests/dist/scarce_sms.cuh).
__global__ void __launch_bounds__(gemm::kThreads, 1)
    gemm_ar_kernel(const __grid_constant__ gemm::GemmParams gp, const __grid_constant__ roles::ReduceScatter rs,
                   const __grid_constant__ roles::ArGather ag, const dev::DeviceEpoch ep,
                   const net::AgentLaunch agent) {
  extern __shared__ uint8_t smem[];
  if (net::op_agent_block(agent, gp.ctx, ep, smem)) return;  // Role::Deliver (emu): this kernel's network writes
  const int cta = static_cast<int>(blockIdx.x) - agent.ctas;
  if (threadIdx.x == 0) dev::trace(gp.trace, cta, dev::TraceKind::KernelEntry, 0);
  const uint64_t epoch = dev::epoch_of_launch(ep);
  char* buf = reinterpret_cast<char*>(smem);
  if (gp.num_compute > 0) {  // run(): Gather CTAs from the start, compute CTAs once out of tiles
    if (cta == 0 && threadIdx.x == 0) roles::rs_announce(gp.ctx, rs, epoch);
    if (cta < gp.num_compute) {
      gemm::run_compute<true>(gp, smem, cta);
      // The engine's stages were written by TMA (async proxy); the
      // gather's barriers and copies reuse them.
      dev::sm90::fence_proxy_async_shared();
      __syncthreads();
    }
    dev::BulkCopier<> copier(buf);
    roles::ar_gather(gp.ctx, ag, epoch, copier);
  } else {  // all_reduce(): the reduce-scatter's items (the tile counter is free), then the gather, one copier
    // (a copier declared once before the branch, 2026-12-06, made ptxas spill 948 bytes in this kernel)
    dev::BulkCopier<> copier(buf);
    roles::rs_claimed(gp.ctx, rs, epoch, copier, ep.tiles);
    __syncthreads();
    roles::ar_gather(gp.ctx, ag, epoch, copier);
  }
  dev::epoch_finish(ep);
  if (threadIdx.x == 0) dev::trace(gp.trace, cta, dev::TraceKind::KernelExit, 0);
}

using tp::aligned16;

}  // namespace

GemmAr::GemmAr(Communicator& comm, int64_t m, int64_t n, int64_t k_local, const GemmArOptions& opt)
    : comm_(comm), m_(m), n_(n), k_(k_local) {
  order_.share(comm.launch_chain());  // (ordered with the communicator's other plans: mkernel/launch_order.hpp)
  const Topology& t = comm.topology();
  // This rank's checks, their outcome in the plan check (tp::PlanArgs: a
  // rank failing alone fails every rank at once).
  tp::PlanArgs args(comm, "GemmAr", roles::kMaxRsRanks);
  const roles::ArLayout al{t.num_nodes};
  int swizzle = 0;
  std::string variant;
  int64_t n_tiles = 0;
  args.run([&] {
    tp::rs_check_shape(t, "GemmAr", m, n, k_local);
    const int sms = gemm::num_sms();
    const int free_sms = tp::network_free_sms(comm, "GemmAr", opt.num_ctas, sms);
    num_ctas_ = opt.num_ctas ? opt.num_ctas : sms - free_sms;
    tp::check_grid("GemmAr", num_ctas_, sms, opt.num_ctas, free_sms);
    // Default split: at least tp::ar_gather_ctas Gather CTAs, and the SMs the
    // GEMM's last wave would leave idle anyway (tp::balanced_ctas): 8 Gather
    // CTAs cost 1x2 M = 1024 a third wave (0.66 ms against 0.41 with 3).
    n_tiles = (n + gemm::kBlockN - 1) / gemm::kBlockN;
    const int64_t tiles = tp::rs_share_blocks(m, t.world) * t.world * n_tiles;  // two-shot: whole row-blocks per share
    const int min_gather = std::min(tp::ar_gather_ctas(k_local), num_ctas_ - 1);
    num_gather_ = opt.num_gather_ctas ? opt.num_gather_ctas
                                      : num_ctas_ - std::min(num_ctas_ - min_gather,
                                                             tp::balanced_ctas(tiles, num_ctas_ - min_gather));
    if (num_gather_ < 1 || num_gather_ > num_ctas_ - 1)
      fail("GemmAr: num_gather_ctas must be in [1, ", num_ctas_ - 1, "] (got ", num_gather_, ")");
    async_ = tp::rs_async_store("GemmAr", opt.async_store, free_sms > 0);
    own_tma_ = tp::rs_own_tma("GemmAr", opt.own_tma_store);
    plain_ctas_ = opt.num_ctas;  // the plain path: every SM unless the grid was set
    plain_ = tp::single_rank(t, m, n, k_local, plain_ctas_ ? plain_ctas_ : sms, false);  // (fused: no split tiles)
    plain_swizzle_ = opt.swizzle;
    if (opt.interleave < -1 || opt.interleave > 1)
      fail("GemmAr: interleave must be -1, 0 or 1 (got ", opt.interleave, ")");
    interleave_ = opt.interleave == -1 ? tp::ar_interleave(t.num_nodes) : opt.interleave == 1;
    // all_reduce()'s grid: kRsPushCtas + the Reduce CTAs + 1 (every CTA takes claims, then gathers).
    num_reduce_ = tp::rs_reduce_ctas("GemmAr", opt.num_reduce_ctas, sms, free_sms, 1);
    if (opt.one_shot < -1 || opt.one_shot > 1) fail("GemmAr: one_shot must be -1, 0 or 1 (got ", opt.one_shot, ")");
    if (opt.one_shot == 1 && !tp::ar_one_shot_possible(t.num_nodes, t.world))
      fail("GemmAr: one_shot = 1 needs one node of 2 ranks (", t.describe(),
           "; with more the ranks would add in different orders and their bits differ)");
    // One-shot (by default the same decision on every rank: shape and
    // topology only; the plan check below compares the variant too).
    one_shot_ = opt.one_shot == 1 || (opt.one_shot == -1 && tp::ar_one_shot_fits(t.num_nodes, t.world, m, n));
    swizzle = opt.swizzle ? opt.swizzle : tp::ar_swizzle(t.num_nodes, tp::rs_share_blocks(m, t.world));
    variant = cat(one_shot_ ? ", one-shot" : ", two-shot", interleave_ ? ", interleaved" : "",
                  num_reduce_ || plain_ ? "" : ", no room for all_reduce()");  // (alike on every rank: else one
    // rank refused all_reduce() while its peers waited for it until MK_TIMEOUT_MS)
  });
  // Signals, this rank's memory, the plan check, then the collective memory.
  rs_ = std::make_unique<tp::RsPlan>(
      tp::rs_reserve_plan(comm, args, "GemmAr", m, n, k_local, swizzle, 1, &sig_fin_, variant));
  swizzle_ = rs_->swizzle;
  int64_t os_tiles = 0;   // one-shot: no shares
  std::string os_check;  // the one-shot part's signal words, in the same plan check
  args.run([&] {
    if (!one_shot_) return;  // (two ranks of one node: never with a one-rank plan's plain path)
    os_tiles = (m + gemm::kBlockM - 1) / gemm::kBlockM * n_tiles;
    num_os_ctas_ = tp::balanced_ctas(os_tiles, num_ctas_);
    // Its own family of calls: entry signals, epoch counter (run()'s calls
    // only; all_reduce() keeps the reduce-scatter's counts in step) and
    // per-tile arrival signals.
    os_sig_entry_ = os_signals_.take(comm, t.world);
    const int64_t bcast_words = (t.local_size - 1) * os_tiles;
    if (bcast_words > std::numeric_limits<int>::max())  // (before the int the signal pool takes; it wrapped)
      fail("GemmAr: the one-shot path's ", bcast_words, " per-tile signal words (m=", m, ", n=", n,
           ") exceed any signal pool: pass one_shot=0 (two-shot) or a smaller m x n");
    sig_bcast_ = os_signals_.take(comm, static_cast<int>(bcast_words));
    os_check = cat("; one-shot ", os_tiles, " tiles (signals ", os_sig_entry_, ", ", sig_bcast_, ")");
  });
  tp::undo_on_throw([&] {  // this rank's memory first, then the collective (tp::undo_on_throw says why)
    args.run([&] {  // (its failure too travels in the plan check)
      if (one_shot_) {
        MK_CUDA_CHECK(cudaMalloc(&os_epoch_, 4 * sizeof(uint64_t)));
        MK_CUDA_CHECK(cudaMemset(os_epoch_, 0, 4 * sizeof(uint64_t)));
      }
      if (plain_)
        tp::alloc_plain_ws(GemmArgs{.m = m, .n = n, .k = k_local, .num_compute_ctas = plain_ctas_}, plain_ws_,
                           plain_ws_bytes_);
      tp::rs_alloc_counters(t, *rs_);
      // (an error of the memsets, or one left pending, in the check too)
      MK_DEVICE_SYNC(cat("rank ", comm.rank(), ": GemmAr plan setup"));
    });
    // Ranks write into each other's words by index: the one-shot part's are compared too.
    args.exchange({&rs_->signals, &os_signals_}, rs_->check + os_check, "m x n x k_local");
    tp::rs_alloc_staging(comm, *rs_, al.extra_slots(), !plain_);
    if (one_shot_)  // one whole partial result per node peer
      os_staging_ = &comm.alloc_symmetric(size_t(t.local_size - 1) * size_t(os_tiles) * gemm::kBlockM *
                                          gemm::kBlockN * 2);
    MK_DEVICE_SYNC(cat("rank ", comm.rank(), ": GemmAr plan setup"));  // the plan's memsets before any stream's launch
  }, [&] { release(); });
  tp::undo_on_throw([&] { comm.attach_plan(this); }, [&] { release(); });  // (mkernel/comm_plan.hpp)
  // MK_LOG=debug: what this plan chose (made on every rank alike).
  if (log_level() >= LogLevel::Debug)
    log(LogLevel::Debug,
        cat("rank ", comm.rank(), ": GemmAr plan m x n x k_local = ", m, "x", n, "x", k_local, " on ", t.describe(),
            plain_ ? tp::plain_plan_words(plain_ctas_, "all-reduce")
            : one_shot_ ? cat(": fused one-shot, ", num_os_ctas_, " CTAs, swizzle ", swizzle_)
                        : cat(": fused two-shot, ", num_ctas_, " CTAs (", num_gather_, " gather, ",
                              num_ctas_ - num_gather_, " compute), swizzle ", swizzle_,
                              interleave_ ? ", interleaved" : "", async_ ? ", async stores" : ""),
            plain_ ? ""
            : num_reduce_ ? cat("; all_reduce(): ", tp::kRsPushCtas, " + ", num_reduce_, " + 1 CTAs")
                          : "; all_reduce(): none (no room for its Reduce CTAs)"));
}

GemmAr::~GemmAr() {
  if (leave_communicator(comm_)) release();  // (else released with its communicator: mkernel/comm_plan.hpp)
}

void GemmAr::release_with_communicator() noexcept {
  release();
  os_signals_.reset();
}

void GemmAr::release() noexcept {
  tp::settle_before_frees(comm_, "a GemmAr plan");
  if (os_epoch_) teardown_call(cudaFree(os_epoch_), "GemmAr's one-shot counters");
  os_epoch_ = nullptr;
  tp::free_plain_ws(plain_ws_, plain_ws_bytes_, "GemmAr's workspace for the standalone GEMM");
  if (!tp::free_symmetric_quietly(comm_, os_staging_)) os_signals_.keep();
  if (rs_) tp::rs_free_plan(comm_, *rs_);
  rs_.reset();
}

namespace {

// One-shot run(): every tile is an owner-reduce tile of destination 0 (all
// rows): its partial goes to every node peer's slot for this rank first
// (EpilogueHook::bcast_out), then the peers' partials of the same tile are
// added (per-tile signals) and the sum stored into out. Every rank walks
// the same order, so the tile a CTA waits for is being computed by a
// resident CTA of the peer, which pushed it before waiting itself.
gemm::GemmParams one_shot_params(const Topology& t, const DeviceCtx& ctx, const SymmetricBuffer& st, int sig_entry,
                                 int sig_bcast, uint64_t* epoch_counter, int swizzle, const void* a, const void* b,
                                 void* out, int64_t m, int64_t n, int64_t k, int ctas) {
  gemm::GemmParams gp =
      gemm::make_params(gemm::Operands{.a = a, .b = b, .out = st.local, .m = m, .n = n, .k = k}, ctas);
  const int64_t tiles = sched::total_tiles(gp.sched);
  const int64_t slot_elems = tiles * gemm::kBlockM * gemm::kBlockN;
  gp.sched.order = sched::TileOrder::Swizzled;
  gp.sched.swizzle = swizzle;
  gp.epi.layout = gemm::OutLayout::FragMajor;  // partial tiles read only by the owner reduce
  gp.epi.rows_per_dest = (m + gemm::kBlockM - 1) / gemm::kBlockM * gemm::kBlockM;  // one destination, whole tiles
  gp.epi.own_mask = 1;
  gp.epi.own_final = 0;
  gp.epi.own_nsrc = t.local_size - 1;
  gp.epi.own_slots = static_cast<const uint16_t*>(st.local);
  gp.epi.own_src_stride = slot_elems;
  gp.epi.own_signals = ctx.signals + sig_bcast;
  gp.epi.own_sig_stride = tiles;
  gp.epi.own_expect = 1;
  for (int c = 0; c < t.local_size - 1; ++c)  // (reports: compact source c's rank)
    gp.epi.own_src_rank[c] = t.rank_at(t.node, c < t.local_rank ? c : c + 1);
  gp.epi.own_per_tile = 1;
  gp.epi.own_out = out;
  gp.epi.own_ldo = n;
  for (int l = 0; l < t.local_size; ++l) {
    if (l == t.local_rank) continue;
    const int i = gp.epi.bcast_n++;
    const int j = rs::compact(t.local_rank, l);  // this rank's slot at peer l
    gp.epi.bcast_out[i] = static_cast<char*>(st.peer[l]) + size_t(j) * size_t(slot_elems) * 2;
    gp.epi.bcast_sig[i] = ctx.peer_signals[l] + sig_bcast + int64_t(j) * tiles;
  }
  gp.load.start_signals = ctx.signals + sig_entry;  // every peer entered this call: its slots are free
  gp.load.num_start = t.world;
  gp.load.epoch_counter = epoch_counter;
  gp.tile_counter = epoch_counter + 2;
  gp.has_ctx = 1;
  gp.ctx = ctx;
  return gp;
}

}  // namespace

LaunchOrder::Call GemmAr::launch(const void* a, const void* b, const void* x, void* out, cudaStream_t stream) {
  tp::check_plan_usable(communicator_gone(), comm_, "GemmAr");
  const Topology& t = comm_.topology();
  const bool compute = x == nullptr;
  const int64_t out_bytes = m_ * n_ * 2;
  if (compute) {
    tp::rs_check_run_pointers("GemmAr", a, m_ * k_ * 2, b, n_ * k_ * 2, out, out_bytes);
  } else {
    if (!out || !aligned16(out)) fail("GemmAr: out must be a 16-byte aligned device pointer (got ", out, ")");
    if (!aligned16(x)) fail("GemmAr::all_reduce: x must be a 16-byte aligned device pointer (got ", x, ")");
    if (out != x && overlap(out, out_bytes, x, out_bytes))
      fail("GemmAr::all_reduce: out overlaps x (in place, out == x, is allowed)");
    if (!plain_) tp::rs_check_reduce_room("GemmAr::all_reduce", num_reduce_, 1);
  }
  if (compute) {
    check_device_pointer("GemmAr", "a", a, size_t(m_ * k_ * 2), comm_.device());
    check_device_pointer("GemmAr", "b", b, size_t(n_ * k_ * 2), comm_.device());
  } else {
    check_device_pointer("GemmAr::all_reduce", "x", x, size_t(out_bytes), comm_.device());
  }
  check_device_pointer(compute ? "GemmAr" : "GemmAr::all_reduce", "out", out, size_t(out_bytes), comm_.device());
  check_stream_device("GemmAr", stream, comm_.device());
  // A call on another stream waits for the previous one (mkernel/launch_order.hpp); the
  // returned span records this call's end once the caller enqueued all of it.
  LaunchOrder::Call call = order_.begin(stream);
  graphs_.note(stream, call.capture_id());  // (after begin(): a call refused there changes nothing)
  if (plain_) {  // one rank: nothing to reduce (tp::single_rank)
    trace_.clear(stream);  // no events from this call
    if (compute)
      gemm_bf16(GemmArgs{.a = a, .b = b, .out = out, .m = m_, .n = n_, .k = k_, .num_compute_ctas = plain_ctas_,
                         .swizzle = plain_swizzle_, .workspace = plain_ws_, .workspace_bytes = plain_ws_bytes_},
                stream);
    else if (out != x)
      MK_CUDA_CHECK(cudaMemcpyAsync(out, x, size_t(out_bytes), cudaMemcpyDeviceToDevice, stream));
    return call;
  }
  const DeviceCtx& ctx = comm_.device_ctx();
  const rs::Layout lay{t.num_nodes, t.local_size};
  const roles::ArLayout al{t.num_nodes};
  const uint64_t slot_bytes = uint64_t(rs_->slot_elems) * 2;
  const int rs_slots = lay.num_slots();
  char* fin = static_cast<char*>(rs_->staging->local) + al.final_slot(rs_slots) * slot_bytes;
  const uint64_t fin_off = al.final_slot(rs_slots) * slot_bytes;
  // The other nodes' rail peers (same local index) and where this rank's
  // final rows land there.
  int fin_net_n = 0;
  int32_t fin_peer[kMaxLocalRanks] = {};
  uint64_t fin_dst[kMaxLocalRanks] = {};
  for (int nd = 0; nd < t.num_nodes; ++nd) {
    if (nd == t.node) continue;
    fin_peer[fin_net_n] = t.rank_at(nd, t.local_rank);
    fin_dst[fin_net_n] = al.recv_slot(rs_slots, t.node, nd) * slot_bytes;
    ++fin_net_n;
  }
  gemm::GemmParams gp{};
  int grid = 0;
  const bool one_shot = compute && one_shot_;
  if (one_shot) {
    gp = one_shot_params(t, ctx, *os_staging_, os_sig_entry_, sig_bcast_, os_epoch_, swizzle_, a, b, out, m_, n_, k_,
                         num_os_ctas_);
    gemm::validate_hooks(gp);
    grid = num_os_ctas_;
  } else if (compute) {
    gp = tp::rs_gemm_params(*rs_, t, ctx, a, b, fin, num_ctas_ - num_gather_, async_);
    gp.sched.share_interleave = interleave_ ? 1 : 0;  // owners finish rows all along; their own group a group late
    gp.sched.share_lag = 1;
    gp.epi.fin_publish = 1;
    gp.epi.fin_sig = sig_fin_;
    gp.epi.fin_net_n = fin_net_n;
    gp.epi.fin_rb_count = rs_->net_rb_count;  // final row-blocks: other ids than the sums sent
    gp.epi.fin_src_off = fin_off;
    for (int i = 0; i < fin_net_n; ++i) {
      gp.epi.fin_net_peer[i] = fin_peer[i];
      gp.epi.fin_net_dst_off[i] = fin_dst[i];
    }
    // The final rows by TMA from the held stage, into the staging buffer and out (the gather skips them).
    // (out and n were checked: it cannot be refused.)
    if (own_tma_ && !gemm::use_own_tma(gp, static_cast<char*>(out) + t.rank * (m_ / t.world) * n_ * 2))
      fail("GemmAr: internal: own_tma_store refused for out=", out);
    gemm::validate_hooks(gp);
    grid = num_ctas_;
  } else {
    gp.num_compute = 0;
    gp.timeout_ns = ctx.timeout_ns;
    gp.has_ctx = 1;
    gp.ctx = ctx;
    grid = tp::kRsPushCtas + num_reduce_ + 1;  // as many CTAs as push + Reduce + one Gather CTA once had
  }
  roles::ReduceScatter rs = tp::rs_role_params(*rs_, t, x, fin);
  rs.publish_fin = 1;
  rs.sig_fin = sig_fin_;
  rs.fin_net_n = fin_net_n;
  rs.fin_src_off = fin_off;
  for (int i = 0; i < fin_net_n; ++i) {
    rs.fin_net_peer[i] = fin_peer[i];
    rs.fin_net_dst_off[i] = fin_dst[i];
  }
  roles::ArGather ag{};
  for (int d = 0; d < t.local_size; ++d) ag.staging[d] = static_cast<char*>(rs_->staging->peer[d]);
  ag.out = static_cast<char*>(out);
  ag.rows = m_ / t.world;
  ag.n = n_;
  ag.row_block = gemm::kBlockM;
  ag.slot_bytes = static_cast<int64_t>(slot_bytes);
  ag.rs_slots = rs_slots;
  ag.rank = t.rank;
  ag.world = t.world;
  ag.node = t.node;
  ag.local_rank = t.local_rank;
  for (int d = 0; d < t.world; ++d) {
    ag.node_of[d] = static_cast<int8_t>(t.node_of[d]);
    ag.local_of[d] = static_cast<int8_t>(t.local_rank_of[d]);
  }
  if (one_shot) {
    ag.world = 0;                   // nothing to gather: every rank summed every tile
    rs.sig_entry = os_sig_entry_;   // announced on the one-shot family's entry signals
  }
  ag.sig_fin = sig_fin_;
  ag.skip_own = gp.epi.own_tma == 2 ? 1 : 0;  // the owner wrote its rows into out too
  ag.adds_per_block = rs.adds_per_block;
  ag.parts = kGatherParts;
  uint64_t* ec = one_shot ? os_epoch_ : rs_->epoch_counter;
  ag.items = ec + 3;
  const net::AgentLaunch agent = tp::agent_launch(comm_);  // the delivery agent CTAs, if any
  gp.trace = dev::TraceBuf{trace_.base(), trace_.cap(), agent.ctas};
  trace_.clear(stream);  // this call's events only
  gemm::allow_engine_smem(reinterpret_cast<const void*>(gemm_ar_kernel), gemm::kSmemBytesAsync);
  size_t smem = compute ? (gp.epi.async_store ? gemm::kSmemBytesAsync : gemm::kSmemBytes) : roles::kArGatherSmem;
  smem = std::max({smem, roles::kArGatherSmem, roles::kRsClaimedSmem});
  if (t.num_nodes > 1) comm_.network().warn_legacy_stream("mkernel GemmAr", stream);
  gemm_ar_kernel<<<grid + agent.ctas, gemm::kThreads, smem, stream>>>(
      gp, rs, ag, dev::DeviceEpoch{ec, reinterpret_cast<uint32_t*>(ec + 1), ec + 2, ec + 3}, agent);
  MK_CUDA_CHECK(cudaGetLastError());
  return call;
}

// Indexed by CTA (the grid index less the delivery agents'): room for every grid (at most one CTA per SM).
// The trace's buffer lives on, and is sized for, the plan's device, which must be current (as for run()).
void GemmAr::enable_trace(int events_per_cta) {
  tp::check_plan_usable(communicator_gone(), comm_, "GemmAr::enable_trace");
  trace_.enable(gemm::num_sms(), events_per_cta, graphs_.alive());
}
std::vector<TraceEvent> GemmAr::read_trace() const {
  tp::check_plan_usable(communicator_gone(), comm_, "GemmAr::read_trace");  // it synchronises the current device
  return trace_.read();
}

void GemmAr::run(const void* a, const void* b, void* out, cudaStream_t stream) {
  const LaunchOrder::Call call = launch(a, b, nullptr, out, stream);
}

void GemmAr::all_reduce(const void* x, void* out, cudaStream_t stream) {
  if (!x) fail("GemmAr::all_reduce: x is null");
  const LaunchOrder::Call call = launch(nullptr, nullptr, x, out, stream);
}

}  // namespace mk
