#include "src/runtime/device_support.hpp"

#include <cuda_runtime_api.h>

#include "mkernel/error.hpp"

namespace mk {

std::string unsupported_gpu_reason(int major, int minor) {
  if (major == 9 && minor == 0) return "";
  return cat("compute capability ", major, ".", minor, "; mkernel's kernels are built for sm_90a only (Hopper: H100, "
             "H200, GH200) and use its architecture-specific instructions (wgmma, setmaxnreg), which no other GPU "
             "can run");
}

int compute_capability(int device) {
  int major = 0, minor = 0;
  MK_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  MK_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return 10 * major + minor;
}

void check_device_supported(int device) {
  const int cc = compute_capability(device);
  const std::string why = unsupported_gpu_reason(cc / 10, cc % 10);
  if (!why.empty()) {
    cudaDeviceProp prop{};
    const std::string name = cudaGetDeviceProperties(&prop, device) == cudaSuccess ? prop.name : "unknown";
    fail("GPU ", device, " (", name, ") has ", why);
  }
}

bool gpu_orders_rdma_writes(int device) {
  int v = 0;
  if (cudaDeviceGetAttribute(&v, cudaDevAttrGPUDirectRDMAWritesOrdering, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return v >= cudaGPUDirectRDMAWritesOrderingOwner;
}

}  // namespace mk
