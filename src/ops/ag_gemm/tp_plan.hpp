// mkernel: host-side decisions and checks shared by the tensor-parallel
// plans (AgGemm, GemmRs), as plain functions (CPU-tested:
// tests/cpu/test_ag_gemm_plan.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "device/ctx.hpp"
#include "device/gemm/gemm_params.hpp"
#include "mkernel/communicator.hpp"
#include "mkernel/error.hpp"
#include "mkernel/gemm.hpp"
#include "mkernel/knobs.hpp"
#include "mkernel/network.hpp"
#include "mkernel/topology.hpp"
#include "src/ops/gemm/gemm_host.hpp"
#include "src/runtime/device_health.hpp"
#include "src/runtime/device_pointer.hpp"  // (overlap)

namespace mk::tp {

// The GEMM's dimensions as the kernel takes them (int32, at most gemm::kMaxDim: gemm::make_params): checked when
// the plan is made, not first at run(). The output's rows are m x m_factor (AgGemm: m_local x world; no product
// that overflows).
inline void check_dims_int32(const char* op, int64_t m, int64_t n, int64_t k, int64_t m_factor = 1) {
  if (m > gemm::kMaxDim / m_factor || n > gemm::kMaxDim || k > gemm::kMaxDim)
    fail(op, ": dimensions must stay at or below 2^31 - 256 = ", gemm::kMaxDim, " (",
         m_factor > 1 ? cat(m, " x ", m_factor, " rows") : cat("m=", m), ", n=", n, ", k=", k, ")");
}

// Plan destructors: releases the plan's network region, if it has one
// (collective, Network::deregister_buffer); never throws. This rank's kernels
// end first (deregister_buffer synchronises the device): fabric's staging
// drops data for the region that no kernel has taken yet, and a kernel of the
// plan still running (a call launched just before the plan was destroyed) may
// be waiting for it. On a failed device it does not wait for the peers.
// False when the region stays registered (on every rank alike:
// deregister_buffer exchanges the ranks' sync outcomes), said in a warning:
// then the caller keeps the plan's buffer (free_symmetric_quietly with
// may_free false) and its signal words too, since no rank's GPU was confirmed
// done with them.
inline bool release_net_region(Communicator& comm, int region) noexcept {
  if (region <= 0) return true;  // none (region 0 is the signal pool, never a plan's)
  try {
    comm.network().deregister_buffer(region);
    return true;
  } catch (const std::exception& e) {
    warn_noexcept([&] {
      return cat("rank ", comm.rank(), ": a plan's network region ", region, " stays registered and its symmetric ",
                 "buffer allocated until the communicator closes, and its signal words stay reserved: ", error_reason(e));
    });
  } catch (...) {
  }
  return false;
}

// A plan's symmetric buffer, freed and forgotten (destructor work: never
// throws). Collective, like the plan's destructor. False when the free failed
// (on every rank alike: SymmetricHeap::free exchanges the outcome): the buffer
// stays allocated until the communicator closes, said in a warning, and the
// caller keeps the plan's signal words (SignalLease::keep), since no rank's
// GPU was confirmed done with them.
inline bool free_symmetric_quietly(Communicator& comm, SymmetricBuffer*& buf, bool may_free = true) noexcept {
  if (!buf) return true;
  if (!may_free) {  // its network region stays registered (release_net_region said so)
    buf = nullptr;
    return false;
  }
  bool freed = true;
  try {
    comm.free_symmetric(*buf);
  } catch (const std::exception& e) {
    freed = false;
    warn_noexcept([&] {
      return cat("rank ", comm.rank(), ": a plan's symmetric buffer stays allocated until the communicator closes, ",
                 "and its signal words stay reserved: ", error_reason(e));
    });
  } catch (...) {
    freed = false;
  }
  buf = nullptr;
  return freed;
}

// A plan's collective teardown: its network region (if any), then its
// symmetric buffer (the buffer stays when the region did), and its signal
// words kept when either stays, since no rank's GPU was confirmed done with
// them (on every rank alike: both steps exchange the ranks' outcomes). The
// region and buffer are forgotten. Never throws.
inline void release_shared(Communicator& comm, int& region, SymmetricBuffer*& buf, SignalLease& lease) noexcept {
  const bool released = release_net_region(comm, region);
  region = 0;
  if (!free_symmetric_quietly(comm, buf, released)) lease.keep();
}

// Runs `reserve`, a constructor's steps from its first allocation on; when one
// throws, `undo` (the destructor's work, which C++ does not run for a
// constructor that throws) runs as the exception unwinds. Without it a failed
// plan kept its symmetric memory, network region and device memory for the
// communicator's life. Plans take their signal words and reserve what is
// local to this rank (device counters, split-tile scratch), then check that
// every rank made the same plan, with each rank's outcome so far (tp::PlanArgs:
// a rank that failed alone, out of memory say, fails every rank there, at
// once, before anything collective is allocated), then reserve what is
// collective (symmetric memory, network registration): alloc_symmetric fails
// on every rank alike when one rank cannot allocate or map its part, and so
// does a network registration
// (Transport::register_region exchanges every rank's outcome; the id is used
// up on every rank), so every rank frees the same buffers in the same order
// and the frees' exchanges pair up. Signal words stay reserved while an
// exception unwinds (SignalLease::reset), as for any plan failing after its
// plan check (one failing in it, on every rank alike, gives them back:
// tp::PlanArgs, SignalLease::abandon). A failed CUDA call's error is
// cleared where it throws (MK_CUDA_CHECK: mk::cuda_check_failed).
template <class Reserve, class Undo>
void undo_on_throw(Reserve&& reserve, Undo&& undo) {
  struct Guard {
    Undo& undo;
    const int unwinding = std::uncaught_exceptions();
    ~Guard() {
      if (std::uncaught_exceptions() > unwinding) undo();
    }
  } guard{undo};
  reserve();
}

// A plan on one rank has nothing to gather or reduce. MK_TP_SINGLE_RANK:
// plain = its run() launches the standalone GEMM on every SM and its
// standalone collective copies; fused = its fused kernel as on several ranks
// (to measure that machinery alone); auto (the default) = plain, except where
// the plan splits its tail (`splits`), the standalone GEMM would leave over 5%
// of its SM-waves idle in its last wave, and it splits nothing there itself
// (gemm::standalone_split: halves only, k >= 4096). The plain path's split
// tiles take the plan's own workspace (alloc_plain_ws), so eager calls and
// calls captured in a graph take the same path and give the same bits. On one
// H200 at W = 1 (bench/results/tp-single-rank-20261202.md): the standalone
// GEMM 0.98-1.01x of cuBLAS where its waves are 97% busy, the fused kernels
// 0.90-0.97x there; AgGemm m = 1024, n = 14336 (448 tiles on 132 SMs, 85%
// busy): fused (52 tiles in halves) 0.94x, the standalone GEMM without split
// tiles 0.88x, with them (halves) 0.95x. 95% lies between the two measured
// cases. Decided when the plan is made.
inline double grid_busy(int64_t tiles, int sms) {
  const int64_t waves = (tiles + sms - 1) / sms;
  return waves > 0 ? double(tiles) / double(waves * sms) : 1.0;
}
// `sms`: the plain path's grid (the options' num_ctas, else every SM).
inline bool single_rank(const Topology& t, int64_t m, int64_t n, int64_t k, int sms, bool splits) {
  if (t.world != 1) return false;
  const std::string mode = knob_str(Knob::MK_TP_SINGLE_RANK);
  if (mode != "auto") return mode == "plain";
  const int64_t tiles = ((m + gemm::kBlockM - 1) / gemm::kBlockM) * ((n + gemm::kBlockN - 1) / gemm::kBlockN);
  const bool unsplit_ok = !splits || grid_busy(tiles, sms) >= 0.95;  // the standalone GEMM needs no split
  return unsplit_ok || gemm::standalone_split(tiles, sms, k / gemm::kBlockK).tiles > 0;
}
// MK_LOG=debug's words on a plain plan (single_rank): its GEMM's grid (`plain_ctas`, 0: every SM) and its
// collective, a copy.
inline std::string plain_plan_words(int plain_ctas, const char* collective) {
  return cat(": plain (the standalone GEMM on ", plain_ctas ? plain_ctas : gemm::num_sms(), " CTAs, a copy for the ",
             collective, ")");
}
// A plain plan allocates none of the fused kernel's buffers (gathered rows,
// staging, split-tile parts: each the size of an operand or of the output,
// e.g. 256 MB for the AG+GEMM's A at m = 16384, k = 8192), only the
// standalone GEMM's workspace for its split tiles (gemm_workspace_bytes; at
// most half the SMs' 128 x 256 fp32 tiles, ~8.5 MB on 132 SMs; none where
// its waves are whole). One workspace serves all the plan's calls, as its
// other state does: two launches of a plan never run at once (LaunchOrder
// orders eager calls; graphs holding the plan must be replayed in order with
// its other calls, mkernel/launch_order.hpp).
inline void alloc_plain_ws(const GemmArgs& dims, void*& ptr, size_t& bytes) {
  bytes = gemm_workspace_bytes(dims);
  if (bytes) MK_CUDA_CHECK(cudaMalloc(&ptr, bytes));
}
// A plan's own device memory (its counters, split-tile scratch, the standalone GEMM's workspace) goes by
// cudaFree, which first waits for the whole device: for work that is not mkernel's too (another library's
// collective waiting for its dead peer), which no MK_* bound covers. The plan's destructor synchronises the
// device first, reported (reported_wait.hpp: after 4 x MK_TIMEOUT_MS a warning names the plan being destroyed
// and what it waits for), before its collective teardown too (whose own synchronisations are reported under
// free_symmetric's and deregister_buffer's names), so the waits after it find the device idle; an idle device
// costs a few microseconds. Called whatever the plan holds (every plan holds some such memory once made; a list
// of what to test would go stale as plans change). A failed synchronisation is left to the steps after it, which
// say it.
inline void settle_before_frees(Communicator& comm, const char* plan) noexcept {
  try {
    (void)synchronize_device(comm.device(), cat("rank ", comm.rank(), ": destroying ", plan, " (its device memory)"));
  } catch (...) {  // (the report's text: no memory) the frees below wait unreported, as before
  }
}
inline void free_plain_ws(void*& ptr, size_t& bytes, const char* what) noexcept {
  if (ptr) teardown_call(cudaFree(ptr), what);
  ptr = nullptr;
  bytes = 0;
}

// A plan's call launches on the calling thread's current device, which must be the plan's (its communicator's):
// its counters, signals and buffers live there (another device's launch faults on them or runs on the wrong GPU,
// and its peers wait for it). Checked first in every plan call (~tens of ns).
inline void check_current_device(const Communicator& comm, const char* op) {
  int cur = -1;
  if (const cudaError_t e = cudaGetDevice(&cur); e != cudaSuccess) {
    cudaGetLastError();
    fail(op, ": cudaGetDevice failed (", cudaGetErrorString(e), ")");
  }
  if (cur != comm.device())
    fail(op, ": the calling thread's current CUDA device is ", cur, ", this plan's (its communicator's) is ",
         comm.device(), ": make it current (cudaSetDevice / torch.cuda.set_device) before the call");
}

// A plan whose communicator was destroyed (mkernel/comm_plan.hpp) fails by name, before anything reads it.
inline void check_communicator_alive(bool communicator_gone, const char* op) {
  if (communicator_gone) fail(op, ": the plan's communicator was destroyed (the plan was released with it)");
}

// check_current_device for a plan, which first refuses a plan whose communicator was destroyed.
inline void check_plan_usable(bool communicator_gone, const Communicator& comm, const char* op) {
  check_communicator_alive(communicator_gone, op);
  check_current_device(comm, op);
}

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// A plan's whole grid: 2..sms CTAs; `opt_ctas` 0 when the grid is the default (every SM but `free_sms`, left to
// the network's kernels: tp::network_free_sms), which the message then says.
inline void check_grid(const char* op, int num_ctas, int sms, int opt_ctas, int free_sms) {
  if (num_ctas < 2 || num_ctas > sms)
    fail(op, ": num_ctas must be in [2, ", sms, "] (got ", num_ctas,
         opt_ctas ? std::string() : cat(": the default, every SM but the ", free_sms, " left to the network's kernels"),
         ")");
}

// Rows per pushed chunk (and per arrival signal): the largest divisor of
// m_local in [16, 128], else the whole block.
inline int64_t chunk_rows(int64_t m_local) {
  for (int64_t d = std::min<int64_t>(128, m_local); d >= 16; --d)
    if (m_local % d == 0) return d;
  return m_local;
}

// IntraComm CTAs: enough to push this rank's rows to all W ranks within a
// quarter of the GEMM's time, at ~44 GB/s per pushing SM (bulk copier on
// H200 NVLink, bench/results) and ~600 TFLOP/s of GEMM; clamped to 2..16. M,
// k and W cancel: 6e14 / (11e9 n), i.e. 4 CTAs at n = 14336, 7 at n = 8192.
// NOTES: next to a running GEMM a pushing SM gets far less than 44 GB/s;
// before own rows were read in place, 8 CTAs beat 4 at M = 4096
// (bench/results/mkbench-20261130T075651Z-1x2_NVLink.md); not re-measured
// since (mkbench ag_gemm's "16 comm CTAs" column is for that).
inline int comm_ctas_heuristic(int64_t n) {
  const int c = static_cast<int>(std::ceil(6e14 / (11e9 * static_cast<double>(n))));
  return std::max(2, std::min(16, c));
}

// The GEMM reads this rank's own rows straight from its input (no local
// copy, no wait) when no tile straddles two ranks' rows.
inline bool own_rows_in_place(int64_t m_local, int64_t block_m) { return m_local % block_m == 0; }

// GEMM+RS tile walk (shares in the order of device/roles/rs_layout.hpp):
// waiting tiles come after every tile they wait for. Swizzle groups must
// not straddle two shares: the largest divisor of the row-blocks per share
// up to max_sw (rs_swizzle_cap). A share's row-blocks complete together at
// the end of their group.
inline int rs_swizzle(int64_t blocks_per_rank, int64_t max_sw = 8) {
  for (int64_t sw = std::min<int64_t>(max_sw, blocks_per_rank); sw > 1; --sw)
    if (blocks_per_rank % sw == 0) return static_cast<int>(sw);
  return 1;
}

// AG+GEMM tile walk: rank-rotated (own rows first), in groups of row-blocks
// walked column by column (tiles in flight share B's column blocks in L2).
// A group holds own row-blocks only, so the first tiles need no remote row:
// the largest divisor of the own row-blocks up to 8. With a group of 8 at M
// = 1024 on 1x2 (4 own row-blocks), the first wave waited for remote rows
// (fused 0.49 ms against 0.38 for the GEMM alone). Own rows that are not a
// whole number of row-blocks are copied like the others: groups of 8.
inline int ag_swizzle(int64_t m_local, int64_t block_m) {
  return own_rows_in_place(m_local, block_m) ? rs_swizzle(m_local / block_m) : 8;
}

// Split tiles' device buffers (GemmParams::split_ws, split_flags; flags
// zeroed): nothing for no split tiles. The plan frees them.
inline void alloc_split(int64_t tiles, int parts, float** ws, uint64_t** flags) {
  if (tiles <= 0) return;
  MK_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(ws),
                           size_t(tiles) * (parts - 1) * gemm::kBlockM * gemm::kBlockN * sizeof(float)));
  const size_t n = size_t(tiles) * (parts - 1) * 2;  // per part and consumer warpgroup
  MK_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(flags), n * sizeof(uint64_t)));
  MK_CUDA_CHECK(cudaMemset(*flags, 0, n * sizeof(uint64_t)));
}
// The split-tail rule lives with the GEMM engine's host code (the standalone GEMM uses it too).
using gemm::split_tail;
using gemm::SplitTail;

// Standalone reduce-scatter: pieces per row-block, so that few row-blocks
// still keep many CTAs busy (one 2 MB row-block per CTA left the reduce-
// scatter of 8 MB 4.8x slower than NCCL's). A piece adds adds_per_block /
// parts to the arrival count (counts stay in step with the GEMM's one add
// per tile) and holds a whole number of 16-byte vectors: the largest
// common divisor of both up to 8.
inline int rs_parts(int64_t adds_per_block, int64_t vecs_per_block) {
  for (int d = 8; d > 1; --d)
    if (adds_per_block % d == 0 && vecs_per_block % d == 0) return d;
  return 1;
}

// Bytes one GPU sends per call, over NVLink and over the network, on N
// nodes of L GPUs (what the kernels move; the benchmarks report these).
struct LinkBytes {
  double nvlink = 0, network = 0;
};
// AG+GEMM: own rows once to each other node's rail peer; own rows and the
// rows that arrived from each other node to every node peer.
inline LinkBytes ag_bytes_per_gpu(int nodes, int local, int64_t m_local, int64_t k) {
  const double block = double(m_local) * double(k) * 2;
  return {double(local - 1) * nodes * block, double(nodes - 1) * block};
}
// GEMM+RS: partial rows of the shares a node peer aggregates (all shares of
// the other local indices) over NVLink; the node's sum of each other node's
// share of this local index over the network (rs_layout.hpp). Exact when a
// share is whole 128-row blocks and n a multiple of 256: the fused op's
// network puts carry whole tiles, so ragged shares send more (2x1, m = 384,
// n = 320: 262144 bytes against 122880); the standalone reduce-scatter
// sends exactly this. The same holds for GEMM+AR below.
inline LinkBytes rs_bytes_per_gpu(int nodes, int local, int64_t m, int64_t n) {
  const double share = double(m) / (double(nodes) * local) * double(n) * 2;
  return {double(local - 1) * nodes * share, double(nodes - 1) * share};
}

// GEMM+AR: one Gather CTA per ~20 GB/s the all-gather of final rows needs
// beside the GEMM (every rank copies m x n bf16 per call, its own share
// locally, the others over NVLink, in the GEMM's time 2 m n k_local /
// ~6e14 s): 6e14 / k_local bytes/s, so 3 at k_local = 14336, 5 at 7168;
// clamped to 2..16. The per-SM rate is a guess beside a running GEMM (the
// bulk copier pulls ~23 GB/s per SM with 16 SMs alone, bench/results);
// mkbench gemm_ar --quick times other counts. Set before 2026-12-02, when
// owners began to store their own share into out themselves (GemmArOptions::
// own_tma_store), leaving (W - 1) / W of those bytes to the gather: not
// re-measured since.
inline int ar_gather_ctas(int64_t k_local) {
  const int c = static_cast<int>(std::ceil(6e14 / (20e9 * static_cast<double>(k_local))));
  return std::max(2, std::min(16, c));
}
// GEMM+AR bytes per GPU: the reduce-scatter's, then the final rows: each
// GPU pulls every share of the other local indices over NVLink (its node
// peers' own shares and the other nodes' shares their rail peers received)
// and sends its own share once to each other node's rail peer.
inline LinkBytes ar_bytes_per_gpu(int nodes, int local, int64_t m, int64_t n) {
  const LinkBytes rs = rs_bytes_per_gpu(nodes, local, m, n);
  const double share = double(m) / (double(nodes) * local) * double(n) * 2;
  return {rs.nvlink + double(local - 1) * nodes * share, rs.network + double(nodes - 1) * share};
}

// GEMM+AR one-shot variant (both ranks sum every tile themselves: no
// final rows to gather, no tail, but every tile pays the owner reduce and
// the plan holds the peer's whole partial result): one node of two ranks
// (with two, both add the same two bf16 partials, and fp32 addition
// commutes: the same bits on both; with more, the order would differ by
// rank), up to kArOneShotMaxElems output elements, where it was measured
// faster than two-shot: H200x2, n = 8192, k = 14336, M = 256 / 512 / 1024
// / 4096: one-shot 0.190 / 0.217 / 0.419 / 1.724 ms, two-shot 0.212 /
// 0.236 / 0.413 / 1.60 (mkbench gemm_ar --quick, 2026-11-30 16:04 and
// 16:02, bench/results mkbench-20261130T160430Z / T160244Z).
constexpr int64_t kArOneShotMaxElems = int64_t(512) * 8192;
inline bool ar_one_shot_possible(int nodes, int world) { return nodes == 1 && world == 2; }
inline bool ar_one_shot_fits(int nodes, int world, int64_t m, int64_t n) {
  return ar_one_shot_possible(nodes, world) && m * n <= kArOneShotMaxElems;
}

// GEMM+AR swizzle: at most 4 row-blocks per group. The last group of the
// own share is gathered (by the other ranks) after the GEMM (the tail), and groups of 8 left
// 2x1 emu M = 4096 at 2.09 ms against 1.57 with 4 (1x2: 4 and 2 0-4%
// faster than 8 at M = 2048..8192; mkbench gemm_ar --quick, 2026-11-30).
// Across nodes with at most 4 row-blocks per share, 2: one group would
// leave every final row to cross the network after the GEMM (2x1 emu M =
// 1024: 0.57 ms with 2, 0.66-0.73 with 4; mkbench-20261130T161058Z).
inline int ar_swizzle(int nodes, int64_t blocks_per_rank) {
  return rs_swizzle(blocks_per_rank, nodes > 1 && blocks_per_rank <= 4 ? 2 : 4);
}

// GEMM+AR two-shot walk: interleave the shares' groups across nodes only.
// Across nodes the final rows must cross the network during the GEMM (2x1
// emu M = 8192: 3.35 ms interleaved, 3.47 own share last); inside a node
// the gather of all final rows at the end costs less than the interleave's
// waits (1x2 M = 1024 / 4096 / 8192: 0.437 / 1.610 / 3.179 ms own share
// last, 0.438 / 1.619 / 3.221 interleaved; mkbench gemm_ar --quick,
// bench/results mkbench-20261130T161033Z and T161058Z).
inline bool ar_interleave(int nodes) { return nodes > 1; }

// The GEMM+RS swizzle cap. Across nodes (one network put per row-block)
// with few row-blocks per share, one group of 8 left a whole share's puts
// to the end of its walk (2x1 emu, M = 2048: 1.47-1.50 ms, slower than M =
// 4096); groups of 2 fixed it (0.72 ms), but the larger M ran slower with
// 2 than with 8 earlier in the day (M = 4096: 1.60 against 1.35 ms; 16384:
// 6.00 against 5.54; bench/results mkbench-20261130T110626Z vs T093703Z,
// 2x1; other changes in between, so L2 reuse is the likely, not a proven,
// cause). So: at most 2 across nodes up to 8 row-blocks per share, else 8.
// Not re-measured with this rule (no device time left that day).
inline int64_t rs_swizzle_cap(int nodes, int64_t blocks_per_rank) {
  return nodes > 1 && blocks_per_rank <= 8 ? 2 : 8;
}

// The fewest CTAs (of at most `avail`) that compute `tiles` equal tiles in
// as few waves as `avail` would (only the last wave may be short, by fewer
// tiles than there are waves). GEMM+RS walks the other
// ranks' tiles first, so with W ranks and tiles a multiple of W x CTAs the
// first own tile starts after every other share's tile was claimed,
// instead of a few own tiles sharing the first wave and waiting for the
// peer's wave to finish and arrive (1x2 M=1024 on 132 CTAs: 4 own tiles
// waited ~70 us, then started the last wave that late; trace of 2026-11-30).
inline int balanced_ctas(int64_t tiles, int avail) {
  if (tiles < 1 || avail < 1) return avail;
  const int64_t waves = (tiles + avail - 1) / avail;
  return static_cast<int>(std::max<int64_t>(2, (tiles + waves - 1) / waves));
}

// The free-SM rule, apart from the communicator: the transport's want
// clamped so that 2 CTAs remain; "" when num_ctas (0: the default grid) fits
// beside it, else why not. A num_ctas outside [2, sms] is left to the plan's
// range check.
inline int grid_free_sms(int transport_free, int sms) { return std::clamp(transport_free, 0, std::max(sms - 2, 0)); }
inline std::string grid_free_sms_error(int free, int num_ctas, int sms) {
  if (free < 1 || num_ctas < 1 || num_ctas > sms || num_ctas <= sms - free) return "";
  return cat("num_ctas = ", num_ctas, " would deadlock: the transport runs kernels on this GPU to deliver data and ",
             "signals and needs ", free, free == 1 ? " SM" : " SMs", " free (MK_NET_FREE_SMS); use at most ",
             sms - free);
}
// Across nodes, how many SMs the plan's persistent kernel must leave free
// for the transport's own kernels (NetCtx::free_sms, MK_NET_FREE_SMS; 0:
// none); an explicit grid larger than the rest is refused. Collective on
// first use (creates the network).
inline int network_free_sms(Communicator& comm, const char* op, int num_ctas, int sms) {
  if (comm.topology().num_nodes == 1) return 0;
  const int free = grid_free_sms(comm.network().device_ctx().free_sms, sms);
  if (const std::string why = grid_free_sms_error(free, num_ctas, sms); !why.empty())
    fail(op, ": ", why, " (", comm.network().transport_name(), ")");
  return free;
}

// The delivery agent's launch argument (net::AgentLaunch): its CTAs across
// nodes when the network delivers through the kernels' agent (emu,
// MK_EMU_AGENTS), else none. Their SMs are among those network_free_sms
// leaves (at least as many there).
// Collective on first use (creates the network).
inline net::AgentLaunch agent_launch(Communicator& comm) {
  if (comm.topology().num_nodes == 1 || !comm.network().device_ctx().agent) return {};
  return net::AgentLaunch{comm.network().device_ctx_ptr(), net::agent_ctas(comm.network().device_ctx())};
}

// Ranks the tensor-parallel plans can serve: nodes of equal size (rail
// peers exist for every local rank), at most kMaxLocalRanks per node and
// max_nodes nodes.
inline void check_topology(const Topology& t, const char* op, int max_nodes) {
  if (!t.uniform)
    fail(op, ": nodes of different sizes (", t.describe(), "); every node must hold the same number of ranks");
  if (t.local_size > kMaxLocalRanks) fail(op, ": at most ", kMaxLocalRanks, " ranks per node (got ", t.local_size, ")");
  if (t.num_nodes > max_nodes) fail(op, ": at most ", max_nodes, " nodes (got ", t.num_nodes, ")");
}

// Every rank must make the same plan: `all` holds each rank's shape string
// (with its signal slots, which ranks use in each other's pools).
inline void check_same_plan(const std::vector<std::string>& all, int me, const char* op, const char* dims) {
  const std::string& mine = all[static_cast<size_t>(me)];
  // The part before the signal indices: the shape and variant.
  auto shape = [](const std::string& s) { return s.substr(0, s.find("signals ")); };
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r] == mine) continue;
    if (shape(all[r]) == shape(mine))  // same plan, other signal words: the ranks' pools went apart
      fail(op, ": rank ", r, " made the same plan (", dims, " = ", all[r], ") with other signal words than rank ",
           me, " (", mine, "); every rank must make and destroy plans in the same order");
    fail(op, ": rank ", r, " made a plan for ", dims, " = ", all[r], ", rank ", me, " for ", mine,
         "; every rank must use the same shape and options (the sizes and variant; for attention also the mask "
         "and the scale, a default one included)");
  }
}

}  // namespace mk::tp
