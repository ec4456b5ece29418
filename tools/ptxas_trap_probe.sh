#!/usr/bin/env bash
# Shows the ptxas behaviour behind the attention engine's consumer failure
# path (device/attention/attn_engine.cuh, ConsumerStop): in a
# warp-specialised kernel (384 threads, setmaxnreg 24 / 240), a region that
# contains a trap is held to the launch's register count (168) and spills,
# while the same region without one, or with the trap after the branches
# join, uses what setmaxnreg gives it. CPU only (nvcc, ptxas -v).
set -euo pipefail
cd "$(dirname "$0")/.."
nvcc=nvcc
[ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/probe.cu" <<'CU'
#include "device/attention/attn_mma.cuh"
#include "device/gemm/sm90.cuh"
using namespace mk::dev::sm90;
__global__ void __launch_bounds__(384, 1) probe(float* out, const float* in, int n) {
  extern __shared__ __align__(1024) uint8_t smem[];
  __shared__ int failed;
  const int wg = threadIdx.x / 128;
  if (threadIdx.x == 0) failed = 0;
  __syncthreads();
  if (wg == 0) {
    regs_dealloc<24>();
  } else {
    regs_alloc<240>();
    float acc[64], a[110];
#pragma unroll
    for (int i = 0; i < 110; ++i) a[i] = in[i * 384 + threadIdx.x];
    for (int it = 0; it < n; ++it) {
#if MODE == 1
      if (in[it] == 12345.f) __trap();
#elif MODE == 2
      if (in[it] == 12345.f) { failed = 1; asm volatile("exit;"); }
#endif
      wgmma_fence();
      const uint64_t d0 = wgmma_desc_sw128(smem), d1 = wgmma_desc_sw128(smem + 16384);
#pragma unroll
      for (int kk = 0; kk < 8; ++kk) wgmma_m64n128k16_ss(acc, d0 + 2 * kk, d1 + 2 * kk, kk != 0);
      wgmma_commit();
      wgmma_wait<0>();
#pragma unroll
      for (int i = 0; i < 64; ++i) fence_operand(acc[i]);
#pragma unroll
      for (int i = 0; i < 110; ++i) a[i] = a[i] * acc[i % 64] + 1.f;
    }
    float s = 0;
#pragma unroll
    for (int i = 0; i < 110; ++i) s += a[i] + acc[i % 64];
    out[threadIdx.x] = s;
  }
  __syncthreads();
  if (failed) __trap();
}
CU
for mode in 0 1 2; do
  label=("no trap in the consumer branch" "a trap inside the consumer branch" "exit inside, trap after the join")
  spill=$("$nvcc" -I include -I . -std=c++20 --expt-relaxed-constexpr -O3 -DMODE=$mode \
          -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -c "$tmp/probe.cu" -o /dev/null 2>&1 |
          grep -oE "[0-9]+ bytes spill stores" | head -1)
  echo "${label[$mode]}: ${spill}"
done
