// C ABI of the ring-attention plan (include/mkernel/mkernel.h).
#include "mkernel/mkernel.h"
#include "mkernel/ring_attention.hpp"
#include "src/runtime/c_api_util.hpp"

struct mk_ring_attn_s {
  std::unique_ptr<mk::RingAttention> plan;
};

using mk::capi::guarded;
using mk::capi::null_arg;

extern "C" {

int mk_ring_attn_create(mk_comm_t comm, int64_t batch, int64_t s_local, int64_t heads, int64_t kv_heads,
                        int64_t head_dim, int causal, float scale, int num_comm_ctas, int num_ctas,
                        mk_ring_attn_t* out) {
  mk::RingAttentionOptions opt;
  opt.num_comm_ctas = num_comm_ctas;
  opt.num_ctas = num_ctas;
  opt.scale = scale;
  return mk::capi::create_plan<mk_ring_attn_s, mk::RingAttention>(comm, out, batch, s_local, heads, kv_heads,
                                                                  head_dim, causal != 0, opt);
}

int mk_ring_attn_run(mk_ring_attn_t plan, const void* q, const void* k, const void* v, void* out, float* lse,
                     void* stream) {
  if (!plan) return null_arg("plan");
  return guarded([&] { plan->plan->run(q, k, v, out, lse, static_cast<cudaStream_t>(stream)); });
}

int mk_ring_attn_destroy(mk_ring_attn_t plan) {
  if (!plan) return 0;
  return guarded([&] { delete plan; });
}

}  // extern "C"
