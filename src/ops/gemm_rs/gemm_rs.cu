// mkernel: GEMM + ReduceScatter (include/mkernel/tp.hpp), one persistent
// kernel, inside a node or across nodes of one GPU each.
// - run(): every CTA computes (the GEMM engine): other ranks' rows first,
//   each tile stored into its owner's staging slot (NVLink, or a network put
//   from this rank's send slot) with a row-block signal; own rows last, each
//   tile summed with the other ranks' tiles before its final store.
// - reduce_scatter(): [0, num_push) IntraComm CTAs push rows, then Reduce
//   CTAs sum the owned rows (device/roles/reduce_scatter.cuh).
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
      roles::rs_reduce(gp.ctx, rs, epoch, cta - num_push, num_reduce);
      break;
    default:
      gemm::run_compute(gp, smem, cta - num_push - num_reduce);
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
  if (t.num_nodes > 1 && t.local_size > 1)
    fail("GemmRs: ", t.describe(), ": across nodes only one GPU per node is supported so far (the two-level reduce, "
         "inside each node first, is not built)");
  if (t.world > roles::kMaxRsRanks) fail("GemmRs: at most ", roles::kMaxRsRanks, " ranks (got ", t.world, ")");
  const int sms = gemm::num_sms();
  const bool leave_sm = tp::leave_free_sm(comm, "GemmRs", opt.num_ctas, sms);
  num_ctas_ = opt.num_ctas ? opt.num_ctas : sms - (leave_sm ? 1 : 0);
  if (num_ctas_ < 2 || num_ctas_ > sms) fail("GemmRs: num_ctas must be in [2, ", sms, "] (got ", opt.num_ctas, ")");
  num_reduce_ = opt.num_reduce_ctas ? opt.num_reduce_ctas : kDefaultReduceCtas;
  if (num_reduce_ < 1 || num_reduce_ + kStandalonePushCtas > sms)
    fail("GemmRs: num_reduce_ctas must be in [1, ", sms - kStandalonePushCtas, "] (got ", num_reduce_, ")");
  const int64_t total_blocks = m / gemm::kBlockM;
  sig_entry_ = comm.reserve_signals(t.world);
  sig_arrival_ = comm.reserve_signals(static_cast<int>(t.world * total_blocks));
  tp::check_same_plan(comm.bootstrap().allgather(cat(m, "x", n, "x", k_local, " (signals ", sig_entry_, ", ",
                                                     sig_arrival_, ")")),
                      t.rank, "GemmRs", "m x n x k_local");
  // Receive slots [W][slot] (+ send slots [W][slot] on several nodes), a
  // slot holding R x n in whole GEMM tiles.
  const int64_t n_tiles = (n + gemm::kBlockN - 1) / gemm::kBlockN;
  slot_elems_ = (m / t.world) * n_tiles * gemm::kBlockN;
  staging_ = &comm.alloc_symmetric(static_cast<size_t>((t.num_nodes > 1 ? 2 : 1) * t.world * slot_elems_ * 2));
  if (t.num_nodes > 1) {
    Network& net = comm.network();
    net_region_ = net.register_buffer(*staging_);
    netctx_ = net.device_ctx_ptr();
    MK_CUDA_CHECK(cudaMalloc(&net_rb_count_, size_t(m / gemm::kBlockM) * sizeof(uint64_t)));
    MK_CUDA_CHECK(cudaMemset(net_rb_count_, 0, size_t(m / gemm::kBlockM) * sizeof(uint64_t)));
  }
  MK_CUDA_CHECK(cudaMalloc(&epoch_counter_, 2 * sizeof(uint64_t)));
  MK_CUDA_CHECK(cudaMemset(epoch_counter_, 0, 2 * sizeof(uint64_t)));
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
    gp.sched.order = sched::TileOrder::RankRotated;  // the next rank's rows first, own rows last
    gp.sched.rotate_mblk = static_cast<int32_t>(((t.rank + 1) % t.world) * rows / gemm::kBlockM);
    gp.sched.swizzle = tp::rs_swizzle(rows / gemm::kBlockM);
    // Tiles into each owner's receive slot for this rank: over NVLink on
    // this node, else into this rank's send slot for the owner and one put.
    const size_t slot_bytes = size_t(slot_elems_) * 2;
    for (int d = 0; d < t.world; ++d) {
      if (t.same_node(d, t.rank)) {
        const int dl = t.local_rank_of[d];
        gp.epi.out[d] = static_cast<char*>(staging_->peer[dl]) + size_t(t.rank) * slot_bytes;
        gp.epi.signals[d] = ctx.peer_signals[dl] + sig_arrival_ + int64_t(t.rank) * (m_ / gemm::kBlockM);
      } else {
        gp.epi.out[d] = static_cast<char*>(staging_->local) + size_t(t.world + d) * slot_bytes;
        gp.epi.net |= 1u << d;
        gp.epi.net_peer[d] = d;
        gp.epi.net_src_off[d] = size_t(t.world + d) * slot_bytes;
        gp.epi.net_dst_off[d] = size_t(t.rank) * slot_bytes;
      }
    }
    gp.epi.layout = gemm::OutLayout::TileMajor;
    gp.epi.rows_per_dest = rows;
    gp.epi.signal = gemm::EpiSignal::PerRowBlock;
    gp.epi.sig_delta = 1;
    gp.epi.net_region = net_region_;
    gp.epi.net_sig_base = sig_arrival_ + static_cast<int32_t>(int64_t(t.rank) * (m_ / gemm::kBlockM));
    gp.netctx = netctx_;
    gp.epi.net_rb_count = net_rb_count_;  // one put per row-block
    // Own rows last: each of their tiles adds the other ranks' partial tiles
    // (arrived meanwhile in this rank's receive slots) to its accumulator
    // and stores the final rows into `out`. No Reduce CTAs.
    gp.epi.own_dest = t.rank;
    gp.epi.own_src = t.rank;
    gp.epi.own_nsrc = t.world;
    gp.epi.own_slots = static_cast<const uint16_t*>(staging_->local);
    gp.epi.own_slot_elems = slot_elems_;
    gp.epi.own_signals = ctx.signals + sig_arrival_;
    gp.epi.own_sig_stride = m_ / gemm::kBlockM;
    gp.epi.own_expect = static_cast<uint64_t>((n_ + gemm::kBlockN - 1) / gemm::kBlockN);
    gp.epi.own_out = out;
    gp.epi.own_ldo = n_;
    gp.load.start_signals = ctx.signals + sig_entry_;  // every owner entered this call
    gp.load.num_start = t.world;
    gp.load.epoch_counter = epoch_counter_;
  } else {
    gp.num_compute = 0;
    gp.timeout_ns = ctx.timeout_ns;
    num_push = kStandalonePushCtas;
  }
  gp.has_ctx = 1;
  gp.ctx = ctx;
  roles::ReduceScatter rs{};
  for (int d = 0; d < t.local_size; ++d) rs.staging[d] = staging_->peer[d];
  for (int d = 0; d < t.world; ++d) rs.local_of[d] = t.same_node(d, t.rank) ? t.local_rank_of[d] : -1;
  rs.input = x;
  rs.out = out;
  rs.rows = rows;
  rs.n = n_;
  rs.row_block = gemm::kBlockM;
  rs.slot_elems = slot_elems_;
  rs.rank = t.rank;
  rs.world = t.world;
  rs.local_rank = t.local_rank;
  rs.sig_entry = sig_entry_;
  rs.sig_arrival = sig_arrival_;
  rs.netctx = netctx_;
  rs.net_region = net_region_;
  rs.net_queue = 0;
  // The GEMM adds once per tile (n_blocks per row-block), the standalone push
  // once per row-block by the same amount: counts stay in step whichever
  // entry point each call of the plan uses.
  rs.adds_per_block = static_cast<uint64_t>((n_ + gemm::kBlockN - 1) / gemm::kBlockN);
  if (compute) gemm::validate_hooks(gp);
  gemm::allow_engine_smem(reinterpret_cast<const void*>(gemm_rs_kernel));
  const int grid = compute ? num_ctas_ : num_push + num_reduce_;  // fused: every CTA computes
  gemm_rs_kernel<<<grid, gemm::kThreads, gemm::kSmemBytes, stream>>>(
      gp, rs, dev::DeviceEpoch{epoch_counter_, reinterpret_cast<uint32_t*>(epoch_counter_ + 1)}, num_push);
  MK_CUDA_CHECK(cudaGetLastError());
}

void GemmRs::run(const void* a, const void* b, void* out, cudaStream_t stream) { launch(a, b, nullptr, out, stream); }

void GemmRs::reduce_scatter(const void* x, void* out, cudaStream_t stream) {
  if (!x) fail("GemmRs::reduce_scatter: x is null");
  launch(nullptr, nullptr, x, out, stream);
}

}  // namespace mk
