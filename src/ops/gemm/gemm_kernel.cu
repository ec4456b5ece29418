// mkernel: the standalone GEMM kernel: the engine's Compute role on CTAs
// [0, num_compute), a Test role (a plain copy) on the rest, after the
// network's delivery agent when an epilogue puts over a network that asks for
// one (net::run_counted_agent). One instantiation; fused ops have kernels of their
// own that call the same engine from their Compute role.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "device/gemm/gemm_engine.cuh"
#include "device/net/agent.cuh"
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
    gemm_kernel(const __grid_constant__ GemmParams p, const TestRoleParams test, const net::AgentLaunch agent,
                uint32_t* agent_finished) {
  extern __shared__ uint8_t smem[];
  if (static_cast<int>(blockIdx.x) < agent.ctas) {  // Role::Deliver
    net::run_counted_agent<dev::Report::Quiet>(*agent.nc, p.ctx, agent_finished, smem, agent.ctas);
    return;
  }
  const int cta = static_cast<int>(blockIdx.x) - agent.ctas;
  const Role role = cta < p.num_compute ? Role::Compute : Role::Test;
  switch (role) {
    case Role::Compute:
      run_compute<false, true>(p, smem, cta);  // one call site: two would double the engine's code
      break;
    default:
      test_role(test, cta - p.num_compute, static_cast<int>(gridDim.x) - agent.ctas - p.num_compute);
      break;
  }
  if (agent.ctas) net::count_block_done(agent_finished);
}

}  // namespace

// Hook settings that would fault or hang on the device fail here instead.
void validate_hooks(const GemmParams& p) {
  const EpilogueHook& e = p.epi;
  const LoadHook& l = p.load;
  const bool f32 = e.op == EpiOp::AddF32;
  const int ndest = e.rows_per_dest > 0 ? static_cast<int>((int64_t(p.m) + e.rows_per_dest - 1) / e.rows_per_dest) : 1;
  if (e.rows_per_dest < 0 || ndest > kMaxDests)
    fail("gemm: rows_per_dest ", e.rows_per_dest, " splits ", p.m, " rows over ", ndest, " destinations (max ",
         kMaxDests, ")");
  for (int d = 0; d < ndest; ++d) {
    if (!e.out[d]) fail("gemm epilogue: destination ", d, " (rows from ", int64_t(d) * e.rows_per_dest, ") is null");
    const int align = e.layout == OutLayout::FragMajor ? 16 : f32 ? 8 : 4;  // FragMajor: 16-byte chunks
    if (reinterpret_cast<uintptr_t>(e.out[d]) % align)
      fail("gemm epilogue: destination ", d, " must be ", align, "-byte aligned");
    if (e.signal != EpiSignal::None && !((e.net >> d) & 1u) && d != e.own_final && !e.signals[d])
      fail("gemm epilogue: signals requested but signals[", d, "] is null");
  }
  if (p.split_tiles) {
    if (p.split_tiles < 0 || p.split_tiles > sched::total_tiles(p.sched))
      fail("gemm: split_tiles ", p.split_tiles, " outside [0, ", sched::total_tiles(p.sched), "]");
    if (!p.tile_counter || !p.load.epoch_counter || !p.split_ws || !p.split_flags)
      fail("gemm: split tiles need the dynamic tile queue, an epoch counter, split_ws and split_flags");
    if (p.split_parts < 2 || p.split_parts > kMaxSplitParts)
      fail("gemm: split_parts must be in [2, ", kMaxSplitParts, "] (got ", p.split_parts, ")");
    if (p.k / kBlockK < p.split_parts)
      fail("gemm: ", p.split_parts, " split parts need k >= ", p.split_parts * kBlockK, " (got ", p.k, ")");
    if (p.split_last) {
      // The walk's last tiles must be the owner's final tiles, which no tile
      // waits for (GemmParams::split_last): the last share of a
      // SharePermuted walk, not interleaved, whose destination is own_final.
      const sched::TileSchedParams& sc = p.sched;
      const int shares = sc.share_blocks > 0 ? sc.m_blocks / sc.share_blocks : 0;
      const bool own_last = sc.order == sched::TileOrder::SharePermuted && !sc.share_interleave && shares > 0 &&
                            shares <= sched::kMaxShares && e.own_final >= 0 && e.own_final < kMaxDests &&
                            sc.share_order[shares - 1] == e.own_final && ((e.own_mask >> e.own_final) & 1u) &&
                            !((e.net >> e.own_final) & 1u) && !e.bcast_n && !e.fin_publish;
      if (!own_last || p.split_tiles > int64_t(sc.share_blocks) * sc.n_blocks)
        fail("gemm: split_last needs the owner's final share last in a SharePermuted walk (not interleaved, owner "
             "reduce, no broadcast or publication) and at most its ", int64_t(sc.share_blocks) * sc.n_blocks,
             " tiles split (got ", p.split_tiles, ")");
    } else if (e.op != EpiOp::Store || e.layout != OutLayout::RowMajor || e.signal != EpiSignal::None || e.net ||
               e.own_mask || e.async_store) {
      fail("gemm: split tiles need the RowMajor Store epilogue (plain or TMA stores; no signals, puts, owner "
           "reduce or asynchronous stores), or split_last on the owner's final tiles");
    }
  }
  if (e.net >> ndest) fail("gemm epilogue: network destination mask ", e.net, " sets bits >= ", ndest, " (there are only ", ndest,
           " destinations)");
  // Ragged shares (sched.share_rows): a tile never straddles two (tile_rows).
  const bool ragged = p.sched.share_rows > 0;
  if (ragged && (p.sched.order != sched::TileOrder::SharePermuted || e.rows_per_dest != p.sched.share_rows ||
                 p.sched.share_blocks != (p.sched.share_rows + kBlockM - 1) / kBlockM ||
                 int64_t(p.sched.m_blocks) * p.sched.share_rows != int64_t(p.m) * p.sched.share_blocks))
    fail("gemm: ragged shares (share_rows ", p.sched.share_rows, ") need the SharePermuted order, rows_per_dest = "
         "share_rows, share_blocks = its row-blocks and m_blocks = shares x share_blocks");
  const bool tiled = e.layout == OutLayout::TileMajor || e.layout == OutLayout::FragMajor;
  if (e.layout != OutLayout::RowMajor && !tiled)
    fail("gemm epilogue: unknown output layout ", static_cast<int>(e.layout));
  if (e.layout == OutLayout::FragMajor && e.op != EpiOp::Store)
    fail("gemm epilogue: FragMajor output holds bf16 partial tiles: it needs the Store op");
  if ((e.signal != EpiSignal::None || tiled || e.net) && e.rows_per_dest % kBlockM && !ragged)
    fail("gemm epilogue: with signals, TileMajor / FragMajor output or network puts, rows_per_dest (", e.rows_per_dest,
         ") must be a multiple of ", kBlockM, " (a tile goes to one destination)");
  if (e.layout == OutLayout::RowMajor && (e.ldo < p.n || e.ldo % 2))
    fail("gemm epilogue: ldo must be even and >= n (got ", e.ldo, ")");
  if (e.net) {
    if (!tiled || e.op != EpiOp::Store)
      fail("gemm epilogue: a network put per tile needs TileMajor or FragMajor output and the Store op (the tile is "
           "sent whole)");
    if (!p.has_ctx || !p.netctx)
      fail("gemm epilogue: a network put needs the communicator (has_ctx) and the network context (netctx, a "
           "device copy of Network::device_ctx())");
  }
  if (e.net_rb_count && (e.signal != EpiSignal::PerRowBlock || !tiled))
    fail("gemm epilogue: one put per row-block (net_rb_count) needs PerRowBlock signals and TileMajor or FragMajor "
         "output");
  if (e.async_store && (e.layout != OutLayout::FragMajor || (p.m % kBlockM && !ragged) ||
                        (e.rows_per_dest > 0 && e.rows_per_dest % kBlockM && !ragged)))
    fail("gemm epilogue: asynchronous stores copy whole tiles: they need FragMajor output (partial tiles) and m and "
         "rows_per_dest multiples of ", kBlockM, " (got m ", p.m, ", rows_per_dest ", e.rows_per_dest, ")");
  if (e.own_mask) {
    const char* w = "gemm epilogue: the owner reduce (own_mask ";
    const uint32_t m = e.own_mask;
    if (e.rows_per_dest <= 0 || (m >> ndest)) fail(w, m, ") needs rows_per_dest > 0 and bits < the ", ndest, " destinations");
    if (e.own_final >= 0 && (!((m >> e.own_final) & 1u) || ((e.net >> e.own_final) & 1u)))
      fail(w, m, "): own_final ", e.own_final, " must be in the mask and not a network destination");
    if (e.layout != OutLayout::FragMajor)
      fail(w, m, ") needs FragMajor output (the sources' tiles, which other launches of it wrote, are read that way)");
    for (int d = 0; d < ndest; ++d)
      if (((m >> d) & 1u) && d != e.own_final && !((e.net >> d) & 1u))
        fail(w, m, "): destination ", d, " is neither own_final nor a network destination (its sum would go nowhere)");
    if (e.own_final >= 0 && !e.own_out) fail(w, m, ") needs own_out for own_final ", e.own_final);
    if (e.own_final >= 0 && (e.own_ldo < p.n || e.own_ldo % 2))
      fail(w, m, ") needs an even own_ldo >= n (got ", e.own_ldo, ")");
    if (!l.epoch_counter) fail(w, m, ") needs load.epoch_counter (its waits expect epoch * own_expect)");
    if (e.own_nsrc < 0 || e.own_net_nsrc < 0 || e.own_nsrc + e.own_net_nsrc > 2 * kMaxDests)
      fail(w, m, ") needs 0..", kMaxDests, " sources of each kind (got ", e.own_nsrc, ", ", e.own_net_nsrc, ")");
    if (e.own_nsrc > 0 && (!e.own_slots || !e.own_signals)) fail(w, m, ") needs own_slots and own_signals");
    if (e.own_net_nsrc > 0 && (!e.own_net_slots || !e.own_net_signals || e.own_final < 0))
      fail(w, m, ") needs own_net_slots, own_net_signals and own_final for network sources");
    bool al = (reinterpret_cast<uintptr_t>(e.own_slots) | reinterpret_cast<uintptr_t>(e.own_net_slots)) % 16 == 0 &&
              (e.own_src_stride | e.own_net_stride) % 8 == 0;
    for (int d = 0; d < kMaxDests; ++d) al = al && e.own_dst_off[d] % 8 == 0;
    if (!al)
      fail(w, m, ") reads sources 16 bytes at a time: own_slots and own_net_slots must be 16-byte aligned and "
           "own_src_stride, own_net_stride and own_dst_off[] multiples of 8 elements");
    if (e.own_expect == 0 || e.own_sig_stride <= 0)
      fail(w, m, ") needs own_expect > 0 and own_sig_stride > 0 (a zero expectation reads unarrived data)");
    const int64_t dest_blocks = ragged ? p.sched.share_blocks : e.rows_per_dest / kBlockM;
    const int64_t tile_elems = dest_blocks * ((int64_t(p.n) + kBlockN - 1) / kBlockN) * kBlockM * kBlockN;
    if (e.own_nsrc > 1 && e.own_src_stride < tile_elems)
      fail(w, m, "): own_src_stride ", e.own_src_stride, " < one destination's ", tile_elems, " tile elements");
    if (e.own_net_nsrc > 1 && e.own_net_stride < tile_elems)
      fail(w, m, "): own_net_stride ", e.own_net_stride, " < one destination's ", tile_elems, " tile elements");
  }
  if (e.bcast_n) {
    if (e.bcast_n < 0 || e.bcast_n >= kMaxDests || e.own_final < 0 || !((e.own_mask >> e.own_final) & 1u))
      fail("gemm epilogue: the one-shot partials (bcast_n ", e.bcast_n, ") go out from owner-reduce tiles of own_final, to "
           "at most ", kMaxDests - 1, " peers");
    for (int i = 0; i < e.bcast_n; ++i)
      if (!e.bcast_out[i] || !e.bcast_sig[i] || reinterpret_cast<uintptr_t>(e.bcast_out[i]) % 16)
        fail("gemm epilogue: one-shot peer ", i, " needs a 16-byte aligned bcast_out and bcast_sig");
  }
  if (e.fin_publish) {
    const char* w = "gemm epilogue: publishing final rows (fin_publish) ";
    if (e.own_final < 0 || !e.own_out || e.own_ldo != p.n || !p.has_ctx || !l.epoch_counter)
      fail(w, "needs own_final, own_out with own_ldo == n (got ", e.own_ldo, ", n ", p.n,
           "), the communicator and load.epoch_counter");
    // The schedule's row-blocks (ragged shares: share_blocks x W of them, more than m / 128) index the words.
    if (p.sched.order == sched::TileOrder::Grouped) fail(w, "takes no grouped order (its row-blocks index the words)");
    const int64_t row_blocks = std::max<int64_t>(p.sched.m_blocks, (int64_t(p.m) + kBlockM - 1) / kBlockM);
    if (e.fin_sig < 0 || e.fin_sig + row_blocks > p.ctx.num_signals)
      fail(w, "needs fin_sig + its ", row_blocks, " row-blocks inside the signal pool (fin_sig ", e.fin_sig, ", pool ",
           p.ctx.num_signals, ")");
    if (e.fin_net_n < 0 || e.fin_net_n > kMaxDests || (e.fin_net_n && (!e.fin_rb_count || !p.netctx)))
      fail(w, "to ", e.fin_net_n, " other nodes needs 0..", kMaxDests, " of them, fin_rb_count and netctx");
  }
  if (l.num_start < 0 || (l.num_start > 0 && !l.start_signals))
    fail("gemm load hook: num_start = ", l.num_start, " needs start_signals");
  if (l.kind == LoadWait::RowSignal && (!l.signals || l.rows_per_signal < 1))
    fail("gemm load hook: RowSignal needs signals and rows_per_signal >= 1 (got ", l.rows_per_signal, ")");
  if ((l.kind == LoadWait::ArrivalCount) != (p.sched.order == sched::TileOrder::ArrivalQueue))
    fail("gemm: the ArrivalQueue order and the ArrivalCount load hook go together");
  if (l.kind == LoadWait::ArrivalCount && (!l.arrival_count || !p.sched.arrival))
    fail("gemm load hook: ArrivalCount needs arrival_count and sched.arrival");
  if (p.sched.order == sched::TileOrder::Grouped && (!p.sched.group_tile_start || !p.group_row_start))
    fail("gemm: grouped order without group arrays");
  if (e.tma_store && (e.layout != OutLayout::RowMajor || e.op != EpiOp::Store || e.signal != EpiSignal::None || e.net ||
                      e.own_mask || e.async_store || e.rows_per_dest || e.ldo % 8 || !e.out[0] ||
                      reinterpret_cast<uintptr_t>(e.out[0]) % 16 ||
                      p.sched.order == sched::TileOrder::Grouped))
    fail("gemm epilogue: TMA stores need the plain epilogue (RowMajor Store to one destination, ldo a multiple of 8, "
         "no signals, puts, owner reduce or asynchronous stores, not Grouped); see gemm::use_tma_store");
  if (e.own_tma && (e.own_tma < 0 || e.own_tma > 2 || e.own_final < 0 || !e.own_out || e.rows_per_dest < 1 ||
                    e.own_ldo % 8 || e.bcast_n || e.tma_store || reinterpret_cast<uintptr_t>(e.own_out) % 16))
    fail("gemm epilogue: TMA stores of the owner's final rows (own_tma ", e.own_tma, ") need own_final, own_out "
         "16-byte aligned with own_ldo a multiple of 8, rows_per_dest >= 1, no one-shot broadcast and no tma_store; "
         "see gemm::use_own_tma");
  if (p.timeout_ns == 0) fail("gemm: timeout_ns is 0 (every wait is bounded; see MK_TIMEOUT_MS)");
}

void allow_engine_smem(const void* kernel, size_t bytes) {
  // Per device and kernel; a few kernels use the engine.
  struct Done {
    const void* kernel;
    int dev;
  };
  static std::mutex mu;
  static std::vector<Done> done;
  int dev = 0;
  MK_CUDA_CHECK(cudaGetDevice(&dev));
  thread_local const void* last_kernel = nullptr;
  thread_local int last_dev = -1;
  if (kernel == last_kernel && dev == last_dev) return;
  std::lock_guard<std::mutex> lock(mu);
  bool found = false;
  for (const Done& d : done) found |= d.kernel == kernel && d.dev == dev;
  if (!found) {
    MK_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
    done.push_back({kernel, dev});
  }
  last_kernel = kernel;
  last_dev = dev;
}

void launch(const GemmParams& p, int grid, const TestRoleParams& test, cudaStream_t stream,
            const net::AgentLaunch& agent, uint32_t* agent_finished) {
  allow_engine_smem(reinterpret_cast<const void*>(gemm_kernel), kSmemBytesAsync);
  validate_hooks(p);
  if (p.epi.async_store) fail("gemm: the standalone GEMM kernel has no storer (async_store is for fused kernels built with it)");
  if (p.epi.own_tma)
    fail("gemm: the standalone GEMM kernel stores the owner's final rows with plain stores (own_tma is for the fused "
         "kernels built with the asynchronous epilogue)");
  if (p.epi.layout == OutLayout::FragMajor &&
      !((p.epi.own_mask & 1u) && p.epi.own_final == 0 && p.epi.rows_per_dest >= p.m))
    fail("gemm: the standalone GEMM kernel stores FragMajor tiles only through the owner reduce of one destination "
         "(own_mask bit 0, own_final 0, rows_per_dest >= m); fused kernels built with the asynchronous epilogue store "
         "them too");
  if (p.num_compute < 1 || grid < p.num_compute)
    fail("gemm: launch of ", grid, " CTAs with ", p.num_compute, " compute CTAs (need 1 <= compute <= grid)");
  if (agent.ctas && (!agent.nc || !agent_finished || !p.has_ctx))
    fail("gemm: a launch with the delivery agent needs its network context, a zeroed counter and has_ctx");
  GemmParams q = p;
  q.trace.first = agent.ctas;  // the log's CTA 0 is the first after the agent's
  gemm_kernel<<<grid + agent.ctas, kThreads, p.epi.tma_store ? kSmemBytesAsync : kSmemBytes, stream>>>(
      q, test, agent, agent_finished);
  MK_CUDA_CHECK(cudaGetLastError());
}

}  // namespace mk::gemm
