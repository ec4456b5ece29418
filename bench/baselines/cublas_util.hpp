// mkbench: cuBLAS error check and the plain bf16 GEMM baseline
// (bench/baselines/cublas_gemm.cu) shared by the benchmarks.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "mkernel/error.hpp"

#define MKB_CUBLAS(x)                                                             \
  do {                                                                            \
    cublasStatus_t s_ = (x);                                                      \
    if (s_ != CUBLAS_STATUS_SUCCESS) mk::fail(#x, " failed: status ", int(s_)); \
  } while (0)

namespace mkb {

// out [m x n] = a [m x k] b^T, b [n x k] (nn.Linear layout), bf16, fp32 accumulate.
void gemm_bf16_tn(cublasHandle_t h, int m, int n, int k, const void* a, const void* b, void* c, cudaStream_t s);

}  // namespace mkb
