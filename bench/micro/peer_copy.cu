// Peer copy bandwidth over NVLink vs the number of SMs doing it (the
// IntraComm role's budget), against the copy engine in the same run.
// Rank 0 moves 256 MiB to (push) or from (pull) rank 1's symmetric buffer;
// rank 1 stays idle. Floor: bytes / NVLink bandwidth (~396 GB/s measured
// with cudaMemcpyPeer).
#include "bench/bench.hpp"
#include "device/bulk_copy.cuh"
#include "device/peer_copy.cuh"

namespace mkb {

namespace {
constexpr int kCopyThreads = 1024;

__global__ void __launch_bounds__(kCopyThreads) copy_kernel(void* dst, const void* src, size_t bytes) {
  mk::dev::copy_v16<true>(dst, src, bytes, blockIdx.x * blockDim.x + threadIdx.x,
                          static_cast<size_t>(gridDim.x) * blockDim.x);
}

template <typename S, mk::dev::BulkLayout L>
__global__ void copy_bulk_kernel(mk::DeviceCtx ctx, void* dst, const void* src, size_t bytes) {
  extern __shared__ __align__(128) char smem[];
  mk::dev::BulkCopier<S> copier(smem);
  copier.copy(ctx, dst, src, bytes, blockIdx.x, gridDim.x, static_cast<int32_t>(mk::Role::IntraComm), L);
}

template <typename S, mk::dev::BulkLayout L>
void set_bulk_smem() {
  MKB_CUDA(cudaFuncSetAttribute(copy_bulk_kernel<S, L>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                static_cast<int>(120 * 1024)));
}

// One CTA per SM for the bulk kernel: ask for more shared memory than two
// CTAs could share.
constexpr size_t kBulkLaunchSmem = 120 * 1024;
using Bulk4x16 = mk::dev::BulkStagesT<4, 16384>;
using BulkDefault = mk::dev::BulkStages;
static_assert(kBulkLaunchSmem >= BulkDefault::kSmemBytes);
constexpr auto kRR = mk::dev::BulkLayout::RoundRobin;
constexpr auto kContig = mk::dev::BulkLayout::Contiguous;
}  // namespace

void bench_peer_copy(BenchContext& bc) {
  auto& c = *bc.comm;
  Table t{"peer copy bandwidth vs SMs (NVLink, 256 MiB, rank 0 -> rank 1)",
          {"engine", "SMs", "push GB/s", "pull GB/s", "push % of CE", "pull % of CE"},
          {},
          "Target: push >= 90% of cudaMemcpyPeer (~396 GB/s) with <= 32 SMs. GB/s = 1e9 bytes/s of payload moved "
          "one way; median over calls."};
  if (!node_pair_or_skip(bc, t)) return;
  const size_t bytes = size_t(256) << 20;
  mk::SymmetricBuffer& remote = c.alloc_symmetric(bytes);
  void* local = nullptr;
  MKB_CUDA(cudaMalloc(&local, bytes));
  fill_random_bytes(local, bytes, 7 + c.rank(), bc.stream);
  fill_random_bytes(remote.local, bytes, 11 + c.rank(), bc.stream);
  MKB_CUDA(cudaStreamSynchronize(bc.stream));
  const bool active = c.rank() == 0;
  void* peer = remote.peer[1 - c.topology().local_rank];

  auto measure = [&](const std::function<void()>& push, const std::function<void()>& pull, double* gb_push,
                     double* gb_pull) {
    auto before = [&](int) { c.barrier(); };
    auto sp = time_calls(&c.bootstrap(), bc.stream, bc.opts, [&](int) { if (active) push(); }, before);
    auto sl = time_calls(&c.bootstrap(), bc.stream, bc.opts, [&](int) { if (active) pull(); }, before);
    // Rank 1 times empty regions; the max over ranks is rank 0's copy time.
    *gb_push = bytes / (sp.median_ms * 1e6);
    *gb_pull = bytes / (sl.median_ms * 1e6);
  };

  // Copy engine baselines: cudaMemcpyPeerAsync between cudaMalloc buffers
  // (the ~396 GB/s reference) and the copy engine on our VMM peer mapping.
  int ndev = 0;
  MKB_CUDA(cudaGetDeviceCount(&ndev));
  double ce_push = 0, ce_pull = 0;
  int peer_dev = -1;
  for (int d = 0; d < ndev; ++d)
    if (d != c.device()) peer_dev = d;  // the other GPU of the pair (2-GPU host)
  if (ndev == 2 && peer_dev >= 0) {
    void* other = nullptr;
    if (active) {
      MKB_CUDA(cudaSetDevice(peer_dev));
      MKB_CUDA(cudaMalloc(&other, bytes));
      MKB_CUDA(cudaSetDevice(c.device()));
      cudaError_t pe = cudaDeviceEnablePeerAccess(peer_dev, 0);
      if (pe != cudaSuccess && pe != cudaErrorPeerAccessAlreadyEnabled) MKB_CUDA(pe);
      cudaGetLastError();
    }
    measure([&] { MKB_CUDA(cudaMemcpyPeerAsync(other, peer_dev, local, c.device(), bytes, bc.stream)); },
            [&] { MKB_CUDA(cudaMemcpyPeerAsync(local, c.device(), other, peer_dev, bytes, bc.stream)); }, &ce_push,
            &ce_pull);
    t.rows.push_back({"cudaMemcpyPeerAsync", "CE", fmt(ce_push, 1), fmt(ce_pull, 1), "100", "100"});
    if (other) cudaFree(other);
  }
  double vm_push = 0, vm_pull = 0;
  measure([&] { MKB_CUDA(cudaMemcpyAsync(peer, local, bytes, cudaMemcpyDefault, bc.stream)); },
          [&] { MKB_CUDA(cudaMemcpyAsync(local, peer, bytes, cudaMemcpyDefault, bc.stream)); }, &vm_push, &vm_pull);
  if (ce_push == 0) ce_push = vm_push, ce_pull = vm_pull;
  t.rows.push_back({"cudaMemcpyAsync on VMM peer map", "CE", fmt(vm_push, 1), fmt(vm_pull, 1),
                    fmt(100 * vm_push / ce_push, 1), fmt(100 * vm_pull / ce_pull, 1)});

  int sms = 0;
  MKB_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, c.device()));
  set_bulk_smem<Bulk4x16, kRR>();
  set_bulk_smem<BulkDefault, kContig>();
  const mk::DeviceCtx ctx = c.device_ctx();
  // The SM-driven movers: 16-byte loads/stores in a grid-stride layout, and
  // bulk (TMA engine) copies issued by one thread per CTA. (A CTA-contiguous
  // 16-byte variant and 2 x 32 KB bulk stages were measured and dropped:
  // bench/results/mkbench-20261130T0517*, *T0519*.)
  using Launch = std::function<void(int n, void* dst, const void* src)>;
  const std::vector<std::pair<std::string, Launch>> movers = {
      {"copy_v16 grid-stride", [&](int n, void* d, const void* s) { copy_kernel<<<n, kCopyThreads, 0, bc.stream>>>(d, s, bytes); }},
      {"copy_bulk 4x16K round-robin",
       [&](int n, void* d, const void* s) { copy_bulk_kernel<Bulk4x16, kRR><<<n, 32, kBulkLaunchSmem, bc.stream>>>(ctx, d, s, bytes); }},
      {"copy_bulk 6x16K contiguous (default)",
       [&](int n, void* d, const void* s) { copy_bulk_kernel<BulkDefault, kContig><<<n, 32, kBulkLaunchSmem, bc.stream>>>(ctx, d, s, bytes); }},
  };
  for (const auto& [name, launch] : movers) {
    std::vector<int> counts = {1, 2, 4, 8, 16, 24, 32, 48, 64, sms};
    if (name.find("default") != std::string::npos) counts = {1, 2, 4, 8, 12, 16, 24, 32, 48, 64, sms};
    if (bc.quick) counts = {8, 32};
    for (int n : counts) {
      double gp = 0, gl = 0;
      measure([&] { launch(n, peer, local); }, [&] { launch(n, local, peer); }, &gp, &gl);
      MKB_CUDA(cudaGetLastError());
      t.rows.push_back({name, std::to_string(n), fmt(gp, 1), fmt(gl, 1), fmt(100 * gp / ce_push, 1),
                        fmt(100 * gl / ce_pull, 1)});
    }
    // The kernel that was timed moves the right bytes: fresh data, one push
    // with 32 SMs, byte-for-byte comparison.
    if (active) {
      fill_random_bytes(local, bytes, 99 + t.rows.size(), bc.stream);
      launch(32, peer, local);
      MKB_CUDA(cudaStreamSynchronize(bc.stream));
      std::vector<uint64_t> a(bytes / 8), b(bytes / 8);
      MKB_CUDA(cudaMemcpy(a.data(), local, bytes, cudaMemcpyDeviceToHost));
      MKB_CUDA(cudaMemcpy(b.data(), peer, bytes, cudaMemcpyDefault));
      if (a != b) mk::fail("peer_copy: ", name, " left the peer buffer different from its source");
    }
    c.barrier();
  }
  c.barrier();
  cudaFree(local);
  c.free_symmetric(remote);
  bc.report->add(t);
}

}  // namespace mkb
