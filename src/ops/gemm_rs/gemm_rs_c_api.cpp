// C ABI of the GEMM+ReduceScatter plan (include/mkernel/mkernel.h).
#include "mkernel/mkernel.h"
#include "mkernel/tp.hpp"
#include "src/runtime/c_api_util.hpp"

struct mk_gemm_rs_s {
  static constexpr mk::capi::HandleKind handle_kind() { return mk::capi::HandleKind::GemmRs; }
  mk::capi::HandleKind kind = handle_kind();  // (first: mk::capi::HandleKind)
  std::unique_ptr<mk::GemmRs> plan;
  mk_comm_s* owner = nullptr;  // (counted on it: mk::capi::create_plan)
};

using mk::capi::guarded;
using mk::capi::null_arg;

extern "C" {

int mk_gemm_rs_create(mk_comm_t comm, int64_t m, int64_t n, int64_t k_local, int num_reduce_ctas, int num_ctas,
                      mk_gemm_rs_t* out) {
  return mk::capi::create_plan<mk_gemm_rs_s, mk::GemmRs>(__func__, comm, out, m, n, k_local,
                                                         mk::GemmRsOptions{num_reduce_ctas, num_ctas});
}

int mk_gemm_rs_run(mk_gemm_rs_t plan, const void* a, const void* b, void* out, void* stream) {
  if (const int rc = mk::capi::handle_arg(__func__, "plan", plan, mk_gemm_rs_s::handle_kind())) return rc;
  return guarded([&] { plan->plan->run(a, b, out, static_cast<cudaStream_t>(stream)); });
}

int mk_gemm_rs_reduce_scatter(mk_gemm_rs_t plan, const void* x, void* out, void* stream) {
  if (const int rc = mk::capi::handle_arg(__func__, "plan", plan, mk_gemm_rs_s::handle_kind())) return rc;
  return guarded([&] { plan->plan->reduce_scatter(x, out, static_cast<cudaStream_t>(stream)); });
}

int mk_gemm_rs_captured(mk_gemm_rs_t plan, int* out) { return mk::capi::plan_captured(__func__, plan, out); }

int mk_gemm_rs_destroy(mk_gemm_rs_t plan) { return mk::capi::destroy_plan(__func__, plan); }

}  // extern "C"
