// mkernel: the proxy's half of emu's delivery (src/net/emu/emu_transport.cu):
// pacing, publication into the delivery ring (device/net/delivery.hpp) and
// completion, apart from CUDA so that the CPU tests drive it with a host
// thread in the agent's place (tests/cpu/test_emu_ring.cpp).
//
// Pacing: one emulated link at `bytes_per_ns` with `latency_ns` (EmuLink: a
// GPU's, shared by the rings of its proxy threads' queues, MK_NET_THREADS,
// which are paths to the same NIC; before session 47 each queue paced a link
// of its own, N times the rate). A write of B
// bytes occupies the link for B / rate after the link is free (kept in
// fractional ns: a 16-byte write takes its 0.32 ns at 50 GB/s), and is
// published at that time plus the latency less the real path's own time (the
// agent's poll, copy and signal, as the proxy sees it), so that the emulated
// latency is max(configured, real) rather than their sum. The real path is
// estimated from writes of at most kSmallWriteBytes published onto an empty
// ring (no wait behind other writes in it): the median of a window of
// kRealWindow, starting from kRealStartNs.
//
// Chunks: while fewer published slots than `agents` (MK_EMU_AGENTS) are
// not done (an agent is idle),
// the front write's bytes that have left the link are published as a chunk
// of their own, once at least `chunk_bytes` (MK_EMU_CHUNK_KB; 0: never) are
// out (more for large writes: early_chunk), the rest when the write is due:
// the agent's copy of the first chunks overlaps the wire time of the rest,
// so a lone write arrives about one chunk's copy after its emulated time
// (plus the agent's lag where it copies slower than the emulated rate)
// rather than a whole write's copy after it. While the agents are busy nothing is split, so a stream of
// writes that keeps them busy costs them no more batches (each a claim and
// two system-scope fences) than unsplit writes. At most
// kMaxDeliveryChunks chunks a write; only the last carries the signal, with
// `after` (when there is a signal), so that an agent waits for the earlier chunks' done words before
// it (device/net/delivery.hpp).
//
// Completion: in publication order (a prefix), once a slot's done word holds
// its sequence + 1 (the agent read the source and wrote the data and the
// signal); a write completes with its last chunk. A slot is published only
// once the slot `size` before it is done, so none is rewritten while an agent
// may read it.
#pragma once

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstdint>
#include <deque>
#include <memory>
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
  bool cut = false;     // delivers nothing any more (cancel(); fabric's retire of a shadow): not a stall
};

// The emulated link's next free time, in ns. reserve() is thread-safe: one
// link serves the rings of every proxy thread of a GPU. Times are kept from
// the first reservation's `now` on: a double of the clock's absolute ns (the
// time since boot) rounds a 0.32 ns step away after ~52 days of uptime.
class EmuLink {
 public:
  // A transfer's start: `base` + `at` ns (the later of `now` and the link's
  // free time); the link is busy until then + the transfer's ns.
  struct Start {
    int64_t base;
    double at;
  };
  // Reserves the link for a transfer taking `ns` that may begin at `now`.
  Start reserve(int64_t now, double ns) {
    int64_t base = base_.load(std::memory_order_relaxed);
    // (set once; a thread that loses the race reads the winner's value into `base`)
    if (base == kUnset && base_.compare_exchange_strong(base, now, std::memory_order_relaxed)) base = now;
    const double rel = static_cast<double>(now - base);
    double free = free_.load(std::memory_order_relaxed), start = 0;
    do {
      start = std::max(rel, free);
    } while (!free_.compare_exchange_weak(free, start + ns, std::memory_order_relaxed));
    return Start{base, start};
  }

 private:
  static constexpr int64_t kUnset = INT64_MIN;
  std::atomic<int64_t> base_{kUnset};
  std::atomic<double> free_{0};
};

class EmuRing {
 public:
  static constexpr size_t kMaxQueuedOps = 8192;  // writes posted and not done, at most
  static constexpr int64_t kRealStartNs = 2000;
  static constexpr uint64_t kSmallWriteBytes = 4096;
  static constexpr size_t kRealWindow = 32;
  // Chunks end at whole multiples of this from the write's start (keeps the
  // write's 16-byte alignment for the agent's vector copies).
  static constexpr uint64_t kChunkAlign = 4096;

  // `ring`: zeroed slots and done words, `ring.size` a power of two.
  // chunk_bytes: the least a write's early chunk holds (0: no chunks).
  // agents: the delivery agents a kernel runs (early chunks go while fewer
  // slots than this are outstanding). link: shared with other rings (null:
  // a link of its own).
  EmuRing(DeliveryRing ring, double bytes_per_ns, int64_t latency_ns, uint64_t chunk_bytes = 0, int agents = 1,
          std::shared_ptr<EmuLink> link = nullptr)
      : link_(link ? std::move(link) : std::make_shared<EmuLink>()),
        ring_(ring),
        bytes_per_ns_(bytes_per_ns),
        latency_ns_(latency_ns),
        chunk_bytes_(chunk_bytes),
        agents_(static_cast<uint64_t>(std::max(agents, 1))) {
    if (ring.size == 0 || (ring.size & (ring.size - 1)) != 0 || !ring.slots || !ring.done)
      fail("emu: the delivery ring needs slots, done words and a power-of-two size (got ", ring.size, ")");
    if (!(bytes_per_ns > 0)) fail("emu: the emulated rate must be positive");
  }

  // False when kMaxQueuedOps writes wait already (the caller retries later).
  bool post(const EmuWrite& w, int64_t now_ns) {
    if (w.bytes > kDeliveryBytesMask) fail("emu: write of ", w.bytes, " bytes is too large for one delivery");
    if (w.has_inline && w.bytes > kMaxInlineBytes) fail("emu: inline write of ", w.bytes, " bytes (at most 16)");
    if (pending_ >= kMaxQueuedOps) return false;
    Op op;
    op.w = w;
    const double wire_ns = static_cast<double>(w.bytes) / bytes_per_ns_;
    const EmuLink::Start s = link_->reserve(now_ns, wire_ns);
    op.start_ns = s.base + static_cast<int64_t>(s.at);
    op.lat_ns = std::max<int64_t>(0, latency_ns_ - real_ns_);
    op.due_ns = s.base + static_cast<int64_t>(std::ceil(s.at + wire_ns)) + op.lat_ns;
    ops_.push_back(op);
    ++pending_;
    return true;
  }

  // The done prefix's cookies into `cookies` (at most max), then every write
  // whose time has come is published while the ring has room (and, while
  // an agent is idle, the front write's bytes out so far as a chunk).
  // Returns the number of completions.
  int progress(int64_t now_ns, uint64_t* cookies, int max) {
    int n = 0;
    while (n < max && done_ < published_ &&
           __atomic_load_n(ring_.done + (done_ & (ring_.size - 1)), __ATOMIC_ACQUIRE) == done_ + 1) {
      const Slot& sl = slots_.front();
      if (sl.sample) sample_real_path(now_ns - sl.published_ns);
      if (sl.last) cookies[n++] = sl.cookie, --pending_;
      cut_ -= sl.cut;
      slots_.pop_front();
      ++done_;
    }
    while (!ops_.empty() && published_ - done_ < ring_.size) {
      Op& o = ops_.front();
      if (o.due_ns <= now_ns) {
        publish(o, o.w.bytes - o.sent, true, now_ns);
        ops_.pop_front();
        continue;
      }
      const uint64_t chunk = early_chunk(o, now_ns);
      if (chunk) publish(o, chunk, false, now_ns);
      break;
    }
    return n;
  }

  // Makes every write not done whose source `match(src, bytes)` picks
  // deliver nothing: no bytes, no signal; it still completes, with its
  // cookie, once an agent marks it done. Writes not yet published are cut
  // before they are; published slots get their meta word rewritten (one
  // 8-byte store: an agent reads it once, after its claim, so it makes the
  // write whole or not at all), except those an agent has marked done
  // already. An agent that claimed a slot and read it before the cut makes
  // the write as it was. Inline writes read no source and are never picked.
  // Returns the writes cut, and in `until` one past the sequence of the last
  // published slot cut (0: none): until done() reaches it an agent may still
  // be making one of them as it was. (fabric: a staging shadow being freed,
  // src/net/fabric/fabric_stage_agent.cpp.) Throws on a ring that publishes
  // chunks: a write's last chunk read before the cut would signal after
  // earlier chunks cut from under it.
  template <typename Match>
  size_t cancel(Match&& match, uint64_t& until) {
    if (chunk_bytes_ != 0) fail(label_, ": cancel on a ring that publishes writes in chunks");
    size_t n = 0;
    until = 0;
    for (uint64_t seq = done_; seq < published_; ++seq) {
      DeliverySlot& s = ring_.slots[seq & (ring_.size - 1)];
      if (__atomic_load_n(ring_.done + (seq & (ring_.size - 1)), __ATOMIC_ACQUIRE) == seq + 1) continue;  // made
      const uint64_t meta = s.w[1];
      const uint64_t bytes = delivery_bytes(meta);
      if (delivery_inline(meta) || (bytes == 0 && delivery_sig_op(meta) == SigOp::None) || !match(s.w[2], bytes))
        continue;
      __atomic_store_n(&s.w[1], uint64_t(0), __ATOMIC_RELAXED);  // no bytes, no signal
      Slot& sl = slots_[seq - done_];
      sl.bytes = 0;
      sl.cut = true;
      ++cut_;
      until = seq + 1;
      ++n;
    }
    for (Op& o : ops_) {
      if (o.w.has_inline || (o.w.bytes == 0 && o.w.sig_op == SigOp::None) || !match(o.w.src, o.w.bytes)) continue;
      o.w.bytes = 0;
      o.w.sig_op = SigOp::None;
      o.w.cut = true;
      ++n;
    }
    return n;
  }

  // In slots (a write split into chunks takes several).
  uint64_t published() const { return published_; }
  uint64_t done() const { return done_; }
  size_t waiting() const { return pending_; }  // writes posted and not done
  int64_t real_ns() const { return real_ns_; }
  // When the oldest published slot not done and not cut was published (-1:
  // none): a cut slot waits for an agent too, but nothing waits for it.
  int64_t oldest_published_ns() const {
    const size_t i = first_uncut();
    return i < slots_.size() ? slots_[i].published_ns : -1;
  }
  // The name describe() gives the ring's owner ("emu" unless set).
  void set_label(const char* label) { label_ = label; }

  // The oldest delivery (slot) or write not done, for the proxy's report
  // when it takes too long (Transport::in_flight); empty when none.
  std::string describe(int64_t now_ns) const {
    if (pending_ == 0) return {};
    if (slots_.empty())
      return cat("; ", label_, ": ", ops_.size(), " writes wait for their emulated time (the first due in ",
                 std::max<int64_t>(0, ops_.front().due_ns - now_ns) / 1000, " us)");
    // The oldest slot something waits for (not cut), else the oldest.
    const size_t i = first_uncut() < slots_.size() ? first_uncut() : 0;
    const Slot& sl = slots_[i];
    const uint64_t seq = done_ + i;
    // The agents' last claim as one of them wrote it (plain stores of several
    // agents: approximate).
    const uint64_t claimed = ring_.claimed ? __atomic_load_n(ring_.claimed, __ATOMIC_ACQUIRE) : 0;
    return cat("; ", label_, ": delivery #", seq, " (", sl.bytes, " bytes",
               sl.chunk || !sl.last ? cat(", chunk ", sl.chunk, " of a write") : std::string(),
               sl.cut ? ", cut: it delivers nothing" : "",
               i ? cat(", after ", i, " cut ones") : std::string(),
               ") was published to the delivery ring ", (now_ns - sl.published_ns) / 1000000,
               " ms ago and is not done (", published_ - done_, " published, agents claimed up to #", claimed,
               claimed > seq ? ": claimed, not finished: its agent is stuck or was stopped)"
                             : ": not claimed: no kernel of this rank that runs the delivery agent is running, or "
                               "its agent CTAs are not resident: MK_NET_FREE_SMS)");
  }

 private:
  // The index in slots_ of the oldest slot not cut (slots_.size(): none).
  size_t first_uncut() const {
    if (cut_ == 0) return 0;  // the front, or none (0 == size)
    size_t i = 0;
    while (i < slots_.size() && slots_[i].cut) ++i;
    return i;
  }
  const char* label_ = "emu";
  struct Op {  // a write not yet published in full
    EmuWrite w;
    int64_t start_ns = 0;  // its first byte enters the link
    int64_t lat_ns = 0;    // the latency it was paced with (configured less the real path)
    int64_t due_ns = 0;    // its last byte is out, plus lat_ns
    uint64_t sent = 0;     // bytes published in earlier chunks
    uint32_t chunks = 0;   // chunks published so far
  };
  struct Slot {  // published, not done
    uint64_t cookie = 0, bytes = 0;
    int64_t published_ns = 0;
    uint32_t chunk = 0;   // its index in its write
    bool last = true;     // the write's last chunk: signal and completion
    bool sample = false;  // times the real path
    bool cut = false;     // cancel() made it deliver nothing
  };

  // Bytes of the front write `o` to publish now as an early chunk (0: none):
  // only while fewer slots than agents are not done, once enough more of its bytes have
  // left the link, up to a kChunkAlign boundary. Enough: chunk_bytes_, or the
  // rest spread over the chunks left if that is more (else an agent that
  // keeps up would spend the cap on the first chunk_bytes_ x 31 bytes of a
  // large write and copy the rest only once it is due).
  uint64_t early_chunk(const Op& o, int64_t now_ns) const {
    if (chunk_bytes_ == 0 || o.w.has_inline || published_ - done_ >= agents_ || o.chunks + 1 >= kMaxDeliveryChunks)
      return 0;
    const int64_t t = now_ns - o.lat_ns - o.start_ns;
    if (t <= 0) return 0;
    const double out_f = static_cast<double>(t) * bytes_per_ns_;
    uint64_t out = out_f >= static_cast<double>(o.w.bytes) ? o.w.bytes : static_cast<uint64_t>(out_f);
    out = out / kChunkAlign * kChunkAlign;
    const uint64_t spread = (o.w.bytes - o.sent) / (kMaxDeliveryChunks - o.chunks);
    const uint64_t least = std::max(chunk_bytes_, (spread + kChunkAlign - 1) / kChunkAlign * kChunkAlign);
    if (out >= o.w.bytes || out < o.sent + least) return 0;
    return out - o.sent;
  }

  void publish(Op& o, uint64_t bytes, bool last, int64_t now_ns) {
    Slot sl;
    sl.sample = last && o.chunks == 0 && published_ == done_ && bytes <= kSmallWriteBytes;
    const uint64_t seq = published_++;
    DeliverySlot& s = ring_.slots[seq & (ring_.size - 1)];
    const bool inl = o.w.has_inline;
    // Its signal waits for the write's earlier chunks (without a signal
    // there is nothing to order: completion is in order anyway).
    const bool after = last && o.chunks > 0 && o.w.sig_op != SigOp::None;
    s.w[1] = delivery_meta(bytes, last ? o.w.sig_op : SigOp::None, inl, after);
    s.w[2] = inl ? 0 : o.w.src + o.sent;
    s.w[3] = o.w.dst + o.sent;
    s.w[4] = last ? o.w.sig : 0;
    s.w[5] = o.w.sig_value;
    s.w[6] = inl ? o.w.inline_data[0] : after ? o.chunks : 0;
    s.w[7] = inl ? o.w.inline_data[1] : 0;
    __atomic_store_n(&s.w[0], seq + 1, __ATOMIC_RELEASE);
    sl.cookie = o.w.cookie;
    sl.bytes = bytes;
    sl.published_ns = now_ns;
    sl.chunk = o.chunks;
    sl.last = last;
    sl.cut = o.w.cut;
    cut_ += sl.cut;
    slots_.push_back(sl);
    o.sent += bytes;
    ++o.chunks;
  }

  void sample_real_path(int64_t ns) {
    window_.push_back(ns);
    if (window_.size() < kRealWindow) return;
    std::nth_element(window_.begin(), window_.begin() + kRealWindow / 2, window_.end());
    real_ns_ = window_[kRealWindow / 2];
    window_.clear();
  }

  std::shared_ptr<EmuLink> link_;
  DeliveryRing ring_;
  double bytes_per_ns_;
  int64_t latency_ns_;
  uint64_t chunk_bytes_;
  uint64_t agents_;
  int64_t real_ns_ = kRealStartNs;
  std::vector<int64_t> window_;
  std::deque<Op> ops_;      // writes not published in full, in post order
  std::deque<Slot> slots_;  // published and not done: published_ - done_ of them
  uint64_t published_ = 0, done_ = 0;  // slots published / done since the start
  size_t cut_ = 0;                     // slots in slots_ cut (cancel)
  size_t pending_ = 0;                 // writes posted and not done
};

}  // namespace mk::net
