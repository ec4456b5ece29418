// mkernel: ring attention (sequence parallel), forward, one persistent kernel
// per call: the attention engine (device/attention/) computes over this
// rank's own K/V at once and over every other rank's as it arrives, while
// the idle warps of the engine's producer warpgroups move K and V head by
// head over NVLink inside a node and rail-aligned over the network between
// nodes (each shard crosses the network once per node, then fans out over
// NVLink): no SM is taken from the compute. The softmax runs online in fp32 over the whole sequence: there
// are no per-step partial outputs to merge in bf16.
//
// Per rank: q, out [batch, s_local, heads, head_dim], k, v [batch, s_local,
// kv_heads, head_dim] (bf16, contiguous), lse [batch, heads, s_local] fp32
// (natural log). Sharding: causal plans use the zigzag layout (rank r holds
// chunks r and 2W - 1 - r of 2W equal chunks of the sequence; see
// mkernel.zigzag_shard), non-causal plans any layout (rank r's tokens are
// taken as [r s_local, (r + 1) s_local) but no result depends on it).
// run() refuses, by name and before anything is queued, a tensor that is not
// device or managed memory of the plan's GPU to its last byte, or a stream of
// another GPU (as the TP plans: mkernel/tp.hpp; the refusal is this rank's
// alone, the other ranks' calls wait for it until MK_TIMEOUT_MS).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "mkernel/communicator.hpp"
#include "mkernel/comm_plan.hpp"
#include "mkernel/graph_uses.hpp"
#include "mkernel/launch_order.hpp"
#include "mkernel/trace_log.hpp"

namespace mk {

namespace net {
struct NetCtx;
}

struct RingAttentionOptions {
  int num_comm_ctas = 0;  // CTAs whose spare producer warps move K/V (clamped to the grid); 0: every CTA
  int num_ctas = 0;       // 0: every SM (less MK_NET_FREE_SMS next to emu/fabric)
  float scale = 0.f;      // 0: 1 / sqrt(head_dim)
};

class RingAttention final : private CommPlan {  // (registered with its communicator: mkernel/comm_plan.hpp)
 public:
  // Collective: every rank makes the same plan (checked once, here).
  RingAttention(Communicator& comm, int64_t batch, int64_t s_local, int64_t heads, int64_t kv_heads, int64_t head_dim,
                bool causal, const RingAttentionOptions& opt = {});
  // Collective, like the constructor: every rank destroys its plans in the same order. It synchronises this rank's
  // device (all its work, not only the plan's), then frees the plan's symmetric memory and network region and gives
  // its signal words back with the other ranks.
  ~RingAttention();
  RingAttention(const RingAttention&) = delete;
  RingAttention& operator=(const RingAttention&) = delete;

  // out, lse for this rank's queries over the whole sequence. No host
  // synchronisation; CUDA-graph capturable; stream-ordered with other calls.
  void run(const void* q, const void* k, const void* v, void* out, float* lse, cudaStream_t stream);

  int num_comm_ctas() const { return num_comm_; }
  int num_ctas() const { return num_ctas_; }
  // Bytes this GPU sends per call: over NVLink, and over the network.
  int64_t nvlink_bytes_sent() const;
  int64_t network_bytes_sent() const;
  // Whether a launch of this plan was ever captured in a CUDA graph (stream
  // capture): replaying such a graph uses the plan's memory, so the plan must
  // outlive the graph. Python's bounded plan cache keeps it while a graph holds it.
  bool captured() const { return graphs_.ever(); }
  // Whether a graph (or an executable graph) holding one of those launches
  // still exists, or its launches are still running (mkernel/graph_uses.hpp).
  bool graphs_alive() const { return graphs_.alive(); }
  // Whether one of its calls is enqueuing its work now (on another host thread: LaunchOrder::busy).
  bool in_call() const noexcept { return order_.busy(); }

  // Diagnostics: record up to events_per_cta device events per CTA of every
  // later call (device/trace.hpp: chunk waits, pushes, network puts); 0
  // turns it off. read_trace() waits for the device and returns the last
  // call's events, in CTA order.
  using TraceEvent = mk::TraceEvent;
  void enable_trace(int events_per_cta);
  std::vector<TraceEvent> read_trace() const;

 private:
  void release() noexcept;  // the destructor's work, also when the constructor throws after reserving
  void release_with_communicator() noexcept override;  // release(), signal words too

  Communicator& comm_;
  int64_t batch_, s_local_, heads_, kv_heads_, head_dim_;
  bool causal_;
  GraphUses graphs_;  // captured(), graphs_alive()
  float scale_;
  int num_ctas_ = 0, num_comm_ = 0;
  int local_size_, num_nodes_;  // the topology's, kept for the byte counts (they outlive the communicator)
  int sig_entry_ = 0, sig_arrival_ = 0;
  SignalLease signals_;  // sig_entry_ and sig_arrival_'s words, given back after the destructor's body
  SymmetricBuffer* gathered_ = nullptr;
  const net::NetCtx* netctx_ = nullptr;
  int net_region_ = -1;
  uint64_t* epoch_counter_ = nullptr;  // device: calls done, CTAs finished, unit counter, push claims (device/epoch.cuh)
  std::vector<int> kv_order_;          // source ranks in the order the engine reads their keys (own first)
  TraceLog trace_{"RingAttention"};   // device event log (enable_trace)
  LaunchOrder order_{"RingAttention's launch-order event"};  // calls on other streams wait for the previous one
};

}  // namespace mk
