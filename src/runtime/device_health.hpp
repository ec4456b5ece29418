// mkernel: whether this rank's GPU can still be used, for teardown. A rank
// whose device failed leaves out the steps that wait for other ranks (they
// may be stuck in their own waits): Network::deregister_buffer, SignalLease,
// SymmetricHeap::free, and the communicator's bootstrap, which it leaves with
// Bootstrap::abort so that the others hear at once.
#pragma once

#include <cuda_runtime_api.h>

#include <new>
#include <optional>
#include <string>

#include "mkernel/bootstrap.hpp"
#include "mkernel/error.hpp"
#include "mkernel/knobs.hpp"
#include "src/runtime/cuda_driver.hpp"
#include "src/runtime/reported_wait.hpp"
#include "src/runtime/step_status.hpp"

namespace mk {

// The errors after which the process's CUDA context cannot be used again:
// those CUDA 13.0's driver_types.h documents as leaving "the process in an
// inconsistent state" (every later CUDA call returns them; the process must be
// relaunched: a kernel that trapped, as a timed-out bounded wait does, is
// cudaErrorLaunchFailure), uncorrectable ECC / NVLink errors, a contained
// error, and a destroyed context. Others (out of memory, a stream capture in
// progress, not ready) leave the device usable.
inline bool cuda_error_is_fatal(cudaError_t e) {
  switch (e) {
    case cudaErrorSyncDepthExceeded:
    case cudaErrorLaunchPendingCountExceeded:
    case cudaErrorECCUncorrectable:
    case cudaErrorNvlinkUncorrectable:
    case cudaErrorContained:
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorContextIsDestroyed:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure:
    case cudaErrorTensorMemoryLeak:
    case cudaErrorMpsClientTerminated:
    case cudaErrorExternalDevice:
      return true;
    default:
      return false;
  }
}

// Leaves the bootstrap saying that this rank's device failed (`error`: the fatal CUDA error's text), so that the
// other ranks' collective steps fail at once naming it, as the first teardown step that finds the failure does.
inline void leave_after_device_failure(Bootstrap& bs, const std::string& error) {
  bs.abort(cat("rank ", bs.rank(), "'s device failed (", error, ")"));
}

// Whether `stream` is being captured into a CUDA graph; none when the query
// itself fails (the legacy stream while another stream captures in global
// mode: the launch that follows fails and says so). The query's own error is
// cleared where none was pending before it (where one was, CUDA reports the
// query's in its place: it keeps only the last). Static, as teardown_call.
static inline std::optional<bool> stream_capturing(cudaStream_t stream) noexcept {
  const bool clean = cudaPeekAtLastError() == cudaSuccess;
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &st) != cudaSuccess) {
    if (clean) (void)cudaGetLastError();
    return std::nullopt;
  }
  return st != cudaStreamCaptureStatusNone;
}

// Makes `device` current for a scope and gives the calling thread its own
// context back after (a process may hold communicators on several GPUs,
// setup and teardown may run on any thread, and a caller's current device is
// the caller's). Saved and restored as the driver's current context, not as a
// device number: a thread that had none gets none back, instead of GPU 0's
// primary context made for it (memory on another rank's GPU; refused in
// exclusive-process mode).
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    save();
    MK_CUDA_CHECK(cudaSetDevice(device));
  }
  // Teardown's: a failure to switch is left to the calls that follow (they say it), nothing thrown.
  DeviceScope(int device, std::nothrow_t) noexcept {
    save();
    if (device >= 0 && cudaSetDevice(device) != cudaSuccess) cudaGetLastError();
  }
  ~DeviceScope() {
    if (!api_) return;
    CUcontext now = nullptr;
    if (api_->cuCtxGetCurrent(&now) == CUDA_SUCCESS && now == prev_) return;
    if (api_->cuCtxSetCurrent(prev_) != CUDA_SUCCESS) cudaGetLastError();
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  void save() noexcept {
    try {
      const drv::Api& a = drv::api();
      if (a.cuCtxGetCurrent(&prev_) == CUDA_SUCCESS) api_ = &a;
    } catch (...) {  // no driver: nothing to give back (and nothing below will work either)
    }
  }
  const drv::Api* api_ = nullptr;  // set when prev_ was read
  CUcontext prev_ = nullptr;
};

// cudaDeviceSynchronize on `device`, keeping the calling thread's current
// device; its result. A non-fatal error is also cleared from the runtime's
// last error (a fatal one cannot be). Static, as teardown_call: each binary
// clears the runtime that made the call. A long wait is reported, naming
// `what` (reported_wait.hpp).
static inline cudaError_t synchronize_device(int device, const std::string& what) {
  int prev = -1;
  const bool have_prev = cudaGetDevice(&prev) == cudaSuccess;
  cudaError_t e = cudaSetDevice(device);
  if (e == cudaSuccess) {
    try {
      const int64_t ms = device_wait_report_ms();
      run_reported(what, device_work_awaited(device), ms, ms, [&] { e = cudaDeviceSynchronize(); });
    } catch (const std::exception&) {  // (the report's strings: no memory) the synchronisation, unreported
      e = cudaDeviceSynchronize();
    }
  }
  if (have_prev && prev != device) cudaSetDevice(prev);
  if (e != cudaSuccess && !cuda_error_is_fatal(e)) cudaGetLastError();
  return e;
}

// The result `e` of a release call in teardown (cudaFree, cudaFreeHost,
// cudaStreamDestroy, ...), which must not throw. One that failed without the
// device failing (refused while a stream capture in global mode is in
// progress, say) leaves what it held in place until the process ends, said in
// a warning naming `what`, and its error is cleared: the library links the
// CUDA runtime statically, so its last error is its own, which the
// application's cudaGetLastError does not clear, and one left set was
// reported by the library's next launch check as that launch's failure
// (session 36: a plan destroyed inside such a capture failed the next plan's
// first run). A fatal error is left set (it cannot be cleared; the device's
// failure is said where it is met); the runtime unloading at exit is cleared
// without a warning. Static (internal linkage): a program that also compiles
// it keeps its own copy, so the library's calls cannot bind to a copy that
// would clear the program's runtime instead of the library's.
static inline void teardown_call(cudaError_t e, const char* what) noexcept {
  if (e == cudaSuccess || cuda_error_is_fatal(e)) return;
  cudaGetLastError();
  if (e == cudaErrorCudartUnloading) return;
  warn_noexcept([&] {
    return cat("teardown: ", what, " not released (", cuda_error_string(e), "): it stays until the process ends");
  });
}

// This rank's answer, in a teardown step's exchange (step_status), for its
// device synchronisation's result `e` (not fatal: a failed device leaves the
// exchange out): ok, or failed and why (a stream capture in progress in
// global mode refuses it). SymmetricHeap::free, Network::deregister_buffer.
inline std::string sync_answer(cudaError_t e, step_status::Tags tags = {}) {
  if (e == cudaSuccess) return tags.ok;
  return cat(tags.failed, "its device synchronisation failed (", cuda_error_string(e), ")");
}

}  // namespace mk
