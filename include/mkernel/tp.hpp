// mkernel: tensor-parallel fused ops (issues tp-ag-rs, tp-ar): AgGemm,
// GemmRs and GemmAr (below), each ONE persistent kernel per call (on one rank, where there is nothing to
// gather or reduce, mostly the standalone GEMM instead: single_rank_plain(), MK_TP_SINGLE_RANK).
//
//   AgGemm: out = allgather(a_local) x b^T in one persistent kernel: each
//   rank's rows travel to every rank of its node over NVLink (IntraComm
//   role) and once per other node over the network to the rank of the same
//   local index (InterSend), which forwards them over NVLink in its node;
//   the GEMM (Compute role) starts on local rows and takes remote row blocks
//   as their signals arrive.
//
// A plan is made once per shape (collective: it allocates the symmetric
// gathered buffer, reserves signals and checks that every rank asked for the
// same shape; on one rank, where every call takes the plain path, it
// allocates none of the fused kernel's buffers), then run any number of times with no host synchronisation
// between calls: each call's epoch comes from a counter on the device, so
// CUDA-graph replays get fresh epochs too. A plan orders its own calls on the
// device: a call on another stream than the previous one waits for it there
// (mkernel/launch_order.hpp); calls captured in a CUDA graph are ordered by
// the stream the graph is launched on. Every rank makes the same calls in
// the same order.
//
// Every call checks its pointers before anything is enqueued: 16-byte aligned, apart where they must be, and
// device (or managed) memory of the plan's GPU from the first byte to the last the shape needs (host memory,
// another GPU's, or a buffer whose last needed byte is not this GPU's memory is refused by name); so is a stream
// of another GPU (outside a capture). A refusal is this rank's alone: the other ranks' calls wait for it until
// MK_TIMEOUT_MS. The checks are best-effort: a buffer's first and last needed bytes are asked (a buffer too short
// whose end lands in another allocation of the GPU passes), and a pointer (with its size) or stream that passed
// lately is not asked again (a process-wide memo of 64), so memory or a stream freed and made again at the same
// address in between is not seen.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "mkernel/comm_plan.hpp"
#include "mkernel/graph_uses.hpp"
#include "mkernel/launch_order.hpp"
#include "mkernel/signal_lease.hpp"
#include "mkernel/trace_log.hpp"

namespace mk {

class Communicator;
struct SymmetricBuffer;
namespace net {
struct NetCtx;
}
namespace tp {
struct RsPlan;  // the reduce-scatter state GemmRs and GemmAr share (src/ops/gemm_rs/rs_plan.hpp)
}

struct AgGemmOptions {
  int num_comm_ctas = 0;  // IntraComm CTAs; 0: the heuristic (see AgGemm::num_comm_ctas)
  int num_ctas = 0;       // whole grid; 0: every SM
  int swizzle = 0;        // row-blocks per group of the tile walk (1-16); 0: the heuristic (tp::ag_swizzle)
  bool split_tail = true; // a last partial wave of tiles in parts of K (tp::split_tail)
  int max_split_parts = 0; // parts per split tile at most: 2-8; 0: 8 (the plan picks the count, tp::split_tail)
  bool join = true;       // comm CTAs join the compute role once their rows are sent
};

class AgGemm final : private CommPlan {  // (registered with its communicator: mkernel/comm_plan.hpp)
 public:
  // a_local: [m_local x k] bf16 per rank; b: [n x k] bf16 (this rank's
  // column shard, nn.Linear layout); out: [world x m_local, n] bf16.
  // n and k multiples of 64, m_local >= 1. Nodes of equal size (up to 8
  // GPUs each, up to 16 nodes).
  AgGemm(Communicator& comm, int64_t m_local, int64_t n, int64_t k, const AgGemmOptions& opt = {});
  // Collective, like the constructor: every rank destroys its plans in the same order. It synchronises this rank's
  // device (all its work, not only the plan's), then frees the plan's symmetric memory and network region and gives
  // its signal words back with the other ranks.
  ~AgGemm();
  AgGemm(const AgGemm&) = delete;
  AgGemm& operator=(const AgGemm&) = delete;

  // out = allgather(a_local) x b^T; if `gathered` is not null it also
  // receives allgather(a_local) ([world x m_local, k], for the backward).
  void run(const void* a_local, const void* b, void* out, cudaStream_t stream, void* gathered = nullptr);
  // The all-gather alone (no compute): gathered = allgather(a_local).
  void all_gather(const void* a_local, void* gathered, cudaStream_t stream);

  int num_comm_ctas() const { return num_comm_; }
  int num_compute_ctas() const { return num_ctas_ - num_comm_; }
  int64_t rows_per_chunk() const { return rows_per_chunk_; }
  int swizzle() const { return swizzle_; }
  int64_t split_tiles() const { return split_tiles_; }
  int split_parts() const { return split_tiles_ ? split_parts_ : 0; }  // 0: no split tiles
  // One rank, where MK_TP_SINGLE_RANK picks the plain path (auto, the default, mostly does; see the knob): run()
  // is the standalone GEMM (on the options' num_ctas, else every SM, with their swizzle; its split tiles in the
  // plan's own workspace, in graph captures too) and the collective a copy; the other options and the CTA counts
  // above are then unused, and such calls log no trace events.
  bool single_rank_plain() const { return plain_; }
  // Whether a launch of this plan was ever captured in a CUDA graph (stream
  // capture): replaying such a graph uses the plan's memory, so the plan must
  // outlive the graph. Python's bounded plan cache keeps it while a graph holds it.
  bool captured() const { return graphs_.ever(); }
  // Whether a graph (or an executable graph) holding one of those launches
  // still exists, or its launches are still running (mkernel/graph_uses.hpp).
  bool graphs_alive() const { return graphs_.alive(); }
  // Whether one of its calls is enqueuing its work now (on another host thread: LaunchOrder::busy).
  bool in_call() const noexcept { return order_.busy(); }
  // The plan's symmetric gathered buffer (valid until the next call). It lacks this rank's own rows after
  // run() on one node when m_local is a multiple of 128 (the GEMM reads them in place), and after all_gather()
  // on one node (every m_local: the copy skips them); pass `gathered` for all rows. Not an argument of this
  // plan's calls (refused: its peers write into it). Null where the plan has none: one rank on the plain path
  // (single_rank_plain(): the plan then allocates none of its fused kernel's buffers).
  const void* gathered_buffer() const;

  // Diagnostics: log up to events_per_cta device events per CTA of every
  // later call (device/trace.hpp: kernel entry and exit, the engine's start,
  // end and work units); 0 turns it off. read_trace() waits for the device
  // and returns the last call's events, in CTA order.
  void enable_trace(int events_per_cta);
  std::vector<TraceEvent> read_trace() const;

 private:
  LaunchOrder::Call launch(const void* a_local, const void* b, void* out, bool compute, cudaStream_t stream);
  void copy_gathered(const void* a_local, void* gathered, cudaStream_t stream);
  void copy_all_gathered(const void* a_local, void* gathered, cudaStream_t stream);
  void release() noexcept;  // the destructor's work, also when the constructor throws after reserving
  void release_with_communicator() noexcept override;  // release(), signal words too

  Communicator& comm_;
  int64_t m_local_, n_, k_;
  int64_t rows_per_chunk_ = 0;
  int num_ctas_ = 0, num_comm_ = 0, swizzle_ = 8;
  bool join_ = true;  // finished comm CTAs join the compute role
  bool plain_ = false;                           // single_rank_plain()
  void* plain_ws_ = nullptr;                      // the plain path's workspace for split tiles (gemm.hpp)
  size_t plain_ws_bytes_ = 0;
  GraphUses graphs_;                             // captured(), graphs_alive()
  int plain_ctas_ = 0, plain_swizzle_ = 0;        // the plain path's GemmArgs (the options' num_ctas, swizzle)
  int64_t split_tiles_ = 0;  // GemmParams::split_tiles, with its workspace and flags
  int split_parts_ = 2;
  float* split_ws_ = nullptr;
  uint64_t* split_flags_ = nullptr;
  int sig_entry_ = 0, sig_arrival_ = 0;
  SignalLease signals_;  // sig_entry_ and sig_arrival_'s words, given back after the destructor's body
  SymmetricBuffer* gathered_ = nullptr;
  uint64_t* epoch_counter_ = nullptr;  // device: calls completed (+ a CTA counter); see device/epoch.cuh
  TraceLog trace_{"AgGemm"};
  LaunchOrder order_{"AgGemm's launch-order event"};  // calls on other streams wait for the previous one
  const net::NetCtx* netctx_ = nullptr;  // the network's device context (several nodes)
  int net_region_ = 0;
};

// GEMM + ReduceScatter: rank r holds a [m x k_local] and b [n x k_local] (a
// row-parallel layer's shards); out_r = rows [r m/W, (r+1) m/W) of the sum
// over ranks of a b^T. One persistent kernel in which every SM computes:
// other ranks' rows first, each tile stored into its owner's staging slot
// (NVLink inside a node, one network put per row-block across nodes) with a
// row-block signal; own rows last, each tile summed with the other ranks'
// tiles (arrived meanwhile) before its final bf16 store into out.
struct GemmRsOptions {
  int num_reduce_ctas = 0;  // reduce_scatter()'s grid is 16 + this many CTAs (run() has none); 0: 16, or as many
                            // as the SMs leave (none: reduce_scatter() refuses, run() is not concerned)
  int num_ctas = 0;         // run()'s grid; 0: every SM
  int swizzle = 0;          // run()'s row-blocks per group of the tile walk, dividing ceil(m / world / 128);
                            // 0: the heuristic
  int async_store = -1;     // run(): other ranks' tiles leave through bulk copies (1) or plain stores (0); -1: 1
                            // unless the transport runs kernels on the GPU (then 0; 1 is refused there)
  // run(): a last partial wave of own tiles in parts of K on every SM, where tp::split_tail's rule finds
  // it faster than whole waves on fewer CTAs (the own tiles come last in the walk: GemmParams::split_last)
  bool split_tail = true;
  int max_split_parts = 0;  // parts per split tile at most: 2-8; 0: 8
  // run(): the own final rows leave by TMA stores from shared memory (1) or by plain stores from the
  // registers (0); -1: 1
  int own_tma_store = -1;
};

class GemmRs final : private CommPlan {  // (registered with its communicator: mkernel/comm_plan.hpp)
 public:
  // m must be a multiple of world (any rows per rank: a share that ends
  // inside a 128-row tile is computed in whole tiles, its extra rows
  // dropped); n and k_local multiples of 64. At most 8 ranks: N nodes of L
  // GPUs, reduced inside each node first, then one share per GPU over the
  // network (device/roles/rs_layout.hpp).
  GemmRs(Communicator& comm, int64_t m, int64_t n, int64_t k_local, const GemmRsOptions& opt = {});
  // Collective, like the constructor: every rank destroys its plans in the same order. It synchronises this rank's
  // device (all its work, not only the plan's), then frees the plan's symmetric memory and network region and gives
  // its signal words back with the other ranks.
  ~GemmRs();
  GemmRs(const GemmRs&) = delete;
  GemmRs& operator=(const GemmRs&) = delete;

  // out [m / world x n] = this rank's rows of sum_ranks a b^T.
  void run(const void* a, const void* b, void* out, cudaStream_t stream);
  // The reduce-scatter alone: out = this rank's rows of sum_ranks x ([m x n] bf16).
  void reduce_scatter(const void* x, void* out, cudaStream_t stream);

  int num_reduce_ctas() const { return num_reduce_; }  // reduce_scatter()'s grid: 16 + this (0: no room for it)
  int swizzle() const { return swizzle_; }
  int num_compute_ctas() const { return num_ctas_; }    // of run()
  int64_t split_tiles() const { return split_tiles_; }  // run(): own tiles computed in parts (0: none)
  int split_parts() const { return split_tiles_ ? split_parts_ : 0; }
  // One rank, where MK_TP_SINGLE_RANK picks the plain path (auto, the default, mostly does; see the knob): run()
  // is the standalone GEMM (on the options' num_ctas, else every SM, with their swizzle; its split tiles in the
  // plan's own workspace, in graph captures too) and the collective a copy; the other options and the CTA counts
  // above are then unused, and such calls log no trace events.
  bool single_rank_plain() const { return plain_; }
  // Whether a launch of this plan was ever captured in a CUDA graph (stream
  // capture): replaying such a graph uses the plan's memory, so the plan must
  // outlive the graph. Python's bounded plan cache keeps it while a graph holds it.
  bool captured() const { return graphs_.ever(); }
  // Whether a graph (or an executable graph) holding one of those launches
  // still exists, or its launches are still running (mkernel/graph_uses.hpp).
  bool graphs_alive() const { return graphs_.alive(); }
  // Whether one of its calls is enqueuing its work now (on another host thread: LaunchOrder::busy).
  bool in_call() const noexcept { return order_.busy(); }

  // Diagnostics: log up to events_per_cta device events per CTA of every
  // later call (device/trace.hpp: kernel entry and exit, the engine's start,
  // end and work units); 0 turns it off. read_trace() waits for the device
  // and returns the last call's events, in CTA order.
  void enable_trace(int events_per_cta);
  std::vector<TraceEvent> read_trace() const;

 private:
  LaunchOrder::Call launch(const void* a, const void* b, const void* x, void* out, cudaStream_t stream);
  void release() noexcept;  // the destructor's work, also when the constructor throws after reserving
  void release_with_communicator() noexcept override;  // release(), signal words too

  Communicator& comm_;
  int64_t m_, n_, k_;
  int num_ctas_ = 0, num_reduce_ = 0, swizzle_ = 1;
  bool async_ = true;  // asynchronous epilogue (not next to a transport that needs an SM)
  bool own_tma_ = true;  // GemmRsOptions::own_tma_store
  bool plain_ = false;                           // single_rank_plain()
  void* plain_ws_ = nullptr;                      // the plain path's workspace for split tiles (gemm.hpp)
  size_t plain_ws_bytes_ = 0;
  GraphUses graphs_;                             // captured(), graphs_alive()
  int plain_ctas_ = 0, plain_swizzle_ = 0;        // the plain path's GemmArgs (the options' num_ctas, swizzle)
  std::unique_ptr<tp::RsPlan> rs_;  // signals, staging slots, device counters
  int64_t split_tiles_ = 0;  // GemmParams::split_tiles (split_last), with its workspace and flags
  int split_parts_ = 2;
  float* split_ws_ = nullptr;
  uint64_t* split_flags_ = nullptr;
  TraceLog trace_{"GemmRs"};
  LaunchOrder order_{"GemmRs's launch-order event"};  // calls on other streams wait for the previous one
};

// GEMM + AllReduce: rank r holds a [m x k_local] and b [n x k_local]; every
// rank gets out [m x n] = sum over ranks of a b^T, bit-identical on every
// rank. One persistent kernel: the GEMM+RS walk (tiles of other ranks'
// shares stored into their owners' staging slots; this rank's own tiles
// summed with the arrived partials); across nodes (interleave's default)
// it interleaves the shares group by group, so owners finish their rows
// throughout the GEMM, and on one node it walks the own share last, as
// GemmRs does; each finished row-block is signalled (and sent
// once per other node to the rail peer, which fans it out inside its node)
// and Gather CTAs pull every share's finished rows into out as they come.
// Compute CTAs that run out of tiles join the gather. Every rank copies the
// owner's bf16 sum, so results agree bit for bit.
struct GemmArOptions {
  int num_gather_ctas = 0;  // run(): Gather CTAs beside the GEMM, 1..num_ctas - 1; 0: the heuristic (tp::ar_gather_ctas)
  int num_ctas = 0;         // run()'s whole grid; 0: every SM (less MK_NET_FREE_SMS next to emu/fabric)
  int swizzle = 0;          // row-blocks per group of the walk, dividing ceil(m / world / 128); 0: the heuristic
  int async_store = -1;     // as GemmRsOptions::async_store
  int num_reduce_ctas = 0;  // all_reduce()'s grid is 16 + this + 1 CTAs; 0: as GemmRsOptions::num_reduce_ctas
  // run(): -1 picks by the measured crossover (tp::ar_one_shot_fits); 1
  // one-shot: one node of two ranks only, each pushes every partial tile
  // to the other and sums every tile itself (no Gather CTAs; the plan
  // holds the peer's whole partial result); 0 two-shot (owners, then the
  // gather). num_gather_ctas, async_store, interleave and own_tma_store are
  // two-shot's: a one-shot run() checks them and leaves them unused.
  int one_shot = -1;
  // run(), two-shot: 1 interleaves the shares' row-block groups (owners
  // finish rows all along); 0 walks every other share first and the own
  // share last, as GemmRs (the final rows are gathered at the end); -1:
  // interleaved across nodes only (tp::ar_interleave).
  int interleave = -1;
  // run(), two-shot: the own final rows leave by TMA stores from shared memory, into the staging buffer
  // (where node peers read them) and from the same shared memory into out, so the gather skips the own
  // share (1); or by plain stores into the staging buffer, out filled by the gather (0); -1: 1
  int own_tma_store = -1;
};

class GemmAr final : private CommPlan {  // (registered with its communicator: mkernel/comm_plan.hpp)
 public:
  // m must be a multiple of world (any rows per rank); n and k_local
  // multiples of 64. At
  // most 8 ranks: N nodes of L GPUs each (equal sizes), as GemmRs.
  GemmAr(Communicator& comm, int64_t m, int64_t n, int64_t k_local, const GemmArOptions& opt = {});
  // Collective, like the constructor: every rank destroys its plans in the same order. It synchronises this rank's
  // device (all its work, not only the plan's), then frees the plan's symmetric memory and network region and gives
  // its signal words back with the other ranks.
  ~GemmAr();
  GemmAr(const GemmAr&) = delete;
  GemmAr& operator=(const GemmAr&) = delete;

  // out [m x n] = sum over ranks of a b^T (the same bits on every rank).
  void run(const void* a, const void* b, void* out, cudaStream_t stream);
  // The all-reduce alone: out = sum over ranks of x ([m x n] bf16), the
  // same bits on every rank; in place (out == x) allowed: every rank's
  // rows of a row-block are read before any rank can gather its sum.
  void all_reduce(const void* x, void* out, cudaStream_t stream);

  bool one_shot() const { return one_shot_; }                       // run()'s variant
  int num_gather_ctas() const { return one_shot_ ? 0 : num_gather_; }
  int num_compute_ctas() const { return one_shot_ ? num_os_ctas_ : num_ctas_ - num_gather_; }  // of run()
  int num_reduce_ctas() const { return num_reduce_; }               // all_reduce()'s grid: 16 + this + 1 (0: none)
  int swizzle() const { return swizzle_; }
  // One rank, where MK_TP_SINGLE_RANK picks the plain path (auto, the default, mostly does; see the knob): run()
  // is the standalone GEMM (on the options' num_ctas, else every SM, with their swizzle; its split tiles in the
  // plan's own workspace, in graph captures too) and the collective a copy; the other options and the CTA counts
  // above are then unused, and such calls log no trace events.
  bool single_rank_plain() const { return plain_; }
  // Whether a launch of this plan was ever captured in a CUDA graph (stream
  // capture): replaying such a graph uses the plan's memory, so the plan must
  // outlive the graph. Python's bounded plan cache keeps it while a graph holds it.
  bool captured() const { return graphs_.ever(); }
  // Whether a graph (or an executable graph) holding one of those launches
  // still exists, or its launches are still running (mkernel/graph_uses.hpp).
  bool graphs_alive() const { return graphs_.alive(); }
  // Whether one of its calls is enqueuing its work now (on another host thread: LaunchOrder::busy).
  bool in_call() const noexcept { return order_.busy(); }

  // Diagnostics: log up to events_per_cta device events per CTA of every
  // later call (device/trace.hpp: kernel entry and exit, the engine's start,
  // end and work units); 0 turns it off. read_trace() waits for the device
  // and returns the last call's events, in CTA order.
  void enable_trace(int events_per_cta);
  std::vector<TraceEvent> read_trace() const;

 private:
  LaunchOrder::Call launch(const void* a, const void* b, const void* x, void* out, cudaStream_t stream);
  void release() noexcept;  // the destructor's work, also when the constructor throws after reserving
  void release_with_communicator() noexcept override;  // release(), signal words too

  Communicator& comm_;
  int64_t m_, n_, k_;
  int num_ctas_ = 0, num_gather_ = 0, num_reduce_ = 0, swizzle_ = 1;
  int sig_fin_ = 0;  // signal pool index: final rows ready, per global row-block
  bool async_ = true;
  bool own_tma_ = true;  // GemmArOptions::own_tma_store
  bool plain_ = false;      // single_rank_plain()
  void* plain_ws_ = nullptr;  // the plain path's workspace for split tiles (gemm.hpp)
  size_t plain_ws_bytes_ = 0;
  GraphUses graphs_;  // captured(), graphs_alive()
  int plain_ctas_ = 0, plain_swizzle_ = 0;  // the plain path's GemmArgs (the options' num_ctas, swizzle)
  bool one_shot_ = false;
  bool interleave_ = true;
  int num_os_ctas_ = 0;                   // one-shot run()'s grid
  int sig_bcast_ = 0;                     // one-shot: partial tiles arrived, per node peer and tile
  int os_sig_entry_ = 0;                  // one-shot: entry signals of its own family of calls
  SignalLease os_signals_;                // one-shot: sig_bcast_ and os_sig_entry_'s words
  uint64_t* os_epoch_ = nullptr;          // one-shot: epoch, finished CTAs, tile counter (device)
  SymmetricBuffer* os_staging_ = nullptr;  // one-shot: one whole partial result per node peer
  std::unique_ptr<tp::RsPlan> rs_;  // the reduce-scatter's signals and staging slots, then the final rows (ar_gather.cuh)
  TraceLog trace_{"GemmAr"};
  LaunchOrder order_{"GemmAr's launch-order event"};  // calls on other streams wait for the previous one
};

}  // namespace mk
