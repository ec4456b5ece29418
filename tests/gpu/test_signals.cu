// Signals on one GPU: message passing between CTAs at both scopes, many
// back-to-back launches reusing the same signals with growing epochs, atomic
// adds from many threads, and the bounded wait's diagnostic (in a child
// process, since the waiter traps).
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "device/pingpong.cuh"
#include "device/signals.cuh"
#include "mkernel/mkernel.hpp"
#include "tests/gpu/child.hpp"
#include "tests/test_comm.hpp"

using namespace mk;
using mk::test::comm;

namespace {

#define CK(x) comm().check(static_cast<int>(x), #x)

// Two CTAs of one GPU play the two sides of a ping-pong through the pool.
template <dev::Scope S>
__global__ void intra_pingpong(DeviceCtx ctx, int s0, int s1, int rounds, uint64_t base, uint32_t* errors) {
  if (threadIdx.x != 0) return;
  dev::PingPongSide side;
  const bool init = blockIdx.x == 0;
  side.my_signal = ctx.signals + (init ? s0 : s1);
  side.peer_signal = ctx.signals + (init ? s1 : s0);
  side.my_payload = ctx.signals + (init ? s0 : s1) + 1;
  side.peer_payload = ctx.signals + (init ? s1 : s0) + 1;
  side.peer = ctx.rank;
  side.signal_id = init ? s0 : s1;
  side.initiator = init;
  dev::pingpong_side<S>(ctx, side, rounds, base, errors);
}

__global__ void add_many(uint64_t* sig, int per_thread) {
  for (int i = 0; i < per_thread; ++i) dev::signal_add<dev::Scope::Gpu>(sig, 1);
}

__global__ void wait_one(DeviceCtx ctx, int idx, uint64_t expected, int role, int peer, uint64_t* seen) {
  if (threadIdx.x == 0)
    *seen = dev::wait_ge<dev::Scope::Sys>(ctx, ctx.signals + idx, expected, dev::WaitSite{role, peer, idx});
}

struct DevBuf {
  void* p = nullptr;
  explicit DevBuf(size_t n) { CK(cudaMalloc(&p, n)); CK(cudaMemset(p, 0, n)); }
  ~DevBuf() { cudaFree(p); }
  template <typename T> T* as() { return static_cast<T*>(p); }
};

uint32_t read_u32(uint32_t* d) {
  uint32_t h = 0;
  CK(cudaMemcpy(&h, d, 4, cudaMemcpyDeviceToHost));
  return h;
}
uint64_t read_u64(const uint64_t* d) {
  uint64_t h = 0;
  CK(cudaMemcpy(&h, d, 8, cudaMemcpyDeviceToHost));
  return h;
}

}  // namespace

// Child scenarios: each ends in a trapped kernel and prints the host error.
int run_signals_child_scenario(const char* name) {
  const std::string n(name);
  if (n != "timeout" && n != "host_abort" && n != "host_word_only") {
    std::printf("unknown scenario %s\n", name);
    return 2;
  }
  return mk::test::expect_device_failure("waiting kernel", [&]() -> Communicator& {
    Communicator& c = comm();
    uint64_t* seen = nullptr;
    cudaMalloc(&seen, 8);
    if (n == "timeout") {
      // Signal 7 is never raised: the wait must give up after MK_TIMEOUT_MS.
      wait_one<<<1, 32>>>(c.device_ctx(), 7, 42, static_cast<int>(Role::IntraComm), 1, seen);
    } else if (n == "host_abort") {
      DeviceCtx ctx = c.device_ctx();
      ctx.timeout_ns = 10ull * 1000000000ull;  // only the abort can end this wait in time
      // ... and only through the device word, which raise_abort writes from
      // its own stream: the host word is not read for a minute.
      ctx.host_abort_poll_ns = 60ull * 1000000000ull;
      wait_one<<<1, 32>>>(ctx, 9, 5, static_cast<int>(Role::InterRecv), 0, seen);
      usleep(200000);
      c.raise_abort();
    } else {
      // The fallback: only the host-mapped word is raised (mapped pinned
      // memory: under UVA its device address is its host address), read by
      // the wait once per host_abort_poll_ns.
      DeviceCtx ctx = c.device_ctx();
      ctx.timeout_ns = 10ull * 1000000000ull;
      ctx.host_abort_poll_ns = 50ull * 1000000ull;
      wait_one<<<1, 32>>>(ctx, 9, 5, static_cast<int>(Role::InterRecv), 0, seen);
      usleep(200000);
      *reinterpret_cast<volatile uint32_t*>(ctx.abort_host) = static_cast<uint32_t>(c.rank()) + 1;
    }
    return c;
  });
}

TEST(Signals, SingleRankCommunicator) {
  EXPECT_EQ(comm().world(), 1);
  EXPECT_EQ(comm().topology().local_size, 1);
  const DeviceCtx& ctx = comm().device_ctx();
  EXPECT_EQ(ctx.signals, ctx.peer_signals[0]);
  EXPECT_GE(ctx.num_signals, 1024);
  EXPECT_EQ(comm().device_failure(), "");
}

template <dev::Scope S>
void intra_pingpong_rounds(int base_signal) {
  DevBuf errors(4);
  const int rounds = 20000;
  uint64_t base = comm().next_epoch() * rounds;
  intra_pingpong<S><<<2, 32>>>(comm().device_ctx(), base_signal, base_signal + 2, rounds, base, errors.as<uint32_t>());
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  EXPECT_EQ(read_u32(errors.as<uint32_t>()), 0u);
  EXPECT_EQ(read_u64(comm().device_ctx().signals + base_signal), base + rounds);
  EXPECT_EQ(read_u64(comm().device_ctx().signals + base_signal + 2), base + rounds);
}

TEST(Signals, CtaPingPongGpuScope) { intra_pingpong_rounds<dev::Scope::Gpu>(comm().reserve_signals(4)); }
TEST(Signals, CtaPingPongSysScope) { intra_pingpong_rounds<dev::Scope::Sys>(comm().reserve_signals(4)); }

TEST(Signals, BackToBackLaunchesReuseSignalsWithGrowingEpochs) {
  // 200 launches queued without any host synchronisation between them and
  // no reset of the signals: each call's epoch makes its waits fresh.
  const int s = comm().reserve_signals(4);
  DevBuf errors(4);
  const int rounds = 100, calls = 200;
  uint64_t last_base = 0;
  for (int k = 0; k < calls; ++k) {
    last_base = comm().next_epoch() * rounds;
    intra_pingpong<dev::Scope::Gpu><<<2, 32>>>(comm().device_ctx(), s, s + 2, rounds, last_base, errors.as<uint32_t>());
  }
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  EXPECT_EQ(read_u32(errors.as<uint32_t>()), 0u);
  EXPECT_EQ(read_u64(comm().device_ctx().signals + s), last_base + rounds);
}

TEST(Signals, AddFromManyThreadsCountsExactly) {
  const int s = comm().reserve_signals(1);
  uint64_t* sig = comm().device_ctx().signals + s;
  const uint64_t before = read_u64(sig);
  add_many<<<132, 256>>>(sig, 10);
  DevBuf seen(8);
  wait_one<<<1, 32>>>(comm().device_ctx(), s, before + 132 * 256 * 10, 0, 0, seen.as<uint64_t>());
  CK(cudaDeviceSynchronize());
  EXPECT_EQ(read_u64(sig), before + 132ull * 256 * 10);
}

TEST(Signals, SatisfiedWaitReturnsTheValueSeen) {
  const int s = comm().reserve_signals(1);
  uint64_t v = 1234567;
  CK(cudaMemcpy(comm().device_ctx().signals + s, &v, 8, cudaMemcpyHostToDevice));
  DevBuf seen(8);
  wait_one<<<1, 32>>>(comm().device_ctx(), s, 1000, 0, 0, seen.as<uint64_t>());
  CK(cudaDeviceSynchronize());
  EXPECT_EQ(read_u64(seen.as<uint64_t>()), v);
}

TEST(Signals, TimedOutWaitReportsWhoWaitedForWhat) {
  // The wait ends near MK_TIMEOUT_MS=300.
  mk::test::expect_child_failure("timeout", {"CHILD ERROR", "rank 0 role IntraComm", "timed out after",
                                             "waiting on signal 7", "from peer 1", "expected >= 42, seen 0",
                                             "MK_TIMEOUT_MS"});
}

TEST(Signals, HostRaisedAbortEndsDeviceWaits) {
  // Through the device word (the host word is not read before the 10 s bound).
  mk::test::expect_child_failure("host_abort", {"rank 0 role InterRecv", "signal 9", "abort raised by rank 0"}, 8.0);
}

TEST(Signals, HostWordAloneEndsDeviceWaitsToo) {
  // The fallback read of the host-mapped word (once per 50 ms here).
  mk::test::expect_child_failure("host_word_only", {"rank 0 role InterRecv", "signal 9", "abort raised by rank 0"},
                                 8.0);
}
