// mkernel: bulk (TMA engine) copies between global memories through shared
// memory, driven by one thread per CTA. Each chunk is loaded with
// cp.async.bulk (completion on an mbarrier) and stored with cp.async.bulk
// (bulk-group completion); the next loads run while stores drain, so one SM
// keeps tens of KB in flight with a single issuing thread. This is the
// IntraComm role's NVLink mover: few SMs, few registers.
//
// NOTES:
// - dst, src and bytes must be 16-byte aligned (checked by the caller's
//   validation; copy_v16 handles the general case).
// - When copy_bulk returns, every store issued by this CTA has completed
//   (wait_group 0), so a release signal after a __syncthreads() orders them.
// - The mbarrier waits are bounded by ctx.timeout_ns like every other wait.
#pragma once

#include <cstdint>

#include "device/mbarrier.cuh"
#include "device/signals.cuh"

namespace mk::dev {

// Default 6 x 16 KB: measured on H200 NVLink (bench/results, 2026-11-30) it
// pushes ~357 GB/s with 8 SMs and pulls ~371 GB/s with 16; 2 x 32 KB keeps
// too little in flight per SM, 4 stages pull slower with few SMs.
template <int kStagesT = 6, uint32_t kChunkT = 16384>
struct BulkStagesT {
  static_assert(kStagesT >= 2, "the refill of stage k-1 needs a second stage in flight");
  static_assert(kChunkT % 16 == 0, "bulk copies move multiples of 16 bytes");
  static constexpr int kStages = kStagesT;
  static constexpr uint32_t kChunk = kChunkT;  // bytes per stage
  static constexpr size_t kSmemBytes = size_t(kStages) * kChunk + 64;
};
using BulkStages = BulkStagesT<>;

// How chunks are dealt to CTAs: round-robin (chunk j to CTA j % ncta) or one
// contiguous range per CTA (fewer, longer write streams into the peer).
enum class BulkLayout { RoundRobin, Contiguous };

// Bounded wait on a local mbarrier phase (reported as a wait on this CTA's
// own pipeline stage; `expected` holds the stage).
template <Report R = Report::Print>
__device__ __forceinline__ void mbar_wait(const DeviceCtx& ctx, uint64_t* bar, uint32_t parity, int32_t role,
                                          int stage) {
  if (mbar_try_wait(bar, parity)) return;
  const uint64_t t0 = globaltimer();
  while (!mbar_try_wait(bar, parity)) {
    const uint64_t waited = globaltimer() - t0;
    if (waited > ctx.timeout_ns)
      give_up<R>(ctx, WaitSite{role, -1, kDiagPipelineStage}, uint64_t(stage), parity, waited, kWaitTimeout, -1);
  }
}

__device__ __forceinline__ void bulk_load(void* smem_dst, const void* gmem_src, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   smem_addr(smem_dst)),
               "l"(gmem_src), "r"(bytes), "r"(smem_addr(bar))
               : "memory");
}

__device__ __forceinline__ void bulk_store(void* gmem_dst, const void* smem_src, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(gmem_dst), "r"(smem_addr(smem_src)),
               "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }

template <int N>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}

// All but the newest N bulk groups of this thread written (completed, not only read).
template <int N>
__device__ __forceinline__ void bulk_wait() {
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }

// Copies this CTA's share of [src, src + bytes) to dst (see BulkLayout),
// issued by thread 0 of the calling CTA; `smem` is S::kSmemBytes of dynamic
// shared memory. Other threads return at once (call __syncthreads() after if
// they must observe completion).
template <typename S = BulkStages, Report R = Report::Print>
__device__ __forceinline__ void copy_bulk(const DeviceCtx& ctx, void* dst, const void* src, size_t bytes, int cta,
                                          int ncta, char* smem, int32_t role,
                                          BulkLayout layout = BulkLayout::Contiguous) {
  if (threadIdx.x != 0) return;
  auto* bars = reinterpret_cast<uint64_t*>(smem + size_t(S::kStages) * S::kChunk);
  for (int s = 0; s < S::kStages; ++s) mbar_init(&bars[s], 1);
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");

  const size_t nchunks = (bytes + S::kChunk - 1) / S::kChunk;
  const size_t per = (nchunks + ncta - 1) / ncta;  // Contiguous: chunks per CTA
  const size_t first = size_t(cta) * per;
  size_t mine;
  if (layout == BulkLayout::RoundRobin)
    mine = nchunks > size_t(cta) ? (nchunks - cta + ncta - 1) / ncta : 0;
  else
    mine = first < nchunks ? (nchunks - first < per ? nchunks - first : per) : 0;
  auto chunk_off = [&](size_t k) {
    return (layout == BulkLayout::RoundRobin ? size_t(cta) + k * ncta : first + k) * S::kChunk;
  };
  auto chunk_len = [&](size_t k) {
    size_t off = chunk_off(k);
    return static_cast<uint32_t>(bytes - off < S::kChunk ? bytes - off : S::kChunk);
  };
  auto issue_load = [&](size_t k) {
    const int s = static_cast<int>(k % S::kStages);
    const uint32_t n = chunk_len(k);
    mbar_arrive_expect_tx(&bars[s], n);
    bulk_load(smem + size_t(s) * S::kChunk, static_cast<const char*>(src) + chunk_off(k), n, &bars[s]);
  };
  for (size_t k = 0; k < mine && k < size_t(S::kStages); ++k) issue_load(k);
  for (size_t k = 0; k < mine; ++k) {
    const int s = static_cast<int>(k % S::kStages);
    mbar_wait<R>(ctx, &bars[s], static_cast<uint32_t>((k / S::kStages) & 1), role, s);
    bulk_store(static_cast<char*>(dst) + chunk_off(k), smem + size_t(s) * S::kChunk, chunk_len(k));
    bulk_commit();
    // Refill the stage whose store (chunk k-1) has finished reading smem;
    // chunk k's store may still be reading.
    if (k >= 1 && k - 1 + S::kStages < mine) {
      bulk_wait_read<1>();
      issue_load(k - 1 + S::kStages);
    }
  }
  bulk_wait_all();
  // The stores were made by the async proxy: order them before the generic
  // release (signal) or network command the caller issues next.
  asm volatile("fence.proxy.async.global;" ::: "memory");
  // Every load completed (waited above): the barriers' memory may be reused
  // (the next copy's barriers, or the GEMM engine's stages when the CTA
  // joins the compute role).
  for (int s = 0; s < S::kStages; ++s) mbar_inval(&bars[s]);
}

}  // namespace mk::dev
