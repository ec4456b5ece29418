#include "bench/gpu_clocks.hpp"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <chrono>
#include <type_traits>

namespace mkb {

// NVML's entry points as documented (nvml.h): enums are ints, a device is an opaque pointer, 0 is NVML_SUCCESS.
struct ClockSampler::Nvml {
  using Dev = void*;
  void* lib = nullptr;
  Dev dev = nullptr;
  int (*init)() = nullptr;                                   // nvmlInit_v2
  int (*shutdown)() = nullptr;                               // nvmlShutdown
  int (*by_pci)(const char*, Dev*) = nullptr;                // nvmlDeviceGetHandleByPciBusId_v2
  int (*clock)(Dev, int, unsigned*) = nullptr;               // nvmlDeviceGetClockInfo (NVML_CLOCK_SM = 1)
  int (*limit)(Dev, unsigned*) = nullptr;                    // nvmlDeviceGetEnforcedPowerLimit (mW)
  int (*reasons)(Dev, unsigned long long*) = nullptr;        // nvmlDeviceGetCurrentClocks{Event,Throttle}Reasons
};

ClockSampler& ClockSampler::instance() {
  static ClockSampler s;
  return s;
}

ClockSampler::~ClockSampler() {
  stop();
  if (nvml_) {
    if (nvml_->shutdown) nvml_->shutdown();
    dlclose(nvml_->lib);
    delete nvml_;
  }
}

bool ClockSampler::open() {
  if (tried_) return nvml_ != nullptr;
  tried_ = true;
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    why_not_ = "not sampled: libnvidia-ml.so.1 (the driver's NVML) could not be opened";
    return false;
  }
  auto* n = new Nvml;
  n->lib = lib;
  auto sym = [&](auto& f, const char* name, const char* alt = nullptr) {
    void* p = dlsym(lib, name);
    if (!p && alt) p = dlsym(lib, alt);
    f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(p);
    return p != nullptr;
  };
  const bool ok = sym(n->init, "nvmlInit_v2") && sym(n->shutdown, "nvmlShutdown") &&
                  sym(n->by_pci, "nvmlDeviceGetHandleByPciBusId_v2") && sym(n->clock, "nvmlDeviceGetClockInfo") &&
                  sym(n->limit, "nvmlDeviceGetEnforcedPowerLimit") &&
                  sym(n->reasons, "nvmlDeviceGetCurrentClocksEventReasons",
                      "nvmlDeviceGetCurrentClocksThrottleReasons");
  char bus[32] = {0};
  int dev = 0;
  if (!ok) {
    why_not_ = "not sampled: this NVML lacks an entry point mkbench reads";
    n->shutdown = nullptr;  // (never initialized)
  } else if (n->init() != 0) {
    why_not_ = "not sampled: nvmlInit failed";
    n->shutdown = nullptr;
  } else if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetPCIBusId(bus, sizeof(bus), dev) != cudaSuccess ||
             n->by_pci(bus, &n->dev) != 0) {
    why_not_ = "not sampled: NVML has no device for this rank's GPU";
  } else {
    if (n->limit(n->dev, &limit_mw_) != 0) limit_mw_ = 0;
    nvml_ = n;
    return true;
  }
  if (n->shutdown) n->shutdown();
  dlclose(lib);
  delete n;
  return false;
}

std::string ClockSampler::status() {
  if (!open()) return why_not_;
  return "NVML every " + std::to_string(kPeriodMs) + " ms on a host thread while the timed rounds run (rank 0's GPU "
         "in the tables' notes): SM clock and clock-event reasons; enforced power limit " +
         std::to_string(limit_mw_ / 1000) + " W";
}

void ClockSampler::start() {
  if (!open()) return;
  std::lock_guard<std::mutex> c(ctl_);
  if (thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> g(mu_);
    running_ = true;
  }
  thread_ = std::thread([this] {
    for (;;) {
      ClockSample x;
      const bool got = nvml_->clock(nvml_->dev, 1, &x.sm_mhz) == 0 && nvml_->reasons(nvml_->dev, &x.reasons) == 0;
      {
        std::lock_guard<std::mutex> g(mu_);
        if (!running_) return;
        if (got) samples_.push_back(x);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(kPeriodMs));
    }
  });
}

void ClockSampler::stop() {
  std::lock_guard<std::mutex> c(ctl_);
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> g(mu_);
    running_ = false;
  }
  thread_.join();
}

std::string ClockSampler::take_summary() {
  std::vector<ClockSample> s;
  {
    std::lock_guard<std::mutex> g(mu_);
    s.swap(samples_);
  }
  return summarize_clocks(std::move(s), kPeriodMs);
}

}  // namespace mkb
