// mkernel: the one-GPU attention kernel: every CTA runs the engine's compute
// role (device/attention/attn_engine.cuh). One instantiation per head
// dimension; the ring-attention op has a kernel of its own that calls the
// same engine beside its communication roles.
#include <cuda_runtime_api.h>


#include "device/attention/attn_engine.cuh"
#include "mkernel/error.hpp"
#include "src/ops/attention/attn_host.hpp"
#include "src/ops/gemm/gemm_host.hpp"

namespace mk::attn {

namespace {

template <int D>
__global__ void __launch_bounds__(kThreads, 1) attention_kernel(const __grid_constant__ AttnParams p) {
  extern __shared__ uint8_t smem[];
  run_compute<D, kBlockNOneGpu>(p, smem, blockIdx.x, gridDim.x);
}

}  // namespace

void launch(const AttnParams& p, int grid, cudaStream_t stream) {
  if (p.block_n != kBlockNOneGpu)
    fail("attention: internal: parameters for key blocks of ", p.block_n, ", the kernel's are ", kBlockNOneGpu);
  const int64_t units = int64_t(p.batch) * p.heads * p.q_tiles;
  if (units < grid) grid = static_cast<int>(units);
  if (p.head_dim == 64) {
    gemm::allow_engine_smem(reinterpret_cast<const void*>(attention_kernel<64>), Geom<64, kBlockNOneGpu>::kSmemBytes);
    attention_kernel<64><<<grid, kThreads, Geom<64, kBlockNOneGpu>::kSmemBytes, stream>>>(p);
  } else {
    gemm::allow_engine_smem(reinterpret_cast<const void*>(attention_kernel<128>), Geom<128, kBlockNOneGpu>::kSmemBytes);
    attention_kernel<128><<<grid, kThreads, Geom<128, kBlockNOneGpu>::kSmemBytes, stream>>>(p);
  }
  MK_CUDA_CHECK(cudaGetLastError());
}

}  // namespace mk::attn
