// mkernel: the IntraComm role of the tensor-parallel all-gather (AG+GEMM and
// the standalone AllGather), inside one node.
//
// Every rank pushes its row block A_r, cut into row chunks, into the
// gathered buffer (symmetric, [W * m_local x k]) of every rank of the node,
// itself first, then its ring predecessors; after each chunk it sets the
// destination's arrival signal for that chunk to the call's epoch. The
// Compute role of the destination waits on those signals before its TMA
// loads the rows (GEMM engine load hook, LoadWait::RowSignal).
//
// NOTES:
// - Buffer reuse without host synchronisation: at entry, each rank sets its
//   "entered call e" signal in every peer's pool; a rank pushes into peer d
//   only after seeing d's entry signal for this epoch. Kernels of one plan are
//   stream-ordered, so a rank that entered call e has finished reading its
//   gathered buffer for call e-1.
// - Chunks go out with the bulk (TMA) copier from one thread per CTA; after
//   copy_bulk returns its stores have completed, so the release signal that
//   follows orders them for the destination.
#pragma once

#include "device/bulk_copy.cuh"
#include "device/signals.cuh"

namespace mk::roles {

// Failed waits here report without a function call: this role shares its
// kernel with the GEMM engine (device/signals.cuh, Report).
constexpr dev::Report kReport = dev::Report::Quiet;

struct AllGatherPush {
  const void* a_local;           // [m_local x k] bf16, this rank's rows
  void* gathered[kMaxLocalRanks]; // every node rank's gathered buffer (peer mappings), by local rank
  int64_t m_local;
  int64_t row_bytes;             // k * 2
  int64_t rows_per_chunk;        // divides m_local
  int32_t local_rank;
  int32_t local_size;
  int32_t sig_entry;             // pool index: + source local rank
  int32_t sig_arrival;           // pool index: + global chunk (source * chunks + chunk)
  int32_t skip_self;             // 1: no copy into this rank's own buffer (the GEMM reads a_local directly)
  int32_t wait_incoming;         // 1: also wait until every peer's rows arrived here (no Compute role waits)
};

// CTA `cta` of `ncta` IntraComm CTAs.
// Order: own buffer first (unless skipped), then the ring predecessors
// r-1, r-2, ...: rank d's rotated GEMM wants d+1's rows right after its own,
// and d+1 sends to d first.
__device__ __forceinline__ void allgather_push(const DeviceCtx& ctx, const AllGatherPush& g, uint64_t epoch,
                                               char* smem, int cta, int ncta) {
  const int32_t role = static_cast<int32_t>(Role::IntraComm);
  const int w = g.local_size, r = g.local_rank;
  if (cta == 0 && threadIdx.x == 0)
    for (int d = 0; d < w; ++d)
      if (d != r) dev::signal_set(dev::peer_signal(ctx, d, g.sig_entry + r), epoch);
  const int64_t chunks = g.m_local / g.rows_per_chunk;
  const int64_t chunk_bytes = g.rows_per_chunk * g.row_bytes;
  const int first = g.skip_self ? 1 : 0;
  for (int64_t item = cta; item < int64_t(w - first) * chunks; item += ncta) {
    const int d = static_cast<int>(((r - first - item / chunks) % w + w) % w);
    const int64_t c = item % chunks;
    if (threadIdx.x == 0 && d != r)
      dev::wait_ge<dev::Scope::Sys, kReport>(ctx, ctx.signals + g.sig_entry + d, epoch,
                                             dev::WaitSite{role, d, g.sig_entry + d});
    const char* src = static_cast<const char*>(g.a_local) + c * chunk_bytes;
    char* dst = static_cast<char*>(g.gathered[d]) + (int64_t(r) * g.m_local) * g.row_bytes + c * chunk_bytes;
    dev::copy_bulk<dev::BulkStages, kReport>(ctx, dst, src, static_cast<size_t>(chunk_bytes), 0, 1, smem, role);
    if (threadIdx.x == 0)
      dev::signal_set(dev::peer_signal(ctx, d, g.sig_arrival + static_cast<int32_t>(int64_t(r) * chunks + c)),
                      epoch);
  }
  // Standalone all-gather: the launch may end (and the host copy out of the
  // gathered buffer start) only once the peers' rows are here.
  if (g.wait_incoming && threadIdx.x == 0)
    for (int64_t item = cta; item < int64_t(w - 1) * chunks; item += ncta) {
      const int src = static_cast<int>((r + 1 + item / chunks) % w);
      const int32_t sig = g.sig_arrival + static_cast<int32_t>(int64_t(src) * chunks + item % chunks);
      dev::wait_ge<dev::Scope::Sys, kReport>(ctx, ctx.signals + sig, epoch, dev::WaitSite{role, src, sig});
    }
}

}  // namespace mk::roles
