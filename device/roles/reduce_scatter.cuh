// mkernel: the roles of the tensor-parallel reduce-scatter (GEMM+RS and the
// standalone ReduceScatter), inside a node and across nodes of one GPU.
//
// Rank d owns rows [d R, (d+1) R) of the result (R = M / W). Every rank s
// writes its partial rows for d into d's staging buffer, slot s (receive
// slots [W][slot], symmetric) and adds to d's arrival signal of that
// (source, row-block): over NVLink when d is on s's node, else through the
// network from s's own send slot for d (send slots [W][slot] after the
// receive slots; the network reads registered memory).
// - GEMM+RS: the GEMM epilogue writes tiles (TileMajor, one signal add per
//   tile; across nodes one put per row-block; EpiSignal::PerRowBlock), peers' rows
//   first; d computes its own rows last and adds the other slots' tiles to
//   its accumulator before storing them (EpilogueHook::own_dest): no Reduce
//   role, every SM computes.
// - ReduceScatter alone: the push role writes rows (RowMajor, one add of
//   n_blocks per row-block); the Reduce role of d waits until every
//   source's row-block signal reached epoch * n_blocks, sums the W partial
//   rows in fp32 and writes bf16 out.
//
// NOTES:
// - Buffer reuse without host synchronisation: d's grid signals "entered
//   call e" to every rank at start; a writer waits for that before its first
//   write into d (the GEMM consumers' start signals; the push role before
//   each destination). d entered call e => d's previous reduce ended, so
//   every write of the previous call into d, network puts included, landed
//   (and their send-slot sources were read).
// - Several nodes of several GPUs each (reduce inside the node first, then
//   one share per GPU over the network) is not built: plans refuse it.
// - Deadlock freedom of GEMM+RS needs every CTA of the grid resident:
//   own tiles wait for the other ranks' tiles, which non-resident CTAs of
//   the other rank would compute. CTAs become resident as other kernels
//   finish, so only a concurrent kernel that itself waits (another
//   persistent kernel on another stream) can block it; a tile queue handed
//   out by an atomic counter would remove the need (not built).
// - Entry signals over the network are Sets: a transport must deliver one
//   peer's commands of one queue in order (all of ours do).
// - Every wait reports without a function call (the roles share a kernel
//   with the GEMM engine).
#pragma once

#include "device/bulk_copy.cuh"
#include "device/net/net.cuh"
#include "device/signals.cuh"

namespace mk::roles {

constexpr dev::Report kRsReport = dev::Report::Quiet;
constexpr int kMaxRsRanks = kMaxLocalRanks;

struct ReduceScatter {
  void* staging[kMaxLocalRanks];  // every node rank's staging buffer, by local rank
  const void* input;              // standalone push: [M x N] bf16, this rank's full partial result
  void* out;                      // [R x N] bf16, this rank's reduced rows
  int64_t rows;                   // R = M / W, a multiple of row_block
  int64_t n;                      // columns (multiple of 64)
  int64_t row_block;              // rows per signal (128: the GEMM tile height)
  int64_t slot_elems;             // bf16 elements per slot (>= rows * n: whole tiles)
  int32_t rank;                   // global
  int32_t world;
  int32_t local_rank;
  int32_t local_of[kMaxRsRanks];  // local rank of each global rank on this node, -1 on other nodes
  int32_t sig_entry;              // pool index: + global rank that entered
  int32_t sig_arrival;            // pool index: + source * (M / row_block) + global row-block
  uint64_t adds_per_block;        // arrivals per (source, row-block) per call: the GEMM's n_blocks
  const net::NetCtx* netctx;      // device memory; several nodes only
  int32_t net_region;             // the staging buffer's region id
  int32_t net_queue;
};

// Announces this rank's entry into the call (one thread of the grid).
__device__ __forceinline__ void rs_announce(const DeviceCtx& ctx, const ReduceScatter& g, uint64_t epoch) {
  for (int d = 0; d < g.world; ++d) {
    if (g.local_of[d] >= 0)
      dev::signal_set(dev::peer_signal(ctx, g.local_of[d], g.sig_entry + g.rank), epoch);
    else
      net::signal<kRsReport>(*g.netctx, ctx, g.net_queue, d, net::SigOp::Set, g.sig_entry + g.rank, epoch);
  }
}

// Standalone push: this rank's input rows for every owner d into d's slot,
// owners after their entry signal, ring predecessors first (own rows too).
__device__ __forceinline__ void rs_push(const DeviceCtx& ctx, const ReduceScatter& g, uint64_t epoch, char* smem,
                                        int cta, int ncta) {
  const int32_t role = static_cast<int32_t>(Role::IntraComm);
  const int w = g.world, r = g.rank;
  const int64_t blocks = g.rows / g.row_block, total_blocks = blocks * w;
  const int64_t block_bytes = g.row_block * g.n * 2, slot_bytes = g.slot_elems * 2;
  for (int64_t item = cta; item < int64_t(w) * blocks; item += ncta) {
    const int d = static_cast<int>(((r - item / blocks) % w + w) % w);
    const int64_t b = item % blocks;
    if (threadIdx.x == 0)
      dev::wait_ge<dev::Scope::Sys, kRsReport>(ctx, ctx.signals + g.sig_entry + d, epoch,
                                               dev::WaitSite{role, d, g.sig_entry + d});
    const char* src = static_cast<const char*>(g.input) + (int64_t(d) * blocks + b) * block_bytes;
    const int64_t global_block = int64_t(d) * blocks + b;
    const int32_t sig = g.sig_arrival + static_cast<int32_t>(r * total_blocks + global_block);
    const int dl = g.local_of[d];
    if (dl >= 0) {
      char* dst = static_cast<char*>(g.staging[dl]) + int64_t(r) * slot_bytes + b * block_bytes;
      dev::copy_bulk<dev::BulkStages, kRsReport>(ctx, dst, src, static_cast<size_t>(block_bytes), 0, 1, smem, role);
      if (threadIdx.x == 0) dev::signal_add(dev::peer_signal(ctx, dl, sig), g.adds_per_block);
    } else {  // other node: into the own send slot for d, then one put
      const int64_t send_off = (int64_t(w) + d) * slot_bytes + b * block_bytes;
      char* dst = static_cast<char*>(g.staging[g.local_rank]) + send_off;
      dev::copy_bulk<dev::BulkStages, kRsReport>(ctx, dst, src, static_cast<size_t>(block_bytes), 0, 1, smem, role);
      if (threadIdx.x == 0)
        net::put<kRsReport>(*g.netctx, ctx, g.net_queue, d, g.net_region,
                            /*dst_off=*/static_cast<uint64_t>(int64_t(r) * slot_bytes + b * block_bytes),
                            /*src_off=*/static_cast<uint64_t>(send_off), static_cast<uint64_t>(block_bytes),
                            net::SigOp::Add, sig, g.adds_per_block);
    }
  }
}

// Reduce (standalone reduce-scatter): this rank's row-blocks, CTA `cta` of
// `ncta`, all threads. Each thread keeps 2 vectors x W slots of loads in
// flight (memory-level parallelism: one load at a time ran at ~12 GB/s per
// SM).
__device__ __forceinline__ void rs_reduce(const DeviceCtx& ctx, const ReduceScatter& g, uint64_t epoch, int cta,
                                          int ncta) {
  const int32_t role = static_cast<int32_t>(Role::Reduce);
  const int w = g.world, r = g.rank;
  const int64_t blocks = g.rows / g.row_block, total_blocks = blocks * w;
  const int64_t vecs = g.row_block * g.n / 8;  // 16-byte vectors (8 bf16) per row-block
  constexpr int kU = 2;
  const uint16_t* slot0 = static_cast<const uint16_t*>(g.staging[g.local_rank]);
  for (int64_t b = cta; b < blocks; b += ncta) {
    if (threadIdx.x < w) {
      const int s = static_cast<int>(threadIdx.x);
      const int32_t sig = g.sig_arrival + static_cast<int32_t>(s * total_blocks + int64_t(r) * blocks + b);
      dev::wait_ge<dev::Scope::Sys, kRsReport>(ctx, ctx.signals + sig, epoch * g.adds_per_block,
                                               dev::WaitSite{role, s, sig});
    }
    __syncthreads();  // the waits above (acquire) come before every thread's loads
    const uint4* base = reinterpret_cast<const uint4*>(slot0 + b * g.row_block * g.n);
    const int64_t slot_vecs = g.slot_elems / 8;
    for (int64_t v0 = threadIdx.x; v0 < vecs; v0 += int64_t(blockDim.x) * kU) {
      uint4 x[kU][kMaxRsRanks];
#pragma unroll
      for (int u = 0; u < kU; ++u)
#pragma unroll
        for (int s = 0; s < kMaxRsRanks; ++s)
          if (s < w && v0 + u * blockDim.x < vecs)
            // L2, not L1: the rows were written by other GPUs during this kernel.
            x[u][s] = __ldcg(base + s * slot_vecs + v0 + u * blockDim.x);
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int64_t v = v0 + u * blockDim.x;
        if (v >= vecs) break;
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll
        for (int s = 0; s < kMaxRsRanks; ++s) {
          if (s >= w) break;
          const uint32_t words[4] = {x[u][s].x, x[u][s].y, x[u][s].z, x[u][s].w};
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
}

}  // namespace mk::roles
