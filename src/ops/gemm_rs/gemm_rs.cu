// mkernel: GEMM + ReduceScatter inside a node (include/mkernel/tp.hpp), one
// persistent kernel. Roles, lowest block indices first (resident first):
// [0, num_push) IntraComm (the standalone reduce-scatter only), then Reduce,
// then Compute (the GEMM engine, peers' rows first, each tile stored into
// its owner's staging slot with a row-block signal).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>

#include "device/epoch.cuh"
#include "device/gemm/gemm_engine.cuh"
#include "device/roles/reduce_scatter.cuh"
#include "mkernel/error.hpp"
#include "mkernel/mkernel.hpp"
#include "mkernel/tp.hpp"
#include "src/ops/ag_gemm/tp_plan.hpp"
#include "src/ops/gemm/gemm_host.hpp"

namespace mk {

namespace {

constexpr int kStandalonePushCtas = 8;
constexpr int kDefaultReduceCtas = 8;

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
  if (t.num_nodes != 1 || t.local_size != t.world)
    fail("GemmRs: the ", t.world, " ranks span ", t.num_nodes,
         " nodes; this build reduces over NVLink inside one node only");
  if (t.world > kMaxLocalRanks) fail("GemmRs: at most ", kMaxLocalRanks, " ranks (got ", t.world, ")");
  const int sms = gemm::num_sms();
  num_ctas_ = opt.num_ctas ? opt.num_ctas : sms;
  if (num_ctas_ < 2 || num_ctas_ > sms) fail("GemmRs: num_ctas must be in [2, ", sms, "] (got ", opt.num_ctas, ")");
  num_reduce_ = opt.num_reduce_ctas ? opt.num_reduce_ctas : std::min(kDefaultReduceCtas, num_ctas_ - 1);
  if (num_reduce_ < 1 || num_reduce_ >= num_ctas_ || num_reduce_ + kStandalonePushCtas > sms)
    fail("GemmRs: num_reduce_ctas must be in [1, ", std::min(num_ctas_ - 1, sms - kStandalonePushCtas), "] (got ",
         num_reduce_, ")");
  const int64_t total_blocks = m / gemm::kBlockM;
  sig_entry_ = comm.reserve_signals(t.world);
  sig_arrival_ = comm.reserve_signals(static_cast<int>(t.world * total_blocks));
  tp::check_same_plan(comm.bootstrap().allgather(cat(m, "x", n, "x", k_local, " (signals ", sig_entry_, ", ",
                                                     sig_arrival_, ")")),
                      t.rank, "GemmRs", "m x n x k_local");
  staging_ = &comm.alloc_symmetric(static_cast<size_t>(m * n * 2));  // W slots of [m / W x n]
  MK_CUDA_CHECK(cudaMalloc(&epoch_counter_, 2 * sizeof(uint64_t)));
  MK_CUDA_CHECK(cudaMemset(epoch_counter_, 0, 2 * sizeof(uint64_t)));
  // The legacy-stream memset must be done before a launch on any stream
  // (non-blocking streams do not wait for it): plan creation is setup time.
  MK_CUDA_CHECK(cudaDeviceSynchronize());
}

GemmRs::~GemmRs() {
  if (epoch_counter_) cudaFree(epoch_counter_);
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
                           num_ctas_ - num_reduce_);
    gp.sched.order = sched::TileOrder::RankRotated;  // the next rank's rows first, own rows last
    gp.sched.rotate_mblk = static_cast<int32_t>(((t.rank + 1) % t.world) * rows / gemm::kBlockM);
    for (int d = 0; d < t.world; ++d) {
      gp.epi.out[d] = static_cast<char*>(staging_->peer[d]) + size_t(t.rank) * rows * n_ * 2;
      gp.epi.signals[d] = ctx.peer_signals[d] + sig_arrival_ + int64_t(t.rank) * (m_ / gemm::kBlockM);
    }
    gp.epi.ldo = n_;
    gp.epi.rows_per_dest = rows;
    gp.epi.signal = gemm::EpiSignal::PerRowBlock;
    gp.epi.sig_delta = 1;
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
  for (int d = 0; d < t.world; ++d) rs.staging[d] = staging_->peer[d];
  rs.input = x;
  rs.out = out;
  rs.rows = rows;
  rs.n = n_;
  rs.row_block = gemm::kBlockM;
  rs.local_rank = t.local_rank;
  rs.local_size = t.local_size;
  rs.sig_entry = sig_entry_;
  rs.sig_arrival = sig_arrival_;
  // The GEMM adds once per tile (n_blocks per row-block), the standalone push
  // once per row-block by the same amount: counts stay in step whichever
  // entry point each call of the plan uses.
  rs.adds_per_block = static_cast<uint64_t>((n_ + gemm::kBlockN - 1) / gemm::kBlockN);
  if (compute) gemm::validate_hooks(gp);
  gemm::allow_engine_smem(reinterpret_cast<const void*>(gemm_rs_kernel));
  const int grid = compute ? num_ctas_ : num_push + num_reduce_;
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
