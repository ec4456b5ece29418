// mkernel: the proxy's half of emu's delivery (src/net/emu/emu_transport.cu):
// pacing, publication into the delivery ring (device/net/delivery.hpp) and
// completion, apart from CUDA so that the CPU tests drive it with a host
// thread in the agent's place (tests/cpu/test_emu_ring.cpp).
//
// Pacing: one emulated link at `bytes_per_ns` with `latency_ns`. A write of B
// bytes occupies the link for B / rate after the link is free, and is
// published at that time plus the latency less the real path's own time (the
// agent's poll, copy and signal, as the proxy sees it), so that the emulated
// latency is max(configured, real) rather than their sum. The real path is
// estimated from writes of at most kSmallWriteBytes published onto an empty
// ring (no wait behind other writes in it): the median of a window of
// kRealWindow, starting from kRealStartNs.
//
// Completion: in publication order (a prefix), once a slot's done word holds
// its sequence + 1 (the agent read the source and wrote the data and the
// signal). A slot is published only once the write size slots before it is
// done, so none is rewritten while an agent may read it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "device/net/delivery.hpp"
#include "mkernel/error.hpp"

namespace mk::net {

// One write as the agent will make it: addresses as the GPU sees them.
struct EmuWrite {
  uint64_t src = 0, dst = 0, sig = 0;  // sig 0: no signal
  uint64_t bytes = 0;
  SigOp sig_op = SigOp::None;
  uint64_t sig_value = 0;
  bool has_inline = false;  // the bytes travel in inline_data (<= 16)
  uint64_t inline_data[2] = {0, 0};
  uint64_t cookie = 0;  // returned at completion
};

class EmuRing {
 public:
  static constexpr size_t kMaxQueuedOps = 8192;  // posted and not done, at most
  static constexpr int64_t kRealStartNs = 2000;
  static constexpr uint64_t kSmallWriteBytes = 4096;
  static constexpr size_t kRealWindow = 32;

  // `ring`: zeroed slots and done words, `ring.size` a power of two.
  EmuRing(DeliveryRing ring, double bytes_per_ns, int64_t latency_ns)
      : ring_(ring), bytes_per_ns_(bytes_per_ns), latency_ns_(latency_ns) {
    if (ring.size == 0 || (ring.size & (ring.size - 1)) != 0 || !ring.slots || !ring.done)
      fail("emu: the delivery ring needs slots, done words and a power-of-two size (got ", ring.size, ")");
    if (!(bytes_per_ns > 0)) fail("emu: the emulated rate must be positive");
  }

  // False when kMaxQueuedOps writes wait already (the caller retries later).
  bool post(const EmuWrite& w, int64_t now_ns) {
    if (w.bytes > kDeliveryBytesMask) fail("emu: write of ", w.bytes, " bytes is too large for one delivery");
    if (w.has_inline && w.bytes > kMaxInlineBytes) fail("emu: inline write of ", w.bytes, " bytes (at most 16)");
    if (ops_.size() >= kMaxQueuedOps) return false;
    const int64_t start = std::max(now_ns, link_free_ns_);
    link_free_ns_ = start + static_cast<int64_t>(static_cast<double>(w.bytes) / bytes_per_ns_);
    Op op;
    op.w = w;
    op.due_ns = link_free_ns_ + std::max<int64_t>(0, latency_ns_ - real_ns_);
    ops_.push_back(op);
    return true;
  }

  // The done prefix's cookies into `cookies` (at most max), then every write
  // whose time has come is published while the ring has room. Returns the
  // number of completions.
  int progress(int64_t now_ns, uint64_t* cookies, int max) {
    int n = 0;
    while (n < max && done_ < published_ &&
           __atomic_load_n(ring_.done + (done_ & (ring_.size - 1)), __ATOMIC_ACQUIRE) == done_ + 1) {
      const Op& o = ops_.front();
      if (o.sample) sample_real_path(now_ns - o.published_ns);
      cookies[n++] = o.w.cookie;
      ops_.pop_front();
      ++done_;
    }
    while (published_ - done_ < ops_.size() && published_ - done_ < ring_.size) {
      Op& o = ops_[published_ - done_];
      if (o.due_ns > now_ns) break;
      publish(o, now_ns);
    }
    return n;
  }

  uint64_t published() const { return published_; }
  uint64_t done() const { return done_; }
  size_t waiting() const { return ops_.size(); }
  int64_t real_ns() const { return real_ns_; }

  // The oldest write not done, for the proxy's report when it takes too long
  // (Transport::in_flight); empty when none.
  std::string describe(int64_t now_ns) const {
    if (ops_.empty()) return {};
    const Op& o = ops_.front();
    if (published_ == done_)
      return cat("; emu: ", ops_.size(), " writes wait for their emulated time (the first due in ",
                 std::max<int64_t>(0, o.due_ns - now_ns) / 1000, " us)");
    // The agents' last claim as one of them wrote it (plain stores of several
    // agents: approximate).
    const uint64_t claimed = ring_.claimed ? __atomic_load_n(ring_.claimed, __ATOMIC_ACQUIRE) : 0;
    return cat("; emu: write #", done_, " (", o.w.bytes, " bytes) was published to the delivery ring ",
               (now_ns - o.published_ns) / 1000000, " ms ago and is not done (", published_ - done_,
               " published, agents claimed up to #", claimed,
               claimed > done_ ? ": claimed, not finished: its agent is stuck or was stopped)"
                               : ": not claimed: no kernel of this rank that runs the delivery agent is running, or "
                                 "its agent CTA is not resident: MK_NET_FREE_SMS)");
  }

 private:
  struct Op {
    EmuWrite w;
    int64_t due_ns = 0;
    int64_t published_ns = 0;
    bool sample = false;  // times the real path
  };

  void publish(Op& o, int64_t now_ns) {
    o.sample = published_ == done_ && o.w.bytes <= kSmallWriteBytes;
    const uint64_t seq = published_++;
    DeliverySlot& s = ring_.slots[seq & (ring_.size - 1)];
    const bool inl = o.w.has_inline;
    s.w[1] = delivery_meta(o.w.bytes, o.w.sig_op, inl);
    s.w[2] = inl ? 0 : o.w.src;
    s.w[3] = o.w.dst;
    s.w[4] = o.w.sig;
    s.w[5] = o.w.sig_value;
    s.w[6] = inl ? o.w.inline_data[0] : 0;
    s.w[7] = inl ? o.w.inline_data[1] : 0;
    __atomic_store_n(&s.w[0], seq + 1, __ATOMIC_RELEASE);
    o.published_ns = now_ns;
  }

  void sample_real_path(int64_t ns) {
    window_.push_back(ns);
    if (window_.size() < kRealWindow) return;
    std::nth_element(window_.begin(), window_.begin() + kRealWindow / 2, window_.end());
    real_ns_ = window_[kRealWindow / 2];
    window_.clear();
  }

  DeliveryRing ring_;
  double bytes_per_ns_;
  int64_t latency_ns_;
  int64_t real_ns_ = kRealStartNs;
  std::vector<int64_t> window_;
  std::deque<Op> ops_;                 // not done, in post order: [0, published_ - done_) published
  uint64_t published_ = 0, done_ = 0;  // writes published / done since the start
  int64_t link_free_ns_ = 0;
};

}  // namespace mk::net
