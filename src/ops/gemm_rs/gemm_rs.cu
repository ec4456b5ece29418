// mkernel: GEMM + ReduceScatter (include/mkernel/tp.hpp), one persistent
// kernel, on N nodes of L GPUs (the two-level reduce of
// device/roles/rs_layout.hpp).
// - run(): every CTA computes (the GEMM engine), walking the shares in the
//   layout's order: tiles of shares a node peer aggregates go to its NVLink
//   receive slot; tiles of other nodes' shares this rank aggregates add the
//   node peers' tiles, then go out in one network put per row-block; own
//   tiles last, summed with every source before their final store.
// - reduce_scatter(): [0, num_push) IntraComm CTAs push rows to the node
//   peers, then Reduce CTAs sum what this rank aggregates or owns
//   (device/roles/reduce_scatter.cuh).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>

#include "device/epoch.cuh"
#include "device/gemm/gemm_engine.cuh"
#include "device/roles/reduce_scatter.cuh"
#include "mkernel/error.hpp"
#include "mkernel/mkernel.hpp"
#include "mkernel/network.hpp"
#include "mkernel/tp.hpp"
#include "src/ops/ag_gemm/tp_plan.hpp"
#include "src/ops/gemm/gemm_host.hpp"

namespace mk {

namespace {

// The standalone reduce-scatter has the GPU to itself: pushing CTAs (16
// saturate NVLink with the bulk copier) and Reduce CTAs.
constexpr int kStandalonePushCtas = 16;
constexpr int kDefaultReduceCtas = 16;

__device__ __forceinline__ Role role_of(int cta, int num_push, int num_reduce) {
  if (cta < num_push) return Role::IntraComm;
  if (cta < num_push + num_reduce) return Role::Reduce;
  return Role::Compute;
}

__global__ void __launch_bounds__(gemm::kThreads, 1)
    gemm_rs_kernel(const __grid_constant__ gemm::GemmParams gp, const __grid_constant__ roles::ReduceScatter rs,
                   const dev::DeviceEpoch ep, const int32_t num_push) {
  extern __shared__ uint8_t smem[];
  const int cta = blockIdx.x;
  const uint64_t epoch = dev::epoch_of_launch(ep);
  const int num_reduce = static_cast<int>(gridDim.x) - gp.num_compute - num_push;
  if (cta == 0 && threadIdx.x == 0) roles::rs_announce(gp.ctx, rs, epoch);
  switch (role_of(cta, num_push, num_reduce)) {
    case Role::IntraComm:
      roles::rs_push(gp.ctx, rs, epoch, reinterpret_cast<char*>(smem), cta, num_push);
      break;
    case Role::Reduce:
      roles::rs_reduce(gp.ctx, rs, epoch, reinterpret_cast<char*>(smem), cta - num_push, num_reduce);
      break;
    default:
      gemm::run_compute<true>(gp, smem, cta - num_push - num_reduce);
      break;
  }
  dev::epoch_finish(ep);
}

using tp::aligned16;
using tp::overlap;

}  // namespace

GemmRs::GemmRs(Communicator& comm, int64_t m, int64_t n, int64_t k_local, const GemmRsOptions& opt)
    : comm_(comm), m_(m), n_(n), k_(k_local) {
  const Topology& t = comm.topology();
  if (n < 64 || n % 64) fail("GemmRs: n must be a positive multiple of 64 (got ", n, ")");
  if (k_local < 64 || k_local % 64) fail("GemmRs: k_local must be a positive multiple of 64 (got ", k_local, ")");
  if (m < 1 || m % t.world || (m / t.world) % gemm::kBlockM)
    fail("GemmRs: m (", m, ") must split into ", t.world, " row blocks of a multiple of ", gemm::kBlockM,
         " rows each (smaller or ragged blocks are not supported yet)");
  tp::check_topology(t, "GemmRs", roles::kMaxRsRanks);
  if (t.world > roles::kMaxRsRanks) fail("GemmRs: at most ", roles::kMaxRsRanks, " ranks (got ", t.world, ")");
  const int sms = gemm::num_sms();
  const bool leave_sm = tp::leave_free_sm(comm, "GemmRs", opt.num_ctas, sms);
  num_ctas_ = opt.num_ctas ? opt.num_ctas : tp::balanced_ctas((m / gemm::kBlockM) * ((n + gemm::kBlockN - 1) / gemm::kBlockN),
                                                                sms - (leave_sm ? 1 : 0));
  if (opt.async_store < -1 || opt.async_store > 1 || (opt.async_store == 1 && leave_sm))
    fail("GemmRs: async_store must be -1, 0 or 1 (1 not next to a transport that needs a free SM; got ",
         opt.async_store, ")");
  async_ = opt.async_store == -1 ? !leave_sm : opt.async_store == 1;
  if (num_ctas_ < 2 || num_ctas_ > sms) fail("GemmRs: num_ctas must be in [2, ", sms, "] (got ", num_ctas_, ")");
  num_reduce_ = opt.num_reduce_ctas ? opt.num_reduce_ctas : kDefaultReduceCtas;
  if (num_reduce_ < 1 || num_reduce_ + kStandalonePushCtas > sms)
    fail("GemmRs: num_reduce_ctas must be in [1, ", sms - kStandalonePushCtas, "] (got ", num_reduce_, ")");
  const int64_t total_blocks = m / gemm::kBlockM;
  const int64_t share_blocks = total_blocks / t.world;
  if (opt.swizzle < 0 || (opt.swizzle && share_blocks % opt.swizzle))
    fail("GemmRs: swizzle must be 0 or divide the ", share_blocks, " row-blocks of a share (got ", opt.swizzle, ")");
  swizzle_ = opt.swizzle ? opt.swizzle : tp::rs_swizzle(share_blocks, tp::rs_swizzle_cap(t.num_nodes, share_blocks));
  const rs::Layout lay{t.num_nodes, t.local_size};
  sig_entry_ = comm.reserve_signals(t.world);
  sig_local_ = comm.reserve_signals(static_cast<int>(std::max(1, lay.local_sources()) * total_blocks));
  sig_net_ = comm.reserve_signals(static_cast<int>(std::max(1, lay.net_sources()) * total_blocks));
  tp::check_same_plan(comm.bootstrap().allgather(cat(m, "x", n, "x", k_local, " (signals ", sig_entry_, ", ",
                                                     sig_local_, ", ", sig_net_, ")")),
                      t.rank, "GemmRs", "m x n x k_local");
  // Staging slots (rs_layout.hpp), each holding one share, R x n in whole GEMM tiles.
  const int64_t n_tiles = (n + gemm::kBlockN - 1) / gemm::kBlockN;
  slot_elems_ = (m / t.world) * n_tiles * gemm::kBlockN;
  staging_ = &comm.alloc_symmetric(static_cast<size_t>(std::max(1, lay.num_slots()) * slot_elems_ * 2));
  if (t.num_nodes > 1) {
    Network& net = comm.network();
    net_region_ = net.register_buffer(*staging_);
    netctx_ = net.device_ctx_ptr();
    MK_CUDA_CHECK(cudaMalloc(&net_rb_count_, size_t(total_blocks) * sizeof(uint64_t)));
    MK_CUDA_CHECK(cudaMemset(net_rb_count_, 0, size_t(total_blocks) * sizeof(uint64_t)));
  }
  // Epoch counter + finished-CTA count (device/epoch.cuh) + tile counter, zero.
  MK_CUDA_CHECK(cudaMalloc(&epoch_counter_, 3 * sizeof(uint64_t)));
  MK_CUDA_CHECK(cudaMemset(epoch_counter_, 0, 3 * sizeof(uint64_t)));
  // The legacy-stream memset must be done before a launch on any stream
  // (non-blocking streams do not wait for it): plan creation is setup time.
  MK_CUDA_CHECK(cudaDeviceSynchronize());
}

GemmRs::~GemmRs() {
  if (epoch_counter_) cudaFree(epoch_counter_);
  if (net_rb_count_) cudaFree(net_rb_count_);
  if (staging_) {
    try {
      comm_.free_symmetric(*staging_);
    } catch (...) {
    }
  }
}

void GemmRs::launch(const void* a, const void* b, const void* x, void* out, cudaStream_t stream) {
  const Topology& t = comm_.topology();
  const rs::Layout lay{t.num_nodes, t.local_size};  // staging slots, walk order (rs_layout.hpp)
  const int64_t rows = m_ / t.world;
  const bool compute = x == nullptr;
  if (!out || !aligned16(out)) fail("GemmRs: out must be a 16-byte aligned device pointer (got ", out, ")");
  if (compute) {
    if (!a || !b || !aligned16(a) || !aligned16(b))
      fail("GemmRs: a and b must be 16-byte aligned device pointers (got a=", a, " b=", b, ")");
    if (overlap(out, rows * n_ * 2, a, m_ * k_ * 2) || overlap(out, rows * n_ * 2, b, n_ * k_ * 2))
      fail("GemmRs: out overlaps a or b");
  } else {
    if (!aligned16(x)) fail("GemmRs::reduce_scatter: x must be a 16-byte aligned device pointer (got ", x, ")");
    if (overlap(out, rows * n_ * 2, x, m_ * n_ * 2)) fail("GemmRs::reduce_scatter: out overlaps x");
  }
  const DeviceCtx& ctx = comm_.device_ctx();
  gemm::GemmParams gp{};
  int num_push = 0;
  if (compute) {
    gp = gemm::make_params(gemm::Operands{.a = a, .b = b, .out = staging_->local, .m = m_, .n = n_, .k = k_},
                           num_ctas_);
    // Shares in the layout's walk order (rs_layout.hpp); swizzle groups
    // inside a share (tp::rs_swizzle).
    const int64_t blocks = rows / gemm::kBlockM, total_blocks = m_ / gemm::kBlockM;
    gp.sched.order = sched::TileOrder::SharePermuted;
    gp.sched.share_blocks = static_cast<int32_t>(blocks);
    for (int i = 0; i < t.world; ++i) {
      const int s = lay.share_at(i, t.node, t.local_rank);
      gp.sched.share_order[i] = static_cast<int8_t>(t.rank_at(s / t.local_size, s % t.local_size));
    }
    gp.sched.swizzle = swizzle_;
    const size_t slot_bytes = size_t(slot_elems_) * 2;
    char* mine = static_cast<char*>(staging_->local);
    for (int d = 0; d < t.world; ++d) {
      const int dn = t.node_of[d], dl = t.local_rank_of[d];
      if (dl != t.local_rank) {  // a node peer aggregates (or owns) this share: its NVLink receive slot
        gp.epi.out[d] = static_cast<char*>(staging_->peer[dl]) + lay.local_slot(t.local_rank, dl, dn) * slot_bytes;
        gp.epi.signals[d] = ctx.peer_signals[dl] + sig_local_ + rs::compact(t.local_rank, dl) * total_blocks;
        continue;
      }
      // This rank's local index: add the node peers' tiles ...
      if (t.local_size > 1) gp.epi.own_mask |= 1u << d;
      gp.epi.own_dst_off[d] = int64_t(dn) * slot_elems_;
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
      gp.epi.net_sig_base[d] = sig_net_ + static_cast<int32_t>(rs::compact(t.node, dn) * total_blocks);
    }
    gp.epi.layout = gemm::OutLayout::TileMajor;
    gp.epi.rows_per_dest = rows;
    gp.epi.signal = gemm::EpiSignal::PerRowBlock;
    gp.epi.sig_delta = 1;
    gp.epi.net_region = net_region_;
    gp.netctx = netctx_;
    gp.epi.net_rb_count = net_rb_count_;  // one put per row-block
    gp.epi.own_final = t.rank;
    gp.epi.own_nsrc = lay.local_sources();
    gp.epi.own_slots = static_cast<const uint16_t*>(staging_->local);
    gp.epi.own_src_stride = int64_t(t.num_nodes) * slot_elems_;
    gp.epi.own_signals = ctx.signals + sig_local_;
    gp.epi.own_net_nsrc = lay.net_sources();
    gp.epi.own_net_slots = static_cast<const uint16_t*>(staging_->local) + int64_t(lay.local_sources()) * t.num_nodes * slot_elems_;
    gp.epi.own_net_stride = slot_elems_;
    gp.epi.own_net_signals = ctx.signals + sig_net_;
    gp.epi.own_sig_stride = total_blocks;
    gp.epi.own_expect = static_cast<uint64_t>((n_ + gemm::kBlockN - 1) / gemm::kBlockN);
    gp.epi.own_out = out;
    gp.epi.own_ldo = n_;
    gp.load.start_signals = ctx.signals + sig_entry_;  // every owner entered this call
    gp.load.num_start = t.world;
    gp.load.epoch_counter = epoch_counter_;
    // Tiles from a dynamic queue: a tile that waits was claimed after every
    // tile it waits for was claimed (walk order), so no CTA waits on a CTA
    // that is not resident.
    gp.tile_counter = epoch_counter_ + 2;
    // Tiles for other ranks (NVLink receive slots, send slots) leave through
    // the storer's bulk copies while the next tile computes; not next to a
    // transport that runs kernels on this GPU (kSmemBytesAsync leaves them
    // no room beside a CTA: gemm_params.hpp NOTES).
    gp.epi.async_store = async_ ? 1 : 0;
  } else {
    gp.num_compute = 0;
    gp.timeout_ns = ctx.timeout_ns;
    num_push = kStandalonePushCtas;
  }
  gp.has_ctx = 1;
  gp.ctx = ctx;
  roles::ReduceScatter rs{};
  for (int d = 0; d < t.local_size; ++d) rs.staging[d] = staging_->peer[d];
  for (int s = 0; s < t.world; ++s) {
    rs.rank_at[s] = t.rank_at(s / t.local_size, s % t.local_size);
    rs.walk[s] = static_cast<int8_t>(lay.share_at(s, t.node, t.local_rank));
  }
  rs.input = x;
  rs.out = out;
  rs.rows = rows;
  rs.n = n_;
  rs.row_block = gemm::kBlockM;
  rs.slot_elems = slot_elems_;
  rs.rank = t.rank;
  rs.world = t.world;
  rs.node = t.node;
  rs.num_nodes = t.num_nodes;
  rs.local_rank = t.local_rank;
  rs.local_size = t.local_size;
  rs.sig_entry = sig_entry_;
  rs.sig_local = sig_local_;
  rs.sig_net = sig_net_;
  rs.netctx = netctx_;
  rs.net_region = net_region_;
  rs.net_queue = 0;
  // The GEMM adds once per tile (n_blocks per row-block), the standalone push
  // once per row-block by the same amount: counts stay in step whichever
  // entry point each call of the plan uses.
  rs.adds_per_block = static_cast<uint64_t>((n_ + gemm::kBlockN - 1) / gemm::kBlockN);
  rs.parts = tp::rs_parts(static_cast<int64_t>(rs.adds_per_block), gemm::kBlockM * n_ / 8);
  if (compute) gemm::validate_hooks(gp);
  gemm::allow_engine_smem(reinterpret_cast<const void*>(gemm_rs_kernel), gemm::kSmemBytesAsync);
  const int grid = compute ? num_ctas_ : num_push + num_reduce_;  // fused: every CTA computes
  const size_t smem = gp.epi.async_store ? gemm::kSmemBytesAsync : gemm::kSmemBytes;
  gemm_rs_kernel<<<grid, gemm::kThreads, smem, stream>>>(
      gp, rs, dev::DeviceEpoch{epoch_counter_, reinterpret_cast<uint32_t*>(epoch_counter_ + 1), epoch_counter_ + 2},
      num_push);
  MK_CUDA_CHECK(cudaGetLastError());
}

void GemmRs::run(const void* a, const void* b, void* out, cudaStream_t stream) { launch(a, b, nullptr, out, stream); }

void GemmRs::reduce_scatter(const void* x, void* out, cudaStream_t stream) {
  if (!x) fail("GemmRs::reduce_scatter: x is null");
  launch(nullptr, nullptr, x, out, stream);
}

}  // namespace mk
