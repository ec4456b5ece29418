// mkernel: GEMM + ReduceScatter (include/mkernel/tp.hpp), one persistent
// kernel, on N nodes of L GPUs (the two-level reduce of
// device/roles/rs_layout.hpp).
// - run(): every CTA computes (the GEMM engine), walking the shares in the
//   layout's order: tiles of shares a node peer aggregates go to its NVLink
//   receive slot; tiles of other nodes' shares this rank aggregates add the
//   node peers' tiles, then go out in one network put per row-block; own
//   tiles last, summed with every source before their final store.
// - reduce_scatter(): every CTA claims items from one counter: the push of
//   rows to the node peers, then the sums of what this rank aggregates or
//   owns (device/roles/reduce_scatter.cuh: rs_claimed).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>

#include "device/epoch.cuh"
#include "device/net/agent.cuh"
#include "device/gemm/gemm_engine.cuh"
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

__global__ void __launch_bounds__(gemm::kThreads, 1)
    gemm_rs_kernel(const __grid_constant__ gemm::GemmParams gp, const __grid_constant__ roles::ReduceScatter rs,
                   const dev::DeviceEpoch ep, const net::AgentLaunch agent) {
  extern __shared__ uint8_t smem[];
  if (net::op_agent_block(agent, gp.ctx, ep, smem)) return;  // Role::Deliver (emu): this kernel's network writes
  const int cta = static_cast<int>(blockIdx.x) - agent.ctas;
  if (threadIdx.x == 0) dev::trace(gp.trace, cta, dev::TraceKind::KernelEntry, 0);
  const uint64_t epoch = dev::epoch_of_launch(ep);
  if (gp.num_compute > 0) {  // run(): every CTA computes
    if (cta == 0 && threadIdx.x == 0) roles::rs_announce(gp.ctx, rs, epoch);
    gemm::run_compute<true>(gp, smem, cta);
  } else {  // reduce_scatter(): every CTA takes push, then reduce items (the tile counter is free)
    dev::BulkCopier<> copier(reinterpret_cast<char*>(smem));
    roles::rs_claimed(gp.ctx, rs, epoch, copier, ep.tiles);
  }
  dev::epoch_finish(ep);
  if (threadIdx.x == 0) dev::trace(gp.trace, cta, dev::TraceKind::KernelExit, 0);
}

using tp::aligned16;

}  // namespace

GemmRs::GemmRs(Communicator& comm, int64_t m, int64_t n, int64_t k_local, const GemmRsOptions& opt)
    : comm_(comm), m_(m), n_(n), k_(k_local) {
  order_.share(comm.launch_chain());  // (ordered with the communicator's other plans: mkernel/launch_order.hpp)
  const Topology& t = comm.topology();
  // This rank's checks, their outcome in the plan check (tp::PlanArgs: a
  // rank failing alone fails every rank at once).
  tp::PlanArgs args(comm, "GemmRs", roles::kMaxRsRanks);
  args.run([&] {
    tp::rs_check_shape(t, "GemmRs", m, n, k_local);
    const int sms = gemm::num_sms();
    const int free_sms = tp::network_free_sms(comm, "GemmRs", opt.num_ctas, sms);
    const int64_t own_tiles = tp::rs_share_blocks(m, t.world) * ((n + gemm::kBlockN - 1) / gemm::kBlockN);
    const int64_t tiles = own_tiles * t.world;
    const int avail = sms - free_sms;
    if (opt.max_split_parts < 0 || opt.max_split_parts == 1 || opt.max_split_parts > gemm::kMaxSplitParts)
      fail("GemmRs: max_split_parts must be 0 or in [2, ", gemm::kMaxSplitParts, "] (got ", opt.max_split_parts, ")");
    // Whole waves on the fewest CTAs that keep their count (128 of 132 at the
    // issue shapes), or every CTA with the last partial wave's tiles in parts
    // of K where that is faster. The tail must be own tiles (the walk's last),
    // and the other shares must fill at least one wave: then own tiles that
    // share a wave with other shares' tiles (what tp::balanced_ctas avoids)
    // sum sources that their ranks computed a wave or more earlier, so they
    // do not wait.
    tp::SplitTail sp{};
    const int grid = opt.num_ctas ? opt.num_ctas : avail;
    if (opt.split_tail && (t.world == 1 || tiles - own_tiles >= grid)) {
      sp = tp::split_tail(tiles, grid, k_local / gemm::kBlockK,
                          opt.max_split_parts ? opt.max_split_parts : gemm::kMaxSplitParts);
      if (sp.tiles > own_tiles) sp = tp::SplitTail{};
    }
    num_ctas_ = opt.num_ctas ? opt.num_ctas : sp.tiles ? avail : tp::balanced_ctas(tiles, avail);
    async_ = tp::rs_async_store("GemmRs", opt.async_store, free_sms > 0);
    own_tma_ = tp::rs_own_tma("GemmRs", opt.own_tma_store);
    plain_ctas_ = opt.num_ctas;  // the plain path: every SM unless the grid was set
    plain_ = tp::single_rank(t, m, n, k_local, plain_ctas_ ? plain_ctas_ : sms, sp.tiles > 0);
    plain_swizzle_ = opt.swizzle;
    tp::check_grid("GemmRs", num_ctas_, sms, opt.num_ctas, free_sms);
    // reduce_scatter()'s grid is kRsPushCtas + the Reduce CTAs.
    num_reduce_ = tp::rs_reduce_ctas("GemmRs", opt.num_reduce_ctas, sms, free_sms, 0);
    split_tiles_ = sp.tiles;
    split_parts_ = sp.parts;
  });
  const bool fused = !plain_;  // else none of the fused kernel's buffers (tp::alloc_plain_ws)
  // Signals, this rank's memory, the plan check, then the collective memory.
  rs_ = std::make_unique<tp::RsPlan>(
      tp::rs_reserve_plan(comm, args, "GemmRs", m, n, k_local, opt.swizzle, 0, nullptr,
                          num_reduce_ || plain_ ? "" : ", no room for reduce_scatter()"));  // (alike on every rank)
  swizzle_ = rs_->swizzle;
  tp::undo_on_throw([&] {  // this rank's memory first, then the collective (tp::undo_on_throw says why)
    args.run([&] {  // (its failure too travels in the plan check)
      if (fused) tp::alloc_split(split_tiles_, split_parts_, &split_ws_, &split_flags_);  // split tiles' fp32 parts
      if (plain_)
        tp::alloc_plain_ws(GemmArgs{.m = m, .n = n, .k = k_local, .num_compute_ctas = plain_ctas_}, plain_ws_,
                           plain_ws_bytes_);
      tp::rs_alloc_counters(t, *rs_);
      // (an error of the memsets, or one left pending, in the check too)
      MK_DEVICE_SYNC(cat("rank ", comm.rank(), ": GemmRs plan setup"));
    });
    args.exchange(rs_->signals, rs_->check, "m x n x k_local");
    tp::rs_alloc_staging(comm, *rs_, 0, fused);
    // The legacy-stream memset must be done before a launch on any stream
    // (non-blocking streams do not wait for it): plan creation is setup time.
    MK_DEVICE_SYNC(cat("rank ", comm.rank(), ": GemmRs plan setup"));
  }, [&] { release(); });
  tp::undo_on_throw([&] { comm.attach_plan(this); }, [&] { release(); });  // (mkernel/comm_plan.hpp)
  // MK_LOG=debug: what this plan chose (made on every rank alike).
  if (log_level() >= LogLevel::Debug)
    log(LogLevel::Debug,
        cat("rank ", comm.rank(), ": GemmRs plan m x n x k_local = ", m, "x", n, "x", k_local, " on ", t.describe(),
            plain_ ? tp::plain_plan_words(plain_ctas_, "reduce-scatter")
                   : cat(": fused, ", num_ctas_, " CTAs, swizzle ", swizzle_, ", ", split_tiles_, " split tiles",
                         split_tiles_ ? cat(" in ", split_parts_, " parts") : "", async_ ? ", async stores" : "",
                         own_tma_ ? ", own tiles TMA-stored" : "",
                         num_reduce_ ? cat("; reduce_scatter(): ", tp::kRsPushCtas, " + ", num_reduce_, " CTAs")
                                     : "; reduce_scatter(): none (no room for its Reduce CTAs)")));
}

GemmRs::~GemmRs() {
  if (leave_communicator(comm_)) release();  // (else released with its communicator: mkernel/comm_plan.hpp)
}

void GemmRs::release_with_communicator() noexcept {
  release();
}

void GemmRs::release() noexcept {
  tp::settle_before_frees(comm_, "a GemmRs plan");
  if (split_ws_) teardown_call(cudaFree(split_ws_), "GemmRs's split-tile scratch");
  if (split_flags_) teardown_call(cudaFree(split_flags_), "GemmRs's split-tile flags");
  split_ws_ = nullptr;
  tp::free_plain_ws(plain_ws_, plain_ws_bytes_, "GemmRs's workspace for the standalone GEMM");
  split_flags_ = nullptr;
  if (rs_) tp::rs_free_plan(comm_, *rs_);
  rs_.reset();
}

LaunchOrder::Call GemmRs::launch(const void* a, const void* b, const void* x, void* out, cudaStream_t stream) {
  tp::check_plan_usable(communicator_gone(), comm_, "GemmRs");
  const Topology& t = comm_.topology();
  const int64_t rows = m_ / t.world;
  const bool compute = x == nullptr;
  if (compute) {
    tp::rs_check_run_pointers("GemmRs", a, m_ * k_ * 2, b, n_ * k_ * 2, out, rows * n_ * 2);
  } else {
    if (!out || !aligned16(out)) fail("GemmRs: out must be a 16-byte aligned device pointer (got ", out, ")");
    if (!aligned16(x)) fail("GemmRs::reduce_scatter: x must be a 16-byte aligned device pointer (got ", x, ")");
    if (overlap(out, rows * n_ * 2, x, m_ * n_ * 2)) fail("GemmRs::reduce_scatter: out overlaps x");
    if (!plain_) tp::rs_check_reduce_room("GemmRs::reduce_scatter", num_reduce_, 0);
  }
  if (compute) {
    check_device_pointer("GemmRs", "a", a, size_t(m_ * k_ * 2), comm_.device());
    check_device_pointer("GemmRs", "b", b, size_t(n_ * k_ * 2), comm_.device());
  } else {
    check_device_pointer("GemmRs::reduce_scatter", "x", x, size_t(m_ * n_ * 2), comm_.device());
  }
  check_device_pointer(compute ? "GemmRs" : "GemmRs::reduce_scatter", "out", out, size_t(rows * n_ * 2),
                       comm_.device());
  check_stream_device("GemmRs", stream, comm_.device());
  // A call on another stream waits for the previous one (mkernel/launch_order.hpp); the
  // returned span records this call's end once the caller enqueued all of it.
  LaunchOrder::Call call = order_.begin(stream);
  graphs_.note(stream, call.capture_id());  // (after begin(): a call refused there changes nothing)
  if (plain_) {  // one rank: nothing to reduce
    trace_.clear(stream);  // no events from this call
    if (compute)
      gemm_bf16(GemmArgs{.a = a, .b = b, .out = out, .m = m_, .n = n_, .k = k_, .num_compute_ctas = plain_ctas_,
                         .swizzle = plain_swizzle_, .workspace = plain_ws_, .workspace_bytes = plain_ws_bytes_},
                stream);
    else
      MK_CUDA_CHECK(cudaMemcpyAsync(out, x, size_t(m_ * n_ * 2), cudaMemcpyDeviceToDevice, stream));
    return call;
  }
  const DeviceCtx& ctx = comm_.device_ctx();
  gemm::GemmParams gp{};
  if (compute) {
    gp = tp::rs_gemm_params(*rs_, t, ctx, a, b, out, num_ctas_, async_);
    // The final rows by TMA from the held stage (out and n were checked: it cannot be refused).
    if (own_tma_ && !gemm::use_own_tma(gp, nullptr)) fail("GemmRs: internal: own_tma_store refused for out=", out);
    if (split_tiles_) {  // the walk's last tiles (own final ones) in parts
      gp.split_tiles = static_cast<int32_t>(split_tiles_);
      gp.split_parts = split_parts_;
      gp.split_ws = split_ws_;
      gp.split_flags = split_flags_;
      gp.split_last = 1;
    }
  } else {
    gp.num_compute = 0;
    gp.timeout_ns = ctx.timeout_ns;
    gp.has_ctx = 1;
    gp.ctx = ctx;
  }
  const net::AgentLaunch agent = tp::agent_launch(comm_);  // the delivery agent CTAs, if any
  gp.trace = dev::TraceBuf{trace_.base(), trace_.cap(), agent.ctas};
  trace_.clear(stream);  // this call's events only
  const roles::ReduceScatter rs = tp::rs_role_params(*rs_, t, x, out);
  if (compute) gemm::validate_hooks(gp);
  gemm::allow_engine_smem(reinterpret_cast<const void*>(gemm_rs_kernel), gemm::kSmemBytesAsync);
  const int grid = compute ? num_ctas_ : tp::kRsPushCtas + num_reduce_;
  const size_t smem = gp.epi.async_store ? gemm::kSmemBytesAsync : gemm::kSmemBytes;
  static_assert(gemm::kSmemBytes >= roles::kRsClaimedSmem, "reduce_scatter()'s claims need the bulk stages and a slot");
  uint64_t* ec = rs_->epoch_counter;
  if (t.num_nodes > 1) comm_.network().warn_legacy_stream("mkernel GemmRs", stream);
  gemm_rs_kernel<<<grid + agent.ctas, gemm::kThreads, smem, stream>>>(
      gp, rs, dev::DeviceEpoch{ec, reinterpret_cast<uint32_t*>(ec + 1), ec + 2}, agent);
  MK_CUDA_CHECK(cudaGetLastError());
  return call;
}

// Indexed by CTA (the grid index less the delivery agents'): room for every grid (at most one CTA per SM).
// The trace's buffer lives on, and is sized for, the plan's device, which must be current (as for run()).
void GemmRs::enable_trace(int events_per_cta) {
  tp::check_plan_usable(communicator_gone(), comm_, "GemmRs::enable_trace");
  trace_.enable(gemm::num_sms(), events_per_cta, graphs_.alive());
}
std::vector<TraceEvent> GemmRs::read_trace() const {
  tp::check_plan_usable(communicator_gone(), comm_, "GemmRs::read_trace");  // it synchronises the current device
  return trace_.read();
}

void GemmRs::run(const void* a, const void* b, void* out, cudaStream_t stream) {
  const LaunchOrder::Call call = launch(a, b, nullptr, out, stream);
}

void GemmRs::reduce_scatter(const void* x, void* out, cudaStream_t stream) {
  if (!x) fail("GemmRs::reduce_scatter: x is null");
  const LaunchOrder::Call call = launch(nullptr, nullptr, x, out, stream);
}

}  // namespace mk
