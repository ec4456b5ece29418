// mkernel fabric backend: the one kernel of GPU staging (fabric_stage.hpp):
// a signal Add applied by the receiving proxy on its in-order GPU queue,
// after the host -> GPU copy of the data the signal covers.
//
// NOTES: the hooks are filled by a static initialiser of this object file;
// libmkernel.so is a shared library, so the object is always linked in.
// Build: this file needs src/net/fabric/*.cu in the CMake source glob.
#include <cuda_runtime_api.h>

#include "mkernel/error.hpp"
#include "src/net/fabric/fabric_stage.hpp"

namespace mk::net::fabric {

namespace {

__global__ void fabric_signal_add(unsigned long long* word, unsigned long long delta) {
  // System scope: the word may also be updated by GPU threads and read by
  // pollers that are not on this GPU.
  atomicAdd_system(word, delta);
  __threadfence_system();
}

void preload() {
  cudaFuncAttributes attr{};
  MK_CUDA_CHECK(cudaFuncGetAttributes(&attr, fabric_signal_add));
}

void launch(void* stream, unsigned long long* word, unsigned long long delta) {
  fabric_signal_add<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(word, delta);
  MK_CUDA_CHECK(cudaGetLastError());
}

const bool registered = [] {
  add_kernel_hooks().preload = preload;
  add_kernel_hooks().launch = launch;
  return true;
}();

}  // namespace

}  // namespace mk::net::fabric
