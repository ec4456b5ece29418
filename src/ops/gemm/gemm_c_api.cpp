// C ABI of the standalone GEMM (include/mkernel/mkernel.h).
#include "mkernel/gemm.hpp"
#include "mkernel/mkernel.h"
#include "mkernel/error.hpp"
#include "src/runtime/c_api_util.hpp"

extern "C" int mk_gemm_bf16(const void* a, const void* b, void* out, int64_t m, int64_t n, int64_t k, int64_t ldo,
                            int num_compute_ctas, void* stream) {
  return mk_gemm_bf16_ws(a, b, out, m, n, k, ldo, num_compute_ctas, nullptr, 0, stream);
}

extern "C" int mk_gemm_bf16_ws(const void* a, const void* b, void* out, int64_t m, int64_t n, int64_t k, int64_t ldo,
                               int num_compute_ctas, void* workspace, size_t workspace_bytes, void* stream) {
  return mk::capi::guarded([&] {
    mk::gemm_bf16(mk::GemmArgs{.a = a, .b = b, .out = out, .m = m, .n = n, .k = k, .ldo = ldo,
                               .num_compute_ctas = num_compute_ctas, .workspace = workspace,
                               .workspace_bytes = workspace_bytes},
                  static_cast<cudaStream_t>(stream));
  });
}

extern "C" int mk_gemm_workspace_bytes(int64_t m, int64_t n, int64_t k, int num_compute_ctas, size_t* out) {
  return mk::capi::guarded([&] {
    if (!out) mk::fail("mk_gemm_workspace_bytes: out is NULL");
    *out = mk::gemm_workspace_bytes(mk::GemmArgs{.m = m, .n = n, .k = k, .num_compute_ctas = num_compute_ctas});
  });
}
