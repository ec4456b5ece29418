// copy_v16 and the bulk copier on one GPU: every size/alignment combination
// is copied byte for byte, nothing outside the destination range is touched;
// one copier's copies one after another.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "device/bulk_copy.cuh"
#include "device/peer_copy.cuh"
#include "tests/test_comm.hpp"

namespace {

#define CUDA_OK(x) ASSERT_EQ(static_cast<int>(x), 0) << #x << ": " << cudaGetErrorString(x)

template <bool kNc>
__global__ void copy_grid(char* dst, const char* src, size_t bytes) {
  mk::dev::copy_v16<kNc>(dst, src, bytes, blockIdx.x * blockDim.x + threadIdx.x,
                         static_cast<size_t>(gridDim.x) * blockDim.x);
}

__global__ void copy_bulk(mk::DeviceCtx ctx, char* dst, const char* src, size_t bytes, mk::dev::BulkLayout layout) {
  extern __shared__ __align__(128) char smem[];
  mk::dev::BulkCopier<> copier(smem);
  copier.copy(ctx, dst, src, bytes, blockIdx.x, gridDim.x, 1, layout);
}

__global__ void copy_warp(char* dst, const char* src, size_t bytes) {
  if (threadIdx.x < 32) mk::dev::copy_v16<false>(dst, src, bytes, threadIdx.x, 32);
}

// As the delivery agent copies (device/net/agent.cuh): one block, the partial
// last group's loads in flight too.
__global__ void copy_block_tail(char* dst, const char* src, size_t bytes) {
  mk::dev::copy_v16<false, 8, true>(dst, src, bytes, threadIdx.x, blockDim.x);
}

// Copies one after another by one copier per CTA, sizes.n of them, each
// its share (layout) of the next sizes.b[i] bytes (as ar_gather and
// rs_claimed take items): kClaimed puts a CTA-wide barrier between them, as
// their claims do; otherwise thread 0 alone loops (as the AllGather push
// does). The sizes differ, so each stage's phase carries over unevenly (a
// stage loaded twice in one copy, stages a copy leaves unused, CTAs with no
// chunk of a copy): a wrong parity lets a store read a stage before its load
// lands. Under racecheck (tools/sanitize_gpu.sh racecheck gpu) it is also the
// copier's hazard check.
struct CopySizes {
  size_t b[8];
  int n;
};
template <bool kClaimed>
__global__ void copy_bulk_calls(mk::DeviceCtx ctx, char* dst, const char* src, CopySizes sizes,
                                mk::dev::BulkLayout layout) {
  extern __shared__ __align__(128) char smem[];
  mk::dev::BulkCopier<> copier(smem);
  size_t off = 0;
  for (int i = 0; i < sizes.n; ++i) {
    if (kClaimed) __syncthreads();
    copier.copy(ctx, dst + off, src + off, sizes.b[i], blockIdx.x, gridDim.x, 1, layout);
    off += sizes.b[i];
  }
}

struct Case {
  size_t bytes, src_off, dst_off;
  int mode;  // 0 grid coherent, 1 grid nc, 2 one warp, 3 one block as the agent, 4/5 bulk round-robin/contiguous (16 B aligned)
};

}  // namespace

TEST(PeerCopy, EverySizeAndAlignmentByteForByte) {
  const size_t cap = (8u << 20) + 64;
  CUDA_OK(cudaFuncSetAttribute(copy_bulk, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                static_cast<int>(mk::dev::BulkStages::kSmemBytes)));
  char *src = nullptr, *dst = nullptr;
  CUDA_OK(cudaMalloc(&src, cap));
  CUDA_OK(cudaMalloc(&dst, cap));
  std::mt19937_64 rng(12345);
  std::vector<char> h_src(cap), h_dst(cap);
  std::vector<Case> cases;
  for (size_t bytes : {size_t(0), size_t(1), size_t(15), size_t(16), size_t(17), size_t(255), size_t(4096),
                       size_t(4099), size_t(1 << 20) + 5, size_t(8 << 20)})
    for (size_t so : {0, 1, 3, 16})  // (3, 3): both off 16-byte boundaries by the same amount
      for (size_t d : {0, 3, 16})
        for (int mode : {0, 1, 2, 3, 4, 5}) {
          if ((mode == 2 || mode == 3) && bytes > (1 << 20) + 5) continue;
          if (mode >= 4 && (so % 16 || d % 16 || bytes % 16)) continue;
          cases.push_back({bytes, so, d, mode});
        }
  for (auto& b : h_src) b = static_cast<char>(rng());
  CUDA_OK(cudaMemcpy(src, h_src.data(), cap, cudaMemcpyHostToDevice));
  for (const Case& c : cases) {
    CUDA_OK(cudaMemset(dst, 0x5A, cap));  // poison
    if (c.mode == 0) copy_grid<false><<<132, 512>>>(dst + c.dst_off, src + c.src_off, c.bytes);
    if (c.mode == 1) copy_grid<true><<<7, 96>>>(dst + c.dst_off, src + c.src_off, c.bytes);
    if (c.mode == 2) copy_warp<<<1, 32>>>(dst + c.dst_off, src + c.src_off, c.bytes);
    if (c.mode == 3) copy_block_tail<<<1, 256>>>(dst + c.dst_off, src + c.src_off, c.bytes);
    if (c.mode >= 4)
      copy_bulk<<<3, 32, mk::dev::BulkStages::kSmemBytes>>>(
          mk::test::comm().device_ctx(), dst + c.dst_off, src + c.src_off, c.bytes,
          c.mode == 4 ? mk::dev::BulkLayout::RoundRobin : mk::dev::BulkLayout::Contiguous);
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(h_dst.data(), dst, cap, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (size_t i = 0; i < cap; ++i) {
      bool inside = i >= c.dst_off && i < c.dst_off + c.bytes;
      char want = inside ? h_src[c.src_off + (i - c.dst_off)] : static_cast<char>(0x5A);
      bad += h_dst[i] != want;
    }
    ASSERT_EQ(bad, 0u) << "bytes=" << c.bytes << " src_off=" << c.src_off << " dst_off=" << c.dst_off
                       << " mode=" << c.mode;
  }
  cudaFree(src);
  cudaFree(dst);
}

TEST(PeerCopy, BulkCopiesOneAfterAnotherInOneCta) {
  const size_t c = mk::dev::BulkStages::kChunk;  // 6 stages
  // 7 chunks and a short one (a stage loaded twice), 3, 1, a short one alone, 8 (refills), 6 and a short one, 13
  const CopySizes sizes{{7 * c + 4096, 3 * c, c, 4096, 8 * c, 6 * c + 16, 13 * c, 2 * c + 2048}, 8};
  size_t cap = 0;
  for (int i = 0; i < sizes.n; ++i) cap += sizes.b[i];
  char *src = nullptr, *dst = nullptr;
  CUDA_OK(cudaMalloc(&src, cap));
  CUDA_OK(cudaMalloc(&dst, cap));
  std::mt19937_64 rng(777);
  std::vector<char> h_src(cap), h_dst(cap);
  for (auto& b : h_src) b = static_cast<char>(rng());
  CUDA_OK(cudaMemcpy(src, h_src.data(), cap, cudaMemcpyHostToDevice));
  struct Run {
    bool claimed;
    int ctas;
    mk::dev::BulkLayout layout;
  };
  for (const Run& r : {Run{false, 1, mk::dev::BulkLayout::Contiguous}, Run{true, 1, mk::dev::BulkLayout::Contiguous},
                       Run{true, 3, mk::dev::BulkLayout::RoundRobin}, Run{false, 3, mk::dev::BulkLayout::Contiguous}}) {
    auto* kern = r.claimed ? copy_bulk_calls<true> : copy_bulk_calls<false>;
    CUDA_OK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(mk::dev::BulkStages::kSmemBytes)));
    CUDA_OK(cudaMemset(dst, 0x5A, cap));
    kern<<<r.ctas, 128, mk::dev::BulkStages::kSmemBytes>>>(mk::test::comm().device_ctx(), dst, src, sizes, r.layout);
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(h_dst.data(), dst, cap, cudaMemcpyDeviceToHost));
    size_t bad = 0, first = cap;
    for (size_t i = 0; i < cap; ++i)
      if (h_dst[i] != h_src[i]) bad++, first = first < i ? first : i;
    EXPECT_EQ(bad, 0u) << "first wrong byte " << first << "; " << (r.claimed ? "with" : "without")
                       << " a CTA barrier between copies, " << r.ctas << " CTAs, "
                       << (r.layout == mk::dev::BulkLayout::RoundRobin ? "round-robin" : "contiguous");
  }
  cudaFree(src);
  cudaFree(dst);
}
