// mkernel: CUDA driver entry points, fetched through the runtime
// (cudaGetDriverEntryPointByVersion) so that libmkernel.so has no link-time
// dependency on libcuda.so and loads on machines without a GPU driver.
#pragma once

#include <cuda.h>

namespace mk::drv {

struct Api {
  decltype(&::cuGetErrorString) cuGetErrorString;
  decltype(&::cuMemGetAllocationGranularity) cuMemGetAllocationGranularity;
  decltype(&::cuMemCreate) cuMemCreate;
  decltype(&::cuMemRelease) cuMemRelease;
  decltype(&::cuMemAddressReserve) cuMemAddressReserve;
  decltype(&::cuMemAddressFree) cuMemAddressFree;
  decltype(&::cuMemMap) cuMemMap;
  decltype(&::cuMemUnmap) cuMemUnmap;
  decltype(&::cuMemSetAccess) cuMemSetAccess;
  decltype(&::cuMemExportToShareableHandle) cuMemExportToShareableHandle;
  decltype(&::cuMemImportFromShareableHandle) cuMemImportFromShareableHandle;
  decltype(&::cuDeviceGetAttribute) cuDeviceGetAttribute;
  decltype(&::cuDeviceGet) cuDeviceGet;
  decltype(&::cuMemGetHandleForAddressRange) cuMemGetHandleForAddressRange;
  decltype(&::cuStreamWriteValue32) cuStreamWriteValue32;
  decltype(&::cuStreamWriteValue64) cuStreamWriteValue64;
  decltype(&::cuStreamBatchMemOp) cuStreamBatchMemOp;
  decltype(&::cuModuleGetLoadingMode) cuModuleGetLoadingMode;
  decltype(&::cuTensorMapEncodeTiled) cuTensorMapEncodeTiled;
  decltype(&::cuCtxGetCurrent) cuCtxGetCurrent;
  decltype(&::cuCtxSetCurrent) cuCtxSetCurrent;
};

// Loads on first use; throws mk::Error if the driver is missing.
const Api& api();

// Whether this process's CUDA driver is initialised already (libcuda.so.1 loaded and cuInit called), asked without
// initialising it: then it has read CUDA_MODULE_LOADING, and setting that variable would change nothing.
bool driver_initialised() noexcept;

}  // namespace mk::drv

// Throws mk::Error when a driver call fails.
#define MK_CU_CHECK(expr)                                                                 \
  do {                                                                                    \
    CUresult mk_r_ = (expr);                                                              \
    if (mk_r_ != CUDA_SUCCESS) {                                                          \
      const char* mk_s_ = "unknown";                                                      \
      ::mk::drv::api().cuGetErrorString(mk_r_, &mk_s_);                                   \
      ::mk::fail(#expr, " failed: ", mk_s_, " (", __FILE__, ":", __LINE__, ")");          \
    }                                                                                     \
  } while (0)
