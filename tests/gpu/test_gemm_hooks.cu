// GEMM engine hooks on one GPU: epilogue add, tile-major output with
// per-tile signals, row routing to several destinations with per-row-block
// signals, wait-before-load on row signals and on an arrival queue (the
// rows arrive while the GEMM runs; early loads would read NaN poison), and
// a signal that never arrives (bounded, reported, in a child process).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "device/ptx.cuh"
#include "mkernel/mkernel.hpp"
#include "src/ops/gemm/gemm_host.hpp"
#include "tests/gpu/child.hpp"
#include "tests/gpu/gemm_test_util.cuh"
#include "tests/test_comm.hpp"

namespace {

using namespace mkt;
using mk::gemm::GemmParams;

__device__ void spin_ns(uint64_t ns) {
  const uint64_t t0 = mk::dev::globaltimer();
  while (mk::dev::globaltimer() - t0 < ns) {
  }
}

__device__ void copy_rows(uint16_t* a, const uint16_t* src, int64_t k, int64_t r0, int64_t r1) {
  for (int64_t i = r0 * k + threadIdx.x; i < r1 * k; i += blockDim.x) a[i] = src[i];
  __syncthreads();
}

// Publishes rows of `a` chunk by chunk, last chunk first, each followed by
// its signal (release): the GEMM must wait for them.
__global__ void release_row_chunks(uint16_t* a, const uint16_t* src, int64_t k, int64_t m, int64_t rows_per_signal,
                                   uint64_t* sig, uint64_t value) {
  const int64_t n = (m + rows_per_signal - 1) / rows_per_signal;
  for (int64_t s = n - 1; s >= 0; --s) {
    if (threadIdx.x == 0) spin_ns(200000);
    __syncthreads();
    copy_rows(a, src, k, s * rows_per_signal, (s + 1) * rows_per_signal < m ? (s + 1) * rows_per_signal : m);
    if (threadIdx.x == 0) {
      __threadfence_system();
      mk::dev::st_release<mk::dev::Scope::Sys>(sig + s, value);
    }
  }
}

// Arrival queue: m-block order[i] arrives i-th.
__global__ void release_arrivals(uint16_t* a, const uint16_t* src, int64_t k, int64_t m, const int32_t* order,
                                 int nslots, int32_t* arrival, uint64_t* count) {
  for (int i = 0; i < nslots; ++i) {
    if (threadIdx.x == 0) spin_ns(200000);
    __syncthreads();
    const int64_t r0 = int64_t(order[i]) * mk::gemm::kBlockM;
    copy_rows(a, src, k, r0, r0 + mk::gemm::kBlockM < m ? r0 + mk::gemm::kBlockM : m);
    if (threadIdx.x == 0) {
      arrival[i] = order[i];
      __threadfence_system();
      mk::dev::st_release<mk::dev::Scope::Sys>(count, uint64_t(i + 1));
    }
  }
}

class GemmHooks : public GemmFixture {
 protected:
  struct Problem {
    int64_t m, n, k;
    Buf a, b, ref;
    Problem(int64_t m_, int64_t n_, int64_t k_, uint64_t seed)
        : m(m_), n(n_), k(k_), a(m_ * k_ * 2), b(n_ * k_ * 2), ref(m_ * n_ * 4) {
      random_bf16(a.p, m * k, seed);
      random_bf16(b.p, n * k, seed + 1);
    }
    mk::gemm::Operands ops(void* out) const {
      return mk::gemm::Operands{.a = a.p, .b = b.p, .out = out, .m = m, .n = n, .k = k};
    }
  };
  std::vector<uint16_t> host(const void* d, size_t n) {
    std::vector<uint16_t> h(n);
    EXPECT_EQ(cudaMemcpy(h.data(), d, n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
  std::vector<uint64_t> host64(const void* d, size_t n) {
    std::vector<uint64_t> h(n);
    EXPECT_EQ(cudaMemcpy(h.data(), d, n * 8, cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
  // The GEMM on one stream and, concurrently on another, the kernel that
  // `release` launches to deliver its rows; returns when both finished.
  template <typename F>
  void gemm_while_rows_arrive(const GemmParams& p, int ctas, F&& release) {
    const Stream s1, s2;
    mk::gemm::launch(p, ctas, {}, s1);
    release(s2);
    CUDA_OK(cudaDeviceSynchronize());
  }
  static float f32(uint16_t h) {
    uint32_t u = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

TEST_F(GemmHooks, EpilogueAddsIntoExistingOutput) {
  Problem pr(777, 512, 1024, 31);
  Buf out(pr.m * pr.n * 2);
  random_bf16(out.p, pr.m * pr.n, 33);
  bf16_to_f32<<<264, 256>>>(out.as<uint16_t>(), pr.ref.as<float>(), pr.m * pr.n);
  GemmParams p = mk::gemm::make_params(pr.ops(out.p), 0);
  p.epi.op = mk::gemm::EpiOp::AddBf16;
  mk::gemm::launch(p, p.num_compute, {}, nullptr);
  reference(pr.a.p, pr.b.p, pr.ref.as<float>(), pr.m, pr.n, pr.k, 1.f);
  CUDA_OK(cudaDeviceSynchronize());
  Check c = check(out.p, pr.n, pr.ref.as<float>(), pr.m, pr.n);
  EXPECT_EQ(c.nonfinite, 0u);
  EXPECT_LT(c.rel, 1e-2);
}

TEST_F(GemmHooks, TileMajorOutputWithPerTileSignals) {
  Problem pr(300, 512, 256, 41);
  const int mb = 3, nb = 2, tiles = mb * nb;
  const size_t tile_elems = size_t(mk::gemm::kBlockM) * mk::gemm::kBlockN;
  Buf out(tiles * tile_elems * 2), sig(tiles * 8 + 8);
  poison(out.p, tiles * tile_elems);
  cudaMemset(sig.p, 0, tiles * 8 + 8);
  GemmParams p = mk::gemm::make_params(pr.ops(out.p), 0);
  p.epi.layout = mk::gemm::OutLayout::TileMajor;
  p.epi.signal = mk::gemm::EpiSignal::PerTile;
  p.epi.signals[0] = sig.as<uint64_t>();
  p.epi.sig_base = 1;  // signal 0 must stay untouched
  p.epi.sig_delta = 5;
  mk::gemm::launch(p, p.num_compute, {}, nullptr);
  reference(pr.a.p, pr.b.p, pr.ref.as<float>(), pr.m, pr.n, pr.k);
  CUDA_OK(cudaDeviceSynchronize());
  auto s = host64(sig.p, tiles + 1);
  EXPECT_EQ(s[0], 0u);
  for (int t = 0; t < tiles; ++t) EXPECT_EQ(s[1 + t], 5u) << "tile " << t;
  auto o = host(out.p, tiles * tile_elems);
  std::vector<float> ref(pr.m * pr.n);
  CUDA_OK(cudaMemcpy(ref.data(), pr.ref.p, ref.size() * 4, cudaMemcpyDeviceToHost));
  double e = 0, r = 0;
  size_t poisoned_rows_ok = 0;
  for (int t = 0; t < tiles; ++t)
    for (int i = 0; i < mk::gemm::kBlockM; ++i)
      for (int j = 0; j < mk::gemm::kBlockN; ++j) {
        const int64_t row = (t / nb) * mk::gemm::kBlockM + i, col = (t % nb) * mk::gemm::kBlockN + j;
        const uint16_t v = o[t * tile_elems + i * mk::gemm::kBlockN + j];
        if (row >= pr.m) {
          poisoned_rows_ok += v == kPoison;
          continue;
        }
        ASSERT_TRUE(std::isfinite(f32(v))) << "tile " << t << " (" << i << ", " << j << ") unwritten";
        const double d = f32(v) - ref[row * pr.n + col];
        e += d * d;
        r += double(ref[row * pr.n + col]) * ref[row * pr.n + col];
      }
  EXPECT_LT(std::sqrt(e / r), 1e-2);
  EXPECT_EQ(poisoned_rows_ok, size_t(3 * mk::gemm::kBlockM - pr.m) * nb * mk::gemm::kBlockN)
      << "rows past m must not be written";
}

// The owner reduce reads its sources' partial tiles in fragment order
// (OutLayout::FragMajor, gemm_params.hpp), laid out here by the host from
// that definition: the final rows must be a b^T + the source, and the
// FragMajor destination itself is never written. m = 300: a partial last
// row-block, whose extra rows the source holds too (and must not leak).
TEST_F(GemmHooks, OwnerReduceAddsFragMajorSourceTiles) {
  namespace g = mk::gemm;
  Problem pr(300, 512, 256, 61);
  const int mb = 3, nb = 2, tiles = mb * nb;
  const size_t tile_elems = size_t(g::kBlockM) * g::kBlockN;
  std::vector<float> src(size_t(mb) * g::kBlockM * pr.n);  // the source's rows, RowMajor, past m too
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (float& v : src) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    const float r = (int(x % 2001) - 1000) * (8.0f / 1000.0f);
    uint32_t u;
    std::memcpy(&u, &r, 4);
    v = f32(static_cast<uint16_t>(u >> 16));  // bf16 (truncated): exact in the sums' inputs
  }
  std::vector<uint16_t> frag(tiles * tile_elems);
  for (int t = 0; t < tiles; ++t)
    for (int wg = 0; wg < 2; ++wg)
      for (int i = 0; i < 128; ++i)
        for (int u = 0; u < 16; ++u)
          for (int e = 0; e < 8; ++e) {
            const int j = 8 * u + e;  // acc[4 c + 2 h + q]: row 16 warp + lane/4 + 8 h, column 8 c + 2 (lane % 4) + q
            const int c = j / 4, h = (j % 4) / 2, q = j % 2;
            const int row = (t / nb) * g::kBlockM + wg * 64 + (i / 32) * 16 + (i % 32) / 4 + 8 * h;
            const int col = (t % nb) * g::kBlockN + 8 * c + 2 * (i % 4) + q;
            uint32_t bits;
            std::memcpy(&bits, &src[size_t(row) * pr.n + col], 4);
            frag[t * tile_elems + wg * (64 * g::kBlockN) + (128 * u + i) * 8 + e] = static_cast<uint16_t>(bits >> 16);
          }
  Buf part(tiles * tile_elems * 2), dest(tiles * tile_elems * 2), out(pr.m * pr.n * 2), sig(mb * 8), epoch(8);
  CUDA_OK(cudaMemcpy(part.p, frag.data(), frag.size() * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(pr.ref.p, src.data(), size_t(pr.m) * pr.n * 4, cudaMemcpyHostToDevice));
  poison(dest.p, tiles * tile_elems);
  poison(out.p, pr.m * pr.n);
  const std::vector<uint64_t> ones(mb, 1);
  CUDA_OK(cudaMemcpy(sig.p, ones.data(), mb * 8, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(epoch.p, 0, 8));
  GemmParams p = g::make_params(pr.ops(dest.p), 0);
  p.epi.layout = g::OutLayout::FragMajor;
  p.epi.rows_per_dest = mb * g::kBlockM;
  p.epi.own_mask = 1;
  p.epi.own_final = 0;
  p.epi.own_nsrc = 1;
  p.epi.own_slots = part.as<uint16_t>();
  p.epi.own_signals = sig.as<uint64_t>();
  p.epi.own_sig_stride = mb;
  p.epi.own_expect = 1;  // epoch 0: every signal must reach 1
  p.epi.own_out = out.p;
  p.epi.own_ldo = pr.n;
  p.load.epoch_counter = epoch.as<uint64_t>();
  g::launch(p, p.num_compute, {}, nullptr);
  reference(pr.a.p, pr.b.p, pr.ref.as<float>(), pr.m, pr.n, pr.k, 1.f);
  CUDA_OK(cudaDeviceSynchronize());
  Check c = check(out.p, pr.n, pr.ref.as<float>(), pr.m, pr.n);
  EXPECT_EQ(c.nonfinite, 0u);
  EXPECT_LT(c.rel, 1e-2);
  auto d = host(dest.p, tiles * tile_elems);
  size_t poisoned = 0;
  for (uint16_t v : d) poisoned += v == kPoison;
  EXPECT_EQ(poisoned, d.size()) << "the FragMajor destination of owner-final tiles must not be written";
  // Without the source the same launch misses by far more than the bound:
  // the check above sees the source.
  p.epi.own_nsrc = 0;
  g::launch(p, p.num_compute, {}, nullptr);
  CUDA_OK(cudaDeviceSynchronize());
  EXPECT_GT(check(out.p, pr.n, pr.ref.as<float>(), pr.m, pr.n).rel, 5e-2);
}

TEST_F(GemmHooks, RowsRoutedToDestinationsWithRowBlockSignals) {
  Problem pr(512, 512, 128, 51);
  const int64_t half = 256;
  Buf d0(half * pr.n * 2), d1(half * pr.n * 2), s0(8 * 8), s1(8 * 8);
  poison(d0.p, half * pr.n);
  poison(d1.p, half * pr.n);
  cudaMemset(s0.p, 0, 64);
  cudaMemset(s1.p, 0, 64);
  GemmParams p = mk::gemm::make_params(pr.ops(d0.p), 0);
  p.epi.out[1] = d1.p;
  p.epi.rows_per_dest = half;
  p.epi.signal = mk::gemm::EpiSignal::PerRowBlock;
  p.epi.signals[0] = s0.as<uint64_t>();
  p.epi.signals[1] = s1.as<uint64_t>();
  mk::gemm::launch(p, p.num_compute, {}, nullptr);
  reference(pr.a.p, pr.b.p, pr.ref.as<float>(), pr.m, pr.n, pr.k);
  CUDA_OK(cudaDeviceSynchronize());
  auto a = host64(s0.p, 4), b = host64(s1.p, 4);
  EXPECT_EQ(a[0], 2u);  // two column blocks per row-block
  EXPECT_EQ(a[1], 2u);
  EXPECT_EQ(a[2], 0u);
  EXPECT_EQ(a[3], 0u);
  EXPECT_EQ(b[0], 0u);
  EXPECT_EQ(b[1], 0u);
  EXPECT_EQ(b[2], 2u);
  EXPECT_EQ(b[3], 2u);
  Check c0 = check(d0.p, pr.n, pr.ref.as<float>(), half, pr.n);
  Check c1 = check(d1.p, pr.n, pr.ref.as<float>() + half * pr.n, half, pr.n);
  EXPECT_EQ(c0.nonfinite + c1.nonfinite, 0u);
  EXPECT_LT(c0.rel, 1e-2);
  EXPECT_LT(c1.rel, 1e-2);
}

// A is NaN until a concurrent kernel copies each chunk in and signals it.
TEST_F(GemmHooks, WaitBeforeLoadOnRowSignals) {
  Problem pr(1000, 512, 512, 61);
  const int64_t rps = 200;  // chunks straddle tiles
  Buf a(pr.m * pr.k * 2), out(pr.m * pr.n * 2), sig(8 * 8);
  poison(a.p, pr.m * pr.k);
  poison(out.p, pr.m * pr.n);
  cudaMemset(sig.p, 0, 64);
  reference(pr.a.p, pr.b.p, pr.ref.as<float>(), pr.m, pr.n, pr.k);
  CUDA_OK(cudaDeviceSynchronize());
  mk::gemm::Operands o = pr.ops(out.p);
  o.a = a.p;
  const int ctas = mk::gemm::num_sms() - 4;  // leave SMs for the releasing kernel
  GemmParams p = mk::gemm::make_params(o, ctas);
  p.load.kind = mk::gemm::LoadWait::RowSignal;
  p.load.signals = sig.as<uint64_t>();
  p.load.rows_per_signal = rps;
  p.load.expected = 7;
  gemm_while_rows_arrive(p, ctas, [&](cudaStream_t s) {
    release_row_chunks<<<1, 256, 0, s>>>(a.as<uint16_t>(), pr.a.as<uint16_t>(), pr.k, pr.m, rps, sig.as<uint64_t>(), 7);
  });
  Check c = check(out.p, pr.n, pr.ref.as<float>(), pr.m, pr.n);
  EXPECT_EQ(c.nonfinite, 0u) << "the GEMM loaded rows before their signal";
  EXPECT_LT(c.rel, 1e-2);
}

TEST_F(GemmHooks, ArrivalQueueOrder) {
  Problem pr(600, 512, 256, 71);  // 5 row-blocks, the last one partial
  const std::vector<int32_t> order = {3, 0, 4, 1, 2};
  Buf a(pr.m * pr.k * 2), out(pr.m * pr.n * 2), arrival(64), count(8), ord(64);
  poison(a.p, pr.m * pr.k);
  poison(out.p, pr.m * pr.n);
  cudaMemset(arrival.p, 0xFF, 64);
  cudaMemset(count.p, 0, 8);
  CUDA_OK(cudaMemcpy(ord.p, order.data(), order.size() * 4, cudaMemcpyHostToDevice));
  reference(pr.a.p, pr.b.p, pr.ref.as<float>(), pr.m, pr.n, pr.k);
  CUDA_OK(cudaDeviceSynchronize());
  mk::gemm::Operands o = pr.ops(out.p);
  o.a = a.p;
  const int ctas = mk::gemm::num_sms() - 4;
  GemmParams p = mk::gemm::make_params(o, ctas);
  p.sched.order = mk::sched::TileOrder::ArrivalQueue;
  p.sched.arrival = arrival.as<int32_t>();
  p.load.kind = mk::gemm::LoadWait::ArrivalCount;
  p.load.arrival_count = count.as<uint64_t>();
  p.load.arrival_base = 0;
  gemm_while_rows_arrive(p, ctas, [&](cudaStream_t s) {
    release_arrivals<<<1, 256, 0, s>>>(a.as<uint16_t>(), pr.a.as<uint16_t>(), pr.k, pr.m, ord.as<int32_t>(),
                                       int(order.size()), arrival.as<int32_t>(), count.as<uint64_t>());
  });
  Check c = check(out.p, pr.n, pr.ref.as<float>(), pr.m, pr.n);
  EXPECT_EQ(c.nonfinite, 0u) << "the GEMM loaded rows before they arrived";
  EXPECT_LT(c.rel, 1e-2);
}

TEST(GemmHooksChild, SignalThatNeverArrivesIsReportedNotAHang) {
  // The wait ends near MK_TIMEOUT_MS=300.
  mk::test::expect_child_failure("gemm_wait_timeout", {"CHILD ERROR", "role Compute", "timed out after",
                                                       "waiting on signal 5", "expected >= 9, seen 0",
                                                       "MK_TIMEOUT_MS"});
}

}  // namespace

// Child: the producer waits for signal 5 of the communicator's pool, which
// nobody raises; the kernel must trap after MK_TIMEOUT_MS and the host error
// must say who waited for what.
int run_gemm_child_scenario(const char* name) {
  if (std::string(name) != "gemm_wait_timeout") {
    std::printf("unknown scenario %s\n", name);
    return 2;
  }
  return mk::test::expect_device_failure("gemm with a load hook", [&]() -> mk::Communicator& {
    mk::Communicator& c = mk::test::comm();
    const int64_t m = 256, n = 256, k = 128;
    void *a = nullptr, *b = nullptr, *out = nullptr;
    cudaMalloc(&a, m * k * 2);
    cudaMalloc(&b, n * k * 2);
    cudaMalloc(&out, m * n * 2);
    GemmParams p = mk::gemm::make_params(mk::gemm::Operands{.a = a, .b = b, .out = out, .m = m, .n = n, .k = k}, 0);
    p.has_ctx = 1;
    p.ctx = c.device_ctx();
    p.load.kind = mk::gemm::LoadWait::RowSignal;
    p.load.signals = p.ctx.signals + 5;
    p.load.rows_per_signal = 1 << 20;
    p.load.expected = 9;
    mk::gemm::launch(p, p.num_compute, {}, nullptr);
    return c;
  });
}
