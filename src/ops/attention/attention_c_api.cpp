// C ABI of the one-GPU attention (include/mkernel/mkernel.h).
#include "mkernel/attention.hpp"
#include "mkernel/mkernel.h"
#include "mkernel/error.hpp"
#include "src/runtime/c_api_util.hpp"

extern "C" int mk_attention_fwd(const void* q, const void* k, const void* v, void* out, float* lse, int64_t batch,
                                int64_t seq_q, int64_t seq_kv, int64_t heads, int64_t kv_heads, int64_t head_dim,
                                int causal, float scale, int num_ctas, void* stream) {
  return mk_attention_fwd_ws(q, k, v, out, lse, batch, seq_q, seq_kv, heads, kv_heads, head_dim, causal, scale,
                             num_ctas, nullptr, 0, stream);
}

extern "C" int mk_attention_fwd_ws(const void* q, const void* k, const void* v, void* out, float* lse, int64_t batch,
                                   int64_t seq_q, int64_t seq_kv, int64_t heads, int64_t kv_heads, int64_t head_dim,
                                   int causal, float scale, int num_ctas, void* workspace, size_t workspace_bytes,
                                   void* stream) {
  return mk::capi::guarded([&] {
    mk::attention_fwd(mk::AttentionArgs{.q = q, .k = k, .v = v, .out = out, .lse = lse, .batch = batch,
                                        .seq_q = seq_q, .seq_kv = seq_kv, .heads = heads, .kv_heads = kv_heads,
                                        .head_dim = head_dim, .causal = causal != 0, .scale = scale,
                                        .num_ctas = num_ctas, .workspace = workspace,
                                        .workspace_bytes = workspace_bytes},
                      static_cast<cudaStream_t>(stream));
  });
}

extern "C" int mk_attention_workspace_bytes(int64_t batch, int64_t seq_q, int64_t seq_kv, int64_t heads,
                                            int64_t kv_heads, int64_t head_dim, int causal, int num_ctas, size_t* out) {
  return mk::capi::guarded([&] {
    if (!out) mk::fail("mk_attention_workspace_bytes: out is NULL");
    *out = mk::attention_workspace_bytes(mk::AttentionArgs{.batch = batch, .seq_q = seq_q, .seq_kv = seq_kv,
                                                           .heads = heads, .kv_heads = kv_heads,
                                                           .head_dim = head_dim, .causal = causal != 0,
                                                           .num_ctas = num_ctas});
  });
}
