// mkernel: which GPUs the kernels run on. The device code is built for
// sm_90a only (wgmma, setmaxnreg, TMA; CMakeLists.txt forces it): an
// architecture-specific target, which no other GPU can load or JIT. Every
// entry point checks the GPU before anything is allocated or launched, so a
// user on another GPU gets one clear error instead of "no kernel image" from
// the middle of a plan's setup.
#pragma once

#include <string>

namespace mk {

// "" when a GPU of compute capability major.minor runs mkernel's kernels,
// else why not (pure: CPU-tested).
std::string unsupported_gpu_reason(int major, int minor);

// The compute capability of `device` as 10 * major + minor.
int compute_capability(int device);

// Throws mk::Error naming the device, its name and capability unless
// `device` runs mkernel's kernels (two attribute queries: callers cache,
// as gemm::num_sms does per thread and device).
void check_device_supported(int device);

// Whether `device` orders GPUDirect RDMA writes for its own kernels (cudaDevAttrGPUDirectRDMAWritesOrdering >=
// owner: a kernel that sees a NIC's later write sees its earlier ones); false when the query fails (its error
// cleared: the library's runtime keeps none). The transports whose NIC writes data and signal straight into GPU
// memory rely on it (verbs RC, fabric with FI_HMEM; EFA flushes instead where it must).
bool gpu_orders_rdma_writes(int device);

}  // namespace mk
