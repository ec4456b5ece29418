// mkernel: attention (forward) on one GPU, from the engine the ring-attention
// op computes with (device/attention/), for users and for baselines.
//
//   out[b, i, h, :] = softmax(scale * q[b, i, h, :] . k[b, j, h', :]) over j  @ v[b, j, h', :]
//   lse[b, h, i]    = log(sum_j exp(scale * q . k))        (natural log, fp32)
//
// with h' = h / (heads / kv_heads) (grouped-query attention when
// kv_heads < heads). bf16 in and out, fp32 softmax and accumulation. Tensors
// are contiguous in FlashAttention's layout: q, out [batch, seq_q, heads,
// head_dim], k, v [batch, seq_kv, kv_heads, head_dim], lse [batch, heads,
// seq_q]. head_dim 64 or 128; pointers 16-byte aligned. causal: query i
// sees keys j <= i + seq_kv - seq_q (bottom-right aligned, as
// FlashAttention); a query that sees no key gets out 0 and lse -inf.
// Runs on the current CUDA device, on `stream`; no host synchronisation. The
// tensors (and a workspace the call uses) must be that device's or managed
// memory to their last byte, and `stream` its stream: anything else is refused by name
// before anything is queued (best-effort, memoised as mkernel/tp.hpp says).
//
// Under a causal mask the CTAs claim their work units from a counter zeroed
// per call (MK_ATTN_UNITS, include/mkernel/knob_list.inc), kept in the
// library's own stream-ordered memory pool, or in the caller's `workspace`
// (16-byte aligned, at least attention_workspace_bytes(args) bytes; a smaller
// one is refused; when that is 0 the call claims nothing and neither reads
// nor writes the workspace, but a given one must still not overlap the
// tensors). Inside a CUDA-graph capture only a given workspace lets the call
// claim (the pool's memory cannot belong to a graph); without one it walks its
// units statically there (the same result, up to 1.2x slower at some causal
// shapes: bench/results/attention-claim-20261205.md). The call zeroes the
// counter on `stream`; nothing else may use the workspace until the call is
// done.
//
// The kernel's waits are on its own pipeline stages only, each bounded (4 x
// MK_TIMEOUT_MS): with no communicator to record who waited, one that runs
// out (a bug, never a peer) traps without a report, and the call's error is
// the device's launch failure at the next synchronisation (the TP plans' and
// ring attention's engines report such a wait by name: device/bounded_wait.cuh).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace mk {

struct AttentionArgs {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  float* lse = nullptr;
  int64_t batch = 0;
  int64_t seq_q = 0;
  int64_t seq_kv = 0;    // 0 means seq_q
  int64_t heads = 0;
  int64_t kv_heads = 0;  // 0 means heads; must divide heads
  int64_t head_dim = 0;  // 64 or 128
  bool causal = false;
  float scale = 0.f;     // 0 means 1 / sqrt(head_dim)
  int num_ctas = 0;      // CTAs (one per SM); 0 means every SM
  void* workspace = nullptr;  // optional device memory for the unit counter (above); null: the library's pool
  size_t workspace_bytes = 0;
};

// Bytes of workspace a call with these arguments uses (0: it claims nothing;
// MK_ATTN_UNITS is read now); the pointers need not be set. mk::Error for a
// shape attention_fwd refuses (head_dim, sizes, head counts) or num_ctas < 0.
size_t attention_workspace_bytes(const AttentionArgs& args);
void attention_fwd(const AttentionArgs& args, cudaStream_t stream = nullptr);

}  // namespace mk
