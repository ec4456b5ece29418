#include "src/runtime/cuda_driver.hpp"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <mutex>

#include "mkernel/error.hpp"

namespace mk::drv {

namespace {
template <typename F>
void load(F& fn, const char* name) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q{};
  cudaError_t e = cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q);
  if (e != cudaSuccess) cudaGetLastError();  // thrown below, not left set
  if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !p)
    fail("CUDA driver entry point ", name, " unavailable (", cuda_error_string(e),
         "); is an NVIDIA driver >= 12.0 installed?");
  fn = reinterpret_cast<F>(p);
}
}  // namespace

const Api& api() {
  static Api a{};
  static std::once_flag once;
  static std::string error;
  std::call_once(once, [] {
    try {
      load(a.cuGetErrorString, "cuGetErrorString");
      load(a.cuMemGetAllocationGranularity, "cuMemGetAllocationGranularity");
      load(a.cuMemCreate, "cuMemCreate");
      load(a.cuMemRelease, "cuMemRelease");
      load(a.cuMemAddressReserve, "cuMemAddressReserve");
      load(a.cuMemAddressFree, "cuMemAddressFree");
      load(a.cuMemMap, "cuMemMap");
      load(a.cuMemUnmap, "cuMemUnmap");
      load(a.cuMemSetAccess, "cuMemSetAccess");
      load(a.cuMemExportToShareableHandle, "cuMemExportToShareableHandle");
      load(a.cuMemImportFromShareableHandle, "cuMemImportFromShareableHandle");
      load(a.cuDeviceGetAttribute, "cuDeviceGetAttribute");
      load(a.cuDeviceGet, "cuDeviceGet");
      load(a.cuMemGetHandleForAddressRange, "cuMemGetHandleForAddressRange");
      load(a.cuStreamWriteValue32, "cuStreamWriteValue32");
      load(a.cuStreamWriteValue64, "cuStreamWriteValue64");
      load(a.cuStreamBatchMemOp, "cuStreamBatchMemOp");
      load(a.cuModuleGetLoadingMode, "cuModuleGetLoadingMode");
      load(a.cuTensorMapEncodeTiled, "cuTensorMapEncodeTiled");
      load(a.cuCtxGetCurrent, "cuCtxGetCurrent");
      load(a.cuCtxSetCurrent, "cuCtxSetCurrent");
    } catch (const Error& e) {
      error = e.what();
    }
  });
  if (!error.empty()) throw Error(error);
  return a;
}

bool driver_initialised() noexcept {
  // RTLD_NOLOAD: only a libcuda this process has loaded (no load, no cuInit here); cuCtxGetCurrent answers
  // CUDA_ERROR_NOT_INITIALIZED until cuInit.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!lib) return false;
  const auto get = reinterpret_cast<decltype(&::cuCtxGetCurrent)>(dlsym(lib, "cuCtxGetCurrent"));
  CUcontext ctx = nullptr;
  const bool init = get && get(&ctx) != CUDA_ERROR_NOT_INITIALIZED;
  dlclose(lib);  // (the process's own reference stays)
  return init;
}

}  // namespace mk::drv
