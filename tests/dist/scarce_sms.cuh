// Scarce SMs (dist tier): an op must finish while another kernel holds
// every SM but a few, that is with only part of its grid resident (another
// stream's kernel, another MPS client). The CTAs everyone waits for must be
// the ones the hardware makes resident first (the lowest indices); the
// others must be able to run late. finishes_on_free_sms() holds the SMs with
// a kernel on a side stream, runs the op on another, and says whether the
// op's output was complete before that kernel let go: an op whose resident
// CTAs only waited on CTAs not yet resident shows as "not complete" (and
// finishes late, once the SMs are given back, so nothing hangs).
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "tests/gpu/gemm_test_util.cuh"
#include "tests/test_comm.hpp"

namespace mkt {

// How long the holder keeps the SMs at most: far more than any op here
// needs on 2 SMs (milliseconds; time-sliced ranks included), far less than
// the ops' bounded waits (MK_TIMEOUT_MS, 5 s by default), so an op that was
// held up finishes after it and fails the check rather than a wait.
constexpr uint64_t kHoldNs = 2'000'000'000ull;

// One CTA per SM (the whole shared memory): announces itself (its own word
// of `resident`, host-mapped: a plain store, as system-scope atomics on host
// memory are not supported here and compute-sanitizer rejects them), then
// CTA 0 scans out until no element holds kPoison and tells the others; every
// CTA leaves then, or after limit_ns.
static __global__ void hold_sms(const uint16_t* out, int64_t elems, unsigned* resident, int* flags,
                                uint64_t limit_ns) {
  auto now = [] {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
  };
  const uint64_t t0 = now();
  if (threadIdx.x == 0) {
    static_cast<volatile unsigned*>(resident)[blockIdx.x] = 1u;
    __threadfence_system();
  }
  volatile int* done = flags;
  for (;;) {
    if (blockIdx.x == 0) {
      bool poisoned = false;
      for (int64_t i = threadIdx.x; i < elems && !poisoned; i += blockDim.x)
        poisoned = static_cast<const volatile uint16_t*>(out)[i] == kPoison;
      if (!__any_sync(~0u, poisoned)) {
        if (threadIdx.x == 0) {
          flags[1] = 1;  // complete while held
          __threadfence();
          *done = 1;
        }
        break;
      }
    } else if (*done) {
      break;
    }
    if (now() - t0 > limit_ns) break;
    __nanosleep(2000);
  }
}

// Runs op(stream) while a kernel on another stream holds all SMs but
// free_sms. out (elems bf16) must hold kPoison everywhere and be written
// entirely by the op. Returns "" when the op's output was complete while the
// SMs were held, else what happened. Synchronises the device.
template <typename Op>
std::string finishes_on_free_sms(const void* out, int64_t elems, int free_sms, Op&& op) {
  mk::Communicator& c = mk::test::comm();
  auto ck = [&](cudaError_t e, const char* what) { c.check(static_cast<int>(e), what); };
  int dev = 0, sms = 0, optin = 0;
  ck(cudaGetDevice(&dev), "cudaGetDevice");
  ck(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "sm count");
  ck(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev), "smem optin");
  const int held = sms - free_sms;
  if (held < 1)
    return "nothing to hold: " + std::to_string(sms) + " SMs, " + std::to_string(free_sms) + " to leave free";
  ck(cudaFuncSetAttribute(hold_sms, cudaFuncAttributeMaxDynamicSharedMemorySize, optin), "hold_sms smem");
  // Freed on every way out (a failed check throws): after the holder ended,
  // which it does within kHoldNs.
  struct Owned {
    unsigned* resident = nullptr;
    int* flags = nullptr;
    cudaStream_t hs = nullptr, os = nullptr;
    ~Owned() {
      if (hs) cudaStreamSynchronize(hs);
      if (os) cudaStreamSynchronize(os);
      if (hs) cudaStreamDestroy(hs);
      if (os) cudaStreamDestroy(os);
      cudaFree(flags);
      cudaFreeHost(resident);
    }
  } own;
  unsigned*& resident = own.resident;
  int*& flags = own.flags;
  cudaStream_t& hs = own.hs;
  cudaStream_t& os = own.os;
  ck(cudaHostAlloc(&resident, size_t(held) * sizeof(unsigned), cudaHostAllocMapped), "cudaHostAlloc");
  std::memset(resident, 0, size_t(held) * sizeof(unsigned));
  ck(cudaMalloc(&flags, 2 * sizeof(int)), "cudaMalloc");
  ck(cudaMemset(flags, 0, 2 * sizeof(int)), "cudaMemset");
  ck(cudaStreamCreateWithFlags(&hs, cudaStreamNonBlocking), "stream");
  ck(cudaStreamCreateWithFlags(&os, cudaStreamNonBlocking), "stream");
  ck(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  hold_sms<<<held, 32, optin, hs>>>(static_cast<const uint16_t*>(out), elems, resident, flags, kHoldNs);
  ck(cudaGetLastError(), "hold_sms launch");
  std::string why;
  auto count = [&] {
    unsigned n = 0;
    for (int b = 0; b < held; ++b) n += static_cast<volatile unsigned*>(resident)[b];
    return n;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (count() < unsigned(held) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  const unsigned got = count();
  if (got < unsigned(held))
    why = "the holder got " + std::to_string(got) + " of " + std::to_string(held) + " SMs within 1 s";
  op(os);
  ck(cudaGetLastError(), "op launch");
  ck(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  int complete = 0;
  ck(cudaMemcpy(&complete, flags + 1, sizeof(int), cudaMemcpyDeviceToHost), "cudaMemcpy");
  if (why.empty() && !complete)
    why = "the output was not complete while " + std::to_string(held) + " of " + std::to_string(sms) +
          " SMs were held (" + std::to_string(kHoldNs / 1000000) +
          " ms): the op's resident CTAs waited on CTAs that were not resident";
  return why;
}

// Why the test cannot run here ("" when it can): a transport that runs
// kernels on this GPU (emu's copies and signal kernel, fabric's) needs SMs that no op CTA
// holds (tp::network_free_sms), and the op's grid takes every SM left free.
// Under MPS (cudaDevAttrMpsEnabled) other processes' kernels run on this
// GPU at the same time and take SMs this process does not see: the SMs left
// free are not this op's, so what the test measures is MPS's sharing, not
// the op (bench/results/gemm-ar-role-order-20261203.md: GemmRs, whose tiles
// come from a dynamic queue, "fails" there too).
inline std::string scarce_sms_skip_reason() {
  int dev = 0, mps = 0;
  cudaGetDevice(&dev);
  if (cudaDeviceGetAttribute(&mps, cudaDevAttrMpsEnabled, dev) == cudaSuccess && mps)
    return "this GPU's contexts are shared through MPS: other processes' kernels share its SMs, so the SMs left "
           "free are not this op's";
  mk::Communicator& c = mk::test::comm();
  if (c.topology().num_nodes > 1 && c.network().device_ctx().free_sms > 0) {
    const bool agents = c.network().device_ctx().agent > 0;
    return "the " + c.network().transport_name() + " transport " +
           (agents ? "delivers with agent CTAs of the op's grid, which need SMs beside its 2 other CTAs"
                   : "runs kernels on this GPU, which need an SM the op's grid does not hold") +
           "; with every other SM held there is none (runs on 1x2, and across nodes on verbs)";
  }
  return "";
}

}  // namespace mkt
