// emu's proxy half (src/net/emu/emu_ring.hpp) against host threads standing
// in for the delivery agent (device/net/agent.cuh): the same slot format,
// claims by compare-and-swap, done words written out of order. Checks that
// every write is published once, with its fields, no earlier than its
// emulated time, that a slot is never rewritten while claimed, that
// completions come in post order, and what the stall report says.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "src/net/emu/emu_ring.hpp"

namespace {

using mk::net::DeliveryRing;
using mk::net::DeliverySlot;
using mk::net::EmuRing;
using mk::net::EmuWrite;
using mk::net::SigOp;

// Host memory for a ring of `size` slots, zeroed.
struct HostRing {
  explicit HostRing(uint32_t size) : slots(size), done(size, 0) {
    ring.slots = slots.data();
    ring.done = done.data();
    ring.claim = &claim;
    ring.claimed = &claimed;
    ring.size = size;
  }
  std::vector<DeliverySlot> slots;
  std::vector<uint64_t> done;
  uint64_t claim = 0, claimed = 0;
  DeliveryRing ring;
};

EmuWrite write_for(uint64_t i) {
  EmuWrite w;
  w.src = 0x10000 + i * 64;
  w.dst = 0x900000 + i * 128;
  w.bytes = 1 + (i * 37) % 5000;
  w.sig = (i % 3) ? 0x5000 + 8 * (i % 11) : 0;
  w.sig_op = w.sig ? ((i % 2) ? SigOp::Add : SigOp::Set) : SigOp::None;
  w.sig_value = i * 3 + 1;
  w.cookie = 1000 + i;
  return w;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

TEST(EmuRing, FakeAgentsDeliverEveryWriteOnceInPostOrder) {
  constexpr uint32_t kSlots = 16;  // small: the ring wraps many times
  constexpr uint64_t kWrites = 3000;
  HostRing h(kSlots);
  EmuRing er(h.ring, 1e9, 0);  // no pacing: every write is due at once
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> bad{0}, delivered{0};
  std::vector<std::atomic<int>> seen(kWrites);
  for (auto& s : seen) s = 0;
  auto agent = [&](unsigned seed) {
    std::mt19937 rng(seed);
    while (!stop.load()) {
      uint64_t c = __atomic_load_n(&h.claim, __ATOMIC_ACQUIRE);
      DeliverySlot& s = h.slots[c % kSlots];
      if (__atomic_load_n(&s.w[0], __ATOMIC_ACQUIRE) != c + 1) {
        std::this_thread::yield();
        continue;
      }
      if (!__atomic_compare_exchange_n(&h.claim, &c, c + 1, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) continue;
      __atomic_store_n(&h.claimed, c + 1, __ATOMIC_RELEASE);
      uint64_t body[8];
      for (int k = 1; k < 8; ++k) body[k] = __atomic_load_n(&s.w[k], __ATOMIC_RELAXED);
      // Which write this is: writes are published in post order, so slot
      // sequence c carries write c.
      const EmuWrite want = write_for(c);
      if (body[1] != mk::net::delivery_meta(want.bytes, want.sig_op, false) || body[2] != want.src ||
          body[3] != want.dst || body[4] != want.sig || body[5] != want.sig_value)
        ++bad;
      if (c < kWrites) ++seen[c];
      if (rng() % 4 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 50));  // out of order
      // The proxy may not have rewritten the slot while it was claimed.
      if (__atomic_load_n(&s.w[0], __ATOMIC_ACQUIRE) != c + 1) ++bad;
      __atomic_store_n(&h.done[c % kSlots], c + 1, __ATOMIC_RELEASE);
      ++delivered;
    }
  };
  std::thread a1(agent, 1), a2(agent, 2), a3(agent, 3);
  std::vector<uint64_t> order;
  uint64_t posted = 0, cookies[64];
  const auto t0 = std::chrono::steady_clock::now();
  while (order.size() < kWrites && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30)) {
    while (posted < kWrites && er.post(write_for(posted), now_ns())) ++posted;
    const int n = er.progress(now_ns(), cookies, 64);
    for (int i = 0; i < n; ++i) order.push_back(cookies[i]);
    if (er.published() - er.done() > kSlots) {  // (not ASSERT: the agents must be joined first)
      ADD_FAILURE() << "more writes published than the ring holds";
      break;
    }
  }
  stop = true;
  a1.join();
  a2.join();
  a3.join();
  ASSERT_EQ(order.size(), kWrites) << "writes not completed in 30 s";
  for (uint64_t i = 0; i < kWrites; ++i) ASSERT_EQ(order[i], 1000 + i) << "completion " << i << " out of post order";
  for (uint64_t i = 0; i < kWrites; ++i) EXPECT_EQ(seen[i].load(), 1) << "write " << i << " delivered not once";
  EXPECT_EQ(bad.load(), 0u) << "slots with wrong fields, or rewritten while claimed";
  EXPECT_EQ(delivered.load(), kWrites);
  EXPECT_EQ(er.waiting(), 0u);
}

TEST(EmuRing, PacingPublishesNoWriteBeforeItsEmulatedTime) {
  HostRing h(8);
  EmuRing er(h.ring, 1.0, 5000);  // 1 byte/ns, 5 us; the real path starts at kRealStartNs
  const int64_t lat = 5000 - EmuRing::kRealStartNs;
  EmuWrite w = write_for(0);
  w.bytes = 10000;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(er.post(w, 0));  // back to back on an idle link at t = 0
  uint64_t cookies[8];
  EXPECT_EQ(er.progress(10000 + lat - 1, cookies, 8), 0);
  EXPECT_EQ(er.published(), 0u) << "published before its bytes left the emulated link plus the latency";
  er.progress(10000 + lat, cookies, 8);
  EXPECT_EQ(er.published(), 1u);
  er.progress(20000 + lat - 1, cookies, 8);
  EXPECT_EQ(er.published(), 1u) << "the second write shares the link: 10000 bytes later";
  er.progress(30000 + lat, cookies, 8);
  EXPECT_EQ(er.published(), 3u);
  EXPECT_EQ(er.done(), 0u) << "nothing is done before an agent says so";
  // A later post on an idle link starts at its own time.
  ASSERT_TRUE(er.post(w, 100000));
  er.progress(110000 + lat - 1, cookies, 8);
  EXPECT_EQ(er.published(), 3u);
  er.progress(110000 + lat, cookies, 8);
  EXPECT_EQ(er.published(), 4u);
}

TEST(EmuRing, InlineBytesTravelInTheSlot) {
  HostRing h(4);
  EmuRing er(h.ring, 1e9, 0);
  EmuWrite w = write_for(5);
  w.bytes = 12;
  w.has_inline = true;
  w.inline_data[0] = 0x1122334455667788ull;
  w.inline_data[1] = 0x99aabbccull;
  ASSERT_TRUE(er.post(w, 0));
  uint64_t cookies[4];
  er.progress(1, cookies, 4);
  const DeliverySlot& s = h.slots[0];
  EXPECT_EQ(s.w[0], 1u);
  EXPECT_TRUE(mk::net::delivery_inline(s.w[1]));
  EXPECT_EQ(mk::net::delivery_bytes(s.w[1]), 12u);
  EXPECT_EQ(mk::net::delivery_sig_op(s.w[1]), w.sig_op);
  EXPECT_EQ(s.w[2], 0u) << "an inline write names no source";
  EXPECT_EQ(s.w[6], w.inline_data[0]);
  EXPECT_EQ(s.w[7], w.inline_data[1]);
  EmuWrite big = w;
  big.bytes = 17;
  EXPECT_THROW(er.post(big, 0), mk::Error);
}

TEST(EmuRing, FullQueueRefusesAndTheReportNamesTheStuckWrite) {
  HostRing h(4);
  EmuRing er(h.ring, 1.0, 1000000);  // slow: nothing is due for a while
  EXPECT_EQ(er.describe(0), "");
  for (size_t i = 0; i < EmuRing::kMaxQueuedOps; ++i) ASSERT_TRUE(er.post(write_for(i), 0));
  EXPECT_FALSE(er.post(write_for(0), 0)) << "a full queue refuses (the proxy retries)";
  EXPECT_NE(er.describe(0).find("wait for their emulated time"), std::string::npos) << er.describe(0);
  uint64_t cookies[4];
  er.progress(int64_t(1) << 50, cookies, 4);  // everything due: the ring's 4 slots are published
  EXPECT_EQ(er.published(), 4u);
  const std::string unclaimed = er.describe(int64_t(1) << 50);
  EXPECT_NE(unclaimed.find("write #0"), std::string::npos) << unclaimed;
  EXPECT_NE(unclaimed.find("not claimed"), std::string::npos) << unclaimed;
  h.claimed = 1;
  EXPECT_NE(er.describe(int64_t(1) << 50).find("claimed, not finished"), std::string::npos);
  h.done[0] = 1;  // the agent finished write 0
  EXPECT_EQ(er.progress(int64_t(1) << 50, cookies, 4), 1);
  EXPECT_EQ(cookies[0], write_for(0).cookie);
  EXPECT_EQ(er.published(), 5u) << "its slot is published again at once";
}

}  // namespace
