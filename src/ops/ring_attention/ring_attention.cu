// mkernel: ring attention (include/mkernel/ring_attention.hpp), one
// persistent kernel per call: every CTA runs the attention engine from the
// start, over this rank's own K/V (the caller's tensors) and then every other
// rank's slot of the gathered buffer, each chunk (batch, KV head) after its
// arrival signal; the K/V push (device/roles/kv_push.cuh) rides on the idle
// warps of the producer warpgroups of CTAs [0, num_comm) (below). Units come
// from a dynamic counter.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

#include "device/attention/attn_engine.cuh"
#include "device/epoch.cuh"
#include "device/net/agent.cuh"
#include "device/roles/kv_push.cuh"
#include "device/trace.cuh"
#include "mkernel/error.hpp"
#include "mkernel/network.hpp"
#include "mkernel/ring_attention.hpp"
#include "src/ops/ag_gemm/plan_args.hpp"
#include "src/ops/ag_gemm/tp_plan.hpp"
#include "src/ops/attention/attn_host.hpp"
#include "src/ops/gemm/gemm_host.hpp"
#include "src/runtime/device_pointer.hpp"
#include "src/runtime/reported_wait.hpp"

namespace mk {

namespace {

// The K/V push rides on the idle warps of the engine's producer warpgroup
// in CTAs [0, num_comm) (device/roles/kv_push.cuh): no SM leaves the
// compute. (A first version gave the push CTAs of their own that joined
// the compute afterwards; ptxas then held the push code to the producer's
// register budget and spilled.)
// The engine's key blocks and shared-memory geometry in this kernel
// (block_n_side: the one-GPU op's 176 at D = 128, with the push in the
// producer warpgroup's 56 registers, attn_engine.cuh's Regs).
template <int D>
using RingGeom = attn::Geom<D, attn::block_n_side(D)>;

template <int D>
struct PushSide {
  const roles::KvPush& push;
  const DeviceCtx& ctx;
  const dev::DeviceEpoch& ep;
  uint8_t* smem;
  int cta, num_comm;
  __device__ __forceinline__ void operator()(int t) const {
    // The push's parts are claimed (kv_push): by the CTAs that run.
    if (cta < num_comm)
      roles::kv_push(ctx, push, dev::epoch_of_launch(ep), cta, num_comm, t,
                     reinterpret_cast<unsigned long long*>(ep.items),
                     attn::detail::carve<D, attn::block_n_side(D)>(smem).side);
  }
};

template <int D>
__global__ void __launch_bounds__(attn::kThreads, 1)
    ring_attn_kernel(const __grid_constant__ attn::AttnParams ap, const __grid_constant__ roles::KvPush push,
                     const dev::DeviceEpoch ep, const int32_t num_comm, const net::AgentLaunch agent) {
  extern __shared__ uint8_t smem[];
  if (net::op_agent_block(agent, ap.ctx, ep, smem)) return;  // Role::Deliver (emu): this kernel's network writes
  const int cta = static_cast<int>(blockIdx.x) - agent.ctas;
  if (threadIdx.x == 0) dev::trace(ap.trace, cta, dev::TraceKind::CtaStart, 0);
  attn::run_compute<D, attn::block_n_side(D)>(ap, smem, cta, static_cast<int>(gridDim.x) - agent.ctas,
                                          PushSide<D>{push, ap.ctx, ep, smem, cta, num_comm});  // records CtaEnd
  dev::epoch_finish(ep);  // this launch's epoch (ap.epoch_counter: the same counter) ends
}

}  // namespace

namespace attn {
// CTAs whose spare producer warps push K/V: they cost no SM, so all of them
// (each has 96 threads with one 16-byte load in flight, 1.5 KB,
// roles::kv_copy_piece: NVLink needs hundreds of KB in flight); on several
// nodes the one that claims the network send first sends it (kv_items.hpp).
int ring_comm_ctas(const Topology&) { return 1 << 20; }  // clamped to the grid
}  // namespace attn

RingAttention::RingAttention(Communicator& comm, int64_t batch, int64_t s_local, int64_t heads, int64_t kv_heads,
                             int64_t head_dim, bool causal, const RingAttentionOptions& opt)
    : comm_(comm), batch_(batch), s_local_(s_local), heads_(heads), kv_heads_(kv_heads ? kv_heads : heads),
      head_dim_(head_dim), causal_(causal), scale_(opt.scale == 0.0f ? 0.0f : opt.scale),  // (-0: the default too)
      local_size_(comm.topology().local_size), num_nodes_(comm.topology().num_nodes) {
  order_.share(comm.launch_chain());  // (ordered with the communicator's other plans: mkernel/launch_order.hpp)
  const Topology& t = comm.topology();
  const int64_t world = t.world;
  // This rank's checks, their outcome in the plan check (tp::PlanArgs: a
  // rank failing alone fails every rank at once).
  tp::PlanArgs args(comm, "RingAttention", roles::kKvMaxNodes);
  int64_t chunks = 0;
  args.run([&] {
    // (the whole sequence only where s_local passes check_shape's bound, < 2^30: s_local x world never overflows)
    const int64_t s_total = s_local > 0 && s_local < (int64_t(1) << 30) ? s_local * world : s_local;
    if (s_local > 0 && s_local < (int64_t(1) << 30) && s_total >= (int64_t(1) << 30))  // (check_shape: "seq_kv")
      fail("RingAttention: the whole sequence, s_local x world = ", s_local, " x ", world, " = ", s_total,
           ", must be < 2^30");
    attn::check_shape("RingAttention", batch, s_local, s_total, heads, kv_heads_, head_dim);
    if (causal && s_local % 2)
      fail("RingAttention: causal plans use the zigzag layout (two chunks per rank): s_local must be even (got ",
           s_local, ")");
    if (2 * world > attn::kMaxKvSegs)
      fail("RingAttention: at most ", attn::kMaxKvSegs / 2, " ranks (got ", world, "; the kernel holds ",
           attn::kMaxKvSegs, " key segments, two a rank)");
    if (!attn::scale_ok(opt.scale))
      fail("RingAttention: scale must be finite and >= 0, and scale log2(e) finite (got ", opt.scale, ")");
    const int sms = gemm::num_sms();
    const int free_sms = tp::network_free_sms(comm, "RingAttention", opt.num_ctas, sms);
    num_ctas_ = opt.num_ctas ? opt.num_ctas : sms - free_sms;
    const int min_comm = t.num_nodes > 1 ? 2 : 1;
    tp::check_grid("RingAttention", num_ctas_, sms, opt.num_ctas, free_sms);
    const int asked = opt.num_comm_ctas ? opt.num_comm_ctas : attn::ring_comm_ctas(t);
    num_comm_ = std::min(asked, num_ctas_);  // (clamped to the grid, as documented)
    if (num_comm_ < min_comm)
      fail("RingAttention: num_comm_ctas must be at least ", min_comm, " (got ", asked, ")");
    chunks = batch * kv_heads_;
    if (world * chunks >= (int64_t(1) << 30))
      fail("RingAttention: world x batch x kv_heads (", world * chunks, ") needs too many arrival signals");
    sig_entry_ = signals_.take(comm, t.world);
    sig_arrival_ = signals_.take(comm, static_cast<int>(world * chunks));
  });
  // Keys are read own first (no wait), then the node peers' (NVLink, early),
  // then the other nodes' ranks' (network), nearest first.
  for (int step = 0; step < t.world; ++step)
    kv_order_.push_back(t.rank_at((t.node + step / t.local_size) % t.num_nodes,
                                  (t.local_rank + step % t.local_size) % t.local_size));
  const size_t slot = size_t(chunks) * 2 * s_local * head_dim * 2;
  tp::undo_on_throw([&] {  // this rank's memory first, then the collective (tp::undo_on_throw says why)
    args.run([&] {  // (its failure too travels in the plan check)
      MK_CUDA_CHECK(cudaMalloc(&epoch_counter_, 4 * sizeof(uint64_t)));
      MK_CUDA_CHECK(cudaMemset(epoch_counter_, 0, 4 * sizeof(uint64_t)));
      // (an error of the memsets, or one left pending, in the check too)
      MK_DEVICE_SYNC(cat("rank ", comm.rank(), ": RingAttention plan setup"));
    });
    args.exchange(signals_, cat(batch, "x", s_local, "x", heads, "x", kv_heads_, "x", head_dim,
                                causal ? " causal" : " full", " scale ", scale_, " (bits ",
                                std::bit_cast<uint32_t>(scale_), ")", " (signals ", sig_entry_, ", ",
                                sig_arrival_, ")"),
                  "batch x s_local x heads x kv_heads x head_dim");
    // One rank reads only its own K/V (map 0): no gathered buffer (K and V's size).
    if (world > 1) gathered_ = &comm.alloc_symmetric(slot * size_t(world));
    if (t.num_nodes > 1) {
      Network& net = comm.network();
      net_region_ = net.register_buffer(*gathered_);
      netctx_ = net.device_ctx_ptr();
    }
    // the legacy-stream memset before any launch (setup time)
    MK_DEVICE_SYNC(cat("rank ", comm.rank(), ": RingAttention plan setup"));
  }, [&] { release(); });
  tp::undo_on_throw([&] { comm.attach_plan(this); }, [&] { release(); });  // (mkernel/comm_plan.hpp)
  // MK_LOG=debug: what this plan chose (made on every rank alike).
  if (log_level() >= LogLevel::Debug)
    log(LogLevel::Debug,
        cat("rank ", comm.rank(), ": RingAttention plan batch x s_local x heads x kv_heads x head_dim = ", batch, "x",
            s_local, "x", heads, "x", kv_heads_, "x", head_dim, causal ? " causal" : " full", " on ", t.describe(),
            ": ", num_ctas_, " CTAs, ", num_comm_, " of them moving K/V"));
}

RingAttention::~RingAttention() {
  if (leave_communicator(comm_)) release();  // (else released with its communicator: mkernel/comm_plan.hpp)
}

void RingAttention::release_with_communicator() noexcept {
  release();
  signals_.reset();
}

void RingAttention::release() noexcept {
  tp::settle_before_frees(comm_, "a RingAttention plan");
  tp::release_shared(comm_, net_region_, gathered_, signals_);
  if (epoch_counter_) teardown_call(cudaFree(epoch_counter_), "RingAttention's device counters");
  epoch_counter_ = nullptr;
}

// The trace's buffer lives on, and is sized for, the plan's device, which must be current (as for run()).
void RingAttention::enable_trace(int events_per_cta) {
  tp::check_plan_usable(communicator_gone(), comm_, "RingAttention::enable_trace");
  trace_.enable(num_ctas_, events_per_cta, graphs_.alive());
}

std::vector<RingAttention::TraceEvent> RingAttention::read_trace() const {
  tp::check_plan_usable(communicator_gone(), comm_, "RingAttention::read_trace");  // it synchronises the current device
  return trace_.read();
}

// (Pure functions of the plan's shape, answered after its communicator is gone too: no comm_ here.)
int64_t RingAttention::nvlink_bytes_sent() const {
  const int64_t shard = batch_ * kv_heads_ * 2 * s_local_ * head_dim_ * 2;
  return shard * (local_size_ - 1) * num_nodes_;  // own shard + forwarded ones, to each node peer
}
int64_t RingAttention::network_bytes_sent() const {
  return batch_ * kv_heads_ * 2 * s_local_ * head_dim_ * 2 * (num_nodes_ - 1);
}

void RingAttention::run(const void* q, const void* k, const void* v, void* out, float* lse, cudaStream_t stream) {
  tp::check_plan_usable(communicator_gone(), comm_, "RingAttention");
  const Topology& t = comm_.topology();
  const int world = t.world;
  AttentionArgs a{.q = q, .k = k, .v = v, .out = out, .lse = lse, .batch = batch_, .seq_q = s_local_,
                  .seq_kv = s_local_, .heads = heads_, .kv_heads = kv_heads_, .head_dim = head_dim_,
                  .causal = causal_, .scale = scale_, .num_ctas = num_ctas_};
  // Validates pointers, alignment, aliasing; own K/V as map 0; the kernel's key blocks (block_n_side: it
  // runs the K/V push in the engine's producer warpgroup, attn_engine.cuh Regs).
  attn::AttnParams p = attn::make_params(a, attn::block_n_side(static_cast<int>(head_dim_)), "RingAttention");
  check_stream_device("RingAttention", stream, comm_.device());
  // A call on another stream waits for the previous one (mkernel/launch_order.hpp); its span
  // records this call's end when run() returns or throws.
  LaunchOrder::Call call = order_.begin(stream);
  graphs_.note(stream, call.capture_id());  // (after begin(): a call refused there changes nothing)
  // The other ranks' K/V: slot s of the gathered buffer, [batch][kv_heads][K, V][s_local][D]:
  // dims {D, s_local, kv_heads, world * batch}, V one s_local x D block after K.
  const int64_t d = head_dim_;
  const int64_t dims[4] = {d, s_local_, kv_heads_, int64_t(world) * batch_};
  const int64_t strides[3] = {d * 2, 2 * s_local_ * d * 2, kv_heads_ * 2 * s_local_ * d * 2};
  if (gathered_) {
    p.k[1] = attn::make_map(gathered_->local, dims, strides, uint32_t(p.block_n), 1, "gathered K");
    p.v[1] = attn::make_map(static_cast<const char*>(gathered_->local) + s_local_ * d * 2, dims, strides,
                            uint32_t(p.block_n), 1, "gathered V");
    p.kv_seq_dim[1] = 1;
  } else {  // one rank: no segment reads map 1; it stays a valid map (the own K/V's)
    p.k[1] = p.k[0];
    p.v[1] = p.v[0];
    p.kv_seq_dim[1] = p.kv_seq_dim[0];
  }
  // Query and key segments with global positions (zigzag halves when
  // causal), keys in kv_order_.
  const int32_t r = t.rank, S = static_cast<int32_t>(s_local_);
  attn::ring_segments(p, r, world, S, causal_, kv_order_, batch_, batch_ * kv_heads_);
  p.num_compute = num_ctas_;
  p.group_heads = 1;  // head-major: the order in which the push delivers K/V
  p.unit_counter = epoch_counter_ + 2;
  p.signals = comm_.device_ctx().signals + sig_arrival_;
  p.epoch_counter = epoch_counter_;
  const int32_t pieces = roles::kv_pieces(2 * s_local_ * head_dim_ * 2);
  p.sig_mult = static_cast<uint64_t>(pieces);  // a chunk's arrival signal counts its pieces
  p.has_ctx = 1;
  p.ctx = comm_.device_ctx();
  p.timeout_ns = p.ctx.timeout_ns;
  const net::AgentLaunch agent = tp::agent_launch(comm_);  // the delivery agent CTAs, if any
  p.trace = dev::TraceBuf{trace_.base(), trace_.cap(), agent.ctas};
  trace_.clear(stream);  // this call's events only

  roles::KvPush push{};
  push.k = k;
  push.v = v;
  for (int i = 0; i < t.local_size; ++i) {
    push.gathered[i] = gathered_ ? gathered_->peer[i] : nullptr;  // (one rank: nothing to push)
    push.local_ranks[i] = t.rank_at(t.node, i);
  }
  for (int nd = 0; nd < t.num_nodes; ++nd) push.rail[nd] = t.rank_at(nd, t.local_rank);
  push.batch = static_cast<int32_t>(batch_);
  push.s_local = S;
  push.kv_heads = static_cast<int32_t>(kv_heads_);
  push.head_dim = static_cast<int32_t>(head_dim_);
  push.rank = r;
  push.local_rank = t.local_rank;
  push.local_size = t.local_size;
  push.node = t.node;
  push.num_nodes = t.num_nodes;
  push.sig_entry = sig_entry_;
  push.sig_arrival = sig_arrival_;
  push.own_to_self = t.num_nodes > 1 ? 1 : 0;
  push.pieces = pieces;
  push.netctx = netctx_;
  push.net_region = net_region_;
  push.net_queue = 0;
  push.trace = p.trace;
  const dev::DeviceEpoch ep{epoch_counter_, reinterpret_cast<uint32_t*>(epoch_counter_ + 1), epoch_counter_ + 2,
                            epoch_counter_ + 3};  // + 3: the push's part claims (device/roles/kv_push.cuh)
  if (t.num_nodes > 1) comm_.network().warn_legacy_stream("mkernel RingAttention", stream);
  const int grid = num_ctas_ + agent.ctas;
  if (head_dim_ == 64) {
    gemm::allow_engine_smem(reinterpret_cast<const void*>(ring_attn_kernel<64>), RingGeom<64>::kSmemBytes);
    ring_attn_kernel<64><<<grid, attn::kThreads, RingGeom<64>::kSmemBytes, stream>>>(p, push, ep, num_comm_, agent);
  } else {
    gemm::allow_engine_smem(reinterpret_cast<const void*>(ring_attn_kernel<128>), RingGeom<128>::kSmemBytes);
    ring_attn_kernel<128><<<grid, attn::kThreads, RingGeom<128>::kSmemBytes, stream>>>(p, push, ep, num_comm_, agent);
  }
  MK_CUDA_CHECK(cudaGetLastError());
}

}  // namespace mk
