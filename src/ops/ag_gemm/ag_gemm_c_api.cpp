// C ABI of the AllGather+GEMM plan (include/mkernel/mkernel.h).
#include "mkernel/mkernel.h"
#include "mkernel/tp.hpp"
#include "src/runtime/c_api_util.hpp"

struct mk_ag_gemm_s {
  static constexpr mk::capi::HandleKind handle_kind() { return mk::capi::HandleKind::AgGemm; }
  mk::capi::HandleKind kind = handle_kind();  // (first: mk::capi::HandleKind)
  std::unique_ptr<mk::AgGemm> plan;
  mk_comm_s* owner = nullptr;  // (counted on it: mk::capi::create_plan)
};

using mk::capi::guarded;
using mk::capi::null_arg;

extern "C" {

int mk_ag_gemm_create(mk_comm_t comm, int64_t m_local, int64_t n, int64_t k, int num_comm_ctas, int num_ctas,
                      mk_ag_gemm_t* out) {
  return mk::capi::create_plan<mk_ag_gemm_s, mk::AgGemm>(__func__, comm, out, m_local, n, k,
                                                         mk::AgGemmOptions{num_comm_ctas, num_ctas});
}

int mk_ag_gemm_run(mk_ag_gemm_t plan, const void* a_local, const void* b, void* out, void* gathered, void* stream) {
  if (const int rc = mk::capi::handle_arg(__func__, "plan", plan, mk_ag_gemm_s::handle_kind())) return rc;
  return guarded([&] { plan->plan->run(a_local, b, out, static_cast<cudaStream_t>(stream), gathered); });
}

int mk_ag_gemm_all_gather(mk_ag_gemm_t plan, const void* a_local, void* gathered, void* stream) {
  if (const int rc = mk::capi::handle_arg(__func__, "plan", plan, mk_ag_gemm_s::handle_kind())) return rc;
  return guarded([&] { plan->plan->all_gather(a_local, gathered, static_cast<cudaStream_t>(stream)); });
}

int mk_ag_gemm_captured(mk_ag_gemm_t plan, int* out) { return mk::capi::plan_captured(__func__, plan, out); }

int mk_ag_gemm_destroy(mk_ag_gemm_t plan) { return mk::capi::destroy_plan(__func__, plan); }

}  // extern "C"
