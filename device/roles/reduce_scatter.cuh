// mkernel: the roles of the tensor-parallel reduce-scatter inside a node
// (GEMM+RS and the standalone ReduceScatter).
//
// Rank d owns rows [d R, (d+1) R) of the result (R = M / W). Every rank s
// writes its partial rows for d into d's staging buffer, slot s
// ([W][R x N] bf16, symmetric), row-block by row-block, and adds to d's
// arrival signal of that (source, row-block); the GEMM epilogue does it per
// tile (EpiSignal::PerRowBlock, n_blocks adds per row-block), the standalone
// push role once per row-block (n_blocks at once). The Reduce role of d waits
// until every source's row-block signal reached epoch * n_blocks, sums the W
// partial rows in fp32 and writes bf16 out.
//
// NOTES:
// - Buffer reuse without host synchronisation: d's Reduce role signals
//   "entered call e" to every rank at start; a writer waits for that before
//   its first write into d (the GEMM producer's start signals; the push role
//   before each destination). d entered call e => d's previous reduce ended.
// - Every wait reports without a function call (the roles share a kernel
//   with the GEMM engine).
#pragma once

#include "device/bulk_copy.cuh"
#include "device/signals.cuh"

namespace mk::roles {

constexpr dev::Report kRsReport = dev::Report::Quiet;

struct ReduceScatter {
  void* staging[kMaxLocalRanks];  // every node rank's staging buffer, by local rank ([W][R x N] bf16)
  const void* input;              // standalone push: [M x N] bf16, this rank's full partial result
  void* out;                      // [R x N] bf16, this rank's reduced rows
  int64_t rows;                   // R = M / W, a multiple of row_block
  int64_t n;                      // columns (multiple of 64)
  int64_t row_block;              // rows per signal (128: the GEMM tile height)
  int32_t local_rank;
  int32_t local_size;
  int32_t sig_entry;              // pool index: + local rank that entered
  int32_t sig_arrival;            // pool index: + source * (M / row_block) + global row-block
  uint64_t adds_per_block;        // arrivals per (source, row-block) per call: the GEMM's n_blocks
};

// Announces this rank's entry into the call (one thread of the grid).
__device__ __forceinline__ void rs_announce(const DeviceCtx& ctx, const ReduceScatter& g, uint64_t epoch) {
  for (int d = 0; d < g.local_size; ++d)
    dev::signal_set(dev::peer_signal(ctx, d, g.sig_entry + g.local_rank), epoch);
}

// Standalone push: this rank's input rows for every owner d into d's slot,
// owners after their entry signal, ring predecessors first (own rows too).
__device__ __forceinline__ void rs_push(const DeviceCtx& ctx, const ReduceScatter& g, uint64_t epoch, char* smem,
                                        int cta, int ncta) {
  const int32_t role = static_cast<int32_t>(Role::IntraComm);
  const int w = g.local_size, r = g.local_rank;
  const int64_t blocks = g.rows / g.row_block, total_blocks = blocks * w;
  const int64_t block_bytes = g.row_block * g.n * 2;
  for (int64_t item = cta; item < int64_t(w) * blocks; item += ncta) {
    const int d = static_cast<int>(((r - item / blocks) % w + w) % w);
    const int64_t b = item % blocks;
    if (threadIdx.x == 0)
      dev::wait_ge<dev::Scope::Sys, kRsReport>(ctx, ctx.signals + g.sig_entry + d, epoch,
                                               dev::WaitSite{role, d, g.sig_entry + d});
    const char* src = static_cast<const char*>(g.input) + (int64_t(d) * blocks + b) * block_bytes;
    char* dst = static_cast<char*>(g.staging[d]) + (int64_t(r) * blocks + b) * block_bytes;
    dev::copy_bulk<dev::BulkStages, kRsReport>(ctx, dst, src, static_cast<size_t>(block_bytes), 0, 1, smem, role);
    if (threadIdx.x == 0) {
      const int64_t global_block = int64_t(d) * blocks + b;
      dev::signal_add(dev::peer_signal(ctx, d, g.sig_arrival + static_cast<int32_t>(r * total_blocks + global_block)),
                      g.adds_per_block);
    }
  }
}

// Reduce: this rank's row-blocks, CTA `cta` of `ncta`, all threads.
__device__ __forceinline__ void rs_reduce(const DeviceCtx& ctx, const ReduceScatter& g, uint64_t epoch, int cta,
                                          int ncta) {
  const int32_t role = static_cast<int32_t>(Role::Reduce);
  const int w = g.local_size, r = g.local_rank;
  const int64_t blocks = g.rows / g.row_block, total_blocks = blocks * w;
  const int64_t vecs = g.row_block * g.n / 8;  // 8 bf16 per 16-byte vector
  const uint16_t* slot0 = static_cast<const uint16_t*>(g.staging[r]);
  for (int64_t b = cta; b < blocks; b += ncta) {
    if (threadIdx.x < w) {
      const int s = static_cast<int>(threadIdx.x);
      const int32_t sig = g.sig_arrival + static_cast<int32_t>(s * total_blocks + int64_t(r) * blocks + b);
      dev::wait_ge<dev::Scope::Sys, kRsReport>(ctx, ctx.signals + sig, epoch * g.adds_per_block,
                                               dev::WaitSite{role, s, sig});
    }
    __syncthreads();  // the waits above (acquire) come before every thread's loads
    for (int64_t v = threadIdx.x; v < vecs; v += blockDim.x) {
      float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int s = 0; s < w; ++s) {
        // L2, not L1: the rows were written by other GPUs during this kernel.
        const uint4 x = __ldcg(reinterpret_cast<const uint4*>(slot0 + (int64_t(s) * blocks + b) * g.row_block * g.n) + v);
        const uint32_t words[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          acc[2 * i] += __uint_as_float(words[i] << 16);
          acc[2 * i + 1] += __uint_as_float(words[i] & 0xFFFF0000u);
        }
      }
      uint32_t ow[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        uint32_t lo = __float_as_uint(acc[2 * i]), hi = __float_as_uint(acc[2 * i + 1]);
        lo = (lo + 0x7FFFu + ((lo >> 16) & 1u)) >> 16;  // round to nearest even
        hi = (hi + 0x7FFFu + ((hi >> 16) & 1u)) >> 16;
        ow[i] = lo | (hi << 16);
      }
      reinterpret_cast<uint4*>(g.out)[b * vecs + v] = make_uint4(ow[0], ow[1], ow[2], ow[3]);
    }
  }
}

}  // namespace mk::roles
