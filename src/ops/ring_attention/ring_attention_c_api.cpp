// C ABI of the ring-attention plan (include/mkernel/mkernel.h).
#include "mkernel/mkernel.h"
#include "mkernel/ring_attention.hpp"
#include "src/runtime/c_api_util.hpp"

struct mk_ring_attn_s {
  static constexpr mk::capi::HandleKind handle_kind() { return mk::capi::HandleKind::RingAttn; }
  mk::capi::HandleKind kind = handle_kind();  // (first: mk::capi::HandleKind)
  std::unique_ptr<mk::RingAttention> plan;
  mk_comm_s* owner = nullptr;  // (counted on it: mk::capi::create_plan)
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
  return mk::capi::create_plan<mk_ring_attn_s, mk::RingAttention>(__func__, comm, out, batch, s_local, heads, kv_heads,
                                                                  head_dim, causal != 0, opt);
}

int mk_ring_attn_run(mk_ring_attn_t plan, const void* q, const void* k, const void* v, void* out, float* lse,
                     void* stream) {
  if (const int rc = mk::capi::handle_arg(__func__, "plan", plan, mk_ring_attn_s::handle_kind())) return rc;
  return guarded([&] { plan->plan->run(q, k, v, out, lse, static_cast<cudaStream_t>(stream)); });
}

int mk_ring_attn_trace(mk_ring_attn_t plan, int events_per_cta) {
  if (const int rc = mk::capi::handle_arg(__func__, "plan", plan, mk_ring_attn_s::handle_kind())) return rc;
  return guarded([&] { plan->plan->enable_trace(events_per_cta); });
}

int mk_ring_attn_read_trace(mk_ring_attn_t plan, uint64_t* events, int64_t capacity, int64_t* count) {
  if (const int rc = mk::capi::handle_arg(__func__, "plan", plan, mk_ring_attn_s::handle_kind())) return rc;
  if (!count) return null_arg(__func__, "count");
  if (capacity > 0 && !events) return null_arg(__func__, "events");
  return guarded([&] {
    const auto ev = plan->plan->read_trace();
    *count = static_cast<int64_t>(ev.size());
    for (int64_t i = 0; i < capacity && i < *count; ++i) {
      events[4 * i] = static_cast<uint64_t>(ev[i].cta);
      events[4 * i + 1] = ev[i].kind;
      events[4 * i + 2] = ev[i].arg;
      events[4 * i + 3] = ev[i].t_ns;
    }
  });
}

int mk_ring_attn_captured(mk_ring_attn_t plan, int* out) { return mk::capi::plan_captured(__func__, plan, out); }

int mk_ring_attn_destroy(mk_ring_attn_t plan) { return mk::capi::destroy_plan(__func__, plan); }

}  // extern "C"
