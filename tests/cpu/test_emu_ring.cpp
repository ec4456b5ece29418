// emu's proxy half (src/net/emu/emu_ring.hpp) against host threads standing
// in for the delivery agent (device/net/agent.cuh): the same slot format,
// claims by compare-and-swap, done words written out of order. Checks that
// every write is published once, with its fields, no earlier than its
// emulated time, that a slot is never rewritten while claimed, that
// completions come in post order, what the stall report says, and that a
// write published in chunks signals after all of them, however the agents
// split it.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "src/net/emu/emu_ring.hpp"
#include "tests/cpu/host_ring.hpp"

namespace {

using mk::net::DeliverySlot;
using mk::net::EmuRing;
using mk::net::EmuWrite;
using mk::net::SigOp;

using mk::test::HostRing;

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
      uint64_t c = 0;
      if (!h.claim_one(c)) continue;
      DeliverySlot& s = h.slots[c % kSlots];
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

// Link time is kept in fractions of a ns: at 2 bytes/ns, 3-byte writes take
// 1.5 ns each (they took 1 before session 47, the fraction dropped per write,
// so a stream of small writes beat the rate: 16 bytes at 50 GB/s took none).
TEST(EmuRing, SmallWritesPaceAtTheRate) {
  HostRing h(8);
  EmuRing er(h.ring, 2.0, 0);
  EmuWrite w = write_for(0);
  w.bytes = 3;
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(er.post(w, 0));  // ends at 1.5, 3, 4.5, 6 ns
  uint64_t cookies[8];
  er.progress(5, cookies, 8);
  EXPECT_EQ(er.published(), 3u) << "the fourth write is out at 6 ns";
  er.progress(6, cookies, 8);
  EXPECT_EQ(er.published(), 4u);
  // The same 60 days after boot (the clock's ns as a double step by 1 there: the link keeps its own origin).
  const int64_t t0 = int64_t(60) * 86400 * 1000000000;
  HostRing h2(8);
  EmuRing late(h2.ring, 2.0, 0);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(late.post(w, t0));
  late.progress(t0 + 5, cookies, 8);
  EXPECT_EQ(late.published(), 3u) << "the fourth write is out 6 ns after t0";
  late.progress(t0 + 6, cookies, 8);
  EXPECT_EQ(late.published(), 4u);
}

// Rings sharing a link (a GPU's proxy threads, MK_NET_THREADS) share its
// rate: two 10000-byte writes posted at once on two rings at 1 byte/ns go
// out at 10 and 20 us, not both at 10 (each queue paced a link of its own
// before session 47).
TEST(EmuRing, RingsOnOneLinkShareItsRate) {
  HostRing ha(8), hb(8);
  auto link = std::make_shared<mk::net::EmuLink>();
  EmuRing a(ha.ring, 1.0, 0, 0, 1, link), b(hb.ring, 1.0, 0, 0, 1, link);
  EmuWrite w = write_for(0);
  w.bytes = 10000;
  ASSERT_TRUE(a.post(w, 0));
  ASSERT_TRUE(b.post(w, 0));
  uint64_t cookies[8];
  a.progress(10000, cookies, 8);
  b.progress(10000, cookies, 8);
  EXPECT_EQ(a.published(), 1u);
  EXPECT_EQ(b.published(), 0u) << "the second ring's write went out beside the first's on the same link";
  b.progress(20000, cookies, 8);
  EXPECT_EQ(b.published(), 1u);
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
  EXPECT_NE(unclaimed.find("delivery #0"), std::string::npos) << unclaimed;
  EXPECT_NE(unclaimed.find("not claimed"), std::string::npos) << unclaimed;
  h.claimed = 1;
  EXPECT_NE(er.describe(int64_t(1) << 50).find("claimed, not finished"), std::string::npos);
  h.done[0] = 1;  // the agent finished write 0
  EXPECT_EQ(er.progress(int64_t(1) << 50, cookies, 4), 1);
  EXPECT_EQ(cookies[0], write_for(0).cookie);
  EXPECT_EQ(er.published(), 5u) << "its slot is published again at once";
}

TEST(EmuRing, EarlyChunksArePublishedWhileTheAgentsAreIdle) {
  HostRing h(8);
  EmuRing er(h.ring, 1.0, 5000, 4096);  // 1 byte/ns, 5 us, early chunks from 4 KB
  const int64_t lat = 5000 - EmuRing::kRealStartNs;
  EmuWrite w = write_for(1);
  w.bytes = 10000;
  w.sig = 0x5008;
  w.sig_op = SigOp::Add;
  ASSERT_TRUE(er.post(w, 0));
  uint64_t cookies[8];
  er.progress(4096 + lat - 1, cookies, 8);
  EXPECT_EQ(er.published(), 0u) << "published before 4 KB had left the link";
  er.progress(4096 + lat, cookies, 8);
  ASSERT_EQ(er.published(), 1u) << "the first 4 KB are out and no agent is busy: a chunk";
  er.progress(9000 + lat, cookies, 8);
  EXPECT_EQ(er.published(), 1u) << "no early chunk while an agent has one to deliver";
  h.done[0] = 1;
  er.progress(9000 + lat, cookies, 8);
  ASSERT_EQ(er.published(), 2u) << "8192 bytes out (9000 down to 4 KB): the second chunk";
  er.progress(10000 + lat - 1, cookies, 8);
  EXPECT_EQ(er.published(), 2u);
  er.progress(10000 + lat, cookies, 8);
  ASSERT_EQ(er.published(), 3u) << "the write is due: the rest goes, though an agent is busy";
  const uint64_t want_bytes[3] = {4096, 4096, 1808};
  for (int k = 0; k < 3; ++k) {
    const DeliverySlot& s = h.slots[k];
    const bool last = k == 2;
    EXPECT_EQ(s.w[0], uint64_t(k + 1));
    EXPECT_EQ(mk::net::delivery_bytes(s.w[1]), want_bytes[k]) << "chunk " << k;
    EXPECT_EQ(s.w[2], w.src + 4096u * k);
    EXPECT_EQ(s.w[3], w.dst + 4096u * k);
    EXPECT_EQ(mk::net::delivery_sig_op(s.w[1]), last ? SigOp::Add : SigOp::None) << "only the last chunk signals";
    EXPECT_EQ(s.w[4], last ? w.sig : 0u);
    EXPECT_EQ(mk::net::delivery_after(s.w[1]), last) << "chunk " << k;
    if (last) {
      EXPECT_EQ(s.w[6], 2u) << "the last chunk names its 2 earlier chunks";
    }
  }
  EXPECT_EQ(er.progress(20000, cookies, 8), 0) << "a chunked write completes with its last chunk only";
  h.done[1] = 2;
  EXPECT_EQ(er.progress(20000, cookies, 8), 0);
  h.done[2] = 3;
  ASSERT_EQ(er.progress(20000, cookies, 8), 1);
  EXPECT_EQ(cookies[0], w.cookie);
  EXPECT_EQ(er.waiting(), 0u);
  // A write of less than two chunks, and an inline write.
  EmuWrite small = write_for(2);
  small.bytes = 8000;  // less than 4 KB + 4 KB: never 4 KB more out than published
  ASSERT_TRUE(er.post(small, 30000));
  for (int64_t t = 30000; t < 40000 + lat; t += 500) er.progress(t, cookies, 8);
  EXPECT_EQ(er.published(), 5u) << "4 KB out is a chunk, but then the rest of 8000 is due: 2 slots";
  EmuWrite inl = write_for(3);
  inl.bytes = 16;
  inl.has_inline = true;
  ASSERT_TRUE(er.post(inl, 50000));
  h.done[3] = 4;
  h.done[4] = 5;
  er.progress(int64_t(1) << 40, cookies, 8);
  EXPECT_EQ(er.published(), 6u);
  // An agent that is always idle: at most kMaxDeliveryChunks slots a write.
  HostRing big_ring(64);
  EmuRing big(big_ring.ring, 1.0, 0, 4096);
  EmuWrite huge = write_for(4);
  huge.bytes = 1 << 20;  // 256 chunks of 4 KB would be too many
  ASSERT_TRUE(big.post(huge, 0));
  for (int64_t t = 0; big.waiting() > 0 && t < (int64_t(1) << 22); t += 1024) {
    big.progress(t, cookies, 8);
    for (uint64_t q = big.done(); q < big.published(); ++q) big_ring.done[q % 64] = q + 1;
  }
  EXPECT_EQ(big.waiting(), 0u);
  ASSERT_EQ(big.published(), uint64_t(mk::net::kMaxDeliveryChunks));
  uint64_t sum = 0;
  for (uint32_t k = 0; k < mk::net::kMaxDeliveryChunks; ++k) {
    sum += mk::net::delivery_bytes(big_ring.slots[k].w[1]);
    EXPECT_EQ(big_ring.slots[k].w[2] % 4096, huge.src % 4096) << "chunks keep the write's alignment";
  }
  EXPECT_EQ(sum, huge.bytes);
  const DeliverySlot& tail = big_ring.slots[mk::net::kMaxDeliveryChunks - 1];
  EXPECT_EQ(tail.w[6], mk::net::kMaxDeliveryChunks - 1);
  EXPECT_LE(mk::net::delivery_bytes(tail.w[1]), 2u * (huge.bytes / mk::net::kMaxDeliveryChunks))
      << "early chunks grow with the write: its last chunk is a share of it, not the rest after 31 x 4 KB";
  // A chunked write without a signal: its last chunk has nothing to order.
  EmuWrite quiet = write_for(3);
  ASSERT_EQ(quiet.sig_op, SigOp::None);
  quiet.bytes = 1 << 20;
  const uint64_t before = big.published();
  const int64_t t1 = int64_t(1) << 22;
  ASSERT_TRUE(big.post(quiet, t1));
  for (int64_t t = t1; big.waiting() > 0 && t < t1 + (int64_t(1) << 22); t += 1024) {
    big.progress(t, cookies, 8);
    for (uint64_t q = big.done(); q < big.published(); ++q) big_ring.done[q % 64] = q + 1;
  }
  ASSERT_GT(big.published(), before + 1) << "the write was not chunked";
  EXPECT_FALSE(mk::net::delivery_after(big_ring.slots[(big.published() - 1) % 64].w[1]));
}

// cancel (fabric's retire of a staging shadow): a write picked by its source
// delivers nothing from then on, whether its slot is published or it waits
// to be; a slot an agent marked done already is left alone, and so are
// inline writes and writes from elsewhere; every write still completes. A
// ring that publishes chunks refuses (a last chunk read before the cut
// would signal after earlier chunks cut from under it).
TEST(EmuRing, CancelCutsPublishedAndQueuedWritesOnly) {
  HostRing h(2);
  EmuRing er(h.ring, 1e9, 0);  // no pacing, no chunks
  uint64_t cookies[8];
  auto write = [](uint64_t src, uint64_t cookie) {
    EmuWrite w;
    w.src = src, w.dst = 0x800000, w.bytes = 64, w.sig = 0x5000, w.sig_op = SigOp::Set, w.sig_value = 1;
    w.cookie = cookie;
    return w;
  };
  ASSERT_TRUE(er.post(write(0x100000, 1), 0));  // slot 0: published, picked
  er.progress(1, cookies, 8);
  ASSERT_TRUE(er.post(write(0x100040, 2), 0));  // slot 1: published, made by an agent already
  ASSERT_TRUE(er.post(write(0x100080, 3), 0));  // queued (the ring has 2 slots), picked
  ASSERT_TRUE(er.post(write(0x300000, 4), 0));  // queued, another source
  EmuWrite inl = write(0x100000, 5);
  inl.has_inline = true, inl.bytes = 8;
  ASSERT_TRUE(er.post(inl, 0));  // queued, inline: reads no source
  er.progress(5, cookies, 8);
  ASSERT_EQ(er.published(), 2u);
  h.done[1] = 2;  // slot 1 done, not yet seen by progress
  const auto picked = [](uint64_t src, uint64_t bytes) { return src < 0x300000 && 0x100000 < src + bytes; };
  uint64_t until = 0;
  EXPECT_EQ(er.cancel(picked, until), 2u) << "slot 0 and the third write";
  EXPECT_EQ(until, 1u) << "slot 0 was published: an agent may have read it";
  EXPECT_EQ(h.slots[0].w[1], 0u) << "no bytes, no signal";
  EXPECT_EQ(mk::net::delivery_bytes(h.slots[1].w[1]), 64u) << "made already: untouched";
  EXPECT_NE(er.describe(6).find("delivery #1 (64 bytes, after 1 cut ones)"), std::string::npos)
      << "the report names the oldest slot something waits for: " << er.describe(6);
  EXPECT_EQ(er.oldest_published_ns(), 5) << "slot 1 (not cut) is the oldest that anything waits for";
  uint64_t until2 = 0;
  EXPECT_EQ(er.cancel(picked, until2), 0u) << "cut already";
  h.done[0] = 1;
  ASSERT_EQ(er.progress(6, cookies, 8), 2);
  EXPECT_EQ(mk::net::delivery_bytes(h.slots[0].w[1]), 0u) << "the third write: no bytes";
  EXPECT_EQ(mk::net::delivery_sig_op(h.slots[0].w[1]), SigOp::None) << "and no signal";
  EXPECT_EQ(mk::net::delivery_bytes(h.slots[1].w[1]), 64u) << "the other source's write untouched";
  EXPECT_EQ(mk::net::delivery_sig_op(h.slots[1].w[1]), SigOp::Set);
  h.done[0] = 3, h.done[1] = 4;
  ASSERT_EQ(er.progress(7, cookies, 8), 2);
  EXPECT_TRUE(mk::net::delivery_inline(h.slots[0].w[1])) << "the inline write untouched";
  h.done[0] = 5;
  ASSERT_EQ(er.progress(8, cookies, 8), 1);
  EXPECT_EQ(er.waiting(), 0u) << "every write completed, cut or not";

  HostRing hc(16);
  EmuRing chunked(hc.ring, 1.0, 0, 4096);
  EXPECT_THROW(chunked.cancel(picked, until), mk::Error);
}

// With MK_EMU_AGENTS = 2 a kernel runs two agents: an early chunk goes while
// one slot is outstanding (an agent is still idle), not while two are.
TEST(EmuRing, EarlyChunksGoWhileFewerSlotsThanAgentsAreOutstanding) {
  HostRing h(8);
  EmuRing er(h.ring, 1.0, 0, 4096, 2);  // 1 byte/ns, no latency, early chunks from 4 KB, 2 agents
  EmuWrite w = write_for(1);
  w.bytes = 20000;
  w.sig = 0x5008;
  w.sig_op = SigOp::Set;
  ASSERT_TRUE(er.post(w, 0));
  uint64_t cookies[8];
  er.progress(4096 - 1, cookies, 8);
  EXPECT_EQ(er.published(), 0u);
  er.progress(4096, cookies, 8);
  ASSERT_EQ(er.published(), 1u) << "4 KB out, both agents idle: a chunk";
  er.progress(8192, cookies, 8);
  ASSERT_EQ(er.published(), 2u) << "4 KB more out while one slot is outstanding: the second agent takes a chunk";
  er.progress(16384, cookies, 8);
  EXPECT_EQ(er.published(), 2u) << "two slots outstanding: both agents busy, nothing split";
  h.done[1] = 2;  // the second chunk done before the first (another agent): completion still waits for the first
  EXPECT_EQ(er.progress(16384, cookies, 8), 0);
  EXPECT_EQ(er.done(), 0u);
  EXPECT_EQ(er.published(), 2u) << "done counts a prefix: the first slot still outstanding, and so the second";
  h.done[0] = 1;
  er.progress(16384, cookies, 8);
  ASSERT_EQ(er.published(), 3u) << "both done: 16 KB out, the third chunk (8 KB)";
  EXPECT_EQ(mk::net::delivery_bytes(h.slots[2].w[1]), 8192u);
  er.progress(20000, cookies, 8);
  ASSERT_EQ(er.published(), 4u) << "the write is due: the rest";
  EXPECT_TRUE(mk::net::delivery_after(h.slots[3].w[1]));
  EXPECT_EQ(h.slots[3].w[6], 3u) << "the last chunk names its 3 earlier chunks";
  h.done[2] = 3;
  h.done[3] = 4;
  ASSERT_EQ(er.progress(20000, cookies, 8), 1);
  EXPECT_EQ(er.waiting(), 0u);
}

// Fake agents that follow the agent's rule (device/net/agent.cuh,
// agent_await_chunks): before a last chunk's signal, wait for the done words
// of the write's earlier chunks that this agent did not claim in its unbroken
// run. Each "signal" checks that every byte of its write was delivered: it
// fails if the proxy names too few earlier chunks, or none.
// ring_agents: the agents a kernel runs as the proxy counts them
// (MK_EMU_AGENTS: early chunks while fewer slots are outstanding).
void chunked_writes_over_agents(int ring_agents) {
  constexpr uint32_t kSlots = 16;
  constexpr uint64_t kWrites = 500;
  HostRing h(kSlots);
  EmuRing er(h.ring, 0.5, 0, 8192, ring_agents);  // 0.5 bytes/ns: a write's first chunks go while the rest is on the link
  auto wr = [](uint64_t i) {
    EmuWrite w;
    w.src = (i + 1) << 32;
    w.dst = ((i + 1) << 32) + (uint64_t(1) << 31);
    w.bytes = 1 + (i * 7919) % 90000;  // up to 11 chunks
    w.sig = 0x5000;
    w.sig_op = SigOp::Add;
    w.sig_value = 1;
    w.cookie = i;
    return w;
  };
  std::vector<std::atomic<uint64_t>> delivered(kWrites);
  for (auto& d : delivered) d = 0;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> bad{0}, early{0}, waits{0};
  auto agent = [&](unsigned seed) {
    std::mt19937 rng(seed);
    uint64_t run_from = 0, run_end = ~0ull;
    while (!stop.load()) {
      uint64_t c = 0;
      if (!h.claim_one(c)) continue;
      DeliverySlot& s = h.slots[c % kSlots];
      if (run_end != c) run_from = c;
      run_end = c + 1;
      uint64_t body[8];
      for (int k = 1; k < 8; ++k) body[k] = __atomic_load_n(&s.w[k], __ATOMIC_RELAXED);
      const uint64_t i = (body[2] >> 32) - 1, off = body[2] & 0xffffffffu;
      const uint64_t bytes = mk::net::delivery_bytes(body[1]);
      if (i >= kWrites || body[3] != body[2] + (uint64_t(1) << 31) || off + bytes > wr(i).bytes) {
        ++bad;
      } else {
        // Slow copies, most often of early chunks: the write's last chunk is
        // then often due (and claimed by another agent) before they are done.
        const bool early_chunk = mk::net::delivery_sig_op(body[1]) == SigOp::None;
        if (rng() % (early_chunk ? 2 : 4) == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 40));
        delivered[i] += bytes;  // "the copy"
        if (mk::net::delivery_sig_op(body[1]) != SigOp::None) {
          if (off + bytes != wr(i).bytes) ++bad;  // only the last chunk signals
          if (mk::net::delivery_after(body[1])) {
            const uint64_t first = c - body[6];
            for (uint64_t j = first; j < run_from; ++j) {
              bool counted = false;
              while (__atomic_load_n(&h.done[j % kSlots], __ATOMIC_ACQUIRE) < j + 1) {
                if (!counted) ++waits, counted = true;
                std::this_thread::yield();
              }
            }
          }
          if (delivered[i].load() != wr(i).bytes) ++early;  // "the signal" before all of its bytes
        }
      }
      if (__atomic_load_n(&s.w[0], __ATOMIC_ACQUIRE) != c + 1) ++bad;  // rewritten while claimed
      __atomic_store_n(&h.done[c % kSlots], c + 1, __ATOMIC_RELEASE);
    }
  };
  std::thread a1(agent, 1), a2(agent, 2), a3(agent, 3);
  std::vector<uint64_t> order;
  uint64_t posted = 0, cookies[64];
  const auto t0 = std::chrono::steady_clock::now();
  // A clock of the test's own, so that what the proxy sees does not depend on
  // how busy this machine is: 1 us a round while the agents are idle (a
  // write's first bytes are out before it is due: early chunks), 64 ns while
  // they are busy, up to 32 us each time (16 KB: a write's last chunk may
  // fall due while its early chunk is still being copied).
  int64_t t = 0, busy = 0;
  while (order.size() < kWrites && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30)) {
    while (posted < kWrites && er.post(wr(posted), t)) ++posted;
    const int n = er.progress(t, cookies, 64);
    for (int i = 0; i < n; ++i) order.push_back(cookies[i]);
    const bool idle = er.published() == er.done();
    const int64_t step = idle ? 1000 : busy < 32000 ? 64 : 0;
    busy = idle ? 0 : busy + step;
    t += step;
  }
  stop = true;
  a1.join();
  a2.join();
  a3.join();
  ASSERT_EQ(order.size(), kWrites) << "writes not completed in 30 s";
  for (uint64_t i = 0; i < kWrites; ++i) ASSERT_EQ(order[i], i) << "completion " << i << " out of post order";
  for (uint64_t i = 0; i < kWrites; ++i) EXPECT_EQ(delivered[i].load(), wr(i).bytes) << "write " << i;
  EXPECT_EQ(bad.load(), 0u) << "chunks with wrong fields, or rewritten while claimed";
  EXPECT_EQ(early.load(), 0u) << "signals before all of their write's chunks were delivered";
  EXPECT_GT(er.published(), kWrites) << "no write was chunked";
  EXPECT_GT(waits.load(), 0u) << "no agent ever waited for another's chunk: the split was not exercised";
}

TEST(EmuRing, ChunkedWritesSplitOverAgentsSignalAfterEveryChunk) { chunked_writes_over_agents(1); }
TEST(EmuRing, ChunkedWritesSplitOverThreeAgentsOfOneKernel) { chunked_writes_over_agents(3); }

}  // namespace
