// Is racecheck's one report in gemm_ar_kernel's claim slot (write at
// claim_next's STS, read at its LDS, 8 hazards, once or twice a run: session
// 34, bench/results/compute-sanitizer-20261204.md) the tool's, or the code's?
// This kernel runs ar_gather's loop alone, with the project's own
// roles::claim_next and dev::BulkCopier on the same shared-memory layout
// (the bulk stages, their barriers, the claim slot after them): 132 CTAs of
// 384 threads claim pieces of a buffer and copy them. Mode 1 first runs what
// gemm_ar's compute CTAs do before the gather (every thread writes the
// stages, fence.proxy.async, one __syncthreads); mode 2 first splits the
// registers as run_compute does (setmaxnreg: 56 for warpgroup 0, 224 for the
// others); mode 3 also keeps threads 0 and 32 busy alone for 20 us first
// (run_compute's producer and storer end last, their warps' other lanes
// already at gemm_ar_kernel's barrier); mode 4 is mode 3 with a __syncwarp()
// before the barriers. Then every byte is checked.
//   nvcc -I . -I include -std=c++20 --expt-relaxed-constexpr \
//     -gencode=arch=compute_90a,code=sm_90a -o .carry/claim_race_probe tools/wip/claim_race_probe.cu
//   compute-sanitizer --tool racecheck .carry/claim_race_probe MODE [ROUNDS, default 3]   (modes 0-4)
// Session 35 (modes 0 and 1, bench/results/raw-20261204/s35/a): no report at
// the claim slot; only write-write pairs at the three bulk copies (UBLKCP:
// the tool does not model their mbarrier/wait_group ordering).
// No report: the gather's loop alone is clean, and the report needs what
// else gemm_ar_kernel runs (the GEMM engine's warp roles, setmaxnreg).
// Session 51's guess (modes 3, 4): the one place a claim follows the GEMM
// engine is gemm_ar_kernel's run(), where warps 0 and 1 reach the CTA
// barrier after run_compute split (threads 0 and 32 late); racecheck may
// place a diverged warp's late lane in the next barrier interval, which would
// give one 8-byte report a launch, as seen. Mode 3 reporting at the slot and
// mode 4 not would say so. Session 52 (one H100,
// bench/results/session52-gpu-20261206.md): 0 hazards in both modes, every
// byte right. The guess fails; the report stays unexplained.
#include <cstring>
#include <vector>

#include "device/bulk_copy.cuh"
#include "device/gemm/sm90.cuh"
#include "device/roles/claims.hpp"
#include "probe_common.cuh"

using namespace mk;

__global__ void __launch_bounds__(384, 1) claim_copy_kernel(DeviceCtx ctx, uint64_t* counter, char* dst, const char* src, int64_t items,
                                  int64_t part, int mode) {
  extern __shared__ __align__(128) char smem[];
  if (mode >= 2) {  // as gemm::run_compute splits the warpgroups' registers (the producer's 56, the consumers' 224)
    if (threadIdx.x / 128 == 0)
      dev::sm90::regs_dealloc<56>();
    else
      dev::sm90::regs_alloc<224>();
  }
  if (mode >= 3) {  // as run_compute's warp roles end: the producer (thread 0) and the storer (32) finish last,
    // alone in their warps, whose other lanes go on to the barriers below
    if (threadIdx.x == 0 || threadIdx.x == 32) {
      const uint64_t t0 = dev::globaltimer();
      while (dev::globaltimer() - t0 < 20000) {
      }
    }
    if (mode == 4) __syncwarp();  // the candidate mend: each warp converged before the CTA barrier
  }
  if (mode >= 1) {  // as gemm_ar's compute CTAs leave the GEMM: stages written, proxies fenced, one barrier
    for (size_t i = threadIdx.x; i < dev::BulkStages::kSmemBytes / 4; i += blockDim.x)
      reinterpret_cast<uint32_t*>(smem)[i] = static_cast<uint32_t>(i);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
  }  // (mode 0: a Gather CTA, no barrier before its first claim; sessions 34-35 ran modes 0-2 with a second one)
  auto* claim = reinterpret_cast<volatile int64_t*>(smem + dev::BulkStages::kSmemBytes);
  dev::BulkCopier<> copier(smem);
  for (;;) {
    const int64_t item = roles::claim_next(counter, claim);
    if (item >= items) break;
    copier.copy<dev::Report::Quiet>(ctx, dst + item * part, src + item * part, static_cast<size_t>(part), 0, 1, 0);
  }
}

int main(int argc, char** argv) {
  const int mode = argc > 1 ? atoi(argv[1]) : 0;
  const int rounds = argc > 2 ? atoi(argv[2]) : 3;
  const int64_t items = 1024, part = 48 << 10, bytes = items * part;
  const size_t shared = dev::BulkStages::kSmemBytes + 16;  // roles::kArGatherSmem
  DeviceCtx ctx{};
  ctx.timeout_ns = 30ull * 1000000000ull;
  ctx.host_abort_poll_ns = 100000000ull;
  CK(cudaMalloc(&ctx.abort_dev, 4));
  CK(cudaMemset(ctx.abort_dev, 0, 4));
  CK(cudaHostAlloc(&ctx.abort_host, 4, cudaHostAllocMapped));
  *ctx.abort_host = 0;
  CK(cudaHostAlloc(&ctx.diag, sizeof(WaitDiag), cudaHostAllocMapped));
  std::memset(ctx.diag, 0, sizeof(WaitDiag));
  CK(cudaMalloc(&ctx.diag_claim, 4));
  CK(cudaMemset(ctx.diag_claim, 0, 4));
  char *src = nullptr, *dst = nullptr;
  uint64_t* counter = nullptr;
  CK(cudaMalloc(&src, bytes));
  CK(cudaMalloc(&dst, bytes));
  CK(cudaMalloc(&counter, 8));
  std::vector<unsigned char> h(bytes), back(bytes);
  for (int64_t i = 0; i < bytes; ++i) h[i] = static_cast<unsigned char>((i * 2654435761u) >> 13);
  CK(cudaMemcpy(src, h.data(), bytes, cudaMemcpyHostToDevice));
  CK(cudaFuncSetAttribute(claim_copy_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)));
  for (int round = 0; round < rounds; ++round) {
    CK(cudaMemset(counter, 0, 8));
    CK(cudaMemset(dst, 0, bytes));
    claim_copy_kernel<<<132, 384, shared>>>(ctx, counter, dst, src, items, part, mode);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(back.data(), dst, bytes, cudaMemcpyDeviceToHost));
    if (std::memcmp(back.data(), h.data(), bytes) != 0) {
      printf("mode %d round %d: the copy differs\n", mode, round);
      return 1;
    }
  }
  printf("mode %d: %d rounds of %lld pieces copied right\n", mode, rounds, static_cast<long long>(items));
  return 0;
}
