#include "mkernel/error.hpp"

#include <cuda_runtime_api.h>

namespace mk {

std::string cuda_error_string(int code) {
  auto e = static_cast<cudaError_t>(code);
  return cat(cudaGetErrorName(e), ": ", cudaGetErrorString(e));
}

}  // namespace mk
