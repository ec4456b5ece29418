// GEMM engine epilogue hooks across GPUs: rows added (fp32) into their owner's
// buffer over NVLink with per-row-block signals (GEMM+RS shape), whole
// results stored into a peer's buffer with per-tile signals (1x2), and
// tiles sent through the network with a put per tile (2x1, emu or fabric).
// Every element is checked against an fp32 reference; repeated rounds keep the
// monotonic signals growing (no reset).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "device/gemm/sm90.cuh"
#include "device/net/agent.cuh"
#include "device/signals.cuh"
#include "mkernel/mkernel.hpp"
#include "src/ops/gemm/gemm_host.hpp"
#include "tests/gpu/gemm_test_util.cuh"
#include "tests/test_comm.hpp"

using namespace mk;
using mk::test::comm;
using namespace mkt;

namespace {

#define CK(x) comm().check(static_cast<int>(x), #x)

// Waits until signals [first, first + n) of this rank reach `expected`.
__global__ void wait_signals(DeviceCtx ctx, int first, int n, uint64_t expected, int peer) {
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    dev::wait_ge(ctx, ctx.signals + first + i, expected,
                 dev::WaitSite{static_cast<int32_t>(Role::Compute), peer, first + i});
}

// Reference: a plain fp32 kernel. (A cuBLAS handle made in a fixture's SetUp,
// before the communicator selected this rank's GPU, is bound to GPU 0 and
// fails with EXECUTION_FAILED on rank 1.)
class GemmPeer : public GemmCheck {
 protected:
  // A of rank r (regenerated anywhere from its seed), B shared.
  static uint64_t seed_a(int r, int round) { return 1000 + 17 * r + 101 * round; }

  gemm::GemmParams params(const void* a, const void* b, void* out, int64_t m, int64_t n, int64_t k) {
    gemm::GemmParams p = gemm::make_params(gemm::Operands{.a = a, .b = b, .out = out, .m = m, .n = n, .k = k}, 0);
    p.has_ctx = 1;
    p.ctx = comm().device_ctx();
    return p;
  }
  void add_rows_into_owners(gemm::EpiOp op);
};

__global__ void f32_to_bf16(const float* s, uint16_t* d, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    d[i] = to_bf16(s[i]);
}

// The reductions the epilogue can issue, both ranks at once into rank 0's
// words (a peer GPU's memory for rank 1): 32 threads, one add each, 8 per
// word per rank; sums stay exact in bf16.
__global__ void reductions_into(void* bf16, void* f32) {
  mk::dev::sm90::red_add_bf16x2(static_cast<uint32_t*>(bf16) + threadIdx.x % 4, mk::dev::sm90::pack_bf16x2(1.f, 2.f));
  mk::dev::sm90::red_add_f32x2(static_cast<float*>(f32) + 2 * (threadIdx.x % 4), 1.f, 0.5f);
}

TEST_F(GemmPeer, ReductionsIntoPeerMemoryFromBothRanks) {
  if (comm().topology().num_nodes != 1 || comm().world() != 2) GTEST_SKIP() << "needs 2 GPUs of one node (1x2)";
  SymmetricBuffer& bf = comm().alloc_symmetric(64);
  SymmetricBuffer& f = comm().alloc_symmetric(64);
  CK(cudaMemset(bf.local, 0, 64));
  CK(cudaMemset(f.local, 0, 64));
  CK(cudaDeviceSynchronize());
  comm().barrier();
  reductions_into<<<1, 32>>>(bf.peer[0], f.peer[0]);
  CK(cudaDeviceSynchronize());
  comm().barrier();
  if (comm().rank() == 0) {
    uint16_t hb[8];
    float hf[8];
    CK(cudaMemcpy(hb, bf.local, sizeof(hb), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hf, f.local, sizeof(hf), cudaMemcpyDeviceToHost));
    for (int w = 0; w < 4; ++w) {  // 16 adds per word: (1, 2) and (1, 0.5) each
      uint32_t lo = uint32_t(hb[2 * w]) << 16, hi = uint32_t(hb[2 * w + 1]) << 16;
      float flo, fhi;
      std::memcpy(&flo, &lo, 4);
      std::memcpy(&fhi, &hi, 4);
      EXPECT_EQ(flo, 16.f) << "bf16x2 word " << w << " low (raw " << hb[2 * w] << ")";
      EXPECT_EQ(fhi, 32.f) << "bf16x2 word " << w << " high (raw " << hb[2 * w + 1] << ")";
      EXPECT_EQ(hf[2 * w], 16.f) << "f32x2 word " << w;
      EXPECT_EQ(hf[2 * w + 1], 8.f) << "f32x2 word " << w;
    }
  }
  comm().barrier();
  comm().free_symmetric(f);
  comm().free_symmetric(bf);
}

// Rank d owns rows [d rows, (d+1) rows); both ranks add their partial
// products of those rows into the owner's buffer (GEMM+RS), fp32 or bf16.
void GemmPeer::add_rows_into_owners(gemm::EpiOp op) {
  const bool f32 = op == gemm::EpiOp::AddF32;
  const int64_t es = f32 ? 4 : 2;
  const int me = comm().rank();
  const int64_t m = 512, n = 512, k = 512, rows = m / 2;  // rank d owns rows [d rows, (d+1) rows)
  const int n_blocks = 2, mblocks = 4;
  const int sig = comm().reserve_signals(mblocks);
  SymmetricBuffer& dst = comm().alloc_symmetric(rows * n * es);
  Buf a(m * k * 2), b(n * k * 2), a_other(m * k * 2), ref(rows * n * 4), dst16(rows * n * 2);
  random_bf16(b.p, n * k, 7);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (int round = 1; round <= 3; ++round) {
    random_bf16(a.p, m * k, seed_a(me, round));
    random_bf16(a_other.p, m * k, seed_a(1 - me, round));
    CK(cudaMemset(dst.local, 0, rows * n * es));
    CK(cudaDeviceSynchronize());
    comm().barrier();
    gemm::GemmParams p = params(a.p, b.p, dst.peer[0], m, n, k);
    p.epi.op = op;
    p.epi.out[0] = dst.peer[0];
    p.epi.out[1] = dst.peer[1];
    p.epi.rows_per_dest = rows;
    p.epi.signal = gemm::EpiSignal::PerRowBlock;
    p.epi.signals[0] = p.ctx.peer_signals[0] + sig;
    p.epi.signals[1] = p.ctx.peer_signals[1] + sig;
    gemm::launch(p, p.num_compute, {}, s);
    // My two row-blocks: n_blocks adds from each of the 2 ranks per round.
    wait_signals<<<1, 32, 0, s>>>(p.ctx, sig + 2 * me, 2, uint64_t(round) * 2 * n_blocks, 1 - me);
    CK(cudaStreamSynchronize(s));
    // Reference: my rows of A_0 B^T + A_1 B^T.
    const Buf& a0 = me == 0 ? a : a_other;
    const Buf& a1 = me == 0 ? a_other : a;
    simt_reference(a0.as<uint16_t>() + me * rows * k, b.p, ref.as<float>(), rows, n, k);
    simt_reference(a1.as<uint16_t>() + me * rows * k, b.p, ref.as<float>(), rows, n, k, 1.f);
    CK(cudaDeviceSynchronize());
    if (f32) f32_to_bf16<<<264, 256>>>(static_cast<const float*>(dst.local), dst16.as<uint16_t>(), rows * n);
    Check c = check(f32 ? dst16.p : dst.local, n, ref.as<float>(), rows, n);
    EXPECT_EQ(c.nonfinite, 0u) << "round " << round;
    EXPECT_LT(c.rel, 1e-2) << "round " << round;
    if (c.rel >= 1e-2) {  // show where it went wrong
      std::vector<uint16_t> got(8);
      std::vector<float> want(8);
      CK(cudaMemcpy(got.data(), f32 ? dst16.p : dst.local, 16, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(want.data(), ref.p, 32, cudaMemcpyDeviceToHost));
      for (int i = 0; i < 8; ++i) {
        uint32_t u = uint32_t(got[i]) << 16;
        float v;
        std::memcpy(&v, &u, 4);
        std::printf("rank %d row 0 col %d: got %g want %g\n", me, i, v, want[i]);
      }
    }
    comm().barrier();
  }
  cudaStreamDestroy(s);
  comm().free_symmetric(dst);
}

TEST_F(GemmPeer, AddF32RowsIntoOwnersOverNvlinkWithRowBlockSignals) {
  if (comm().topology().num_nodes != 1 || comm().world() != 2) GTEST_SKIP() << "needs 2 GPUs of one node (1x2)";
  add_rows_into_owners(gemm::EpiOp::AddF32);
}

TEST_F(GemmPeer, AddBf16RowsIntoOwnersOverNvlinkWithRowBlockSignals) {
  if (comm().topology().num_nodes != 1 || comm().world() != 2) GTEST_SKIP() << "needs 2 GPUs of one node (1x2)";
  add_rows_into_owners(gemm::EpiOp::AddBf16);
}

TEST_F(GemmPeer, StoreWholeResultIntoPeerWithTileSignals) {
  if (comm().topology().num_nodes != 1 || comm().world() != 2) GTEST_SKIP() << "needs 2 GPUs of one node (1x2)";
  const int me = comm().rank(), peer = 1 - me;
  const int64_t m = 300, n = 512, k = 256;
  const int tiles = 3 * 2;
  static const int sig = comm().reserve_signals(tiles);
  SymmetricBuffer& recv = comm().alloc_symmetric(m * n * 2);
  Buf a(m * k * 2), b(n * k * 2), a_peer(m * k * 2), ref(m * n * 4);
  random_bf16(b.p, n * k, 8);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (int round = 1; round <= 3; ++round) {
    random_bf16(a.p, m * k, seed_a(me, round));
    random_bf16(a_peer.p, m * k, seed_a(peer, round));
    poison(recv.local, m * n);
    CK(cudaDeviceSynchronize());
    comm().barrier();
    gemm::GemmParams p = params(a.p, b.p, recv.peer[peer], m, n, k);
    p.epi.signal = gemm::EpiSignal::PerTile;
    p.epi.signals[0] = p.ctx.peer_signals[peer] + sig;
    gemm::launch(p, p.num_compute, {}, s);
    wait_signals<<<1, 32, 0, s>>>(p.ctx, sig, tiles, uint64_t(round), peer);
    CK(cudaStreamSynchronize(s));
    simt_reference(a_peer.p, b.p, ref.as<float>(), m, n, k);
    CK(cudaDeviceSynchronize());
    Check c = check(recv.local, n, ref.as<float>(), m, n);
    EXPECT_EQ(c.nonfinite, 0u) << "round " << round << ": elements the peer never stored";
    EXPECT_LT(c.rel, 1e-2) << "round " << round;
    comm().barrier();
  }
  cudaStreamDestroy(s);
  comm().free_symmetric(recv);
}

TEST_F(GemmPeer, TilesCrossTheNetworkOnePutPerTile) {
  if (comm().topology().num_nodes != 2 || comm().world() != 2) GTEST_SKIP() << "needs 2 nodes of 1 GPU (2x1)";
  Network& net = comm().network();
  const int me = comm().rank(), peer = net.peers()[0];
  const int64_t m = 300, n = 512, k = 256;
  const int mb = 3, nb = 2, tiles = mb * nb;
  const size_t tile_elems = size_t(gemm::kBlockM) * gemm::kBlockN, half = tiles * tile_elems * 2;
  static const int sig = comm().reserve_signals(tiles);
  SymmetricBuffer& buf = comm().alloc_symmetric(2 * half);
  const int region = net.register_buffer(buf);
  Buf a(m * k * 2), b(n * k * 2), a_peer(m * k * 2), ref(m * n * 4);
  random_bf16(b.p, n * k, 9);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  uint32_t* agent_finished = net::alloc_agent_counter();
  CK(agent_finished ? cudaSuccess : cudaErrorMemoryAllocation);
  std::vector<uint16_t> got(tiles * tile_elems);
  std::vector<float> want(m * n);
  for (int round = 1; round <= 3; ++round) {
    random_bf16(a.p, m * k, seed_a(me, round));
    random_bf16(a_peer.p, m * k, seed_a(peer, round));
    poison(buf.local, half);  // bf16 elements of both halves (2 * half bytes)
    CK(cudaDeviceSynchronize());
    comm().barrier();
    gemm::GemmParams p = params(a.p, b.p, buf.local, m, n, k);
    p.netctx = net.device_ctx_ptr();
    p.epi.layout = gemm::OutLayout::TileMajor;
    p.epi.signal = gemm::EpiSignal::PerTile;
    p.epi.net = 1;
    p.epi.net_peer[0] = peer;
    p.epi.net_region = region;
    p.epi.net_src_off[0] = 0;
    p.epi.net_dst_off[0] = half;
    p.epi.net_sig_base[0] = sig;
    // The epilogue's puts go through the delivery agent when the network
    // asks for one (emu): its CTAs beside the grid and a counter (net::with_agent).
    const net::AgentLaunch agent =
        net::AgentLaunch{net.device_ctx_ptr(), net::agent_ctas(net.device_ctx())};
    gemm::launch(p, p.num_compute, {}, s, agent, agent_finished);
    wait_signals<<<1, 32, 0, s>>>(p.ctx, sig, tiles, uint64_t(round), peer);
    cudaError_t e = cudaStreamSynchronize(s);
    net.check();
    CK(e);
    simt_reference(a_peer.p, b.p, ref.as<float>(), m, n, k);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(got.data(), static_cast<char*>(buf.local) + half, half, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(want.data(), ref.p, want.size() * 4, cudaMemcpyDeviceToHost));
    double err = 0, nrm = 0;
    size_t unwritten = 0;
    for (int t = 0; t < tiles; ++t)
      for (int i = 0; i < gemm::kBlockM; ++i)
        for (int j = 0; j < gemm::kBlockN; ++j) {
          const int64_t row = (t / nb) * gemm::kBlockM + i, col = (t % nb) * gemm::kBlockN + j;
          if (row >= m) continue;
          uint32_t u = uint32_t(got[t * tile_elems + i * gemm::kBlockN + j]) << 16;
          float v;
          std::memcpy(&v, &u, 4);
          if (!std::isfinite(v)) {
            ++unwritten;
            continue;
          }
          const double d = v - want[row * n + col];
          err += d * d;
          nrm += double(want[row * n + col]) * want[row * n + col];
        }
    EXPECT_EQ(unwritten, 0u) << "round " << round;
    EXPECT_LT(std::sqrt(err / nrm), 1e-2) << "round " << round;
    comm().barrier();
  }
  cudaStreamDestroy(s);
  cudaFree(agent_finished);
  comm().barrier();
  comm().free_symmetric(buf);
}

}  // namespace
