// mkernel: the verbs backend's work-request planning, free of real verbs
// objects so that it is unit-tested on machines without an RDMA NIC.
//
// Three roles, each with one contract:
//   RegionTable     — what may be written where: local (base, bytes, lkey) and
//                     per-peer remote (addr, bytes, rkey); check() rejects a
//                     request that can never succeed (mk::Error).
//   WrBatcher       — turns a WriteReq into a CHAIN of work-request
//                     descriptors on ONE queue pair (data chunks, then the
//                     signal), picks that QP round-robin per peer, queues the
//                     chain until it is flushed, and decides which WRs of a
//                     flush are signalled.
//   InflightTracker — knows every WR handed to the NIC per QP, takes the
//                     completions of signalled WRs, infers the completion of
//                     the unsignalled WRs before them (RC completes in
//                     order; in unordered mode, for SRD, every WR is
//                     signalled and retired alone), and reports each
//                     request's cookie exactly once.
//
// The transport (verbs_transport.cpp) only translates WrDesc into ibv_send_wr
// and ibv_wc into on_completion().
#pragma once

#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

#include "src/net/transport.hpp"
#include "src/net/verbs/srd_signal.hpp"

namespace mk::net::verbs {

enum class WrKind : uint8_t {
  Write,      // RDMA_WRITE of data bytes (local region -> same region at the peer)
  SignalSet,  // RDMA_WRITE of the 8-byte signal value, sent inline, into peer region 0
  SignalAdd,  // ATOMIC_FETCH_AND_ADD on the 8-byte signal word in peer region 0 (fenced)
  WriteImm,   // EFA/SRD: RDMA_WRITE_WITH_IMM of data; imm = inline signal or record part (srd_signal.hpp)
  SignalRecord,  // EFA/SRD: SEND of an SrdRecord (full signal + part count), inline
};

const char* to_string(WrKind k);

// One work request, everything the transport needs to build an ibv_send_wr.
struct WrDesc {
  WrKind kind = WrKind::Write;
  int peer = -1;           // global rank
  int qp = -1;             // flat QP index: peer_index * qps_per_peer + k
  uint64_t seq = 0;        // per-QP sequence number, 1-based (goes into wr_id)
  int region = -1;         // Write/WriteImm: source and destination region; signals: 0
  uint64_t src_off = 0;    // Write/WriteImm: offset in the local region
  uint64_t dst_off = 0;    // offset in the peer's region (signals: sig_off)
  uint64_t bytes = 0;      // Write/WriteImm: chunk bytes; signals: 8
  uint64_t value = 0;      // SignalSet: the value written; SignalAdd: the addend
  uint32_t imm = 0;        // WriteImm: encode_imm / encode_part_imm; SignalRecord: the message id
  SigOp sig_op = SigOp::None;  // SignalRecord: the op (dst_off = sig_off, value = value)
  uint32_t nparts = 0;     // SignalRecord: data parts carrying its message id
  uint64_t req = 0;        // request number (per batcher), shared by a request's WRs
  bool signaled = false;   // IBV_SEND_SIGNALED; decided at flush time
  bool fence = false;      // IBV_SEND_FENCE (atomics)
  bool inline_data = false;  // IBV_SEND_INLINE (SignalSet)
  bool has_cookie = false;   // the last WR of its request carries the request's cookie
  uint64_t cookie = 0;
};

struct BatcherConfig {
  int qps_per_peer = 2;        // MK_IB_QPS_PER_PEER
  int max_inflight = 128;      // MK_IB_MAX_INFLIGHT, per QP, WRs queued + on the wire
  int signal_every = 16;       // MK_IB_SIGNAL_EVERY
  uint64_t max_wr_bytes = 1ull << 30;  // larger writes are split into several Write WRs
  bool imm_signals = false;    // EFA/SRD: signals applied by the receiver (srd_signal.hpp)
  // Normalizes: max_inflight >= 2 (a data+signal chain must always fit),
  // signal_every <= max_inflight (the send queue must see a signalled WR
  // before it fills, or its slots are never released), everything >= 1;
  // imm_signals forces signal_every = 1 (SRD completes out of order, so no
  // completion may stand for an earlier WR).
  BatcherConfig normalized() const;
};

// ---------------------------------------------------------------- regions

struct LocalRegion {
  uint64_t base = 0;
  uint64_t bytes = 0;
  uint32_t lkey = 0;
  bool registered = false;
};
struct RemoteRegion {
  uint64_t addr = 0;
  uint64_t bytes = 0;
  uint32_t rkey = 0;
  bool registered = false;
};

class RegionTable {
 public:
  explicit RegionTable(std::vector<int> peers = {});
  void set_local(int id, const LocalRegion& r);
  void set_remote(int peer, int id, const RemoteRegion& r);
  void erase(int id);  // local and every peer's entry of `id` (unknown ids: nothing)
  const LocalRegion& local(int id) const;           // throws on unknown id
  const RemoteRegion& remote(int peer, int id) const;
  bool is_peer(int peer) const { return peer_index_.count(peer) != 0; }
  int peer_index(int peer) const;                   // throws on unknown peer
  const std::vector<int>& peers() const { return peers_; }
  // Throws mk::Error (naming peer, region, offsets) when `w` can never
  // succeed: unknown peer or region, source or destination range beyond the
  // region, a signal without region 0, a signal word out of range or not
  // 8-byte aligned (atomics need it). Overflow-safe.
  void check(const WriteReq& w) const;

 private:
  std::vector<int> peers_;
  std::unordered_map<int, int> peer_index_;
  std::vector<LocalRegion> local_;
  std::vector<std::vector<RemoteRegion>> remote_;  // [peer_index][region]
};

// ---------------------------------------------------------------- tracker

// NOTES: ordered mode (RC) infers unsignalled completions from a later
// signalled one, since a QP completes in order. Unordered mode (SRD: its
// completions come in any order) requires every WR signalled, retires only
// the completed WR, and reports a request's cookie when ALL of its WRs
// (data parts, record) completed, whatever their order.
class InflightTracker {
 public:
  InflightTracker(int num_qps, int max_inflight, bool ordered = true);
  int num_qps() const { return static_cast<int>(qps_.size()); }
  bool ordered() const { return ordered_; }
  // WRs of QP q handed to the NIC whose completion is not known yet.
  int outstanding(int q) const;
  // Records WRs just posted on their QP (in order; seq strictly increasing).
  void on_posted(const WrDesc* wrs, int n);
  // A completion of the signalled WR `seq` on QP q. Ordered: that WR and
  // every earlier one on q are done (RC completes in order). Unordered: only
  // that WR. Cookies of requests now complete become ready. Throws mk::Error
  // on a seq that was not posted signalled or completes twice (a bookkeeping
  // bug, never silently ignored). Unordered on_posted throws on an
  // unsignalled WR.
  void on_completion(int q, uint64_t seq);
  // A request that needs no WR (0 bytes, no signal) completes at once.
  void complete_now(uint64_t cookie);
  // Moves up to max ready cookies into out (oldest first); returns how many.
  int take_ready(Completion* out, int max);
  size_t num_ready() const { return ready_.size(); }

 private:
  struct Entry {
    uint64_t seq;
    uint64_t cookie;
    bool has_cookie;
    bool signaled;
  };
  struct ReqState {
    int remaining = 0;
    bool has_cookie = false;
    uint64_t cookie = 0;
  };
  bool ordered_;
  std::vector<std::deque<Entry>> qps_;                       // ordered mode
  std::vector<std::unordered_map<uint64_t, uint64_t>> out_;  // unordered: per QP, seq -> req
  std::unordered_map<uint64_t, ReqState> reqs_;              // unordered: by request number
  std::deque<Completion> ready_;
};

// ---------------------------------------------------------------- batcher

class WrBatcher {
 public:
  WrBatcher(const BatcherConfig& cfg, std::vector<int> peers, InflightTracker& tracker);
  const BatcherConfig& config() const { return cfg_; }
  int num_qps() const { return static_cast<int>(pending_.size()); }
  int qp_of(int peer, int k) const;  // flat index of the peer's k-th QP
  int peer_of_qp(int q) const { return peers_[q / cfg_.qps_per_peer]; }

  // Plans `w` (already checked by RegionTable::check) as one chain on the
  // peer's next QP in round-robin order. Returns the QP index, or -1 when that
  // QP lacks room for the whole chain (queued + outstanding + chain >
  // max_inflight); then nothing changes (the same QP is tried again next
  // time, so requests to one peer keep their QP order). A request with no
  // bytes and no signal needs no WR: it completes at once and returns -2.
  // Throws mk::Error when the chain could never fit (bytes too large).
  int add(const WriteReq& w);
  // Number of WRs `w` turns into (data chunks + signal).
  // SRD (imm_signals): no signal: the data chunks as plain writes; a signal
  // in the inline form: one WriteImm; else the record form: the chunks as
  // WriteImm parts + one SignalRecord (srd_signal.hpp).
  int chain_length(const WriteReq& w) const;
  // SRD: whether `w`'s signal uses the inline form (one WR carries all).
  bool inline_signal(const WriteReq& w) const;
  int num_pending(int q) const { return static_cast<int>(pending_[q].size()); }
  // Room left on QP q in WRs.
  int room(int q) const;
  // Policy: ring the doorbell now when QP q is idle on the wire (latency of
  // a lone request) or a full signalling period is queued (throughput).
  bool should_flush(int q) const;
  // Takes QP q's queued WRs for one ibv_post_send: marks signalled every
  // signal_every-th WR of the QP (counted across flushes) and always the last
  // one (so nothing waits forever for a later signalled WR), hands them to
  // the tracker and returns them in post order.
  std::vector<WrDesc> take(int q);

 private:
  template <typename Push>
  void plan_srd(const WriteReq& w, int q, Push&& push);

  BatcherConfig cfg_;
  std::vector<int> peers_;
  std::unordered_map<int, int> peer_index_;
  InflightTracker& tracker_;
  std::vector<int> next_qp_;             // per peer: round-robin cursor
  std::vector<uint64_t> next_seq_;       // per QP
  std::vector<uint32_t> next_msg_;       // per QP: SRD record-form message ids
  uint64_t next_req_ = 1;
  std::vector<int> since_signal_;        // per QP: unsignalled WRs since the last signalled one
  std::vector<std::vector<WrDesc>> pending_;  // per QP: planned, not yet posted
};

// wr_id layout: flat QP index in the top 16 bits, sequence number below.
constexpr int kWrIdQpShift = 48;
inline uint64_t make_wr_id(int q, uint64_t seq) {
  return (static_cast<uint64_t>(q) << kWrIdQpShift) | (seq & ((1ull << kWrIdQpShift) - 1));
}
inline int wr_id_qp(uint64_t id) { return static_cast<int>(id >> kWrIdQpShift); }
inline uint64_t wr_id_seq(uint64_t id) { return id & ((1ull << kWrIdQpShift) - 1); }
// SRD receive WRs: the same layout with the receive-buffer slot as "seq"
// (they are told apart from send WRs by the completion's opcode).

}  // namespace mk::net::verbs
