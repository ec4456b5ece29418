// mkernel: waits that mkernel cannot bound, made visible. Setup and teardown
// synchronise the whole device (a plan's legacy-stream memsets must be done
// before any stream's launch; signal words are zeroed, and memory freed, only
// after every kernel that may touch them ended): cudaDeviceSynchronize waits
// for every stream of the device, work that is not mkernel's included (another
// library's collective waiting for its own dead peer), which no MK_* bound
// covers. Such a wait is not cut short (memory may still be in use), but it is
// not silent either: a warning names the step and what it waits for, first
// after device_wait_report_ms() (4 x MK_TIMEOUT_MS: by then every mkernel
// kernel has ended or trapped), then as often again.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <string>

#include "mkernel/error.hpp"

namespace mk {

// Runs `wait` on the calling thread (always: a watcher that cannot start
// leaves it unreported); while it has not returned, logs "<what>: still
// waiting after N s for <awaited>" at first_ms, then every every_ms
// (first_ms <= 0: no reports). Rethrows what `wait` throws.
void run_reported(const std::string& what, const std::string& awaited, int64_t first_ms, int64_t every_ms,
                  const std::function<void()>& wait);

// 4 x MK_TIMEOUT_MS, in ms.
int64_t device_wait_report_ms();

// What a device-wide synchronisation of GPU `device` waits for, as the reports say it.
std::string device_work_awaited(int device);

// cudaDeviceSynchronize of the current device inside run_reported; its result.
// `what` names the step ("rank 1: GemmAr plan setup"). Static, as
// teardown_call (device_health.hpp): the synchronisation is made by the
// runtime of the binary that calls it.
static inline cudaError_t reported_device_sync(const std::string& what) {
  int dev = -1;
  if (cudaGetDevice(&dev) != cudaSuccess) (void)cudaGetLastError();
  cudaError_t e = cudaSuccess;
  const int64_t ms = device_wait_report_ms();
  run_reported(what, device_work_awaited(dev), ms, ms, [&] { e = cudaDeviceSynchronize(); });
  return e;
}

}  // namespace mk

// MK_CUDA_CHECK of reported_device_sync(what): a failure reads "cudaDeviceSynchronize() failed: <error>", as the
// plain call's did.
#define MK_DEVICE_SYNC(what)                                                                          \
  do {                                                                                                \
    const int mk_sync_err_ = static_cast<int>(::mk::reported_device_sync(what));                      \
    if (mk_sync_err_ != 0) ::mk::cuda_check_failed(mk_sync_err_, "cudaDeviceSynchronize()", __FILE__, __LINE__); \
  } while (0)
