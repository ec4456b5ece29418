// Peer copy bandwidth over NVLink vs the number of SMs doing it (the
// IntraComm role's budget), against the copy engine in the same run.
// Rank 0 moves 256 MiB to (push) or from (pull) rank 1's symmetric buffer;
// rank 1 stays idle. Floor: bytes / NVLink bandwidth (~396 GB/s measured
// with cudaMemcpyPeer).
#include "bench/bench.hpp"
#include "device/peer_copy.cuh"

namespace mkb {

namespace {
constexpr int kCopyThreads = 1024;

__global__ void __launch_bounds__(kCopyThreads) copy_kernel(void* dst, const void* src, size_t bytes) {
  mk::dev::copy_v16<true>(dst, src, bytes, blockIdx.x * blockDim.x + threadIdx.x,
                          static_cast<size_t>(gridDim.x) * blockDim.x);
}
}  // namespace

void bench_peer_copy(BenchContext& bc) {
  auto& c = *bc.comm;
  Table t{"peer copy bandwidth vs SMs (NVLink, 256 MiB, rank 0 -> rank 1)",
          {"engine", "SMs", "push GB/s", "pull GB/s", "push % of CE", "pull % of CE"},
          {},
          "Target: push >= 90% of cudaMemcpyPeer (~396 GB/s) with <= 32 SMs. GB/s = 1e9 bytes/s of payload moved "
          "one way; median over calls."};
  if (c.world() != 2 || c.topology().local_size != 2) {
    t.note = "skipped: needs exactly 2 ranks on one node (NVLink); this run is " + config_name(c.topology());
    bc.report->add(t);
    return;
  }
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
  std::vector<int> counts = {1, 2, 4, 8, 16, 24, 32, 48, 64, sms};
  if (bc.quick) counts = {8, 32};
  for (int n : counts) {
    double gp = 0, gl = 0;
    measure([&] { copy_kernel<<<n, kCopyThreads, 0, bc.stream>>>(peer, local, bytes); },
            [&] { copy_kernel<<<n, kCopyThreads, 0, bc.stream>>>(local, peer, bytes); }, &gp, &gl);
    MKB_CUDA(cudaGetLastError());
    t.rows.push_back({"copy_v16 (SMs)", std::to_string(n), fmt(gp, 1), fmt(gl, 1), fmt(100 * gp / ce_push, 1),
                      fmt(100 * gl / ce_pull, 1)});
  }
  // The kernel that was timed moves the right bytes: fresh data, one push,
  // byte-for-byte comparison.
  if (active) {
    fill_random_bytes(local, bytes, 99, bc.stream);
    copy_kernel<<<32, kCopyThreads, 0, bc.stream>>>(peer, local, bytes);
    MKB_CUDA(cudaStreamSynchronize(bc.stream));
    std::vector<uint64_t> a(bytes / 8), b(bytes / 8);
    MKB_CUDA(cudaMemcpy(a.data(), local, bytes, cudaMemcpyDeviceToHost));
    MKB_CUDA(cudaMemcpy(b.data(), peer, bytes, cudaMemcpyDefault));
    if (a != b) mk::fail("peer_copy: the copied buffer differs from its source");
  }
  c.barrier();
  cudaFree(local);
  c.free_symmetric(remote);
  bc.report->add(t);
}

}  // namespace mkb
