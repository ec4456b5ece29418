// Tests of the verbs backend's EFA/SRD logic (no EFA device needed): the
// immediate encoding, signal records, request planning (inline vs record
// form), out-of-order completion accounting, and the receiver's assembly
// that releases a signal only after all of its data parts.
#include <gtest/gtest.h>

#include "tests/cpu/verbs_test_util.hpp"

#include <algorithm>
#include <random>

#include "mkernel/error.hpp"
#include "src/net/verbs/srd_signal.hpp"
#include "src/net/verbs/wr_batcher.hpp"

using namespace mk::net;
using namespace mk::net::verbs;

namespace {

// Every request goes to peer 1 here.
WriteReq req(uint64_t bytes, SigOp op = SigOp::None, uint64_t cookie = 0, uint64_t sig_off = 0,
             uint64_t value = 0) {
  return mk::test::verbs_req(1, bytes, op, cookie, sig_off, value);
}

struct SrdRig {
  explicit SrdRig(uint64_t max_wr_bytes = 1 << 20, int inflight = 64) {
    cfg.imm_signals = true;
    cfg.qps_per_peer = 1;
    cfg.max_inflight = inflight;
    cfg.signal_every = 16;  // must be forced to 1
    cfg.max_wr_bytes = max_wr_bytes;
    cfg = cfg.normalized();
    tracker = std::make_unique<InflightTracker>(1, cfg.max_inflight, false);
    batcher = std::make_unique<WrBatcher>(cfg, std::vector<int>{1}, *tracker);
  }
  std::vector<uint64_t> ready() {
    Completion c[64];
    std::vector<uint64_t> v;
    const int n = tracker->take_ready(c, 64);
    for (int i = 0; i < n; ++i) v.push_back(c[i].cookie);
    return v;
  }
  BatcherConfig cfg;
  std::unique_ptr<InflightTracker> tracker;
  std::unique_ptr<WrBatcher> batcher;
};

// The receiver: feeds `wrs` (as posted by the sender) in the given order,
// returns the signals released, each with how many of its request's data
// WRs had arrived by then.
struct Delivered {
  ImmSignal sig;
  bool all_data_before = false;
};
std::vector<Delivered> deliver(const std::vector<WrDesc>& wrs, const std::vector<int>& order) {
  SrdAssembler as(1);
  std::vector<int> seen_data(wrs.size(), 0);
  std::vector<Delivered> out;
  for (int i : order) {
    const WrDesc& d = wrs[i];
    ImmSignal s;
    bool rel = false;
    if (d.kind == WrKind::WriteImm) {
      seen_data[i] = 1;
      DecodedImm x = decode_imm(d.imm);
      if (x.kind == ImmKind::Inline) {
        s = x.sig;
        rel = true;
      } else {
        EXPECT_EQ(x.kind, ImmKind::Part);
        rel = as.on_part(0, x.msg_id, &s);
      }
    } else if (d.kind == WrKind::SignalRecord) {
      SrdRecord r;
      r.op = static_cast<uint8_t>(d.sig_op);
      r.nparts = static_cast<uint16_t>(d.nparts);
      r.msg_id = d.imm;
      r.sig_off = d.dst_off;
      r.value = d.value;
      rel = as.on_record(0, parse_record(&r, sizeof(r), 1), &s);
    } else {
      seen_data[i] = 1;  // plain write: no receiver event
    }
    if (rel) {
      bool all = true;
      for (size_t j = 0; j < wrs.size(); ++j)
        if (wrs[j].req == d.req && wrs[j].kind != WrKind::SignalRecord) all = all && seen_data[j];
      out.push_back({s, all});
    }
  }
  EXPECT_EQ(as.pending(), 0u);
  return out;
}

}  // namespace

TEST(VerbsEfa, ImmediateInlineRoundTripAndLimits) {
  DecodedImm d = decode_imm(encode_imm(SigOp::Add, 8 * 12345, 3));
  EXPECT_EQ(d.kind, ImmKind::Inline);
  EXPECT_EQ(d.sig.op, SigOp::Add);
  EXPECT_EQ(d.sig.sig_off, 8u * 12345);
  EXPECT_EQ(d.sig.value, 3u);
  d = decode_imm(encode_imm(SigOp::Set, 8 * kImmMaxWord, kImmMaxValue));
  EXPECT_EQ(d.sig.op, SigOp::Set);
  EXPECT_EQ(d.sig.sig_off, 8 * kImmMaxWord);
  EXPECT_EQ(d.sig.value, kImmMaxValue);
  EXPECT_TRUE(imm_fits(SigOp::Set, 8 * kImmMaxWord, kImmMaxValue));
  EXPECT_FALSE(imm_fits(SigOp::Set, 0, kImmMaxValue + 1));
  EXPECT_FALSE(imm_fits(SigOp::Add, 8 * (kImmMaxWord + 1), 1));
  EXPECT_FALSE(imm_fits(SigOp::Add, 4, 1));
  EXPECT_FALSE(imm_fits(SigOp::None, 0, 1));
  EXPECT_THROW(encode_imm(SigOp::Set, 0, kImmMaxValue + 1), mk::Error);
  EXPECT_THROW(encode_imm(SigOp::None, 0, 1), mk::Error);
  d = decode_imm(encode_part_imm(kImmMsgIdMask));
  EXPECT_EQ(d.kind, ImmKind::Part);
  EXPECT_EQ(d.msg_id, kImmMsgIdMask);
  EXPECT_EQ(decode_imm(encode_part_imm(kImmMsgIdMask + 5)).msg_id, 4u);  // wraps in 30 bits
  EXPECT_EQ(decode_imm(0).kind, ImmKind::Invalid);
}

TEST(VerbsEfa, RecordValidation) {
  SrdRecord r;
  r.op = static_cast<uint8_t>(SigOp::Set);
  r.value = ~0ull;
  r.sig_off = 8 * 100000000ull;
  EXPECT_EQ(parse_record(&r, sizeof(r), 3).value, ~0ull);
  EXPECT_THROW(parse_record(&r, sizeof(r) - 1, 3), mk::Error);
  SrdRecord bad = r;
  bad.magic = 0;
  EXPECT_THROW(parse_record(&bad, sizeof(bad), 3), mk::Error);
  bad = r;
  bad.op = 7;
  EXPECT_THROW(parse_record(&bad, sizeof(bad), 3), mk::Error);
  bad = r;
  bad.sig_off = 12;
  EXPECT_THROW(parse_record(&bad, sizeof(bad), 3), mk::Error);
}

TEST(VerbsEfa, PlanningInlineRecordAndPlain) {
  SrdRig r(4096);
  EXPECT_EQ(r.cfg.signal_every, 1);
  ASSERT_EQ(r.batcher->add(req(4096, SigOp::Add, 1, 16, 2)), 0);        // inline
  ASSERT_EQ(r.batcher->add(req(512, SigOp::Set, 2, 24, 1ull << 40)), 0);  // big value: record
  ASSERT_EQ(r.batcher->add(req(0, SigOp::Add, 3, 8, 1)), 0);            // signal only: record
  ASSERT_EQ(r.batcher->add(req(10000, SigOp::None, 4)), 0);             // plain, split in 3
  ASSERT_EQ(r.batcher->add(req(9000, SigOp::Set, 5, 32, 7)), 0);        // split: record
  auto d = r.batcher->take(0);
  ASSERT_EQ(d.size(), 1u + 2 + 1 + 3 + 4);
  EXPECT_EQ(d[0].kind, WrKind::WriteImm);
  EXPECT_EQ(decode_imm(d[0].imm).kind, ImmKind::Inline);
  EXPECT_EQ(decode_imm(d[0].imm).sig.value, 2u);
  EXPECT_EQ(d[1].kind, WrKind::WriteImm);
  EXPECT_EQ(decode_imm(d[1].imm).kind, ImmKind::Part);
  EXPECT_EQ(d[2].kind, WrKind::SignalRecord);
  EXPECT_EQ(d[2].nparts, 1u);
  EXPECT_EQ(d[2].value, 1ull << 40);
  EXPECT_EQ(d[2].imm, decode_imm(d[1].imm).msg_id);
  EXPECT_EQ(d[3].kind, WrKind::SignalRecord);
  EXPECT_EQ(d[3].nparts, 0u);
  EXPECT_NE(d[3].imm, d[2].imm);  // distinct message ids
  for (int i = 4; i < 7; ++i) EXPECT_EQ(d[i].kind, WrKind::Write);
  EXPECT_EQ(d[6].bytes, 10000u - 2 * 4096);
  for (int i = 7; i < 10; ++i) {
    EXPECT_EQ(d[i].kind, WrKind::WriteImm);
    EXPECT_EQ(decode_imm(d[i].imm).msg_id, d[10].imm);
  }
  EXPECT_EQ(d[10].kind, WrKind::SignalRecord);
  EXPECT_EQ(d[10].nparts, 3u);
  for (const WrDesc& x : d) EXPECT_TRUE(x.signaled);
  // Cookie only on the last WR of each request.
  int cookies = 0;
  for (const WrDesc& x : d) cookies += x.has_cookie;
  EXPECT_EQ(cookies, 5);
}

TEST(VerbsEfa, OutOfOrderCompletionsReportEachCookieOnceWhenAllWrsDone) {
  SrdRig r(4096);
  ASSERT_EQ(r.batcher->add(req(9000, SigOp::Set, 11, 32, 7)), 0);  // 3 parts + record
  ASSERT_EQ(r.batcher->add(req(100, SigOp::Add, 12, 8, 1)), 0);    // 1 WR
  auto d = r.batcher->take(0);
  ASSERT_EQ(d.size(), 5u);
  EXPECT_EQ(r.tracker->outstanding(0), 5);
  // The record (last WR of request 11) completes first: 11 is NOT done.
  r.tracker->on_completion(0, d[3].seq);
  EXPECT_TRUE(r.ready().empty());
  r.tracker->on_completion(0, d[4].seq);  // request 12 done, though 11's parts are not
  EXPECT_EQ(r.ready(), std::vector<uint64_t>{12});
  r.tracker->on_completion(0, d[2].seq);
  r.tracker->on_completion(0, d[0].seq);
  EXPECT_TRUE(r.ready().empty());
  EXPECT_EQ(r.tracker->outstanding(0), 1);
  r.tracker->on_completion(0, d[1].seq);
  EXPECT_EQ(r.ready(), std::vector<uint64_t>{11});
  EXPECT_EQ(r.tracker->outstanding(0), 0);
  // A second completion of the same WR is a bookkeeping bug.
  EXPECT_THROW(r.tracker->on_completion(0, d[1].seq), mk::Error);
}

TEST(VerbsEfa, UnorderedTrackerRejectsUnsignalledWr) {
  InflightTracker t(1, 8, false);
  WrDesc d;
  d.qp = 0;
  d.seq = 1;
  d.signaled = false;
  EXPECT_THROW(t.on_posted(&d, 1), mk::Error);
}

TEST(VerbsEfa, BatcherAndTrackerModesMustAgree) {
  BatcherConfig c;
  c.imm_signals = true;
  InflightTracker ordered(2, 8, true);
  EXPECT_THROW(WrBatcher(c, {1}, ordered), mk::Error);
  c.imm_signals = false;
  InflightTracker unordered(2, 8, false);
  EXPECT_THROW(WrBatcher(c, {1}, unordered), mk::Error);
}

TEST(VerbsEfa, InflightRoomCountsOutOfOrderRetirement) {
  SrdRig r(4096, 4);
  ASSERT_EQ(r.batcher->add(req(9000, SigOp::Add, 1, 8, 1)), 0);  // 3 parts + record = 4
  EXPECT_EQ(r.batcher->add(req(10, SigOp::None, 2)), -1);       // full
  auto d = r.batcher->take(0);
  r.tracker->on_completion(0, d[2].seq);  // a middle WR retires alone
  EXPECT_EQ(r.batcher->room(0), 1);
  EXPECT_EQ(r.batcher->add(req(10, SigOp::None, 2)), 0);
}

TEST(VerbsEfa, SignalNeverReleasedBeforeAllItsDataInAnyArrivalOrder) {
  SrdRig r(1000);
  ASSERT_EQ(r.batcher->add(req(3500, SigOp::Set, 1, 40, 123456789012ull)), 0);  // 4 parts + record
  ASSERT_EQ(r.batcher->add(req(800, SigOp::Add, 2, 48, 5)), 0);                 // inline
  ASSERT_EQ(r.batcher->add(req(2500, SigOp::Add, 3, 8 * (kImmMaxWord + 1), 1)), 0);  // far word: record
  ASSERT_EQ(r.batcher->add(req(0, SigOp::Set, 4, 56, 9)), 0);                   // signal only
  auto d = r.batcher->take(0);
  std::vector<int> order(d.size());
  for (size_t i = 0; i < d.size(); ++i) order[i] = static_cast<int>(i);
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::shuffle(order.begin(), order.end(), rng);
    auto got = deliver(d, order);
    ASSERT_EQ(got.size(), 4u);
    for (const Delivered& g : got) EXPECT_TRUE(g.all_data_before) << "trial " << trial;
    std::vector<uint64_t> values;
    for (const Delivered& g : got) values.push_back(g.sig.value);
    std::sort(values.begin(), values.end());
    EXPECT_EQ(values, (std::vector<uint64_t>{1, 5, 9, 123456789012ull}));
  }
}

TEST(VerbsEfa, AssemblerRejectsProtocolViolations) {
  SrdAssembler as(2);
  ImmSignal s;
  SrdRecord rec;
  rec.op = static_cast<uint8_t>(SigOp::Add);
  rec.nparts = 1;
  rec.msg_id = 9;
  rec.value = 4;
  EXPECT_FALSE(as.on_part(0, 9, &s));
  EXPECT_FALSE(as.on_part(1, 9, &s));  // another QP: another sender
  EXPECT_TRUE(as.on_record(0, rec, &s));
  EXPECT_EQ(s.value, 4u);
  EXPECT_EQ(as.pending(), 1u);  // QP 1's message still waits for its record
  EXPECT_FALSE(as.on_part(0, 10, &s));
  EXPECT_FALSE(as.on_part(0, 10, &s));
  rec.msg_id = 10;
  EXPECT_THROW(as.on_record(0, rec, &s), mk::Error);  // 2 parts arrived, record names 1
}
