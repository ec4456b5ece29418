#include "mkernel/error.hpp"

#include <cuda_runtime_api.h>

namespace mk {

std::string cuda_error_string(int code) {
  auto e = static_cast<cudaError_t>(code);
  return cat(cudaGetErrorName(e), ": ", cudaGetErrorString(e));
}

int pending_cuda_error() { return static_cast<int>(cudaPeekAtLastError()); }

}  // namespace mk
