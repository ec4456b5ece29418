// mkernel fabric backend: the non-blocking data path (post, poll) and its
// completion bookkeeping. Contract: src/net/transport.hpp.
#include <cinttypes>
#include <cstring>

#include <rdma/fi_atomic.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "mkernel/error.hpp"
#include "mkernel/knobs.hpp"
#include "src/net/fabric/fabric_transport.hpp"

namespace mk::net::fabric {

namespace {
constexpr int kCqBatch = 16;
constexpr int kMaxBatchesPerPoll = 8;
constexpr auto kAgeCheckEvery = std::chrono::milliseconds(1);

// a + b <= limit without overflow.
bool fits(uint64_t a, uint64_t b, uint64_t limit) { return a <= limit && b <= limit - a; }
}  // namespace

CtlMsg make_note(int src_rank, const WriteReq& w, bool with_data) {
  CtlMsg m{};
  m.magic = kMsgMagic;
  m.type = kMsgNote;
  m.sig_op = static_cast<uint8_t>(w.sig_op);
  m.src_rank = src_rank;
  m.region = with_data ? w.region : -1;
  m.sig_off = w.sig_off;
  m.value = w.sig_value;
  m.dst_off = with_data ? w.dst_off : 0;
  m.bytes = with_data ? w.bytes : 0;
  return m;
}

uint64_t FabricTransport::remote_addr(int peer, int region, uint64_t off) const {
  return remote_[region][peer].addr + off;
}

// Ordered path when the provider both orders the ops (msg_order) and places
// the data of this write before later writes (max_order_waw_size); a message
// Add additionally needs FI_ORDER_SAW.
//
// Why this is sound on tcp;ofi_rxm (libfabric 1.17, what the tests run):
// rxm maps RMA writes, atomics-less messages and their headers onto one tcp
// msg endpoint per peer pair; the tcp provider consumes that byte stream in
// order and copies a write's payload into the target region before it parses
// the next header. It reports msg_order WAW|SAW|... and max_order_waw_size =
// SIZE_MAX accordingly, and it offers neither FI_FENCE nor FI_ATOMIC, so
// requesting ordering (not fencing) is what it honours. Providers that do not
// grant the ordering (or grant it only up to a size) get the deferred path:
// FI_DELIVERY_COMPLETE on the data, signal posted on its completion.
// A staging note is a message like a message Add: ordered needs SAW.
bool FabricTransport::signal_ordered(const Req& q) const {
  const WriteReq& w = q.w;
  if (!ordered_ || w.bytes > max_order_bytes_) return false;
  if (q.plan.note) return saw_;
  return w.sig_op == SigOp::Set || atomics_ || sig_msg_ordered_;
}

bool FabricTransport::post(const WriteReq& w) {
  std::lock_guard<std::mutex> lk(mu_);
  if (closed_) fail("fabric: rank ", cfg_.rank, ": post after close");
  const bool taken = post_locked(w);
  if (taken) refused_since_ = {};  // whichever way it was taken (posted, queued for staging, or nothing to post)
  if (taken && stage_) stage_->pushed();  // not for a refused post the proxy retries
  return taken;
}

bool FabricTransport::post_locked(const WriteReq& w) {
  // ---- requests that can never succeed: throw.
  if (w.peer < 0 || w.peer >= cfg_.world || addr_[w.peer] == FI_ADDR_NOTAVAIL)
    fail("fabric: rank ", cfg_.rank, ": post to rank ", w.peer, ", which is not a connected peer");
  if (w.sig_op != SigOp::None && w.sig_op != SigOp::Set && w.sig_op != SigOp::Add)
    fail("fabric: rank ", cfg_.rank, ": post to rank ", w.peer, ": bad signal op ", int(w.sig_op));
  if (w.bytes > 0) {
    if (w.region < 0 || w.region >= static_cast<int>(local_.size()))
      fail("fabric: rank ", cfg_.rank, ": post to rank ", w.peer, ": region ", w.region, " is not registered");
    if (!local_[w.region].mr)
      fail("fabric: rank ", cfg_.rank, ": post to rank ", w.peer, ": region ", w.region, " was deregistered (or its registration failed)");
    if (!fits(w.src_off, w.bytes, local_[w.region].r.bytes))
      fail("fabric: rank ", cfg_.rank, ": post to rank ", w.peer, ": source [", w.src_off, ", +", w.bytes,
           ") is outside region ", w.region, " (", local_[w.region].r.bytes, " bytes)");
    if (!fits(w.dst_off, w.bytes, remote_[w.region][w.peer].bytes))
      fail("fabric: rank ", cfg_.rank, ": post to rank ", w.peer, ": destination [", w.dst_off, ", +",
           w.bytes, ") is outside the peer's region ", w.region, " (", remote_[w.region][w.peer].bytes,
           " bytes)");
    if (w.bytes > max_msg_)
      fail("fabric: rank ", cfg_.rank, ": post to rank ", w.peer, ": ", w.bytes,
           " bytes exceed the provider's max message size ", max_msg_);
  }
  if (w.sig_op != SigOp::None) {
    if (local_.empty())
      fail("fabric: rank ", cfg_.rank, ": post with a signal before region 0 (signals) was registered");
    if (w.sig_off % 8 != 0 || !fits(w.sig_off, 8, remote_[kSignalRegion][w.peer].bytes))
      fail("fabric: rank ", cfg_.rank, ": post to rank ", w.peer, ": signal offset ", w.sig_off,
           " is unaligned or outside the peer's signal region (", remote_[kSignalRegion][w.peer].bytes,
           " bytes)");
  }
  if (w.bytes == 0 && w.sig_op == SigOp::None) {
    ready_.push_back(Completion{w.cookie, 0});
    return true;
  }

  // ---- in-flight limit: say "no room" after driving progress once.
  retry_signals();
  if (free_reqs_.empty()) {
    progress();
    return false;
  }
  int idx = free_reqs_.back();
  Req& q = reqs_[idx];
  q.w = w;
  q.t0 = std::chrono::steady_clock::now();
  q.data_op.kind = OpKind::Data;
  q.data_op.index = idx;
  q.sig_op.kind = OpKind::Signal;
  q.sig_op.index = idx;
  // NOTES: planned on every rank, staging or not: a write into a peer's
  // staged region must carry a note even from a rank that stages nothing.
  q.plan = plan_staging(w, w.bytes > 0 && local_[w.region].shadow,
                        w.bytes > 0 && remote_[w.region][w.peer].staged,
                        w.sig_op != SigOp::None && remote_[kSignalRegion][w.peer].staged);
  q.copying = false;
  // A request with a GPU -> shadow copy waits in staging_; so does a note
  // while older staged requests wait there (they leave in post order).
  q.queued = q.plan.copy_out || (q.plan.note && !staging_.empty());
  if (q.queued) {
    free_reqs_.pop_back();
    q.in_use = true;
    q.ops_pending = 0;
    q.signal_unposted = false;
    q.signal_waits_data = false;
    if (q.plan.copy_out) {
      LocalRegion& lr = local_[w.region];
      stage_->copy_out(idx, lr.xfer() + w.src_off, static_cast<const char*>(lr.r.base) + w.src_off, w.bytes);
      q.copying = true;
    }
    staging_.push_back(idx);
    advance_staged();
    return true;
  }
  if (start(idx) == -FI_EAGAIN) {
    check_refusal(w);
    progress();
    return false;  // slot stays free: nothing was posted
  }
  free_reqs_.pop_back();
  q.in_use = true;
  return true;
}

// Posts request idx: its data, then its signal (or note) unless that must
// wait for the data's delivery (deferred) or for tx room (unposted_).
// Returns -FI_EAGAIN when nothing was posted (retry the request as is), else
// 0. Throws on provider errors.
int FabricTransport::start(int idx) {
  Req& q = reqs_[idx];
  const WriteReq& w = q.w;
  q.ops_pending = 0;
  q.signal_unposted = w.sig_op != SigOp::None || q.plan.note;
  q.signal_waits_data = false;
  bool deferred = q.signal_unposted && w.bytes > 0 && !signal_ordered(q);
  if (w.bytes > 0) {
    q.signal_waits_data = deferred;  // post_data asks for FI_DELIVERY_COMPLETE then
    int rc = post_data(q);
    if (rc == -FI_EAGAIN) return rc;
    check(rc, cat("write to rank ", w.peer).c_str());
    q.ops_pending = 1;
  }
  if (q.signal_unposted && !q.signal_waits_data) {
    int rc = post_signal(q);
    if (rc == 0) {
      q.ops_pending++;
      q.signal_unposted = false;
    } else if (rc == -FI_EAGAIN) {
      if (w.bytes == 0) return rc;  // nothing posted yet
      // NOTES: the data is already posted, so the signal must follow later;
      // poll() posts it (still after its data in submission order).
      unposted_.push_back(idx);
    } else {
      check(rc, cat("signal to rank ", w.peer).c_str());
    }
  }
  return 0;
}

// Posts staged requests from the head of staging_ while their GPU -> shadow
// copies have finished and the provider has room. Only the head moves, so
// staged requests leave in post order.
void FabricTransport::advance_staged() {
  while (!staging_.empty()) {
    int idx = staging_.front();
    Req& q = reqs_[idx];
    if (q.copying) {
      if (!stage_->copied(idx)) return;
      q.copying = false;
    }
    if (start(idx) == -FI_EAGAIN) return;
    staging_.pop_front();
    q.queued = false;
  }
}

int FabricTransport::post_data(Req& q) {
  const WriteReq& w = q.w;
  LocalRegion& lr = local_[w.region];
  // A staged source is read from its shadow, which copy_out has filled.
  struct iovec iov = {lr.xfer() + w.src_off, w.bytes};
  struct fi_rma_iov riov = {remote_addr(w.peer, w.region, w.dst_off), w.bytes, remote_[w.region][w.peer].key};
  struct fi_msg_rma msg = {};
  msg.msg_iov = &iov;
  msg.desc = &lr.desc;
  msg.iov_count = 1;
  msg.addr = addr_[w.peer];
  msg.rma_iov = &riov;
  msg.rma_iov_count = 1;
  msg.context = &q.data_op.ctx;
  uint64_t flags = FI_COMPLETION | (q.signal_waits_data ? FI_DELIVERY_COMPLETE : 0);
  return static_cast<int>(fi_writemsg(ep_, &msg, flags));
}

int FabricTransport::post_signal(Req& q) {
  const WriteReq& w = q.w;
  int idx = static_cast<int>(&q - reqs_.data());
  CtlMsg& m = scratch_[idx];
  if (q.plan.note) {
    m = make_note(cfg_.rank, w, q.plan.note_data);
    return static_cast<int>(fi_send(ep_, &m, sizeof(m), scratch_desc_, addr_[w.peer], &q.sig_op.ctx));
  }
  uint64_t raddr = remote_addr(w.peer, kSignalRegion, w.sig_off);
  uint64_t key = remote_[kSignalRegion][w.peer].key;
  if (w.sig_op == SigOp::Set) {
    m.value = w.sig_value;
    struct iovec iov = {&m.value, sizeof(uint64_t)};
    struct fi_rma_iov riov = {raddr, sizeof(uint64_t), key};
    struct fi_msg_rma msg = {};
    msg.msg_iov = &iov;
    msg.desc = &scratch_desc_;
    msg.iov_count = 1;
    msg.addr = addr_[w.peer];
    msg.rma_iov = &riov;
    msg.rma_iov_count = 1;
    msg.context = &q.sig_op.ctx;
    return static_cast<int>(fi_writemsg(ep_, &msg, FI_COMPLETION));
  }
  if (atomics_) {
    m.value = w.sig_value;
    return static_cast<int>(fi_atomic(ep_, &m.value, 1, scratch_desc_, addr_[w.peer], raddr, key, FI_UINT64,
                                      FI_SUM, &q.sig_op.ctx));
  }
  m = CtlMsg{};
  m.magic = kMsgMagic;
  m.type = kMsgAdd;
  m.src_rank = cfg_.rank;
  m.sig_off = w.sig_off;
  m.value = w.sig_value;
  return static_cast<int>(fi_send(ep_, &m, sizeof(m), scratch_desc_, addr_[w.peer], &q.sig_op.ctx));
}

void FabricTransport::post_recv(int i) {
  recv_ops_[i].kind = OpKind::Recv;
  recv_ops_[i].index = i;
  ssize_t rc = fi_recv(ep_, &scratch_[scratch_recv_base_ + i], sizeof(CtlMsg), scratch_desc_, FI_ADDR_UNSPEC,
                       &recv_ops_[i].ctx);
  if (rc == -FI_EAGAIN)
    unposted_recvs_.push_back(i);
  else
    check(static_cast<int>(rc), "fi_recv");
}

void FabricTransport::retry_signals() {
  while (!unposted_recvs_.empty()) {
    int i = unposted_recvs_.back();
    unposted_recvs_.pop_back();
    size_t before = unposted_recvs_.size();
    post_recv(i);
    if (unposted_recvs_.size() > before) break;  // still no room
  }
  while (!unposted_.empty()) {
    Req& q = reqs_[unposted_.front()];
    int rc = post_signal(q);
    if (rc == -FI_EAGAIN) return;
    check(rc, cat("signal to rank ", q.w.peer).c_str());
    unposted_.pop_front();
    q.signal_unposted = false;
    q.ops_pending++;
  }
}

void FabricTransport::finish(int idx) {
  Req& q = reqs_[idx];
  ready_.push_back(Completion{q.w.cookie, 0});
  q.in_use = false;
  free_reqs_.push_back(idx);
}

// The target side of a message Add (no provider atomics). NOTES: it runs in
// the TARGET's poll(); tcp;ofi_rxm has manual data progress anyway, so the
// target must keep polling for any incoming write to land (the proxy loop
// does). The host atomic makes the add safe against other adders on this
// host and visible to GPU pollers of mapped host memory.
void FabricTransport::apply_message(const CtlMsg& m) {
  if (m.magic != kMsgMagic)
    fail("fabric: rank ", cfg_.rank, ": received a malformed control message (bad magic)");
  int src = m.src_rank;
  if (src < 0 || src >= cfg_.world)
    fail("fabric: rank ", cfg_.rank, ": received a control message from bad rank ", src);
  if (m.type == kMsgHello) {
    hello_from_[src] = 1;
    return;
  }
  if (m.type == kMsgNote) {
    apply_note(m);
    return;
  }
  if (m.type != kMsgAdd)
    fail("fabric: rank ", cfg_.rank, ": rank ", src, " sent an unknown control message type ", int(m.type));
  if (local_.empty() || m.sig_off % 8 != 0 || !fits(m.sig_off, 8, local_[kSignalRegion].r.bytes))
    fail("fabric: rank ", cfg_.rank, ": rank ", src, " sent a signal Add at offset ", m.sig_off,
         " outside this rank's signal region");
  // A message Add is applied by this host: to host memory only. A GPU signal
  // region registered directly (FI_HMEM) takes provider atomics, so a peer
  // that sends this chose otherwise: its libfabric differs (FI_HMEM or
  // FI_ATOMIC). An error here, not a host store into device memory.
  if (local_[kSignalRegion].r.device && !local_[kSignalRegion].shadow)
    fail("fabric: rank ", cfg_.rank, ": rank ", src, " sent a signal Add as a message, but this rank's signal "
         "region is GPU memory registered with ", prov_name_, " (FI_HMEM), which takes provider atomics only: the "
         "ranks' libfabric builds differ (FI_HMEM / FI_ATOMIC); use the same libfabric on every rank");
  // A staged GPU signal region (a host shadow) takes its signals in staging notes, ordered behind the data's
  // shadow -> GPU copies (apply_note); a message Add would be a host atomic on device memory.
  if (local_[kSignalRegion].r.device)
    fail("fabric: rank ", cfg_.rank, ": rank ", src, " sent a signal Add as a message, but this rank stages its "
         "GPU signal region through a host shadow and takes signals in staging notes only: the ranks' transports "
         "differ (provider, MK_FABRIC_STAGE or libfabric build); use the same on every rank");
  auto* word = reinterpret_cast<uint64_t*>(static_cast<char*>(local_[kSignalRegion].r.base) + m.sig_off);
  __atomic_fetch_add(word, m.value, __ATOMIC_SEQ_CST);
}

// The receiving side of a staged request: its data is in this rank's host
// shadow (the note was ordered behind the write, or sent after the write's
// delivery completion). Has the shadow -> GPU copy made, then the signal
// (StageOps::deliver), so the signal is visible only after the data.
// NOTES: runs in poll() and never waits for the GPU.
void FabricTransport::apply_note(const CtlMsg& m) {
  int src = m.src_rank;
  void* in_dev = nullptr;  // the staged copy in, if any
  const void* in_host = nullptr;
  uint64_t in_bytes = 0;
  if (m.bytes > 0) {
    // A note that arrives after its region was deregistered here (the write
    // landed in the shadow before, the note came after: it travels apart
    // from the barrier that precedes deregistration): its data and signal
    // are dropped, as retire drops those published but not made.
    if (m.region > kSignalRegion && m.region < static_cast<int>(local_.size()) && !local_[m.region].mr) {
      if (local_[m.region].late_notes++ == 0)
        log(LogLevel::Warn, cat("fabric: rank ", cfg_.rank, ": rank ", src, " sent data for region ", m.region,
                                " that arrived after the region was deregistered here (data no kernel of this rank "
                                "waited for): dropped, with its signal (said once a region)"));
      return;
    }
    if (m.region < 0 || m.region >= static_cast<int>(local_.size()) ||
        !fits(m.dst_off, m.bytes, local_[m.region].r.bytes))
      fail("fabric: rank ", cfg_.rank, ": rank ", src, " sent a staging note for region ", m.region, " [",
           m.dst_off, ", +", m.bytes, ") outside this rank's regions");
    const LocalRegion& lr = local_[m.region];
    if (lr.shadow) {
      in_dev = static_cast<char*>(lr.r.base) + m.dst_off;
      in_host = lr.xfer() + m.dst_off;
      in_bytes = m.bytes;
    }
  }
  auto op = static_cast<SigOp>(m.sig_op);
  if (op == SigOp::None) {
    if (in_bytes) stage_->deliver(in_dev, in_host, in_bytes, nullptr, SigOp::None, 0);
    return;
  }
  if (op != SigOp::Set && op != SigOp::Add)
    fail("fabric: rank ", cfg_.rank, ": rank ", src, " sent a staging note with bad signal op ", int(m.sig_op));
  if (local_.empty() || m.sig_off % 8 != 0 || !fits(m.sig_off, 8, local_[kSignalRegion].r.bytes))
    fail("fabric: rank ", cfg_.rank, ": rank ", src, " sent a staged signal at offset ", m.sig_off,
         " outside this rank's signal region");
  const LocalRegion& sr = local_[kSignalRegion];
  char* word = static_cast<char*>(sr.r.base) + m.sig_off;
  if (sr.shadow) {
    stage_->deliver(in_dev, in_host, in_bytes, word, op, m.value);
    return;
  }
  // A host signal region: register_region admits no staged data region
  // then (in_bytes is 0), so no copy precedes this signal; apply it like the
  // direct path.
  if (op == SigOp::Set)
    __atomic_store_n(reinterpret_cast<uint64_t*>(word), m.value, __ATOMIC_SEQ_CST);
  else
    __atomic_fetch_add(reinterpret_cast<uint64_t*>(word), m.value, __ATOMIC_SEQ_CST);
}

void FabricTransport::on_completion(Op* op) {
  switch (op->kind) {
    case OpKind::Recv:
      apply_message(scratch_[scratch_recv_base_ + op->index]);
      post_recv(op->index);
      return;
    case OpKind::Hello:
      hellos_sent_done_++;
      hello_sent_[static_cast<size_t>(op->index)] = 1;
      return;
    case OpKind::Data: {
      Req& q = reqs_[op->index];
      peer_progress_[static_cast<size_t>(q.w.peer)] = std::chrono::steady_clock::now();
      q.ops_pending--;
      if (q.signal_waits_data) {  // deferred: the data is now at the peer
        q.signal_waits_data = false;
        int rc = post_signal(q);
        if (rc == 0) {
          q.ops_pending++;
          q.signal_unposted = false;
        } else if (rc == -FI_EAGAIN) {
          unposted_.push_back(op->index);
        } else {
          check(rc, cat("signal to rank ", q.w.peer).c_str());
        }
      }
      if (q.ops_pending == 0 && !q.signal_unposted) finish(op->index);
      return;
    }
    case OpKind::Signal: {
      Req& q = reqs_[op->index];
      peer_progress_[static_cast<size_t>(q.w.peer)] = std::chrono::steady_clock::now();
      q.ops_pending--;
      if (q.ops_pending == 0 && !q.signal_unposted) finish(op->index);
      return;
    }
  }
}

void FabricTransport::throw_cq_error() {
  struct fi_cq_err_entry err = {};
  ssize_t rc = fi_cq_readerr(cq_, &err, 0);
  if (rc < 0) fail("fabric: rank ", cfg_.rank, ": fi_cq_readerr failed: ", fi_api().err(static_cast<int>(rc)));
  char buf[256] = {};
  const char* prov_msg = fi_cq_strerror(cq_, err.prov_errno, err.err_data, buf, sizeof(buf));
  std::string what = "an operation";
  int peer = -1;
  if (auto* op = static_cast<Op*>(err.op_context)) {
    switch (op->kind) {
      case OpKind::Data:
      case OpKind::Signal: {
        const WriteReq& w = reqs_[op->index].w;
        peer = w.peer;
        what = cat(op->kind == OpKind::Data ? "write" : "signal", " (cookie ", w.cookie, ", ", w.bytes,
                   " bytes)");
        break;
      }
      case OpKind::Hello:
        peer = op->index;
        what = "connection hello";
        break;
      case OpKind::Recv:
        what = "a receive";
        break;
    }
  }
  fail("fabric: rank ", cfg_.rank, ": ", what, peer >= 0 ? cat(" to rank ", peer) : std::string(),
       " failed: ", fi_api().err(err.err), " (", prov_msg ? prov_msg : "", "; provider ", prov_name_,
       ")", peer >= 0 ? cat("; rank ", peer, " dead or unreachable?") : std::string());
}

void FabricTransport::check_eq() {
  if (!eq_) return;
  uint32_t event = 0;
  struct fi_eq_entry entry = {};
  const ssize_t n = fi_eq_read(eq_, &event, &entry, sizeof(entry), 0);
  if (n == -FI_EAGAIN || n >= 0) return;  // (an event that is not an error: none is expected on an RDM endpoint)
  if (n != -FI_EAVAIL) fail("fabric: rank ", cfg_.rank, ": fi_eq_read failed: ", fi_api().err(static_cast<int>(n)));
  struct fi_eq_err_entry err = {};
  const ssize_t rc = fi_eq_readerr(eq_, &err, 0);
  if (rc < 0) fail("fabric: rank ", cfg_.rank, ": fi_eq_readerr failed: ", fi_api().err(static_cast<int>(rc)));
  char buf[256] = {};
  const char* prov_msg = fi_eq_strerror(eq_, err.prov_errno, err.err_data, buf, sizeof(buf));
  fail("fabric: rank ", cfg_.rank, ": the provider reported an asynchronous error: ", fi_api().err(err.err), " (",
       prov_msg ? prov_msg : "", "; provider ", prov_name_, ")");
}

void FabricTransport::progress() {
  struct fi_cq_msg_entry e[kCqBatch];
  ssize_t n = fi_cq_read(cq_, e, kCqBatch);
  if (n == -FI_EAGAIN) return;
  if (n == -FI_EAVAIL) throw_cq_error();
  if (n < 0) fail("fabric: rank ", cfg_.rank, ": fi_cq_read failed: ", fi_api().err(static_cast<int>(n)));
  for (ssize_t i = 0; i < n; ++i) on_completion(static_cast<Op*>(e[i].op_context));
}

// A request the provider keeps refusing (-FI_EAGAIN at every retry: nothing
// posted, so no outstanding request ages) is bounded by MK_NET_TIMEOUT_MS
// too: with tcp;ofi_rxm a dead peer's connection can refuse every send
// without ever reporting an error (cpu.fabric_dead_peer_3 hung 2 times in
// 12 that way, 2026-12-04). The bound runs from the first refusal since the
// last post the provider took.
void FabricTransport::check_refusal(const WriteReq& w) {
  const auto now = std::chrono::steady_clock::now();
  if (refused_since_ == std::chrono::steady_clock::time_point{}) {
    refused_since_ = now;
    return;
  }
  if (now - refused_since_ <= std::chrono::milliseconds(timeout_ms_)) return;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - refused_since_).count();
  fail("fabric: rank ", cfg_.rank, ": write to rank ", w.peer, " (cookie ", w.cookie, ", ", w.bytes,
       " bytes) refused by the provider (", prov_name_, ": no room to post) at every retry for ", ms,
       " ms (MK_NET_TIMEOUT_MS=", timeout_ms_, "): rank ", w.peer, " dead, unreachable or not polling?");
}

// NOTES: a dead peer may never produce an error completion (RDM providers
// can retry silently), so the age of every outstanding request is bounded
// by MK_NET_TIMEOUT_MS; checked at most once per millisecond.
void FabricTransport::check_ages() {
  auto now = std::chrono::steady_clock::now();
  if (now - last_age_check_ < kAgeCheckEvery) return;
  last_age_check_ = now;
  check_eq();  // (once per millisecond too)
  auto limit = std::chrono::milliseconds(timeout_ms_);
  // The oldest request over the bound is the one named: slots come from a
  // LIFO free list, so the first in slot order may be one queued behind it
  // (a later request to a live peer, waiting behind one to a dead peer).
  // Each request's clock starts at its post or at its peer's last completed operation, whichever is later.
  auto since = [&](const Req& q) { return std::max(q.t0, peer_progress_[static_cast<size_t>(q.w.peer)]); };
  const Req* oldest = nullptr;
  for (const Req& q : reqs_)
    if (q.in_use && now - since(q) > limit && (!oldest || q.t0 < oldest->t0)) oldest = &q;
  if (oldest) {
    const Req& q = *oldest;
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - since(q)).count();
    fail("fabric: rank ", cfg_.rank, ": write to rank ", q.w.peer, " (cookie ", q.w.cookie, ", ", q.w.bytes,
         " bytes", q.w.sig_op != SigOp::None ? ", with signal" : "",
         q.copying ? ", its GPU -> host staging copy unfinished" : "", ") not complete, and no write to rank ",
         q.w.peer, " completed, for ", ms, " ms (MK_NET_TIMEOUT_MS=", timeout_ms_, "): rank ", q.w.peer,
         " dead, unreachable or not polling",
         !q.copying             ? std::string()
         : stage_->calls_cuda() ? cat("; or the staging copy waits on this GPU: ", work_queue_cause())
                                : cat("; or the staging copy waits for a delivery agent", stage_->describe()));
  }
  if (stage_) {
    const StageOps::Stall s = stage_->stalled();
    if (!s.line.empty()) log(s.warn ? LogLevel::Warn : LogLevel::Info, cat("fabric: rank ", cfg_.rank, ": ", s.line));
  }
}

std::string FabricTransport::in_flight() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stage_ && !closed_ ? stage_->describe() : std::string();
}

int FabricTransport::poll(Completion* out, int max) {
  std::lock_guard<std::mutex> lk(mu_);
  if (closed_) return 0;
  if (stage_) stage_->progress();
  retry_signals();
  advance_staged();
  for (int b = 0; b < kMaxBatchesPerPoll; ++b) {
    size_t before = ready_.size();
    progress();
    if (ready_.size() == before) break;
    if (static_cast<int>(ready_.size()) >= max) break;
  }
  check_ages();
  int n = 0;
  while (n < max && !ready_.empty()) {
    out[n++] = ready_.front();
    ready_.pop_front();
  }
  return n;
}

}  // namespace mk::net::fabric
