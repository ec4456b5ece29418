// mkernel GEMM engine against cuBLAS, same run, same inputs (issue:
// gemm-engine): MEASURING.md shapes, then throughput vs the CTAs the compute
// role gets, then time vs K at a fixed tile count (the engine's fixed cost
// per tile). Calls are interleaved so both see the same clocks.
#include <cublas_v2.h>

#include <chrono>
#include <functional>
#include <utility>
#include <vector>

#include "bench/baselines/cublas_util.hpp"
#include "bench/bench.hpp"
#include "device/gemm/gemm_params.hpp"
#include "mkernel/gemm.hpp"

namespace mkb {


namespace {

// The launch floor under the GEMM's host cost: kernels that do nothing, with
// 16 bytes of parameters and with as many as the GEMM kernel's.
struct GemmSizedParams {
  char bytes[sizeof(mk::gemm::GemmParams) + 24];
};
__global__ void empty_small(int4) {}
__global__ void empty_gemm_sized(const __grid_constant__ GemmSizedParams) {}

struct Shape {
  const char* what;
  int m, n, k;
};

struct Inputs {
  Rotating a, b;
  void* c = nullptr;
  Inputs(const Shape& s, cudaStream_t st) : a(size_t(s.m) * s.k * 2), b(size_t(s.n) * s.k * 2) {
    for (int i = 0; i < a.copies(); ++i) fill_random_bf16(a.get(i), size_t(s.m) * s.k, 100 + i, st);
    for (int i = 0; i < b.copies(); ++i) fill_random_bf16(b.get(i), size_t(s.n) * s.k, 200 + i, st);
    MKB_CUDA(cudaMalloc(&c, size_t(s.m) * s.n * 2));
  }
  ~Inputs() { cudaFree(c); }
};

double tflops(const Shape& s, double ms) { return 2.0 * s.m * s.n * s.k / (ms * 1e9); }

std::function<void(int)> mk_call(Inputs& in, const Shape& s, int ctas, mk::GemmOrder order, int swizzle,
                                 cudaStream_t st) {
  return [&in, s, ctas, order, swizzle, st](int i) {
    mk::gemm_bf16(mk::GemmArgs{.a = in.a.get(i + 100), .b = in.b.get(i + 100), .out = in.c, .m = s.m, .n = s.n,
                               .k = s.k, .num_compute_ctas = ctas, .order = order, .swizzle = swizzle},
                  st);
  };
}

}  // namespace

void bench_gemm(BenchContext& bc) {
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) mk::fail("cublasCreate failed");
  int sms = 0, dev = 0;
  MKB_CUDA(cudaGetDevice(&dev));
  MKB_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));

  Table t{"mkernel GEMM engine vs cuBLAS (bf16, fp32 accumulate, same run, same inputs)",
          {"shape", "M", "N", "K", "cuBLAS ms", "mkernel ms", "cuBLAS TFLOP/s", "mkernel TFLOP/s", "mkernel / cuBLAS",
           "row-major / cuBLAS", "swizzle 16 / cuBLAS"},
          {},
          "Target: mkernel >= 90% of cuBLAS at every M >= 2048. mkernel: default tile order; the last two "
          "columns are other orders. Calls interleaved (one of each per round, in a balanced order) so "
          "clocks and temperature are shared. Tiles 128x256x64, 4 stages, all SMs computing. Inputs rotate through "
          ">= 256 MiB (no L2 reuse across calls); random bf16 in [-1, 1)."};
  std::vector<Shape> shapes = {{"square", 8192, 8192, 8192}};
  std::vector<int> ms = {1024, 2048, 4096, 8192, 16384};
  if (bc.quick) ms = {4096};
  for (int m : ms) shapes.push_back({"AG+GEMM (N=28672/2)", m, 14336, 8192});
  for (int m : ms) shapes.push_back({"GEMM+RS (K=28672/2)", m, 8192, 14336});
  for (const auto& s : shapes) {
    Inputs in(s, bc.stream);
    auto st = time_interleaved(
        &bc.comm->bootstrap(), bc.stream, bc.opts,
        {[&](int i) { gemm_bf16_tn(h, s.m, s.n, s.k, in.a.get(i + 100), in.b.get(i + 100), in.c, bc.stream); },
         mk_call(in, s, 0, mk::GemmOrder::Swizzled, 0, bc.stream),
         mk_call(in, s, 0, mk::GemmOrder::RowMajor, 0, bc.stream),
         mk_call(in, s, 0, mk::GemmOrder::Swizzled, 16, bc.stream)});
    t.rows.push_back({s.what, std::to_string(s.m), std::to_string(s.n), std::to_string(s.k), fmt(st[0].median_ms),
                      fmt(st[1].median_ms), fmt(tflops(s, st[0].median_ms), 1), fmt(tflops(s, st[1].median_ms), 1),
                      fmt(100.0 * st[0].median_ms / st[1].median_ms, 1) + "%",
                      fmt(100.0 * st[0].median_ms / st[2].median_ms, 1) + "%",
                      fmt(100.0 * st[0].median_ms / st[3].median_ms, 1) + "%"});
  }
  bc.report->add(t);

  // Proportionality: the compute role on a subset of the SMs.
  const Shape sq{"square", 8192, 8192, 8192};
  Table r{"GEMM engine throughput vs compute CTAs (8192^3)",
          {"compute CTAs", "ms", "TFLOP/s", "TFLOP/s per CTA", "vs all SMs, per CTA"},
          {},
          "Calls interleaved (one of each CTA count per round). Proportional scaling keeps TFLOP/s per CTA "
          "constant; 1024 tiles divide unevenly into some CTA counts (last wave partly idle), and fewer busy SMs "
          "run at higher clocks (power)."};
  {
    Inputs in(sq, bc.stream);
    std::vector<int> counts;
    for (int c : {sms, 120, 100, 66, 33, 16})
      if (c <= sms) counts.push_back(c);
    std::vector<std::function<void(int)>> calls;
    for (int c : counts) calls.push_back(mk_call(in, sq, c, mk::GemmOrder::Swizzled, 0, bc.stream));
    auto st = time_interleaved(&bc.comm->bootstrap(), bc.stream, bc.opts, calls);
    const double per_cta_all = tflops(sq, st[0].median_ms) / counts[0];
    for (size_t i = 0; i < counts.size(); ++i) {
      const double tf = tflops(sq, st[i].median_ms);
      r.rows.push_back({std::to_string(counts[i]), fmt(st[i].median_ms), fmt(tf, 1), fmt(tf / counts[i], 2),
                        fmt(100.0 * (tf / counts[i]) / per_cta_all, 1) + "%"});
    }
  }
  bc.report->add(r);

  // Fixed cost per tile: the AG shape's 1792 tiles (the busiest CTA runs
  // 14) at four depths of K; T(K) = a + b K / 64 by least squares, so a / 14
  // is what a tile costs apart from its K blocks (epilogue, pipeline drain
  // and refill, scheduling). cuBLAS's line in the same rounds for reference
  // (its tiles differ: its intercept is not per tile).
  {
    const int m = 4096, n = 14336;
    const int tiles = (m / mk::gemm::kBlockM) * (n / mk::gemm::kBlockN);
    const int waves = (tiles + sms - 1) / sms;
    Table pt{"GEMM engine: time vs K at a fixed tile count (M = 4096, N = 14336)",
             {"K", "cuBLAS ms", "mkernel ms", "mkernel / cuBLAS"},
             {},
             "Calls interleaved. Least-squares line T = a + b K/64 over the rows; the engine's busiest CTA runs " +
                 std::to_string(waves) + " of the " + std::to_string(tiles) +
                 " tiles, so a / that is its fixed cost per tile (epilogue, pipeline drain and refill, "
                 "scheduling), b / that its time per K block of a tile."};
    std::vector<double> ks, t_cublas, t_mk;
    for (int k : {1024, 2048, 4096, 8192}) {
      const Shape s{"AG tiles", m, n, k};
      Inputs in(s, bc.stream);
      auto st = time_interleaved(
          &bc.comm->bootstrap(), bc.stream, bc.opts,
          {[&](int i) { gemm_bf16_tn(h, s.m, s.n, s.k, in.a.get(i + 100), in.b.get(i + 100), in.c, bc.stream); },
           mk_call(in, s, 0, mk::GemmOrder::Swizzled, 0, bc.stream)});
      ks.push_back(k / 64.0);
      t_cublas.push_back(st[0].median_ms);
      t_mk.push_back(st[1].median_ms);
      pt.rows.push_back({std::to_string(k), fmt(st[0].median_ms), fmt(st[1].median_ms),
                         fmt(100.0 * st[0].median_ms / st[1].median_ms, 1) + "%"});
    }
    auto fit = [&](const std::vector<double>& t) {  // {a, b} in ms
      const double nn = double(ks.size());
      double sx = 0, sy = 0, sxx = 0, sxy = 0;
      for (size_t i = 0; i < ks.size(); ++i) {
        sx += ks[i];
        sy += t[i];
        sxx += ks[i] * ks[i];
        sxy += ks[i] * t[i];
      }
      const double b = (nn * sxy - sx * sy) / (nn * sxx - sx * sx);
      return std::pair<double, double>{(sy - b * sx) / nn, b};
    };
    const auto [am, bm] = fit(t_mk);
    const auto [ac, bcu] = fit(t_cublas);
    pt.rows.push_back({"fit a (ms)", fmt(ac, 4), fmt(am, 4), ""});
    pt.rows.push_back({"fit b (us per K block)", fmt(1e3 * bcu, 3), fmt(1e3 * bm, 3), ""});
    pt.rows.push_back({"mkernel: us per tile (fixed / per K block)", "",
                       fmt(1e3 * am / waves, 2) + " / " + fmt(1e3 * bm / waves, 3), ""});
    bc.report->add(pt);
  }

  // Host cost of one call (validation, descriptors, launch), the baseline of
  // bench/python_overhead.py, same settings: 64 back-to-back calls of a 64^3
  // GEMM on 8 compute CTAs (its GPU time stays below its host time, so the
  // host never waits), median of 51 rounds.
  {
    const Shape tiny{"tiny", 64, 64, 64};
    Inputs in(tiny, bc.stream);
    auto gemm = mk_call(in, tiny, 8, mk::GemmOrder::Swizzled, 0, bc.stream);
    auto host_us = [&](const std::function<void()>& call) {
      call();
      MKB_CUDA(cudaStreamSynchronize(bc.stream));
      std::vector<double> us;
      for (int round = 0; round < 51; ++round) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < 64; ++i) call();
        us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / 64);
        MKB_CUDA(cudaStreamSynchronize(bc.stream));
      }
      return median(us);
    };
    const GemmSizedParams big{};
    Table hc{"GEMM host cost per call (C++ API, mk::gemm_bf16)", {"call", "host us per call"}, {},
             "Median over 51 rounds of 64 back-to-back calls, 64x64x64 bf16 on 8 compute CTAs. Compare "
             "bench/python_overhead.py. The empty kernels (8 CTAs of 384 threads, no shared memory) are the "
             "launch floor, with " + std::to_string(sizeof(int4)) + " and " + std::to_string(sizeof(big)) +
             " bytes of parameters (the GEMM kernel's)."};
    hc.rows.push_back({"mk::gemm_bf16 (validate, TMA descriptors, launch)", fmt(host_us([&] { gemm(0); }), 2)});
    hc.rows.push_back({"empty kernel, 16-byte parameters (launch only)",
                       fmt(host_us([&] { empty_small<<<8, 384, 0, bc.stream>>>(int4{}); }), 2)});
    hc.rows.push_back({"empty kernel, GEMM-sized parameters (launch only)",
                       fmt(host_us([&] { empty_gemm_sized<<<8, 384, 0, bc.stream>>>(big); }), 2)});
    bc.report->add(hc);
  }
  cublasDestroy(h);
}

}  // namespace mkb
