// fabric's staging by the delivery agents (src/net/fabric/fabric_stage_agent.cpp,
// MK_FABRIC_STAGE=agent) on the CPU: AgentStageOps over a ring in host
// memory, with a host thread in the agents' place (claims by compare-and-swap,
// the copy, then the signal, then the done word, as device/net/agent.cuh
// makes them). Checks that a sender's copy out is reported copied only once
// its bytes are in the shadow, that a receiver's write lands with its signal
// after its bytes, in one slot (the unordered copy_in/signal pair is
// refused), that more writes than the ring and its queue hold all go through
// in the end, that a delivery no agent takes is said once, that closing
// without an agent does not hang, and that a shadow being retired (its region
// deregistered) has the deliveries from it that no agent took cut, all or
// nothing when an agent races the cut, and is freed only once no agent may
// read it.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "mkernel/error.hpp"
#include "src/net/fabric/fabric_stage.hpp"
#include "tests/cpu/host_ring.hpp"
#include "tests/test_env.hpp"

namespace {

using mk::net::DeliverySlot;
using mk::net::SigOp;

using mk::test::HostAgent;
using mk::test::HostRing;

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
  uint64_t sig = 0;
  ops->deliver(gpu.data(), shadow.data(), shadow.size(), &sig, SigOp::Add, 7);
  ASSERT_TRUE(within(5, [&] {
    ops->progress();
    return __atomic_load_n(&sig, __ATOMIC_ACQUIRE) == 7;
  }));
  EXPECT_EQ(gpu, shadow);
}

// The order of a write's bytes before its signal holds only inside one slot
// (agents take separate slots in either order): deliver publishes the two as
// one, and the unordered pair copy_in + signal is refused.
TEST(FabricStageAgent, AWriteAndItsSignalAreOneSlot) {
  HostRing r(16);
  auto ops = mk::net::fabric::make_agent_stage_ops_on(r.ring);
  std::vector<unsigned char> shadow(300, 0x42), gpu(300, 0);
  uint64_t sig = 0;
  ops->deliver(gpu.data(), shadow.data(), shadow.size(), &sig, SigOp::Set, 3);
  EXPECT_EQ(r.slots[0].w[0], 1u) << "published as slot 0";
  EXPECT_EQ(r.slots[1].w[0], 0u) << "one slot only";
  EXPECT_EQ(mk::net::delivery_bytes(r.slots[0].w[1]), 300u);
  EXPECT_EQ(mk::net::delivery_sig_op(r.slots[0].w[1]), SigOp::Set);
  EXPECT_EQ(r.slots[0].w[4], reinterpret_cast<uint64_t>(&sig));
  EXPECT_EQ(r.slots[0].w[5], 3u);
  EXPECT_THROW(ops->copy_in(gpu.data(), shadow.data(), 8), mk::Error);
  EXPECT_THROW(ops->signal(&sig, SigOp::Add, 1), mk::Error);
}

// A delivery no agent takes is said once, with what it waits for, after
// half MK_TIMEOUT_MS (here 200 ms): quietly (Info) while no kernel of this
// rank has pushed a command since it was published (the rank is behind its
// peers: skew, not a fault), as a warning once one has (a kernel runs, and
// no agent of it takes the ring's work); the next stall is said again.
TEST(FabricStageAgent, AStalledDeliveryIsSaidOnce) {
  const mk::test::EnvGuard t("MK_TIMEOUT_MS", "400");
  HostRing r(16);
  auto ops = mk::net::fabric::make_agent_stage_ops_on(r.ring);
  std::vector<unsigned char> a(64, 1), b(64, 0);
  uint64_t sig = 0;
  ops->pushed();  // a kernel pushed before the delivery came: not "since"
  ops->deliver(b.data(), a.data(), a.size(), &sig, SigOp::Set, 1);
  EXPECT_EQ(ops->stalled().line, "") << "not yet";
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  auto said = ops->stalled();
  EXPECT_FALSE(said.warn) << "no kernel of this rank pushed since: quiet";
  EXPECT_NE(said.line.find("this rank is behind its peers"), std::string::npos) << said.line;
  EXPECT_NE(said.line.find("fabric staging: delivery #0 (64 bytes)"), std::string::npos) << said.line;
  EXPECT_EQ(ops->stalled().line, "") << "said once";
  ops->pushed();  // a kernel of this rank runs now, and still no agent takes it
  said = ops->stalled();
  EXPECT_TRUE(said.warn) << said.line;
  EXPECT_NE(said.line.find("pushes commands"), std::string::npos) << said.line;
  EXPECT_NE(said.line.find("not claimed"), std::string::npos) << said.line;
  EXPECT_EQ(ops->stalled().line, "") << "warned once";
  {
    HostAgent agent(r);
    ASSERT_TRUE(within(5, [&] {
      ops->progress();  // done once its done word is in, after the signal
      return ops->describe().empty();
    }));
  }
  EXPECT_EQ(sig, 1u);
  ops->deliver(b.data(), a.data(), a.size(), &sig, SigOp::Set, 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  said = ops->stalled();
  EXPECT_NE(said.line, "") << "a new stall";
  EXPECT_FALSE(said.warn);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  said = ops->stalled();
  EXPECT_TRUE(said.warn) << "still not taken at MK_TIMEOUT_MS, with no push: a warning all the same";
  EXPECT_NE(said.line.find("the kernels' wait bound"), std::string::npos) << said.line;
}

// A staging copy out waits only because a kernel of this rank pushed the put:
// its stall is a warning at once.
TEST(FabricStageAgent, AStalledCopyOutIsAWarning) {
  const mk::test::EnvGuard t("MK_TIMEOUT_MS", "400");
  HostRing r(16);
  auto ops = mk::net::fabric::make_agent_stage_ops_on(r.ring);
  std::vector<unsigned char> gpu(64, 1), shadow(64, 0);
  ops->copy_out(0, shadow.data(), gpu.data(), gpu.size());
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  const auto said = ops->stalled();
  EXPECT_TRUE(said.warn) << said.line;
  EXPECT_NE(said.line.find("waits for its staging copy"), std::string::npos) << said.line;
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

// Teardown with staged work no kernel took: drain gives up after its bound
// and says so; with an agent it finishes.
TEST(FabricStageAgent, DrainWithoutAnAgentReturnsFalse) {
  HostRing r(16);
  auto ops = mk::net::fabric::make_agent_stage_ops_on(r.ring);
  std::vector<unsigned char> a(64, 1), b(64, 0);
  ops->deliver(b.data(), a.data(), a.size(), nullptr, SigOp::None, 0);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(ops->drain());
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  HostAgent agent(r);
  EXPECT_TRUE(ops->drain());
  EXPECT_EQ(b, a);
}

// Shadows as test memory: alloc_host is never called here (the shadows are
// the tests' vectors); free_host records what the ops free.
struct Frees {
  std::vector<void*> freed;
  mk::net::fabric::HostMemoryHooks hooks() {
    return {[](size_t) -> void* { return nullptr; }, [this](void* p) { freed.push_back(p); }};
  }
  bool has(const void* p) const { return std::find(freed.begin(), freed.end(), p) != freed.end(); }
};

// A shadow being retired (its region deregistered): the deliveries from it
// that no agent took are dropped (no bytes, no signal, ever), copies out
// into it are not; it is free at once when nothing touches it, else the ops
// free it themselves once nothing may (no wait in retire): at a later retire
// or free_retired(), never in progress() (the proxy thread, while a kernel
// may run: cudaFreeHost may wait for it).
TEST(FabricStageAgent, RetiringOneShadowDropsItsDeliveriesAndFreesItOnceNothingTouchesIt) {
  HostRing r(16);
  Frees f;
  auto ops = mk::net::fabric::make_agent_stage_ops_on(r.ring, f.hooks());
  std::vector<unsigned char> shadow_a(256, 5), shadow_b(256, 6), gpu(256, 0), out(256, 9);
  uint64_t sig = 0;
  ops->deliver(gpu.data(), shadow_a.data() + 128, 64, &sig, SigOp::Set, 4);  // reads shadow a
  ops->copy_out(0, shadow_a.data() + 200, out.data(), 16);                  // writes shadow a
  const auto t0 = std::chrono::steady_clock::now();
  auto ret = ops->retire(shadow_b.data(), shadow_b.size());
  EXPECT_TRUE(ret.freeable && !ret.deferred) << "nothing touches shadow b";
  EXPECT_EQ(ret.dropped, 0u);
  ret = ops->retire(shadow_a.data(), 128);
  EXPECT_TRUE(ret.freeable && !ret.deferred) << "the copies touch a from byte 128 on";
  ret = ops->retire(shadow_a.data() + 100, 50);
  EXPECT_TRUE(!ret.freeable && ret.deferred) << "the cut slot was published: an agent may have read it already";
  EXPECT_EQ(ret.dropped, 1u) << "overlaps the delivery's source";
  ret = ops->retire(shadow_a.data() + 150, 106);
  EXPECT_TRUE(ret.deferred) << "the copy out into it is not done";
  EXPECT_EQ(ret.dropped, 0u) << "cut already";
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 0.9) << "no waits (1 s before)";
  ops->progress();
  EXPECT_TRUE(f.freed.empty()) << "no agent has run";
  {
    HostAgent agent(r);
    ASSERT_TRUE(within(5, [&] {
      ops->progress();
      return ops->copied(0) && __atomic_load_n(&r.done[0], __ATOMIC_ACQUIRE) == 1;
    }));
  }
  for (int i = 0; i < 20; ++i) ops->progress();
  EXPECT_TRUE(f.freed.empty()) << "progress() frees nothing";
  std::vector<unsigned char> shadow_c(64, 7);
  ret = ops->retire(shadow_c.data(), shadow_c.size());
  EXPECT_TRUE(ret.freeable && !ret.deferred) << "nothing touches shadow c";
  EXPECT_EQ(f.freed.size(), 2u) << "the next retire freed the two deferred shadows";
  EXPECT_TRUE(f.has(shadow_a.data() + 100) && f.has(shadow_a.data() + 150));
  EXPECT_TRUE(ops->drain());
  EXPECT_EQ(gpu, std::vector<unsigned char>(256, 0)) << "the dropped delivery wrote nothing";
  EXPECT_EQ(sig, 0u) << "nor its signal";
  EXPECT_TRUE(ops->copied(0)) << "the copy out is made";
  EXPECT_TRUE(std::equal(out.begin(), out.begin() + 16, shadow_a.begin() + 200));
}

// Deliveries from a shadow wait in all three places a write can be (a ring
// slot, the ring's queue of writes not yet published, the ops' backlog)
// when a region goes with no agent running: every one is cut, a later
// agent makes none of them, and deliveries from another shadow still land;
// the shadow is freed once the cut slots are done. Close (drain) does not
// wait for cut deliveries.
TEST(FabricStageAgent, RetiringWithoutAnAgentCutsEveryPendingDelivery) {
  HostRing r(16);
  Frees f;
  auto ops = mk::net::fabric::make_agent_stage_ops_on(r.ring, f.hooks());
  constexpr size_t kA = 8200;  // 16 published, 8176 queued in the ring, 8 in the backlog
  std::vector<unsigned char> shadow_a(kA, 1), gpu_a(kA, 0), shadow_b(64, 2), gpu_b(64, 0);
  uint64_t sig_a = 0, sig_b = 0;
  for (size_t i = 0; i < kA; ++i) ops->deliver(&gpu_a[i], &shadow_a[i], 1, &sig_a, SigOp::Add, 1);
  const auto ret = ops->retire(shadow_a.data(), shadow_a.size());
  EXPECT_TRUE(ret.deferred) << "16 published slots, none done";
  EXPECT_EQ(ret.dropped, kA);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(ops->drain()) << "only cut deliveries are pending: nothing to wait for";
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 0.9);
  ops->deliver(gpu_b.data(), shadow_b.data(), shadow_b.size(), &sig_b, SigOp::Set, 3);
  HostAgent agent(r);
  ASSERT_TRUE(within(20, [&] {
    ops->progress();
    ops->free_retired();  // (a deregistering thread)
    return __atomic_load_n(&sig_b, __ATOMIC_ACQUIRE) == 3 && f.has(shadow_a.data());
  }));
  EXPECT_TRUE(ops->drain());
  EXPECT_EQ(gpu_b, shadow_b);
  EXPECT_EQ(sig_a, 0u);
  EXPECT_EQ(gpu_a, std::vector<unsigned char>(kA, 0));
}

// A delivery cut by a retire waits for an agent like any other, but nothing
// waits for it: no stall is said for it (half MK_TIMEOUT_MS: 200 ms here).
TEST(FabricStageAgent, ACutDeliveryIsNotSaidToStall) {
  const mk::test::EnvGuard t("MK_TIMEOUT_MS", "400");
  HostRing r(2);
  Frees f;
  auto ops = mk::net::fabric::make_agent_stage_ops_on(r.ring, f.hooks());
  std::vector<unsigned char> shadow(64, 1), gpu(64, 0);
  uint64_t sig = 0;
  for (int k = 0; k < 3; ++k) ops->deliver(gpu.data(), shadow.data(), 64, &sig, SigOp::Set, 1);  // 2 published, 1 queued
  EXPECT_EQ(ops->retire(shadow.data(), shadow.size()).dropped, 3u);
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  EXPECT_EQ(ops->stalled().line, "");
  EXPECT_NE(ops->describe().find("cut: it delivers nothing"), std::string::npos) << ops->describe();
  {
    HostAgent agent(r);
    ASSERT_TRUE(within(5, [&] {
      ops->progress();
      ops->free_retired();  // (a deregistering thread)
      return f.has(shadow.data());
    }));
  }
  EXPECT_EQ(gpu, std::vector<unsigned char>(64, 0));
  std::vector<unsigned char> other(64, 2);
  ops->deliver(gpu.data(), other.data(), 64, &sig, SigOp::Set, 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  EXPECT_NE(ops->stalled().line, "") << "a delivery not cut is said";
}

// The two orders of a retire against an agent that claimed the slot, made
// to happen by holding the agent: it read the slot before the cut (the
// write lands whole, with its signal, and the shadow is freed only after)
// or after it (nothing lands).
void retire_against_a_held_agent(int held_at) {
  HostRing r(16);
  Frees f;
  auto ops = mk::net::fabric::make_agent_stage_ops_on(r.ring, f.hooks());
  std::vector<unsigned char> shadow(512, 0x33), gpu(512, 0);
  uint64_t sig = 0;
  std::atomic<int> at{-1};
  std::atomic<bool> go{false};
  struct Release {  // a failed ASSERT must not leave the agent held (its join would hang)
    std::atomic<bool>& go;
    ~Release() { go = true; }
  };
  HostAgent agent(r, [&](uint64_t, int stage) {
    if (stage != held_at) return;
    at = stage;
    while (!go) std::this_thread::yield();
  });
  const Release release{go};
  ops->deliver(gpu.data(), shadow.data(), shadow.size(), &sig, SigOp::Set, 1);
  ASSERT_TRUE(within(5, [&] { return at.load() == held_at; }));
  const auto ret = ops->retire(shadow.data(), shadow.size());
  EXPECT_EQ(ret.dropped, 1u) << "published and not done: cut";
  EXPECT_TRUE(ret.deferred) << "the held agent may be making it";
  ops->progress();
  EXPECT_TRUE(f.freed.empty()) << "not freed while the agent holds the slot";
  go = true;
  ASSERT_TRUE(within(5, [&] {
    ops->progress();
    ops->free_retired();  // (a deregistering thread)
    return f.has(shadow.data());
  }));
  const bool read_before = held_at == 1;
  EXPECT_EQ(gpu, read_before ? shadow : std::vector<unsigned char>(512, 0));
  EXPECT_EQ(sig, read_before ? 1u : 0u);
}
TEST(FabricStageAgent, RetireAfterTheAgentReadTheSlotWaitsForItsWholeWrite) { retire_against_a_held_agent(1); }
TEST(FabricStageAgent, RetireBeforeTheAgentReadTheSlotCutsItWhole) { retire_against_a_held_agent(0); }

// Many retires racing a free-running agent: each delivery is made whole
// with its signal, or not at all, and its shadow is freed only after.
TEST(FabricStageAgent, RetireRacingAnAgentIsAllOrNothing) {
  HostRing r(16);
  Frees f;
  auto ops = mk::net::fabric::make_agent_stage_ops_on(r.ring, f.hooks());
  HostAgent agent(r);
  int made = 0, cut = 0;
  for (int k = 0; k < 300; ++k) {
    std::vector<unsigned char> shadow(512, static_cast<unsigned char>(k % 250 + 1)), gpu(512, 0);
    const std::vector<unsigned char> want = shadow;
    uint64_t sig = 0;
    ops->deliver(gpu.data(), shadow.data(), shadow.size(), &sig, SigOp::Set, 1);
    f.freed.clear();
    const auto ret = ops->retire(shadow.data(), shadow.size());
    ASSERT_TRUE(ret.freeable || ret.deferred) << "round " << k;
    ASSERT_TRUE(within(5, [&] {
      ops->progress();
      ops->free_retired();  // (a deregistering thread)
      return ret.freeable || f.has(shadow.data());
    })) << "round " << k;
    const bool landed = gpu == want;
    ASSERT_TRUE(landed || gpu == std::vector<unsigned char>(512, 0)) << "round " << k << ": torn";
    ASSERT_EQ(__atomic_load_n(&sig, __ATOMIC_ACQUIRE), landed ? 1u : 0u) << "round " << k;
    if (!landed) {
      ASSERT_EQ(ret.dropped, 1u) << "round " << k;
    }
    ++(landed ? made : cut);
    std::fill(shadow.begin(), shadow.end(), 0xEE);  // a freed shadow: any later read would show
    ASSERT_TRUE(ops->drain());
    ASSERT_TRUE(landed ? gpu == want : gpu == std::vector<unsigned char>(512, 0)) << "round " << k;
  }
  std::printf("retire racing an agent: %d made, %d cut\n", made, cut);
}

}  // namespace
