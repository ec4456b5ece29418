// mkernel: the standalone GEMM kernel: the engine's Compute role on CTAs
// [0, num_compute), a Test role (a plain copy) on the rest. One
// instantiation; fused ops have kernels of their own that call the same
// engine from their Compute role.
#include <cuda_runtime_api.h>

#include <atomic>

#include "device/gemm/gemm_engine.cuh"
#include "mkernel/error.hpp"
#include "src/ops/gemm/gemm_host.hpp"

namespace mk::gemm {

namespace {

__device__ __forceinline__ void test_role(const TestRoleParams& t, int cta, int ncta) {
  const uint4* src = static_cast<const uint4*>(t.src);
  uint4* dst = static_cast<uint4*>(t.dst);
  const size_t n = t.bytes / 16;
  for (size_t i = size_t(cta) * blockDim.x + threadIdx.x; i < n; i += size_t(ncta) * blockDim.x) dst[i] = src[i];
}

__global__ void __launch_bounds__(kThreads, 1)
    gemm_kernel(const __grid_constant__ GemmParams p, const TestRoleParams test) {
  extern __shared__ uint8_t smem[];
  const int cta = blockIdx.x;
  const Role role = cta < p.num_compute ? Role::Compute : Role::Test;
  switch (role) {
    case Role::Compute:
      run_compute(p, smem, cta);
      break;
    default:
      test_role(test, cta - p.num_compute, gridDim.x - p.num_compute);
      break;
  }
}

}  // namespace

void launch(const GemmParams& p, int grid, const TestRoleParams& test, cudaStream_t stream) {
  // The shared-memory opt-in is per device.
  static std::atomic<uint64_t> attr_set{0};
  int dev = 0;
  MK_CUDA_CHECK(cudaGetDevice(&dev));
  if (dev < 64 && !(attr_set.load() & (uint64_t(1) << dev))) {
    MK_CUDA_CHECK(cudaFuncSetAttribute(gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(kSmemBytes)));
    attr_set.fetch_or(uint64_t(1) << dev);
  }
  if (p.num_compute < 1 || grid < p.num_compute)
    fail("gemm: launch of ", grid, " CTAs with ", p.num_compute, " compute CTAs (need 1 <= compute <= grid)");
  gemm_kernel<<<grid, kThreads, kSmemBytes, stream>>>(p, test);
  MK_CUDA_CHECK(cudaGetLastError());
}

}  // namespace mk::gemm
