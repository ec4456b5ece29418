// C ABI of the one-GPU attention (include/mkernel/mkernel.h).
#include "mkernel/attention.hpp"
#include "mkernel/mkernel.h"
#include "src/runtime/c_api_util.hpp"

extern "C" int mk_attention_fwd(const void* q, const void* k, const void* v, void* out, float* lse, int64_t batch,
                                int64_t seq_q, int64_t seq_kv, int64_t heads, int64_t kv_heads, int64_t head_dim,
                                int causal, float scale, int num_ctas, void* stream) {
  return mk::capi::guarded([&] {
    mk::attention_fwd(mk::AttentionArgs{.q = q, .k = k, .v = v, .out = out, .lse = lse, .batch = batch,
                                        .seq_q = seq_q, .seq_kv = seq_kv, .heads = heads, .kv_heads = kv_heads,
                                        .head_dim = head_dim, .causal = causal != 0, .scale = scale,
                                        .num_ctas = num_ctas},
                      static_cast<cudaStream_t>(stream));
  });
}
