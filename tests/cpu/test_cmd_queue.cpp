// The GPU -> host command ring, exercised by host threads through the same
// header code the kernels use: packing, and many producers under contention
// with wrap-around and back-pressure, every command arriving once and in
// per-producer order.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "device/net/cmd_queue.hpp"

using namespace mk::net;

TEST(CmdPacking, RoundTripsEveryField) {
  std::mt19937_64 rng(1);
  for (int i = 0; i < 10000; ++i) {
    CmdFields f;
    f.op = static_cast<CmdOp>(1 + rng() % 5);
    f.sig_op = static_cast<uint8_t>(rng() % 3);
    f.region = static_cast<uint16_t>(rng());
    f.peer = static_cast<uint32_t>(rng());
    f.sig_idx = static_cast<uint32_t>(rng());
    f.src_off = rng();
    f.dst_off = rng();
    f.bytes = rng();
    f.sig_value = rng();
    f.aux = rng();
    f.aux2 = rng();
    const uint64_t seq = rng();
    Cmd c;
    c.w[0] = pack_header(stamp_for(seq), f.op, f.sig_op, f.region);
    pack_body(f, &c.w[1]);
    CmdFields g = unpack(c);
    ASSERT_EQ(g.stamp, static_cast<uint32_t>(seq + 1));
    ASSERT_EQ(g.op, f.op);
    ASSERT_EQ(g.sig_op, f.sig_op);
    ASSERT_EQ(g.region, f.region);
    ASSERT_EQ(g.peer, f.peer);
    ASSERT_EQ(g.sig_idx, f.sig_idx);
    ASSERT_EQ(g.src_off, f.src_off);
    ASSERT_EQ(g.dst_off, f.dst_off);
    ASSERT_EQ(g.bytes, f.bytes);
    ASSERT_EQ(g.sig_value, f.sig_value);
    ASSERT_EQ(g.aux, f.aux);
    ASSERT_EQ(g.aux2, f.aux2);
  }
}

TEST(CmdPacking, HeaderBitLayoutIsAsDocumented) {
  uint64_t h = pack_header(0xdeadbeef, CmdOp::Barrier, 2, 0xabcd);
  EXPECT_EQ(h & 0xffffffffull, 0xdeadbeefull);
  EXPECT_EQ((h >> 32) & 0xff, 4ull);
  EXPECT_EQ((h >> 40) & 0xff, 2ull);
  EXPECT_EQ(h >> 48, 0xabcdull);
  EXPECT_EQ(stamp_for(0xffffffffull), 0u);  // stamps wrap with the sequence
}

namespace {

struct HostRing {
  std::vector<Cmd> ring;
  uint64_t head = 0, tail = 0, done = 0;
  CmdQueue q;
  explicit HostRing(uint32_t size) : ring(size) {
    std::memset(ring.data(), 0, sizeof(Cmd) * size);
    q.ring = ring.data();
    q.head = &head;
    q.tail = &tail;
    q.done = &done;
    q.size = size;
  }
};

void run_contention(uint32_t ring_size, int producers, int per_producer) {
  HostRing r(ring_size);
  std::atomic<bool> stuck{false};
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p)
    threads.emplace_back([&, p] {
      for (int i = 0; i < per_producer; ++i) {
        CmdFields f;
        f.op = CmdOp::Put;
        f.peer = static_cast<uint32_t>(p);
        f.src_off = static_cast<uint64_t>(i);
        f.bytes = 16;
        f.sig_value = (uint64_t(p) << 32) | uint64_t(i);
        auto t0 = std::chrono::steady_clock::now();
        cmdq_push(r.q, f, [&](uint64_t) {
          if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(20)) {
            stuck = true;
            throw std::runtime_error("ring full for 20 s");
          }
          std::this_thread::yield();
        });
      }
    });
  // Consumer: in sequence order, like the proxy.
  std::vector<int> next(producers, 0);
  const uint64_t total = uint64_t(producers) * per_producer;
  uint64_t seq = 0;
  size_t errors = 0;
  auto t0 = std::chrono::steady_clock::now();
  while (seq < total && !stuck) {
    CmdFields f;
    if (!cmdq_peek(r.q, seq, &f)) {
      ASSERT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30)) << "consumer starved at " << seq;
      std::this_thread::yield();
      continue;
    }
    const int p = static_cast<int>(f.peer);
    if (p < 0 || p >= producers || f.src_off != static_cast<uint64_t>(next[p]) ||
        f.sig_value != ((uint64_t(p) << 32) | f.src_off) || f.op != CmdOp::Put || f.bytes != 16)
      ++errors;
    else
      ++next[p];
    ++seq;
    if (seq % 7 == 0 || seq == total) __atomic_store_n(&r.tail, seq, __ATOMIC_RELEASE);  // batched like the proxy
  }
  for (auto& t : threads) t.join();
  ASSERT_FALSE(stuck);
  EXPECT_EQ(errors, 0u);
  for (int p = 0; p < producers; ++p) EXPECT_EQ(next[p], per_producer) << "producer " << p;
  EXPECT_EQ(r.head, total);
  CmdFields f;
  EXPECT_FALSE(cmdq_peek(r.q, total, &f)) << "a command beyond the last one was published";
}

}  // namespace

TEST(CmdQueue, ManyProducersSmallRingWrapsManyTimes) { run_contention(64, 8, 20000); }
TEST(CmdQueue, SingleProducerLargeRing) { run_contention(4096, 1, 100000); }
TEST(CmdQueue, MoreProducersThanSlots) { run_contention(64, 96, 500); }

// The bound of the device's waits on the proxy (a full queue, a flush): a counter that keeps moving is waited
// for up to 3 bounds, one that stops gives up a bound after its last move. (flush gave up one bound after it
// began, however steadily the proxy completed commands: a backlog at a slow link's rate trapped.)
TEST(ProgressBound, GivesUpOnlyWhenTheCounterStopsOrAfterThreeBounds) {
  const uint64_t T = 1000;
  mk::net::ProgressBound moving;
  moving.start(1, 0);
  uint64_t done = 0, now = 1;
  for (; now <= 1 + 2.5 * T; now += T / 10) {  // a completion every 0.6 T
    if ((now - 1) % (6 * T / 10) == 0) ++done;
    EXPECT_FALSE(moving.expired(now, done, T)) << "gave up at " << now << " while the counter moved";
  }
  EXPECT_TRUE(moving.expired(1 + 3 * T + 1, done + 1, T)) << "moving, it is still bounded by 3 bounds in all";
  mk::net::ProgressBound stopped;
  stopped.start(1, 5);
  EXPECT_FALSE(stopped.expired(1 + T / 2, 6, T));  // moved at T/2
  EXPECT_FALSE(stopped.expired(1 + T / 2 + T, 6, T));
  EXPECT_TRUE(stopped.expired(1 + T / 2 + T + 1, 6, T)) << "no move for a bound";
}
