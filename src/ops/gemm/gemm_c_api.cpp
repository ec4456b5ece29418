// C ABI of the standalone GEMM (include/mkernel/mkernel.h).
#include "mkernel/gemm.hpp"
#include "mkernel/mkernel.h"
#include "src/runtime/c_api_util.hpp"

extern "C" int mk_gemm_bf16(const void* a, const void* b, void* out, int64_t m, int64_t n, int64_t k, int64_t ldo,
                            int num_compute_ctas, void* stream) {
  return mk::capi::guarded([&] {
    mk::gemm_bf16(mk::GemmArgs{.a = a, .b = b, .out = out, .m = m, .n = n, .k = k, .ldo = ldo,
                               .num_compute_ctas = num_compute_ctas},
                  static_cast<cudaStream_t>(stream));
  });
}
