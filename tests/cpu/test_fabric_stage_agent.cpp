// fabric's staging by the delivery agents (src/net/fabric/fabric_stage_agent.cpp,
// MK_FABRIC_STAGE=agent) on the CPU: AgentStageOps over a ring in host
// memory, with a host thread in the agents' place (claims by compare-and-swap,
// the copy, then the signal, then the done word, as device/net/agent.cuh
// makes them). Checks that a sender's copy out is reported copied only once
// its bytes are in the shadow, that a receiver's write lands with its signal
// after its bytes, that more writes than the ring and its queue hold all go
// through in the end, and that closing without an agent does not hang.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "src/net/fabric/fabric_stage.hpp"
#include "tests/cpu/host_ring.hpp"

namespace {

using mk::net::DeliverySlot;
using mk::net::SigOp;

using mk::test::HostRing;

// The agents' part, on the host: every published slot in order.
class HostAgent {
 public:
  explicit HostAgent(HostRing& r) : r_(r), t_([this] { run(); }) {}
  ~HostAgent() {
    stop_ = true;
    t_.join();
  }

 private:
  void run() {
    while (!stop_) {
      const uint64_t c = r_.claim;
      DeliverySlot& s = r_.slots[c % r_.ring.size];
      if (__atomic_load_n(&s.w[0], __ATOMIC_ACQUIRE) != c + 1) {
        std::this_thread::yield();
        continue;
      }
      r_.claim = c + 1;
      const uint64_t bytes = mk::net::delivery_bytes(s.w[1]);
      if (bytes) std::memcpy(reinterpret_cast<void*>(s.w[3]), reinterpret_cast<const void*>(s.w[2]), bytes);
      auto* sig = reinterpret_cast<uint64_t*>(s.w[4]);
      const SigOp op = mk::net::delivery_sig_op(s.w[1]);
      if (op == SigOp::Set) __atomic_store_n(sig, s.w[5], __ATOMIC_RELEASE);
      if (op == SigOp::Add) __atomic_fetch_add(sig, s.w[5], __ATOMIC_ACQ_REL);
      __atomic_store_n(&r_.done[c % r_.ring.size], c + 1, __ATOMIC_RELEASE);
    }
  }
  HostRing& r_;
  std::atomic<bool> stop_{false};
  std::thread t_;
};

template <typename F>
bool within(double seconds, F&& done) {
  const auto t0 = std::chrono::steady_clock::now();
  while (!done())
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > seconds) return false;
  return true;
}

TEST(FabricStageAgent, CopyOutIsReportedOnlyOnceItsBytesAreInTheShadow) {
  HostRing r(16);
  auto ops = mk::net::fabric::make_agent_stage_ops_on(r.ring);
  EXPECT_FALSE(ops->calls_cuda());
  EXPECT_EQ(ops->delivery_ring().slots, r.ring.slots);
  std::vector<unsigned char> gpu(100000, 0x3C), shadow(100000, 0);
  ops->copy_out(5, shadow.data(), gpu.data(), gpu.size());
  EXPECT_FALSE(ops->copied(5)) << "no agent runs yet";
  HostAgent agent(r);
  ASSERT_TRUE(within(5, [&] { return ops->copied(5); }));
  EXPECT_EQ(shadow, gpu);
}

TEST(FabricStageAgent, ReceivedWritesLandWithTheirSignalsAfterTheirBytes) {
  HostRing r(16);
  auto ops = mk::net::fabric::make_agent_stage_ops_on(r.ring);
  HostAgent agent(r);
  std::vector<unsigned char> shadow(4096, 0x77), gpu(4096, 0);
  uint64_t sig = 0, flag = 0;
  ops->deliver(gpu.data(), shadow.data(), shadow.size(), &sig, SigOp::Add, 7);
  ASSERT_TRUE(within(5, [&] {
    ops->progress();
    return __atomic_load_n(&sig, __ATOMIC_ACQUIRE) == 7;
  }));
  EXPECT_EQ(gpu, shadow);
  // Bytes alone, then a signal alone (EFA's kind): this one host agent takes
  // them in order, so the bytes are in once the signal is.
  std::vector<unsigned char> more(64, 0x11), gpu2(64, 0);
  ops->copy_in(gpu2.data(), more.data(), more.size());
  ops->signal(&flag, SigOp::Set, 9);
  ASSERT_TRUE(within(5, [&] {
    ops->progress();
    return __atomic_load_n(&flag, __ATOMIC_ACQUIRE) == 9;
  }));
  EXPECT_EQ(gpu2, more);
}

// 9000 writes: more than the ring (16 slots) and the ring's queue (8192
// writes) hold at once: the rest wait in the ops' backlog.
TEST(FabricStageAgent, MoreWritesThanTheRingAndItsQueueHoldAllLand) {
  HostRing r(16);
  auto ops = mk::net::fabric::make_agent_stage_ops_on(r.ring);
  std::vector<unsigned char> src(9000), dst(9000, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7 + 1);
  uint64_t sig = 0;
  for (size_t i = 0; i < src.size(); ++i) ops->deliver(&dst[i], &src[i], 1, &sig, SigOp::Add, 1);
  HostAgent agent(r);
  ASSERT_TRUE(within(20, [&] {
    ops->progress();
    return __atomic_load_n(&sig, __ATOMIC_ACQUIRE) == src.size();
  })) << "landed " << sig << " of " << src.size();
  EXPECT_EQ(dst, src);
}

// Teardown with staged work no kernel took: drain gives up after its bound.
TEST(FabricStageAgent, DrainWithoutAnAgentReturns) {
  HostRing r(16);
  auto ops = mk::net::fabric::make_agent_stage_ops_on(r.ring);
  std::vector<unsigned char> a(64, 1), b(64, 0);
  ops->copy_in(b.data(), a.data(), a.size());
  const auto t0 = std::chrono::steady_clock::now();
  ops->drain();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
}

}  // namespace
