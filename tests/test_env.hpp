// Shared by the test tiers and the benchmarks: sets a process environment variable for a scope (e.g. a knob that
// is read when a plan is made, MK_TP_SINGLE_RANK) and restores it after; null value: unset for the scope.
#pragma once

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string>

namespace mk::test {

// Whether an NVIDIA driver is loaded here and its user-space library is this process's to load: a CUDA runtime
// that then reports an insufficient driver means a driver older than this build's CUDA needs (a failure of a GPU
// machine), where no driver at all is a CPU machine's, or a container's given no GPU on a GPU host, whose
// /proc/driver/nvidia shows but which has no libcuda (a skip).
inline bool nvidia_driver_loaded() {
  if (access("/proc/driver/nvidia/version", F_OK) != 0) return false;
  void* cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!cuda) return false;
  dlclose(cuda);
  return true;
}

class EnvGuard {
 public:
  EnvGuard(const char* name, const char* value) : name_(name) {
    if (const char* v = std::getenv(name)) old_ = v;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~EnvGuard() {
    if (old_)
      setenv(name_.c_str(), old_->c_str(), 1);
    else
      unsetenv(name_.c_str());
  }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace mk::test
