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
// - When BulkCopier::copy returns, every store it issued has completed
//   (wait_group 0), so a release signal after a __syncthreads() orders them.
// - The mbarrier waits are bounded by ctx.timeout_ns like every other wait.
#pragma once

#include <cstdint>

#include "mbarrier.cuh"
#include "signals.cuh"

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

// One CTA's copier over S::kSmemBytes of dynamic shared memory at `smem`
// (a caller's own words may follow). Its stage barriers live from its
// construction to its destruction, set up and ended by thread 0, and each
// stage's phase carries from copy to copy: a CTA that copies item after item
// (the gathers and pushes) waits every load on a barrier never set up again
// in between. Construct it (all threads, or thread 0 alone) once the shared
// memory is free of other use (after the GEMM engine, on a CTA that leaves
// compute); its destruction frees the memory again (mbarrier.inval).
// NOTES: until 2026-12-06 each copy set its barriers up and invalidated them;
// compute-sanitizer racecheck then reported every load into a stage that the
// copy before had used as a WAW hazard ("invalid async operation
// synchronization", one report a byte), though the load before had been
// waited for. The same copies with the barriers kept gave none (H100,
// tests/gpu/test_peer_copy.cu BulkCopiesOneAfterAnotherInOneCta, run by
// tools/sanitize_gpu.sh racecheck gpu).
template <typename S = BulkStages>
class BulkCopier {
 public:
  __device__ __forceinline__ explicit BulkCopier(char* smem) : smem_(smem) {
    if (threadIdx.x != 0) return;
    for (int s = 0; s < S::kStages; ++s) mbar_init(&bars()[s], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  // Every load was waited for and every store completed by the copy that
  // issued it: the barriers' memory may be reused (the GEMM engine's stages
  // when the CTA joins the compute role, or another copier).
  __device__ __forceinline__ ~BulkCopier() {
    if (threadIdx.x != 0) return;
    for (int s = 0; s < S::kStages; ++s) mbar_inval(&bars()[s]);
  }
  BulkCopier(const BulkCopier&) = delete;
  BulkCopier& operator=(const BulkCopier&) = delete;

  // The shared memory it was given (the stages, then the barriers; the
  // caller's words from S::kSmemBytes on).
  __device__ __forceinline__ char* smem() const { return smem_; }

  // Copies this CTA's share of [src, src + bytes) to dst (see BulkLayout),
  // issued by thread 0; other threads return at once (a __syncthreads()
  // after, if they must observe completion). When it returns, every store
  // it issued has completed.
  template <Report R = Report::Print>
  __device__ __forceinline__ void copy(const DeviceCtx& ctx, void* dst, const void* src, size_t bytes, int cta,
                                       int ncta, int32_t role, BulkLayout layout = BulkLayout::Contiguous) {
    if (threadIdx.x != 0) return;
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
      mbar_arrive_expect_tx(&bars()[s], n);
      bulk_load(smem_ + size_t(s) * S::kChunk, static_cast<const char*>(src) + chunk_off(k), n, &bars()[s]);
    };
    for (size_t k = 0; k < mine && k < size_t(S::kStages); ++k) issue_load(k);
    for (size_t k = 0; k < mine; ++k) {
      const int s = static_cast<int>(k % S::kStages);
      mbar_wait<R>(ctx, &bars()[s], (phases_ >> s) & 1u, role, s);
      phases_ ^= 1u << s;  // the stage's next load completes the barrier's next phase
      bulk_store(static_cast<char*>(dst) + chunk_off(k), smem_ + size_t(s) * S::kChunk, chunk_len(k));
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
  }

 private:
  static_assert(S::kStages * sizeof(uint64_t) <= S::kSmemBytes - size_t(S::kStages) * S::kChunk,
                "the stages' barriers fit past the stages");
  __device__ __forceinline__ uint64_t* bars() const {
    return reinterpret_cast<uint64_t*>(smem_ + size_t(S::kStages) * S::kChunk);
  }
  char* const smem_;
  uint32_t phases_ = 0;  // thread 0's: bit s is the parity that stage s's next load completes
};

}  // namespace mk::dev
