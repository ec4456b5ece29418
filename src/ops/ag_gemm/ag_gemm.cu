// mkernel: AllGather + GEMM (include/mkernel/tp.hpp), one persistent kernel:
// CTAs [0, num_comm) push this rank's rows to every rank of the node and, on
// several nodes, over the network to the rail peers, forwarding what those
// send (device/roles/allgather_push.cuh), then join the compute role; CTAs
// [num_comm, grid) run the GEMM engine over the gathered rows from the
// start (rank-rotated: local rows first; each remote row chunk after its
// arrival signal). Tiles come from a dynamic queue (an atomic counter), so
// the late joiners take whatever is left.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "device/gemm/gemm_engine.cuh"
#include "device/epoch.cuh"
#include "device/net/agent.cuh"
#include "device/roles/allgather_push.cuh"
#include "mkernel/error.hpp"
#include "mkernel/gemm.hpp"
#include "mkernel/mkernel.hpp"
#include "mkernel/network.hpp"
#include "mkernel/tp.hpp"
#include "src/ops/ag_gemm/plan_args.hpp"
#include "src/ops/ag_gemm/tp_plan.hpp"
#include "src/ops/gemm/gemm_host.hpp"
#include "src/runtime/device_pointer.hpp"
#include "src/runtime/reported_wait.hpp"

namespace mk {

namespace {

__global__ void __launch_bounds__(gemm::kThreads, 1)
    ag_gemm_kernel(const __grid_constant__ gemm::GemmParams gp, const __grid_constant__ roles::AllGatherPush push,
                   const dev::DeviceEpoch ep, const int32_t join, const net::AgentLaunch agent) {
  extern __shared__ uint8_t smem[];
  if (net::op_agent_block(agent, gp.ctx, ep, smem)) return;  // Role::Deliver (emu): this kernel's network writes
  const int cta = static_cast<int>(blockIdx.x) - agent.ctas;
  if (threadIdx.x == 0) dev::trace(gp.trace, cta, dev::TraceKind::KernelEntry, 0);
  const uint64_t epoch = dev::epoch_of_launch(ep);  // gp.load reads the same counter
  // NOTES: the communication CTAs take the lowest indices (after the
  // agent's), which the hardware makes resident first: if SMs are scarce
  // (another kernel still running), the CTAs everyone waits for are not the
  // ones left out.
  const int num_comm = static_cast<int>(gridDim.x) - agent.ctas - gp.num_compute;
  if (cta < num_comm) {  // Role::IntraComm (+ InterSend on CTA 0), then Compute if it may join
    roles::allgather_push(gp.ctx, push, epoch, reinterpret_cast<char*>(smem), cta, num_comm,
                          reinterpret_cast<unsigned long long*>(ep.items));
    // Pushes done: join the compute role (tiles come from the dynamic
    // queue; the bulk copier's barriers were invalidated). One call site of
    // the engine below: two would double its code and its registers.
    // The engine's TMA loads (async proxy) then write the shared memory
    // this role used through the generic proxy.
    dev::sm90::fence_proxy_async_shared();
    __syncthreads();
  }
  if (cta >= num_comm || (join && gp.tile_counter)) gemm::run_compute<false, true>(gp, smem, cta - num_comm);
  dev::epoch_finish(ep);
  if (threadIdx.x == 0) dev::trace(gp.trace, cta, dev::TraceKind::KernelExit, 0);
}

// CTAs of the standalone all-gather (no GEMM next to it): ~16 saturate
// NVLink with the bulk copier (bench/results peer_copy tables).
constexpr int kStandaloneCommCtas = 16;

using tp::aligned16;

}  // namespace

AgGemm::AgGemm(Communicator& comm, int64_t m_local, int64_t n, int64_t k, const AgGemmOptions& opt)
    : comm_(comm), m_local_(m_local), n_(n), k_(k) {
  order_.share(comm.launch_chain());  // (ordered with the communicator's other plans: mkernel/launch_order.hpp)
  const Topology& t = comm.topology();
  // This rank's checks, their outcome in the plan check (tp::PlanArgs: a
  // rank failing alone fails every rank at once).
  tp::PlanArgs args(comm, "AgGemm", roles::kMaxNodes);
  args.run([&] {
    if (m_local < 1) fail("AgGemm: m_local must be >= 1 (got ", m_local, ")");
    if (n < 64 || n % 64) fail("AgGemm: n must be a positive multiple of 64 (got ", n, ")");
    if (k < 64 || k % 64) fail("AgGemm: k must be a positive multiple of 64 (got ", k, ")");
    tp::check_dims_int32("AgGemm", m_local, n, k, t.world);
    const int sms = gemm::num_sms();
    const int free_sms = tp::network_free_sms(comm, "AgGemm", opt.num_ctas, sms);
    // Finished comm CTAs join the compute role (the dynamic tile queue).
    // Next to a transport that runs kernels on this GPU (emu, fabric) too:
    // the grid leaves it its SMs whether or not they join.
    join_ = opt.join;
    num_ctas_ = opt.num_ctas ? opt.num_ctas : sms - free_sms;
    tp::check_grid("AgGemm", num_ctas_, sms, opt.num_ctas, free_sms);
    rows_per_chunk_ = tp::chunk_rows(m_local);
    if (opt.swizzle < 0 || opt.swizzle > 16) fail("AgGemm: swizzle must be in [0, 16] (got ", opt.swizzle, ")");
    if (opt.max_split_parts < 0 || opt.max_split_parts == 1 || opt.max_split_parts > gemm::kMaxSplitParts)
      fail("AgGemm: max_split_parts must be 0 (the limit, ", gemm::kMaxSplitParts, ") or in [2, ",
           gemm::kMaxSplitParts, "] (got ", opt.max_split_parts, ")");
    swizzle_ = opt.swizzle ? opt.swizzle : tp::ag_swizzle(m_local, gemm::kBlockM);
    // (the default fitted to the grid: at most every CTA but one; an explicit count is checked)
    num_comm_ = opt.num_comm_ctas ? opt.num_comm_ctas : std::min(tp::comm_ctas_heuristic(n), num_ctas_ - 1);
    if (num_comm_ < 1 || num_comm_ >= num_ctas_)
      fail("AgGemm: num_comm_ctas must be in [1, ", num_ctas_ - 1, "] (got ", num_comm_, ")");
    // Compute CTAs at the end of the walk: the comm CTAs count if they join
    // early, i.e. inside a node (NVLink pushes end long before the GEMM).
    // Across nodes they send for most of the GEMM: counting them split 55
    // tiles (448 on 131 CTAs), and 2x1 (emu) M=1024 took 0.478 ms against
    // 0.411 without split tiles, which is what the rule gives for the 127
    // compute CTAs (bench/results/mkbench-20261130T141906Z).
    const int64_t tiles = ((int64_t(t.world) * m_local + gemm::kBlockM - 1) / gemm::kBlockM) *
                          ((n + gemm::kBlockN - 1) / gemm::kBlockN);
    const int end_ctas = join_ && t.num_nodes == 1 ? num_ctas_ : num_ctas_ - num_comm_;
    const tp::SplitTail sp =
        opt.split_tail ? tp::split_tail(tiles, end_ctas, k / gemm::kBlockK,
                                        opt.max_split_parts ? opt.max_split_parts : gemm::kMaxSplitParts)
                       : tp::SplitTail{};
    split_tiles_ = sp.tiles;
    split_parts_ = sp.parts;
    // (Decided before anything is reserved: a bad MK_TP_SINGLE_RANK fails here.)
    plain_ctas_ = opt.num_ctas;  // the plain path: every SM unless the grid was set
    plain_ = tp::single_rank(t, int64_t(t.world) * m_local, n, k, plain_ctas_ ? plain_ctas_ : sms,
                             split_tiles_ > 0);
    plain_swizzle_ = opt.swizzle;
    const int64_t chunks = int64_t(t.world) * (m_local / rows_per_chunk_);
    sig_entry_ = signals_.take(comm, t.world);
    sig_arrival_ = signals_.take(comm, static_cast<int>(chunks));
  });
  const bool fused = !plain_;  // else (one rank, every call plain) no fused kernel's buffers (tp::alloc_plain_ws)
  tp::undo_on_throw([&] {  // this rank's memory first, then the collective (tp::undo_on_throw says why)
    args.run([&] {  // (its failure too travels in the plan check)
      if (fused) tp::alloc_split(split_tiles_, split_parts_, &split_ws_, &split_flags_);
      if (plain_)
        tp::alloc_plain_ws(GemmArgs{.m = int64_t(t.world) * m_local, .n = n, .k = k, .num_compute_ctas = plain_ctas_},
                           plain_ws_, plain_ws_bytes_);  // (run()'s GEMM: every row, world = 1)
      // Epoch counter + finished-CTA count (device/epoch.cuh) + tile counter +
      // the push's part claims (device/roles/allgather_push.cuh), zero.
      MK_CUDA_CHECK(cudaMalloc(&epoch_counter_, 4 * sizeof(uint64_t)));
      MK_CUDA_CHECK(cudaMemset(epoch_counter_, 0, 4 * sizeof(uint64_t)));
      // (an error of the memsets, or one left pending, in the check too)
      MK_DEVICE_SYNC(cat("rank ", comm.rank(), ": AgGemm plan setup"));
    });
    // Every rank must make the same plan, with the same signal slots (ranks
    // write into each other's pools by index). Checked once, here.
    args.exchange(signals_, cat(m_local, "x", n, "x", k, " (signals ", sig_entry_, ", ", sig_arrival_, ")"),
                  "m_local x n x k");
    if (fused) {
      gathered_ = &comm.alloc_symmetric(static_cast<size_t>(t.world * m_local * k * 2));
      if (t.num_nodes > 1) {  // rows cross the network from and into the gathered buffer
        Network& net = comm.network();
        net_region_ = net.register_buffer(*gathered_);
        netctx_ = net.device_ctx_ptr();
      }
    }
    // The legacy-stream memset must be done before a launch on any stream
    // (non-blocking streams do not wait for it): plan creation is setup time.
    MK_DEVICE_SYNC(cat("rank ", comm.rank(), ": AgGemm plan setup"));
  }, [&] { release(); });
  tp::undo_on_throw([&] { comm.attach_plan(this); }, [&] { release(); });  // (mkernel/comm_plan.hpp)
  // MK_LOG=debug: what this plan chose (made on every rank alike).
  if (log_level() >= LogLevel::Debug)
    log(LogLevel::Debug,
        cat("rank ", comm.rank(), ": AgGemm plan m_local x n x k = ", m_local, "x", n, "x", k, " on ", t.describe(),
            plain_ ? tp::plain_plan_words(plain_ctas_, "gather")
                   : cat(": fused, ", num_ctas_, " CTAs (", num_comm_, " comm, ", num_ctas_ - num_comm_, " compute",
                         join_ ? "; comm CTAs join compute" : "", "), swizzle ", swizzle_, ", ", split_tiles_,
                         " split tiles", split_tiles_ ? cat(" in ", split_parts_, " parts") : "", ", ",
                         rows_per_chunk_, " rows per chunk")));
}

AgGemm::~AgGemm() {
  if (leave_communicator(comm_)) release();  // (else released with its communicator: mkernel/comm_plan.hpp)
}

void AgGemm::release_with_communicator() noexcept {
  release();
  signals_.reset();
}

void AgGemm::release() noexcept {
  tp::settle_before_frees(comm_, "an AgGemm plan");
  tp::release_shared(comm_, net_region_, gathered_, signals_);
  if (epoch_counter_) teardown_call(cudaFree(epoch_counter_), "AgGemm's device counters");
  if (split_ws_) teardown_call(cudaFree(split_ws_), "AgGemm's split-tile scratch");
  if (split_flags_) teardown_call(cudaFree(split_flags_), "AgGemm's split-tile flags");
  tp::free_plain_ws(plain_ws_, plain_ws_bytes_, "AgGemm's workspace for the standalone GEMM");
  epoch_counter_ = nullptr;
  split_ws_ = nullptr;
  split_flags_ = nullptr;
}

LaunchOrder::Call AgGemm::launch(const void* a_local, const void* b, void* out, bool compute, cudaStream_t stream) {
  tp::check_plan_usable(communicator_gone(), comm_, "AgGemm");
  const Topology& t = comm_.topology();
  const int64_t m = int64_t(t.world) * m_local_;
  if (!a_local || !aligned16(a_local)) fail("AgGemm: a_local must be a 16-byte aligned device pointer (got ", a_local, ")");
  if (compute) {
    if (!b || !out || !aligned16(b) || !aligned16(out))
      fail("AgGemm: b and out must be 16-byte aligned device pointers (got b=", b, " out=", out, ")");
    if (overlap(out, m * n_ * 2, a_local, m_local_ * k_ * 2) || overlap(out, m * n_ * 2, b, n_ * k_ * 2))
      fail("AgGemm: out overlaps a_local or b");
  }
  check_device_pointer("AgGemm", "a_local", a_local, size_t(m_local_ * k_ * 2), comm_.device());
  if (compute) {
    check_device_pointer("AgGemm", "b", b, size_t(n_ * k_ * 2), comm_.device());
    check_device_pointer("AgGemm", "out", out, size_t(m * n_ * 2), comm_.device());
  }
  check_stream_device("AgGemm", stream, comm_.device());
  if (gathered_) {  // the plan's own buffer (gathered_buffer()): peers write into it during the call
    const int64_t gb = m * k_ * 2;
    if (overlap(gathered_->local, gb, a_local, m_local_ * k_ * 2) ||
        (compute && (overlap(gathered_->local, gb, b, n_ * k_ * 2) || overlap(gathered_->local, gb, out, m * n_ * 2))))
      fail("AgGemm: a_local, b or out lies in the plan's own gathered buffer (gathered_buffer(): the peers write "
           "into it during the call)");
  }
  // A call on another stream waits for the previous one (mkernel/launch_order.hpp); the
  // returned span records this call's end once the caller enqueued all of it.
  LaunchOrder::Call call = order_.begin(stream);
  graphs_.note(stream, call.capture_id());  // (after begin(): a call refused there changes nothing)
  // One rank: nothing to gather (tp::single_rank); all_gather() copies.
  if (plain_) {
    trace_.clear(stream);  // no events from this call
    if (compute)
      gemm_bf16(GemmArgs{.a = a_local, .b = b, .out = out, .m = m, .n = n_, .k = k_, .num_compute_ctas = plain_ctas_,
                         .swizzle = plain_swizzle_, .workspace = plain_ws_, .workspace_bytes = plain_ws_bytes_},
                stream);
    return call;
  }
  gemm::GemmParams gp{};
  if (compute) {
    gp = gemm::make_params(gemm::Operands{.a = gathered_->local, .b = b, .out = out, .m = m, .n = n_, .k = k_},
                           num_ctas_ - num_comm_);
    gp.sched.order = sched::TileOrder::RankRotated;
    gp.sched.swizzle = swizzle_;
    gp.sched.rotate_mblk = static_cast<int32_t>((int64_t(t.rank) * m_local_) / gemm::kBlockM);
    gp.load.kind = gemm::LoadWait::RowSignal;
    gp.load.signals = comm_.device_ctx().signals + sig_arrival_;
    gp.load.rows_per_signal = rows_per_chunk_;
    gp.load.epoch_counter = epoch_counter_;
    gp.load.peer_of_signal_div = static_cast<int32_t>(m_local_ / rows_per_chunk_);
    gp.tile_counter = epoch_counter_ + 2;  // finished comm CTAs join
    gp.split_tiles = static_cast<int32_t>(split_tiles_);
    gp.split_parts = split_parts_;
    gp.split_ws = split_ws_;
    gp.split_flags = split_flags_;
    // Own rows straight from a_local when tiles do not straddle rank blocks:
    // no local copy competing for memory bandwidth, and no wait for them.
    if (tp::own_rows_in_place(m_local_, gemm::kBlockM)) gemm::set_second_a(gp, a_local, int64_t(t.rank) * m_local_, m_local_);
  } else {
    gp.num_compute = 0;
    gp.timeout_ns = comm_.device_ctx().timeout_ns;
  }
  gp.has_ctx = 1;
  gp.ctx = comm_.device_ctx();
  roles::AllGatherPush push{};
  push.a_local = a_local;
  for (int d = 0; d < t.local_size; ++d) {
    push.gathered[d] = gathered_->peer[d];
    push.local_ranks[d] = t.rank_at(t.node, d);
  }
  for (int nd = 0; nd < t.num_nodes; ++nd) push.rail[nd] = t.rank_at(nd, t.local_rank);
  push.m_local = m_local_;
  push.row_bytes = k_ * 2;
  push.rows_per_chunk = rows_per_chunk_;
  push.rank = t.rank;
  push.local_rank = t.local_rank;
  push.local_size = t.local_size;
  push.node = t.node;
  push.num_nodes = t.num_nodes;
  push.sig_entry = sig_entry_;
  push.sig_arrival = sig_arrival_;
  // Own rows stay out of the own buffer when the GEMM reads them in place,
  // unless the network sends them from there. The standalone all-gather
  // copies them out of a_local.
  push.skip_self = t.num_nodes == 1 && (!compute || tp::own_rows_in_place(m_local_, gemm::kBlockM)) ? 1 : 0;
  push.wait_incoming = compute ? 0 : 1;  // with compute, the GEMM's loads wait for every row
  push.netctx = netctx_;
  push.net_region = net_region_;
  push.net_queue = 0;
  if (compute) {
    gemm::use_tma_store(gp);  // rows leave by TMA while the next tile computes
    gemm::validate_hooks(gp);
  }
  const net::AgentLaunch agent = tp::agent_launch(comm_);  // the delivery agent CTAs, if any
  gp.trace = dev::TraceBuf{trace_.base(), trace_.cap(), agent.ctas};
  trace_.clear(stream);  // this call's events only
  gemm::allow_engine_smem(reinterpret_cast<const void*>(ag_gemm_kernel), gemm::kSmemBytesAsync);
  // The standalone all-gather has the GPU to itself: more pushing CTAs.
  const int grid = compute ? num_ctas_ : std::max(num_comm_, std::min(num_ctas_, kStandaloneCommCtas));
  if (t.num_nodes > 1) comm_.network().warn_legacy_stream("mkernel AgGemm", stream);
  ag_gemm_kernel<<<grid + agent.ctas, gemm::kThreads, gp.epi.tma_store ? gemm::kSmemBytesAsync : gemm::kSmemBytes, stream>>>(
      gp, push,
      dev::DeviceEpoch{epoch_counter_, reinterpret_cast<uint32_t*>(epoch_counter_ + 1), epoch_counter_ + 2,
                       epoch_counter_ + 3},
      join_ ? 1 : 0, agent);
  MK_CUDA_CHECK(cudaGetLastError());
  return call;
}

// Indexed by CTA (the grid index less the delivery agents'): room for every grid (at most one CTA per SM).
// The trace's buffer lives on, and is sized for, the plan's device, which must be current (as for run()).
void AgGemm::enable_trace(int events_per_cta) {
  tp::check_plan_usable(communicator_gone(), comm_, "AgGemm::enable_trace");
  trace_.enable(gemm::num_sms(), events_per_cta, graphs_.alive());
}
std::vector<TraceEvent> AgGemm::read_trace() const {
  tp::check_plan_usable(communicator_gone(), comm_, "AgGemm::read_trace");  // it synchronises the current device
  return trace_.read();
}

const void* AgGemm::gathered_buffer() const { return gathered_ ? gathered_->local : nullptr; }

void AgGemm::run(const void* a_local, const void* b, void* out, cudaStream_t stream, void* gathered) {
  if (gathered) {  // written after the GEMM: it must not hold an input or the output (all_gather: the same)
    tp::check_communicator_alive(communicator_gone(), "AgGemm::run");  // (before comm_ is read below; launch()
                                                                        // checks the device)
    const size_t rows = size_t(comm_.world()) * size_t(m_local_);
    const size_t bytes = rows * size_t(k_) * 2;
    if (overlap(gathered, bytes, a_local, size_t(m_local_ * k_ * 2)) ||
        overlap(gathered, bytes, b, size_t(n_ * k_ * 2)) || overlap(gathered, bytes, out, rows * size_t(n_) * 2))
      fail("AgGemm::run: gathered overlaps a_local, b or out");
    if (gathered_ && overlap(gathered, bytes, gathered_->local, bytes))
      fail("AgGemm::run: gathered overlaps the plan's own gathered buffer (gathered_buffer(): the call copies out "
           "of it)");
    check_device_pointer("AgGemm::run", "gathered", gathered, bytes, comm_.device());
  }
  const LaunchOrder::Call call = launch(a_local, b, out, true, stream);  // its end: after the copies (they read
  if (gathered) copy_gathered(a_local, gathered, stream);                // the plan's buffer)
}

// run()'s copy of every rank's rows into `gathered`.
void AgGemm::copy_gathered(const void* a_local, void* gathered, cudaStream_t stream) {
  const size_t block = size_t(m_local_ * k_ * 2);
  if (comm_.world() == 1) {  // one rank (either path): the gathered rows are a_local
    MK_CUDA_CHECK(cudaMemcpyAsync(gathered, a_local, block, cudaMemcpyDeviceToDevice, stream));
    return;
  }
  MK_CUDA_CHECK(cudaMemcpyAsync(gathered, gathered_->local, block * comm_.world(), cudaMemcpyDeviceToDevice, stream));
  if (tp::own_rows_in_place(m_local_, gemm::kBlockM) && comm_.topology().num_nodes == 1)  // own rows not copied
    MK_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(gathered) + block * comm_.rank(), a_local, block,
                                  cudaMemcpyDeviceToDevice, stream));
}

void AgGemm::all_gather(const void* a_local, void* gathered, cudaStream_t stream) {
  tp::check_communicator_alive(communicator_gone(), "AgGemm::all_gather");  // (before comm_ is read below)
  if (!gathered) fail("AgGemm::all_gather: gathered is null");
  const size_t block = size_t(m_local_ * k_ * 2);
  if (overlap(gathered, block * comm_.world(), a_local, block)) fail("AgGemm::all_gather: gathered overlaps a_local");
  if (gathered_ && overlap(gathered, block * comm_.world(), gathered_->local, block * comm_.world()))
    fail("AgGemm::all_gather: gathered overlaps the plan's own gathered buffer (gathered_buffer(): the call copies "
         "out of it)");
  check_device_pointer("AgGemm::all_gather", "gathered", gathered, block * comm_.world(), comm_.device());
  const LaunchOrder::Call call = launch(a_local, nullptr, nullptr, false, stream);  // its end: after the copies
  copy_all_gathered(a_local, gathered, stream);                                    // (they read the plan's buffer)
}

// all_gather()'s copy of every rank's rows out of the plan's buffer (and a_local).
void AgGemm::copy_all_gathered(const void* a_local, void* gathered, cudaStream_t stream) {
  const size_t block = size_t(m_local_ * k_ * 2);
  const int me = comm_.rank(), w = comm_.world();
  char* out = static_cast<char*>(gathered);
  if (w == 1) {  // either path: the rows are a_local (the plan may have no gathered buffer)
    MK_CUDA_CHECK(cudaMemcpyAsync(out, a_local, block, cudaMemcpyDeviceToDevice, stream));
    return;
  }
  const char* g = static_cast<const char*>(gathered_->local);
  if (comm_.topology().num_nodes > 1) {  // own rows went through the gathered buffer (the network's source)
    MK_CUDA_CHECK(cudaMemcpyAsync(out, g, block * w, cudaMemcpyDeviceToDevice, stream));
    return;
  }
  // One node: own rows were not copied into the gathered buffer.
  if (me > 0) MK_CUDA_CHECK(cudaMemcpyAsync(out, g, block * me, cudaMemcpyDeviceToDevice, stream));
  MK_CUDA_CHECK(cudaMemcpyAsync(out + block * me, a_local, block, cudaMemcpyDeviceToDevice, stream));
  if (me + 1 < w)
    MK_CUDA_CHECK(cudaMemcpyAsync(out + block * (me + 1), g + block * (me + 1), block * (w - me - 1),
                                  cudaMemcpyDeviceToDevice, stream));
}

}  // namespace mk
