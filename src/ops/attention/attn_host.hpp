// mkernel: host side of the attention engine, shared by the one-GPU op
// (include/mkernel/attention.hpp) and the ring-attention op: validation,
// 4-D tensor maps, parameters, launch.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "device/attention/attn_params.hpp"
#include "mkernel/attention.hpp"

namespace mk::attn {

// A bf16 tensor [d3][d2][d1][d0] (d0 contiguous, 64 or 128 elements) for the
// engine's TMA loads: strides in bytes of dims 1..3, boxes of 64 x b1 x b2 x 1
// in the 128-byte swizzle. Cached per thread (steady-state calls skip the
// driver call).
CUtensorMap make_map(const void* base, const int64_t (&dims)[4], const int64_t (&strides)[3], uint32_t box1,
                     uint32_t box2, const char* what);

// A softmax scale the kernels take: finite and >= 0 (0: 1/sqrt(head_dim)), and scale log2(e) finite too (the
// kernels work in base 2: 3e38 overflowed there, every output NaN).
inline bool scale_ok(float scale) {
  return scale >= 0.f && std::isfinite(scale) && std::isfinite(scale * 1.4426950408889634f);
}

// The checks every attention call shares: head_dim, heads / kv_heads, sizes
// (make_params checks the pointers). `op` names the caller in messages.
void check_shape(const char* op, int64_t batch, int64_t seq_q, int64_t seq_kv, int64_t heads, int64_t kv_heads,
                 int64_t head_dim);

// Validates a one-GPU call (mk::Error naming what is wrong) and returns its
// parameters: one query segment, one key segment, units walked statically
// head-major (attention_fwd then applies MK_ATTN_UNITS / MK_ATTN_GROUP_HEADS;
// the ring op sets its own), K/V maps in boxes of block_n keys
// (the kernel's: kBlockNOneGpu for the one-GPU op, block_n_side(head_dim)
// for the ring op, whose kernel runs a side role).
AttnParams make_params(const AttentionArgs& a, int block_n = kBlockNOneGpu, const char* op = "attention");

// Maps of q (dims {D, heads, S, batch}) and of a K or V in the caller's
// layout (dims {D, kv_heads, S, batch}).
CUtensorMap q_map(const void* q, int64_t batch, int64_t seq, int64_t heads, int64_t head_dim, const char* what);

// The query and key segments of rank `rank` of a ring of `world` ranks with
// s_local tokens each: causal plans take zigzag shards (rank r: chunks r and
// 2 world - 1 - r of 2 world), others the rank's contiguous block. Keys are
// read in kv_order (source ranks, own first): own K/V from map 0, the
// others' from map 1 (batch coordinate src x batch) after the arrival
// signals src x chunks + chunk. Sets p.qseg/n_qsegs/q_tiles and p.kvseg/n_kvsegs.
void ring_segments(AttnParams& p, int rank, int world, int32_t s_local, bool causal, const std::vector<int>& kv_order,
                   int64_t batch, int64_t chunks);

// Launches the engine on `grid` CTAs (all compute); p.block_n must be
// kBlockNOneGpu (the kernel's block).
void launch(const AttnParams& p, int grid, cudaStream_t stream);

}  // namespace mk::attn
