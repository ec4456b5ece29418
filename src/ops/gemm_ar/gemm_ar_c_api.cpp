// C ABI of the GEMM+AllReduce plan (include/mkernel/mkernel.h).
#include "mkernel/mkernel.h"
#include "mkernel/tp.hpp"
#include "src/runtime/c_api_util.hpp"

struct mk_gemm_ar_s {
  static constexpr mk::capi::HandleKind handle_kind() { return mk::capi::HandleKind::GemmAr; }
  mk::capi::HandleKind kind = handle_kind();  // (first: mk::capi::HandleKind)
  std::unique_ptr<mk::GemmAr> plan;
  mk_comm_s* owner = nullptr;  // (counted on it: mk::capi::create_plan)
};

using mk::capi::guarded;
using mk::capi::null_arg;

namespace {

// Both creates (`call`: the one the caller called, named in its errors).
int create(const char* call, mk_comm_t comm, int64_t m, int64_t n, int64_t k_local, int num_gather_ctas, int num_ctas,
           int one_shot, mk_gemm_ar_t* out) {
  mk::GemmArOptions opt;
  opt.num_gather_ctas = num_gather_ctas;
  opt.num_ctas = num_ctas;
  opt.one_shot = one_shot;  // (checked by the plan, on every rank)
  return mk::capi::create_plan<mk_gemm_ar_s, mk::GemmAr>(call, comm, out, m, n, k_local, opt);
}

}  // namespace

extern "C" {

int mk_gemm_ar_create(mk_comm_t comm, int64_t m, int64_t n, int64_t k_local, int num_gather_ctas, int num_ctas,
                      mk_gemm_ar_t* out) {
  return create(__func__, comm, m, n, k_local, num_gather_ctas, num_ctas, -1, out);
}

int mk_gemm_ar_create_ex(mk_comm_t comm, int64_t m, int64_t n, int64_t k_local, int num_gather_ctas, int num_ctas,
                         int one_shot, mk_gemm_ar_t* out) {
  return create(__func__, comm, m, n, k_local, num_gather_ctas, num_ctas, one_shot, out);
}

int mk_gemm_ar_run(mk_gemm_ar_t plan, const void* a, const void* b, void* out, void* stream) {
  if (const int rc = mk::capi::handle_arg(__func__, "plan", plan, mk_gemm_ar_s::handle_kind())) return rc;
  return guarded([&] { plan->plan->run(a, b, out, static_cast<cudaStream_t>(stream)); });
}

int mk_gemm_ar_all_reduce(mk_gemm_ar_t plan, const void* x, void* out, void* stream) {
  if (const int rc = mk::capi::handle_arg(__func__, "plan", plan, mk_gemm_ar_s::handle_kind())) return rc;
  return guarded([&] { plan->plan->all_reduce(x, out, static_cast<cudaStream_t>(stream)); });
}

int mk_gemm_ar_captured(mk_gemm_ar_t plan, int* out) { return mk::capi::plan_captured(__func__, plan, out); }

int mk_gemm_ar_destroy(mk_gemm_ar_t plan) { return mk::capi::destroy_plan(__func__, plan); }

}  // extern "C"
