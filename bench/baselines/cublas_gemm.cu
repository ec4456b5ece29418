// cuBLAS bf16 GEMM baseline: out (M x N) = A (M x K) * B^T, B (N x K) as
// torch.nn.Linear stores it; fp32 accumulate. Shapes from MEASURING.md:
// 8192^3 and the tensor-parallel widths (hidden 8192, FFN 28672 over 2 ranks).
#include <cublas_v2.h>

#include "bench/baselines/cublas_util.hpp"
#include "bench/bench.hpp"

namespace mkb {

namespace {

struct Shape {
  const char* what;
  int m, n, k;
};
}  // namespace

// Row-major C = A B^T is column-major C^T = B A^T: gemm(T, N) with B first.
void gemm_bf16_tn(cublasHandle_t h, int m, int n, int k, const void* a, const void* b, void* c, cudaStream_t s) {
  const float alpha = 1.f, beta = 0.f;
  MKB_CUBLAS(cublasSetStream(h, s));
  MKB_CUBLAS(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, b, CUDA_R_16BF, k, a, CUDA_R_16BF, k, &beta,
                          c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void bench_gemm_cublas(BenchContext& bc) {
  auto& c = *bc.comm;
  Table t{"cuBLAS bf16 GEMM (one GPU per rank, all ranks at once)",
          {"shape", "M", "N", "K", "ms", "TFLOP/s", "spread"},
          {},
          "Ceiling measured here: ~789 TFLOP/s at 8192^3. A and B rotate through >= 256 MiB so L2 never holds "
          "them; random bf16 in [-1, 1)."};
  std::vector<Shape> shapes = {{"square", 8192, 8192, 8192}};
  std::vector<int> ms = {1024, 2048, 4096, 8192, 16384};
  if (bc.quick) ms = {4096};
  for (int m : ms) shapes.push_back({"AG+GEMM (N=28672/2)", m, 14336, 8192});
  for (int m : ms) shapes.push_back({"GEMM+RS (K=28672/2)", m, 8192, 14336});
  cublasHandle_t h;
  MKB_CUBLAS(cublasCreate(&h));
  for (const auto& s : shapes) {
    Rotating A(size_t(s.m) * s.k * 2), B(size_t(s.n) * s.k * 2);
    for (int i = 0; i < A.copies(); ++i) fill_random_bf16(A.get(i), size_t(s.m) * s.k, 100 + i, bc.stream);
    for (int i = 0; i < B.copies(); ++i) fill_random_bf16(B.get(i), size_t(s.n) * s.k, 200 + i, bc.stream);
    void* C = nullptr;
    MKB_CUDA(cudaMalloc(&C, size_t(s.m) * s.n * 2));
    auto st = time_calls(&c.bootstrap(), bc.stream, bc.opts,
                         [&](int i) { gemm_bf16_tn(h, s.m, s.n, s.k, A.get(i + 100), B.get(i + 100), C, bc.stream); });
    double tflops = 2.0 * s.m * s.n * s.k / (st.median_ms * 1e9);
    t.rows.push_back({s.what, std::to_string(s.m), std::to_string(s.n), std::to_string(s.k), fmt(st.median_ms),
                      fmt(tflops, 1), fmt(st.spread, 2)});
    cudaFree(C);
  }
  cublasDestroy(h);
  bc.report->add(t);
}

}  // namespace mkb
