#include "mkernel/error.hpp"

#include <cuda_runtime_api.h>

#include "src/runtime/device_health.hpp"

namespace mk {

std::string cuda_error_string(int code) {
  auto e = static_cast<cudaError_t>(code);
  return cat(cudaGetErrorName(e), ": ", cudaGetErrorString(e));
}

void cuda_check_failed(int code, const char* expr, const char* file, int line) {
  const auto e = static_cast<cudaError_t>(code);
  if (!cuda_error_is_fatal(e)) cudaGetLastError();
  fail(expr, " failed: ", cuda_error_string(code), " (", file, ":", line, ")");
}

int pending_cuda_error() { return static_cast<int>(cudaPeekAtLastError()); }

}  // namespace mk
