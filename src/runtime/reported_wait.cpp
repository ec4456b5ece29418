#include "src/runtime/reported_wait.hpp"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <system_error>
#include <thread>

#include "mkernel/knobs.hpp"

namespace mk {

void run_reported(const std::string& what, const std::string& awaited, int64_t first_ms, int64_t every_ms,
                  const std::function<void()>& wait) {
  if (first_ms <= 0) {
    wait();
    return;
  }
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::thread watcher;
  try {
    watcher = std::thread([&] {
      std::unique_lock<std::mutex> lk(mu);
      const auto t0 = std::chrono::steady_clock::now();
      for (int64_t at = first_ms;; at += every_ms > 0 ? every_ms : first_ms) {
        if (cv.wait_until(lk, t0 + std::chrono::milliseconds(at), [&] { return done; })) return;
        log(LogLevel::Warn, cat(what, ": still waiting after ", at / 1000.0, " s for ", awaited));
      }
    });
  } catch (const std::system_error&) {  // no thread: the wait still happens, unreported
    wait();
    return;
  }
  const auto finish = [&] {
    {
      std::lock_guard<std::mutex> g(mu);
      done = true;
    }
    cv.notify_all();
    watcher.join();
  };
  try {
    wait();
  } catch (...) {
    finish();
    throw;
  }
  finish();
}

int64_t device_wait_report_ms() {
  try {
    return 4 * knob_int(Knob::MK_TIMEOUT_MS);
  } catch (const std::exception&) {  // a malformed MK_TIMEOUT_MS is reported where it bounds a kernel
    return 20000;
  }
}

std::string device_work_awaited(int device) {
  return cat("GPU ", device, "'s queued work (a device-wide synchronisation waits for every stream: mkernel's kernels "
             "end within their MK_TIMEOUT_MS bounds, so what still runs is other work, e.g. another library's "
             "collective waiting for its peers, or a long kernel)");
}

}  // namespace mk
