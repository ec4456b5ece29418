// mkernel: verbs work-request planning (see wr_batcher.hpp for the contracts).
#include "src/net/verbs/wr_batcher.hpp"

#include <algorithm>

#include "mkernel/error.hpp"

namespace mk::net::verbs {

const char* to_string(WrKind k) {
  switch (k) {
    case WrKind::Write: return "write";
    case WrKind::SignalSet: return "signal-set";
    case WrKind::SignalAdd: return "signal-add";
    case WrKind::WriteImm: return "write-imm";
    case WrKind::SignalRecord: return "signal-record";
  }
  return "?";
}

BatcherConfig BatcherConfig::normalized() const {
  BatcherConfig c = *this;
  c.qps_per_peer = std::max(1, c.qps_per_peer);
  c.max_inflight = std::max(2, c.max_inflight);
  c.signal_every = std::clamp(c.signal_every, 1, c.max_inflight);
  c.max_wr_bytes = std::max<uint64_t>(1, c.max_wr_bytes);
  if (c.imm_signals) c.signal_every = 1;
  return c;
}

namespace {
// a + b <= limit without overflow.
bool fits(uint64_t a, uint64_t b, uint64_t limit) { return a <= limit && b <= limit - a; }
}  // namespace

// ---------------------------------------------------------------- RegionTable

RegionTable::RegionTable(std::vector<int> peers) : peers_(std::move(peers)) {
  for (size_t i = 0; i < peers_.size(); ++i) peer_index_[peers_[i]] = static_cast<int>(i);
  remote_.resize(peers_.size());
}

int RegionTable::peer_index(int peer) const {
  auto it = peer_index_.find(peer);
  if (it == peer_index_.end()) fail("verbs: rank ", peer, " is not a connected peer");
  return it->second;
}

void RegionTable::set_local(int id, const LocalRegion& r) {
  if (id < 0) fail("verbs: region id ", id, " is negative");
  if (static_cast<size_t>(id) >= local_.size()) local_.resize(id + 1);
  local_[id] = r;
  local_[id].registered = true;
}

void RegionTable::set_remote(int peer, int id, const RemoteRegion& r) {
  auto& v = remote_[peer_index(peer)];
  if (id < 0) fail("verbs: region id ", id, " is negative");
  if (static_cast<size_t>(id) >= v.size()) v.resize(id + 1);
  v[id] = r;
  v[id].registered = true;
}

void RegionTable::erase(int id) {
  if (id >= 0 && static_cast<size_t>(id) < local_.size()) local_[id] = LocalRegion{};
  for (auto& v : remote_)
    if (id >= 0 && static_cast<size_t>(id) < v.size()) v[id] = RemoteRegion{};
}

const LocalRegion& RegionTable::local(int id) const {
  if (id < 0 || static_cast<size_t>(id) >= local_.size() || !local_[id].registered)
    fail("verbs: region ", id, " is not registered on this rank");
  return local_[id];
}

const RemoteRegion& RegionTable::remote(int peer, int id) const {
  const auto& v = remote_[peer_index(peer)];
  if (id < 0 || static_cast<size_t>(id) >= v.size() || !v[id].registered)
    fail("verbs: region ", id, " is not registered at peer rank ", peer);
  return v[id];
}

void RegionTable::check(const WriteReq& w) const {
  if (!is_peer(w.peer)) fail("verbs: write to rank ", w.peer, ", which is not a connected peer");
  if (w.bytes > 0) {
    const LocalRegion& l = local(w.region);
    const RemoteRegion& r = remote(w.peer, w.region);
    if (!fits(w.src_off, w.bytes, l.bytes))
      fail("verbs: write to rank ", w.peer, ": source range [", w.src_off, ", +", w.bytes,
           ") is beyond local region ", w.region, " (", l.bytes, " bytes)");
    if (!fits(w.dst_off, w.bytes, r.bytes))
      fail("verbs: write to rank ", w.peer, ": destination range [", w.dst_off, ", +", w.bytes,
           ") is beyond region ", w.region, " of that peer (", r.bytes, " bytes)");
  }
  if (w.sig_op != SigOp::None) {
    if (w.sig_op != SigOp::Set && w.sig_op != SigOp::Add)
      fail("verbs: write to rank ", w.peer, ": unknown signal op ", static_cast<int>(w.sig_op));
    const RemoteRegion& s = remote(w.peer, kSignalRegion);
    if (w.sig_off % 8 != 0)
      fail("verbs: write to rank ", w.peer, ": signal offset ", w.sig_off,
           " is not 8-byte aligned");
    if (!fits(w.sig_off, 8, s.bytes))
      fail("verbs: write to rank ", w.peer, ": signal offset ", w.sig_off,
           " is beyond the signal region (", s.bytes, " bytes)");
  }
}

// ---------------------------------------------------------------- InflightTracker

InflightTracker::InflightTracker(int num_qps, int /*max_inflight*/, bool ordered)
    : ordered_(ordered), qps_(num_qps), out_(num_qps) {}

int InflightTracker::outstanding(int q) const {
  return static_cast<int>(ordered_ ? qps_.at(q).size() : out_.at(q).size());
}

void InflightTracker::on_posted(const WrDesc* wrs, int n) {
  if (!ordered_) {
    for (int i = 0; i < n; ++i) {
      const WrDesc& d = wrs[i];
      if (!d.signaled)
        fail("verbs: internal: unsignalled WR seq ", d.seq, " on QP ", d.qp,
             " in unordered (SRD) mode; every WR must be signalled");
      if (!out_.at(d.qp).emplace(d.seq, d.req).second)
        fail("verbs: internal: WR seq ", d.seq, " posted twice on QP ", d.qp);
      ReqState& r = reqs_[d.req];
      ++r.remaining;
      if (d.has_cookie) {
        r.has_cookie = true;
        r.cookie = d.cookie;
      }
    }
    return;
  }
  for (int i = 0; i < n; ++i) {
    const WrDesc& d = wrs[i];
    auto& fifo = qps_.at(d.qp);
    if (!fifo.empty() && fifo.back().seq >= d.seq)
      fail("verbs: internal: WR seq ", d.seq, " posted on QP ", d.qp, " after seq ",
           fifo.back().seq);
    fifo.push_back({d.seq, d.cookie, d.has_cookie, d.signaled});
  }
}

void InflightTracker::on_completion(int q, uint64_t seq) {
  if (q < 0 || q >= num_qps()) fail("verbs: internal: completion on unknown QP ", q);
  if (!ordered_) {
    auto it = out_[q].find(seq);
    if (it == out_[q].end())
      fail("verbs: internal: completion for WR seq ", seq, " on QP ", q,
           " that is not an outstanding WR (completed twice?)");
    auto r = reqs_.find(it->second);
    out_[q].erase(it);
    if (r == reqs_.end()) fail("verbs: internal: WR seq ", seq, " on QP ", q, " has no request");
    if (--r->second.remaining == 0) {
      if (r->second.has_cookie) ready_.push_back({r->second.cookie, 0});
      reqs_.erase(r);
    }
    return;
  }
  auto& fifo = qps_[q];
  // NOTES: the completed WR must be outstanding and signalled; everything
  // before it on the QP is done too (unsignalled, or already reaped).
  auto it = std::find_if(fifo.begin(), fifo.end(), [&](const Entry& e) { return e.seq == seq; });
  if (it == fifo.end() || !it->signaled)
    fail("verbs: internal: completion for WR seq ", seq, " on QP ", q,
         " that is not an outstanding signalled WR");
  ++it;
  for (auto e = fifo.begin(); e != it; ++e)
    if (e->has_cookie) ready_.push_back({e->cookie, 0});
  fifo.erase(fifo.begin(), it);
}

void InflightTracker::complete_now(uint64_t cookie) { ready_.push_back({cookie, 0}); }

int InflightTracker::take_ready(Completion* out, int max) {
  int n = 0;
  while (n < max && !ready_.empty()) {
    out[n++] = ready_.front();
    ready_.pop_front();
  }
  return n;
}

// ---------------------------------------------------------------- WrBatcher

WrBatcher::WrBatcher(const BatcherConfig& cfg, std::vector<int> peers, InflightTracker& tracker)
    : cfg_(cfg.normalized()), peers_(std::move(peers)), tracker_(tracker) {
  for (size_t i = 0; i < peers_.size(); ++i) peer_index_[peers_[i]] = static_cast<int>(i);
  const size_t nq = peers_.size() * cfg_.qps_per_peer;
  if (static_cast<size_t>(tracker_.num_qps()) != nq)
    fail("verbs: internal: tracker has ", tracker_.num_qps(), " QPs, batcher needs ", nq);
  if (cfg_.imm_signals == tracker_.ordered())
    fail("verbs: internal: ", cfg_.imm_signals ? "SRD needs an unordered" : "RC needs an ordered",
         " completion tracker");
  next_msg_.assign(nq, 0);
  next_qp_.assign(peers_.size(), 0);
  next_seq_.assign(nq, 1);
  since_signal_.assign(nq, 0);
  pending_.resize(nq);
}

int WrBatcher::qp_of(int peer, int k) const {
  auto it = peer_index_.find(peer);
  if (it == peer_index_.end()) fail("verbs: rank ", peer, " is not a connected peer");
  return it->second * cfg_.qps_per_peer + k;
}

bool WrBatcher::inline_signal(const WriteReq& w) const {
  // NOTES: a signal-only request uses the record form (a SEND): it needs no
  // destination region and no 0-byte RDMA write.
  return cfg_.imm_signals && w.bytes > 0 && w.bytes <= cfg_.max_wr_bytes &&
         imm_fits(w.sig_op, w.sig_off, w.sig_value);
}

int WrBatcher::chain_length(const WriteReq& w) const {
  const uint64_t chunks = (w.bytes + cfg_.max_wr_bytes - 1) / cfg_.max_wr_bytes;
  if (cfg_.imm_signals) {
    const bool sig = w.sig_op != SigOp::None;
    const uint64_t n = chunks + (sig && !inline_signal(w) ? 1 : 0);
    return static_cast<int>(std::min<uint64_t>(n, 1u << 30));
  }
  return static_cast<int>(std::min<uint64_t>(chunks, 1u << 30)) + (w.sig_op != SigOp::None ? 1 : 0);
}

int WrBatcher::room(int q) const {
  return cfg_.max_inflight - tracker_.outstanding(q) - num_pending(q);
}

bool WrBatcher::should_flush(int q) const {
  return num_pending(q) > 0 &&
         (tracker_.outstanding(q) == 0 || num_pending(q) >= cfg_.signal_every);
}

int WrBatcher::add(const WriteReq& w) {
  const int n = chain_length(w);
  if (n == 0) {
    tracker_.complete_now(w.cookie);
    return -2;
  }
  if (n > cfg_.max_inflight)
    fail("verbs: write of ", w.bytes, " bytes to rank ", w.peer, " needs ", n,
         " work requests, more than MK_IB_MAX_INFLIGHT=", cfg_.max_inflight);
  // SRD: the record names its parts in 16 bits (checked before anything changes).
  if (cfg_.imm_signals && w.sig_op != SigOp::None && !inline_signal(w) &&
      static_cast<uint64_t>(n - 1) > kMaxRecordParts)
    fail("verbs/efa: a signalled write of ", w.bytes, " bytes to rank ", w.peer, " needs ", n - 1,
         " parts, more than a signal record can name (", kMaxRecordParts, ")");
  auto it = peer_index_.find(w.peer);
  if (it == peer_index_.end()) fail("verbs: write to rank ", w.peer, ", which is not a connected peer");
  const int pi = it->second;
  const int q = pi * cfg_.qps_per_peer + next_qp_[pi];
  if (room(q) < n) return -1;
  next_qp_[pi] = (next_qp_[pi] + 1) % cfg_.qps_per_peer;

  // NOTES: the chain is [data chunks..., signal]; all on QP q, in this order.
  // RC executes a QP's WRs in order, so the signal lands after the data; the
  // atomic additionally carries IBV_SEND_FENCE (it waits for every earlier
  // WR of the QP to finish) because atomics may otherwise pass writes.
  auto& pend = pending_[q];
  const uint64_t req = next_req_++;
  auto push = [&](WrDesc d) {
    d.peer = w.peer;
    d.qp = q;
    d.seq = next_seq_[q]++;
    d.req = req;
    pend.push_back(d);
  };
  if (cfg_.imm_signals) {
    plan_srd(w, q, push);
    pend.back().has_cookie = true;
    pend.back().cookie = w.cookie;
    return q;
  }
  for (uint64_t off = 0; off < w.bytes; off += cfg_.max_wr_bytes) {
    WrDesc d;
    d.kind = cfg_.imm_signals ? WrKind::WriteImm : WrKind::Write;
    d.region = w.region;
    d.src_off = w.src_off + off;
    d.dst_off = w.dst_off + off;
    d.bytes = std::min(cfg_.max_wr_bytes, w.bytes - off);
    push(d);
  }
  if (w.sig_op != SigOp::None) {
    {
      WrDesc d;
      d.region = kSignalRegion;
      d.dst_off = w.sig_off;
      d.bytes = 8;
      d.value = w.sig_value;
      if (w.sig_op == SigOp::Set) {
        d.kind = WrKind::SignalSet;
        d.inline_data = true;
      } else {
        d.kind = WrKind::SignalAdd;
        d.fence = true;
      }
      push(d);
    }
  }
  pend.back().has_cookie = true;
  pend.back().cookie = w.cookie;
  return q;
}

// NOTES (SRD): the WRs of one request may complete, at both ends, in any
// order; see srd_signal.hpp for why the receiver's signal still follows all
// data. Plain (unsignalled-request) data goes as RDMA_WRITE: no receiver
// action, no receive WR consumed.
template <typename Push>
void WrBatcher::plan_srd(const WriteReq& w, int q, Push&& push) {
  const bool sig = w.sig_op != SigOp::None;
  const bool inl = inline_signal(w);
  const uint32_t msg = (sig && !inl) ? (next_msg_[q]++ & kImmMsgIdMask) : 0;
  uint32_t parts = 0;
  for (uint64_t off = 0; off < w.bytes; off += cfg_.max_wr_bytes) {
    WrDesc d;
    d.kind = !sig ? WrKind::Write : WrKind::WriteImm;
    d.region = w.region;
    d.src_off = w.src_off + off;
    d.dst_off = w.dst_off + off;
    d.bytes = std::min(cfg_.max_wr_bytes, w.bytes - off);
    if (sig) d.imm = inl ? encode_imm(w.sig_op, w.sig_off, w.sig_value) : encode_part_imm(msg);
    push(d);
    ++parts;
  }
  if (sig && !inl) {
    WrDesc d;
    d.kind = WrKind::SignalRecord;
    d.region = kSignalRegion;
    d.dst_off = w.sig_off;
    d.bytes = sizeof(SrdRecord);
    d.value = w.sig_value;
    d.sig_op = w.sig_op;
    d.imm = msg;
    d.nparts = parts;
    d.inline_data = true;
    push(d);
  }
}

std::vector<WrDesc> WrBatcher::take(int q) {
  std::vector<WrDesc> out;
  out.swap(pending_.at(q));
  for (size_t i = 0; i < out.size(); ++i) {
    const bool last = i + 1 == out.size();
    if (++since_signal_[q] >= cfg_.signal_every || last) {
      out[i].signaled = true;
      since_signal_[q] = 0;
    }
  }
  if (!out.empty()) tracker_.on_posted(out.data(), static_cast<int>(out.size()));
  return out;
}

}  // namespace mk::net::verbs
