// Tests of the verbs backend's planning logic (no NIC needed): WR chaining,
// signal kinds, selective signalling, in-flight accounting, round-robin QPs,
// bounds checks, connect/region blobs, GID choice, EFA immediates, and that
// make_verbs fails fast and clearly on a machine without RDMA devices.
#include <gtest/gtest.h>

#include "tests/cpu/verbs_test_util.hpp"

#include <chrono>
#include <set>

#include "mkernel/error.hpp"
#include "src/net/transport.hpp"
#include "src/net/verbs/endpoint.hpp"
#include "src/net/verbs/wr_batcher.hpp"
#include "tests/cpu/env_map.hpp"

using namespace mk::net;
using namespace mk::net::verbs;
using mk::test::expect_error;

namespace {

using mk::test::verbs_req;
WriteReq req(int peer, uint64_t bytes, SigOp op = SigOp::None, uint64_t cookie = 0, uint64_t sig_off = 0,
             uint64_t sig_value = 0) {
  return verbs_req(peer, bytes, op, cookie, sig_off, sig_value);
}

// A batcher over `peers` with its tracker.
struct Rig {
  explicit Rig(BatcherConfig c, std::vector<int> peers = {1})
      : cfg(c.normalized()),
        tracker(static_cast<int>(peers.size()) * cfg.qps_per_peer, cfg.max_inflight),
        batcher(cfg, peers, tracker) {}
  std::vector<Completion> drain() {
    std::vector<Completion> out(tracker.num_ready() + 4);
    out.resize(tracker.take_ready(out.data(), static_cast<int>(out.size())));
    return out;
  }
  // Simulates the NIC: completes the last signalled WR of `posted`.
  void complete_last_signalled(const std::vector<WrDesc>& posted) {
    for (auto it = posted.rbegin(); it != posted.rend(); ++it)
      if (it->signaled) {
        tracker.on_completion(it->qp, it->seq);
        return;
      }
    FAIL() << "no signalled WR";
  }
  BatcherConfig cfg;
  InflightTracker tracker;
  WrBatcher batcher;
};

BatcherConfig cfg(int qps, int inflight, int every) {
  BatcherConfig c;
  c.qps_per_peer = qps;
  c.max_inflight = inflight;
  c.signal_every = every;
  return c;
}

}  // namespace

TEST(VerbsLogic, SetSignalChainsAfterDataOnSameQp) {
  Rig r(cfg(1, 64, 16));
  ASSERT_EQ(r.batcher.add(req(1, 4096, SigOp::Set, 7, 40, 99)), 0);
  auto d = r.batcher.take(0);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].kind, WrKind::Write);
  EXPECT_EQ(d[0].bytes, 4096u);
  EXPECT_EQ(d[0].src_off, 64u);
  EXPECT_EQ(d[0].dst_off, 128u);
  EXPECT_EQ(d[0].region, 1);
  EXPECT_FALSE(d[0].has_cookie);
  EXPECT_EQ(d[1].kind, WrKind::SignalSet);
  EXPECT_EQ(d[1].region, kSignalRegion);
  EXPECT_EQ(d[1].dst_off, 40u);
  EXPECT_EQ(d[1].value, 99u);
  EXPECT_EQ(d[1].bytes, 8u);
  EXPECT_TRUE(d[1].inline_data);
  EXPECT_FALSE(d[1].fence);
  EXPECT_TRUE(d[1].has_cookie);
  EXPECT_EQ(d[1].cookie, 7u);
  EXPECT_EQ(d[0].qp, d[1].qp);
  EXPECT_LT(d[0].seq, d[1].seq);
  EXPECT_EQ(d[0].peer, 1);
}

TEST(VerbsLogic, AddSignalIsFencedAtomic) {
  Rig r(cfg(1, 64, 16));
  ASSERT_EQ(r.batcher.add(req(1, 100, SigOp::Add, 3, 8, 5)), 0);
  auto d = r.batcher.take(0);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].kind, WrKind::Write);
  EXPECT_FALSE(d[0].fence);
  EXPECT_EQ(d[1].kind, WrKind::SignalAdd);
  EXPECT_TRUE(d[1].fence);
  EXPECT_FALSE(d[1].inline_data);
  EXPECT_EQ(d[1].value, 5u);
  EXPECT_EQ(d[1].dst_off, 8u);
}

TEST(VerbsLogic, ZeroByteSignalOnlyIsOneWr) {
  Rig r(cfg(1, 64, 16));
  ASSERT_EQ(r.batcher.chain_length(req(1, 0, SigOp::Add)), 1);
  ASSERT_EQ(r.batcher.add(req(1, 0, SigOp::Add, 11, 16, 1)), 0);
  auto d = r.batcher.take(0);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].kind, WrKind::SignalAdd);
  EXPECT_TRUE(d[0].has_cookie);
  EXPECT_TRUE(d[0].signaled);
  r.tracker.on_completion(d[0].qp, d[0].seq);
  auto c = r.drain();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].cookie, 11u);
}

TEST(VerbsLogic, NoBytesNoSignalCompletesWithoutWr) {
  Rig r(cfg(1, 64, 16));
  EXPECT_EQ(r.batcher.add(req(1, 0, SigOp::None, 21)), -2);
  EXPECT_EQ(r.batcher.num_pending(0), 0);
  auto c = r.drain();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].cookie, 21u);
  EXPECT_TRUE(r.drain().empty());
}

TEST(VerbsLogic, LargeWritesSplitWithSignalLast) {
  BatcherConfig c = cfg(1, 64, 16);
  c.max_wr_bytes = 1000;
  Rig r(c);
  ASSERT_EQ(r.batcher.add(req(1, 2500, SigOp::Set, 1, 0, 1)), 0);
  auto d = r.batcher.take(0);
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(d[0].bytes, 1000u);
  EXPECT_EQ(d[1].bytes, 1000u);
  EXPECT_EQ(d[2].bytes, 500u);
  EXPECT_EQ(d[2].src_off, 64u + 2000);
  EXPECT_EQ(d[2].dst_off, 128u + 2000);
  EXPECT_EQ(d[3].kind, WrKind::SignalSet);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(d[i].has_cookie);
  EXPECT_TRUE(d[3].has_cookie);
}

TEST(VerbsLogic, SignalsEveryNthAndLastOfPost) {
  Rig r(cfg(1, 64, 4));
  for (int i = 0; i < 10; ++i) ASSERT_EQ(r.batcher.add(req(1, 8, SigOp::None, i)), 0);
  auto d = r.batcher.take(0);
  ASSERT_EQ(d.size(), 10u);
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(d[i].signaled, i == 3 || i == 7 || i == 9) << "WR " << i;
  // The count carries across posts: after the last-of-post signal at 9 the
  // period restarts, so the next post of 5 signals its 4th and its 5th.
  for (int i = 0; i < 5; ++i) ASSERT_EQ(r.batcher.add(req(1, 8, SigOp::None, 100 + i)), 0);
  d = r.batcher.take(0);
  ASSERT_EQ(d.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(d[i].signaled, i == 3 || i == 4) << "WR " << i;
  // A lone request is always signalled (else it would never complete).
  ASSERT_EQ(r.batcher.add(req(1, 8)), 0);
  d = r.batcher.take(0);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_TRUE(d[0].signaled);
}

TEST(VerbsLogic, UnsignalledCompletionsInferredInOrderExactlyOnce) {
  Rig r(cfg(1, 64, 4));
  for (int i = 0; i < 10; ++i) ASSERT_EQ(r.batcher.add(req(1, 8, SigOp::None, 1000 + i)), 0);
  auto d = r.batcher.take(0);
  EXPECT_EQ(r.tracker.outstanding(0), 10);
  r.tracker.on_completion(0, d[3].seq);  // WRs 0..3
  auto c = r.drain();
  ASSERT_EQ(c.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(c[i].cookie, 1000u + i);
    EXPECT_EQ(c[i].status, 0);
  }
  EXPECT_EQ(r.tracker.outstanding(0), 6);
  r.tracker.on_completion(0, d[9].seq);  // 4..9 (the signal at 7 was reaped with it)
  c = r.drain();
  ASSERT_EQ(c.size(), 6u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(c[i].cookie, 1004u + i);
  EXPECT_EQ(r.tracker.outstanding(0), 0);
  EXPECT_TRUE(r.drain().empty());
  // Completing again, or completing an unsignalled WR, is a bookkeeping bug.
  EXPECT_THROW(r.tracker.on_completion(0, d[9].seq), mk::Error);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(r.batcher.add(req(1, 8, SigOp::None, i)), 0);
  d = r.batcher.take(0);
  ASSERT_FALSE(d[0].signaled);
  EXPECT_THROW(r.tracker.on_completion(0, d[0].seq), mk::Error);
}

TEST(VerbsLogic, ChainCookieReportedOnceAfterSignal) {
  Rig r(cfg(1, 64, 16));
  ASSERT_EQ(r.batcher.add(req(1, 64, SigOp::Set, 5, 0, 1)), 0);
  ASSERT_EQ(r.batcher.add(req(1, 64, SigOp::Add, 6, 8, 1)), 0);
  auto d = r.batcher.take(0);
  ASSERT_EQ(d.size(), 4u);
  r.complete_last_signalled(d);
  auto c = r.drain();
  ASSERT_EQ(c.size(), 2u);  // two requests, four WRs: one cookie each
  EXPECT_EQ(c[0].cookie, 5u);
  EXPECT_EQ(c[1].cookie, 6u);
}

TEST(VerbsLogic, InflightLimitRefusesThenRoomReturns) {
  Rig r(cfg(1, 4, 4));
  ASSERT_EQ(r.batcher.add(req(1, 8, SigOp::Set, 1)), 0);  // 2 WRs
  ASSERT_EQ(r.batcher.add(req(1, 8, SigOp::None, 2)), 0);  // 3
  EXPECT_EQ(r.batcher.room(0), 1);
  EXPECT_EQ(r.batcher.add(req(1, 8, SigOp::Set, 3)), -1);  // needs 2: refused, nothing queued
  EXPECT_EQ(r.batcher.num_pending(0), 3);
  ASSERT_EQ(r.batcher.add(req(1, 8, SigOp::None, 4)), 0);  // 1 fits: 4
  EXPECT_EQ(r.batcher.room(0), 0);
  EXPECT_EQ(r.batcher.add(req(1, 8, SigOp::None, 5)), -1);
  auto d = r.batcher.take(0);  // posted WRs still count
  EXPECT_EQ(r.batcher.room(0), 0);
  EXPECT_EQ(r.batcher.add(req(1, 8, SigOp::None, 5)), -1);
  r.complete_last_signalled(d);
  EXPECT_EQ(r.batcher.room(0), 4);
  EXPECT_EQ(r.batcher.add(req(1, 8, SigOp::Set, 3)), 0);
  auto c = r.drain();
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].cookie, 1u);
  EXPECT_EQ(c[1].cookie, 2u);
  EXPECT_EQ(c[2].cookie, 4u);
}

TEST(VerbsLogic, ChainLongerThanInflightLimitThrows) {
  BatcherConfig c = cfg(1, 4, 4);
  c.max_wr_bytes = 10;
  Rig r(c);
  EXPECT_EQ(expect_error([&] { r.batcher.add(req(1, 45)); }, {"MK_IB_MAX_INFLIGHT", "rank 1"}), "");
}

TEST(VerbsLogic, RoundRobinOverQpsPerPeer) {
  Rig r(cfg(3, 64, 16), {2, 5});
  std::vector<int> qs;
  for (int i = 0; i < 6; ++i) qs.push_back(r.batcher.add(req(5, 8, SigOp::Set, i)));
  EXPECT_EQ(qs, (std::vector<int>{3, 4, 5, 3, 4, 5}));
  EXPECT_EQ(r.batcher.add(req(2, 8)), 0);  // peer 2's cursor is independent
  EXPECT_EQ(r.batcher.add(req(2, 8)), 1);
  for (int q = 3; q < 6; ++q) {
    auto d = r.batcher.take(q);
    ASSERT_EQ(d.size(), 4u);
    for (const WrDesc& x : d) {
      EXPECT_EQ(x.qp, q);
      EXPECT_EQ(x.peer, 5);
    }
    EXPECT_EQ(d[0].kind, WrKind::Write);
    EXPECT_EQ(d[1].kind, WrKind::SignalSet);
  }
  EXPECT_EQ(r.batcher.peer_of_qp(4), 5);
  EXPECT_EQ(r.batcher.qp_of(5, 2), 5);
  EXPECT_THROW(r.batcher.add(req(9, 8)), mk::Error);
}

TEST(VerbsLogic, RefusedPostKeepsItsQp) {
  Rig r(cfg(2, 2, 2));
  ASSERT_EQ(r.batcher.add(req(1, 8, SigOp::Set, 1)), 0);   // fills QP 0
  ASSERT_EQ(r.batcher.add(req(1, 8, SigOp::None, 2)), 1);  // QP 1 keeps one slot
  EXPECT_EQ(r.batcher.room(1), 1);
  EXPECT_EQ(r.batcher.add(req(1, 8, SigOp::None, 4)), -1);  // QP 0's turn, no room
  EXPECT_EQ(r.batcher.add(req(1, 8, SigOp::None, 4)), -1);  // still QP 0, not QP 1
  r.complete_last_signalled(r.batcher.take(0));
  EXPECT_EQ(r.batcher.add(req(1, 8, SigOp::None, 4)), 0);
  EXPECT_EQ(r.batcher.add(req(1, 8, SigOp::None, 5)), 1);
}

TEST(VerbsLogic, FlushPolicy) {
  Rig r(cfg(1, 64, 4));
  EXPECT_FALSE(r.batcher.should_flush(0));
  ASSERT_EQ(r.batcher.add(req(1, 8)), 0);
  EXPECT_TRUE(r.batcher.should_flush(0));  // idle QP: ring at once
  auto d = r.batcher.take(0);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(r.batcher.add(req(1, 8)), 0);
    EXPECT_FALSE(r.batcher.should_flush(0)) << i;  // busy: batch up
  }
  ASSERT_EQ(r.batcher.add(req(1, 8)), 0);
  EXPECT_TRUE(r.batcher.should_flush(0));  // a full signalling period queued
}

TEST(VerbsLogic, NormalizedConfig) {
  BatcherConfig c = cfg(0, 1, 1000).normalized();
  EXPECT_EQ(c.qps_per_peer, 1);
  EXPECT_EQ(c.max_inflight, 2);
  EXPECT_EQ(c.signal_every, 2);
}

TEST(VerbsLogic, WrIdRoundTrip) {
  const uint64_t id = make_wr_id(517, 123456789);
  EXPECT_EQ(wr_id_qp(id), 517);
  EXPECT_EQ(wr_id_seq(id), 123456789u);
}

// ---------------------------------------------------------------- regions

namespace {
RegionTable table() {
  RegionTable t({1, 3});
  t.set_local(0, {0x1000, 4096, 11});
  t.set_local(1, {0x10000, 1 << 20, 12});
  for (int p : {1, 3}) {
    t.set_remote(p, 0, {0x2000, 4096, 21});
    t.set_remote(p, 1, {0x20000, 1 << 20, 22});
  }
  return t;
}
}  // namespace

// A deregistered region (QpTransport::deregister_region) is unknown again,
// locally and at every peer; the others are untouched.
TEST(VerbsLogic, ErasedRegionIsRejected) {
  RegionTable t = table();
  EXPECT_NO_THROW(t.check(req(1, 4096)));
  t.erase(1);
  t.erase(1);  // twice: nothing more
  t.erase(42);  // never registered: nothing
  EXPECT_EQ(expect_error([&] { t.check(req(1, 8)); }, {"region 1", "not registered"}), "");
  EXPECT_EQ(expect_error([&] { t.remote(3, 1); }, {"region 1", "rank 3"}), "");
  EXPECT_EQ(t.local(0).bytes, 4096u);
  EXPECT_NO_THROW(t.check(req(1, 0, SigOp::Set, 0, 8, 1)));  // signals (region 0) still go
}

TEST(VerbsLogic, BoundsChecks) {
  RegionTable t = table();
  EXPECT_NO_THROW(t.check(req(1, 4096, SigOp::Set, 0, 4088)));
  WriteReq w = req(1, 1 << 20);
  w.src_off = 0;
  w.dst_off = 0;
  EXPECT_NO_THROW(t.check(w));
  w.src_off = 1;  // source overruns
  EXPECT_EQ(expect_error([&] { t.check(w); }, {"source", "region 1"}), "");
  w.src_off = 0;
  w.dst_off = 8;  // destination overruns
  EXPECT_EQ(expect_error([&] { t.check(w); }, {"destination", "rank 1"}), "");
  w.dst_off = ~0ull - 4;  // overflow must not wrap into range
  EXPECT_THROW(t.check(w), mk::Error);
  EXPECT_EQ(expect_error([&] { t.check(req(1, 0, SigOp::Add, 0, 4096)); }, {"signal offset 4096"}), "");
  EXPECT_EQ(expect_error([&] { t.check(req(1, 0, SigOp::Add, 0, 12)); }, {"aligned"}), "");
  EXPECT_EQ(expect_error([&] { t.check(req(2, 8)); }, {"rank 2", "not a connected peer"}), "");
  WriteReq u = req(3, 8);
  u.region = 7;
  EXPECT_EQ(expect_error([&] { t.check(u); }, {"region 7"}), "");
  // A signal-only request needs no data region at all.
  WriteReq s = req(3, 0, SigOp::Set, 0, 0, 1);
  s.region = -1;
  EXPECT_NO_THROW(t.check(s));
  // Signals need region 0 at the peer.
  RegionTable t2({1});
  t2.set_local(1, {0, 64, 1});
  t2.set_remote(1, 1, {0, 64, 1});
  EXPECT_NO_THROW(t2.check(req(1, 0)));
  WriteReq d = req(1, 8);
  d.src_off = d.dst_off = 0;
  EXPECT_NO_THROW(t2.check(d));
  EXPECT_EQ(expect_error([&] { t2.check(req(1, 0, SigOp::Set)); }, {"region 0"}), "");
}

// ---------------------------------------------------------------- blobs and GIDs

TEST(VerbsLogic, ConnectBlobRoundTrip) {
  ConnectInfo c;
  c.rank = 3;
  c.qps_per_peer = 2;
  c.port.lid = 77;
  c.port.gid[15] = 9;
  c.port.link_layer = 2;
  c.port.mtu = 5;
  c.peers = {{1, {10, 11}, {100, 101}}, {4, {12, 13}, {102, 103}}};
  ConnectInfo d = decode_connect(encode(c), 3);
  EXPECT_TRUE(d.ok);
  EXPECT_EQ(d.rank, 3);
  EXPECT_EQ(d.qps_per_peer, 2);
  EXPECT_EQ(d.port.lid, 77);
  EXPECT_EQ(d.port.gid, c.port.gid);
  EXPECT_EQ(d.port.mtu, 5);
  ASSERT_EQ(d.peers.size(), 2u);
  EXPECT_EQ(d.peers[1].peer, 4);
  EXPECT_EQ(d.peers[1].qpn, (std::vector<uint32_t>{12, 13}));
  EXPECT_EQ(d.peers[1].psn, (std::vector<uint32_t>{102, 103}));

  ConnectInfo e;
  e.ok = false;
  e.rank = 2;
  e.error = "ibv_create_qp failed";
  ConnectInfo f = decode_connect(encode(e), 2);
  EXPECT_FALSE(f.ok);
  EXPECT_EQ(f.error, "ibv_create_qp failed");
  std::string blob = encode(c);
  EXPECT_EQ(expect_error([&] { decode_connect(blob.substr(0, blob.size() - 1), 6); }, {"malformed", "rank 6"}), "");
  EXPECT_THROW(decode_connect(encode(RegionInfo{}), 0), mk::Error);  // wrong kind
}

TEST(VerbsLogic, RegionBlobRoundTrip) {
  RegionInfo r{true, "", 4, 0xdeadbeef000, 1 << 20, 0x1234};
  RegionInfo s = decode_region(encode(r), 1);
  EXPECT_TRUE(s.ok);
  EXPECT_EQ(s.id, 4);
  EXPECT_EQ(s.addr, 0xdeadbeef000u);
  EXPECT_EQ(s.bytes, 1u << 20);
  EXPECT_EQ(s.rkey, 0x1234u);
  RegionInfo bad{false, "no peermem", 4};
  EXPECT_EQ(decode_region(encode(bad), 1).error, "no peermem");
}

TEST(VerbsLogic, PicksRoceV2Ipv4Gid) {
  auto gid = [](bool v4, uint8_t last) {
    std::array<uint8_t, 16> g{};
    if (v4) g[10] = g[11] = 0xff;
    else g[0] = 0xfe, g[1] = 0x80;
    g[15] = last;
    return g;
  };
  std::vector<GidCandidate> t = {
      {0, gid(false, 1), false},  // link-local, RoCE v1
      {1, gid(false, 1), true},   // link-local, RoCE v2
      {2, gid(true, 5), false},   // IPv4, RoCE v1
      {3, {}, true},              // empty
      {4, gid(true, 5), true},    // IPv4, RoCE v2: the one
  };
  EXPECT_TRUE(is_ipv4_mapped(gid(true, 1)));
  EXPECT_FALSE(is_ipv4_mapped(gid(false, 1)));
  EXPECT_EQ(pick_roce_gid(t), 4);
  t.pop_back();
  EXPECT_EQ(pick_roce_gid(t), 1);  // no IPv4 v2: first v2
  t.erase(t.begin() + 1);
  EXPECT_EQ(pick_roce_gid(t), -1);
}

// EFA/SRD planning, immediates and records: tests/cpu/test_verbs_efa.cpp.

// ---------------------------------------------------------------- the factory here

TEST(VerbsLogic, MakeVerbsFailsFastWithoutRdmaDevice) {
  TransportConfig tc;
  const auto t0 = std::chrono::steady_clock::now();
  std::string msg;
  try {
    auto t = make_verbs(tc);
    GTEST_SKIP() << "this machine has an RDMA device: " << t->name();
  } catch (const mk::Error& e) {
    msg = e.what();
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 10.0);
  EXPECT_TRUE(msg.find("no RDMA device") != std::string::npos ||
              msg.find("libibverbs") != std::string::npos)
      << msg;
  // A second call fails the same way (the loader caches its outcome).
  EXPECT_THROW(make_verbs(tc), mk::Error);
}
