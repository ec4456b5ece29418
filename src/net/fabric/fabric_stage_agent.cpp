// mkernel fabric backend: staging by the kernels' delivery agents
// (fabric_stage.hpp, make_agent_stage_ops). Each staged copy, and each staged
// write's copy with its signal, is one write in a delivery ring
// (device/net/delivery.hpp), published and completed by an EmuRing without
// pacing (src/net/emu/emu_ring.hpp: its publication and completion are
// exactly what is needed here; the emulated link is set infinitely fast).
// An agent copies GPU -> pinned shadow for a sender (copy_out), and shadow ->
// GPU then the signal for a receiver (deliver); its done word is the
// completion. Nothing here calls CUDA after setup.
#include <chrono>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime_api.h>

#include "mkernel/error.hpp"
#include "mkernel/knobs.hpp"
#include "src/net/delivery_ring_memory.hpp"
#include "src/net/emu/emu_ring.hpp"
#include "src/net/fabric/fabric_stage.hpp"
#include "src/runtime/device_health.hpp"

namespace mk::net::fabric {

namespace {

constexpr uint32_t kStageRingSlots = 1024;
// Cookies: a copy_out carries its request slot with this bit; a receiver's
// delivery carries 0 (nothing waits for it by name).
constexpr uint64_t kOutCookie = uint64_t(1) << 63;

class AgentStageOps final : public StageOps {
 public:
  // On a ring of its own in cuda_device's memory.
  AgentStageOps(int cuda_device, const char* label)
      : mem_(std::make_unique<DeliveryRingMemory>(cuda_device, kStageRingSlots)),
        desc_(mem_->ring()),
        ring_(desc_, std::numeric_limits<double>::max() / 4, 0, 0, 1) {
    ring_.set_label(label);
  }
  // On `ring` (zeroed; the caller's memory, outliving this).
  AgentStageOps(const DeliveryRing& ring, HostMemoryHooks host)
      : desc_(ring), ring_(desc_, std::numeric_limits<double>::max() / 4, 0, 0, 1), host_(std::move(host)) {
    if (!host_.alloc != !host_.free) fail("fabric staging: host memory hooks need both alloc and free, or neither");
    ring_.set_label("fabric staging");
  }
  // The transport drained at close; whatever is left is never made (no
  // kernel may run an agent on this ring after close), and the shadows
  // retired meanwhile go now.
  ~AgentStageOps() override {
    for (const Retiring& r : retiring_) free_host(r.host);
    for (void* h : freeable_) free_host(h);
  }

  void* alloc_host(size_t bytes) override {
    if (host_.alloc) return host_.alloc(bytes);
    void* p = nullptr;
    // Mapped: the agents read and write the shadow at this address (UVA).
    const cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable);
    if (e != cudaSuccess && !cuda_error_is_fatal(e)) cudaGetLastError();  // thrown, not left set
    if (e != cudaSuccess) fail("fabric: pinned staging buffer of ", bytes, " bytes: ", cuda_error_string(e));
    return p;
  }
  void free_host(void* p) noexcept override {
    if (!p) return;
    if (host_.free) host_.free(p);
    else teardown_call(cudaFreeHost(p), "a fabric staging buffer");
  }

  void copy_out(int slot, void* host, const void* dev, size_t bytes) override {
    if (slot < 0) fail("fabric: staging copy for request slot ", slot);
    if (static_cast<size_t>(slot) >= out_done_.size()) out_done_.resize(slot + 1, 1);
    out_done_[slot] = 0;
    EmuWrite w;
    w.src = reinterpret_cast<uint64_t>(dev);
    w.dst = reinterpret_cast<uint64_t>(host);
    w.bytes = bytes;
    w.cookie = kOutCookie | static_cast<uint64_t>(slot);
    ++out_pending_;  // before post(), whose progress() may see it done already
    post(w, w.dst, true);
  }
  bool copied(int slot) override {
    progress();
    return out_done_.at(slot) != 0;
  }
  // Separate writes may be made by different agents in either order: a
  // signal would not follow the bytes before it. Nothing calls these here.
  void copy_in(void*, const void*, size_t) override { refuse_unordered(); }
  void signal(void*, SigOp, uint64_t) override { refuse_unordered(); }
  // One write: the agent orders its bytes before its own signal.
  void deliver(void* dev, const void* host, size_t bytes, void* dev_word, SigOp op, uint64_t value) override {
    if (bytes == 0 && op == SigOp::None) return;
    EmuWrite w;
    w.src = reinterpret_cast<uint64_t>(host);
    w.dst = reinterpret_cast<uint64_t>(dev);
    w.bytes = bytes;
    w.sig = op == SigOp::None ? 0 : reinterpret_cast<uint64_t>(dev_word);
    w.sig_op = op;
    w.sig_value = value;
    post(w, w.src, false);
  }

  void progress() override {
    while (!backlog_.empty() && ring_.post(backlog_.front(), steady_ns())) backlog_.pop_front();
    uint64_t cookies[64];
    int n;
    do {
      n = ring_.progress(steady_ns(), cookies, 64);  // due at once: no pacing
      for (int i = 0; i < n; ++i) {
        if (cookies[i] & kOutCookie) out_done_.at(cookies[i] & ~kOutCookie) = 1, --out_pending_;
        hosts_.pop_front();  // writes complete in post order
      }
    } while (n == 64);
    // A retired shadow that nothing touches any more is not freed here: this
    // is the proxy thread, while a kernel runs (its agent just completed the
    // slots), and cudaFreeHost may wait for that kernel, which may wait for
    // this thread (found by a read-only audit, 2026-12-04). free_retired()
    // frees it: at the next retire (a deregistering thread) or at close.
    for (size_t i = 0; i < retiring_.size();) {
      if (touched(retiring_[i])) {
        ++i;
        continue;
      }
      freeable_.push_back(retiring_[i].host);
      retiring_.erase(retiring_.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  void free_retired() noexcept override {
    try {
      progress();
    } catch (...) {  // (only a failed post of the backlog: the shadows found free so far still go)
    }
    for (void* h : freeable_) free_host(h);
    freeable_.clear();
  }

  DeliveryRing delivery_ring() const override { return desc_; }
  bool calls_cuda() const override { return false; }

  std::string describe() const override {
    std::string d = ring_.describe(steady_ns());
    if (!backlog_.empty()) d += cat("; fabric staging: ", backlog_.size(), " more wait for room in its ring");
    return d;
  }
  // A count, not a time: one increment per command on the proxy's hot path.
  void pushed() override { ++pushes_; }
  Stall stalled() override {
    // Once a stall at each level: the slots published before the last line
    // are its.
    const int64_t t = ring_.oldest_published_ns();
    if (t < 0) return {};  // nothing waits (per poll on EFA: no clock read then)
    if (t != seen_t_) seen_t_ = t, pushes_at_seen_ = pushes_;  // pushes before its first sight: not "since"
    if (t <= said_ns_) return {};
    const int64_t now = steady_ns();
    if (now - t <= stall_ns_) return {};
    // A kernel of this rank runs: it pushed a command since, or waits for
    // its own staging copy; or the wait reached the kernels' whole bound.
    const bool kernel = out_pending_ > 0 || pushes_ != pushes_at_seen_;
    if (!kernel && now - t <= 2 * stall_ns_) {
      if (t <= quiet_said_ns_) return {};
      quiet_said_ns_ = now;
      return {cat("a peer's data or signal has waited ", (now - t) / 1000000, " ms (half MK_TIMEOUT_MS) for a "
                  "kernel of this rank to take it, and none has pushed a command since: this rank is behind its "
                  "peers (fine), or a kernel that only waits for network data runs no delivery agent "
                  "(net::with_agent; the ops' kernels do); said again as a warning at MK_TIMEOUT_MS",
                  describe()),
              false};
    }
    said_ns_ = now;
    return {cat("a staged copy or delivery has waited ", (now - t) / 1000000, " ms for a delivery agent (",
                out_pending_ ? "a kernel of this rank waits for its staging copy"
                : kernel     ? "a kernel of this rank pushes commands meanwhile"
                             : "MK_TIMEOUT_MS, the kernels' wait bound",
                "): no agent CTA takes the ring's work; a kernel that pushes commands or waits for network data "
                "must run the agent (net::with_agent; the ops' kernels do) and keep its agent CTA resident "
                "(MK_NET_FREE_SMS)",
                describe()),
            true};
  }

  // Whatever is still published waits for an agent, which runs only in a
  // kernel: at close none may run any more, so the wait is short (1 s) and
  // its end said by the caller. Cut deliveries (retire) are not waited for:
  // they make nothing.
  bool drain() noexcept override {
    return drain_while([&] {
      for (const HostRange& h : hosts_)
        if (!h.cut) return true;
      return false;
    });
  }
  // Deliveries from the shadow are cut (EmuRing::cancel; the backlog's before
  // they are published): no agent makes them any more, except one that
  // claimed a slot and read it before the cut: it makes the write as it
  // was, and its slot is done once it has. Copies out into the shadow are
  // not cut (a kernel that pushed the put waits for them: none is left by
  // the time a region goes). The shadow is freed at once when nothing may
  // touch it any more, else (deferred) by a later retire or free_retired()
  // once that is so, or at close: no wait here, on the thread that
  // deregisters and with the proxy's queue locked. Earlier retired shadows
  // that nothing touches any more go here too.
  Retired retire(void* host, size_t bytes) noexcept override {
    Retiring rt{host, reinterpret_cast<uint64_t>(host), reinterpret_cast<uint64_t>(host) + bytes, 0};
    const auto reads = [&](uint64_t src, uint64_t n) { return n != 0 && src < rt.hi && rt.lo < src + n; };
    Retired r;
    free_retired();
    try {
      r.dropped = ring_.cancel(reads, rt.until);
      for (EmuWrite& w : backlog_)
        if (!w.has_inline && reads(w.src, w.bytes))
          w.bytes = 0, w.sig_op = SigOp::None, w.sig = 0, w.cut = true, ++r.dropped;
      for (HostRange& h : hosts_)
        if (!h.out && h.lo < rt.hi && rt.lo < h.hi) h.cut = true;  // `until` covers the published ones
      if (!touched(rt)) return r;  // freeable now
      retiring_.push_back(rt);
    } catch (...) {  // cancel refused (a chunked ring) or memory: keep the shadow
      return {false, false, r.dropped};
    }
    r.freeable = false;
    r.deferred = true;
    return r;
  }

 private:
  [[noreturn]] static void refuse_unordered() {
    fail("fabric: staging by delivery agents has no in-order copy_in/signal pair; deliver orders a write's bytes "
         "before its signal");
  }
  // host: the write's end in host memory (the shadow); out: a copy out.
  void post(const EmuWrite& w, uint64_t host, bool out) {
    hosts_.push_back({host, host + w.bytes, out, false});
    if (!backlog_.empty() || !ring_.post(w, steady_ns())) backlog_.push_back(w);
    progress();
  }
  // Progress until `pending()` is false; bounded (kDrainBoundNs). False: it was not.
  template <typename Pending>
  bool drain_while(Pending&& pending) noexcept {
    const int64_t t0 = steady_ns();
    while (true) {
      try {
        progress();
      } catch (...) {
        return false;
      }
      if (!pending()) return true;
      if (steady_ns() - t0 > kDrainBoundNs) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

  std::unique_ptr<DeliveryRingMemory> mem_;  // null: the caller's ring
  DeliveryRing desc_;
  EmuRing ring_;                  // publication (no pacing) and completion in order
  std::deque<EmuWrite> backlog_;  // writes the ring has no room for yet
  struct HostRange {
    uint64_t lo, hi;
    bool out;  // a copy out (writes the shadow); else a delivery (reads it)
    bool cut;  // a delivery cut by retire: it reads nothing any more
  };
  // A shadow retired while copies may still touch it: freed once none may.
  struct Retiring {
    void* host;
    uint64_t lo, hi;
    uint64_t until;  // its cut slots an agent may have read before the cut: [.., until)
  };
  bool touched(const Retiring& r) const {
    if (ring_.done() < r.until) return true;
    for (const HostRange& h : hosts_)
      if (!h.cut && h.lo < r.hi && r.lo < h.hi) return true;
    return false;
  }
  HostMemoryHooks host_;  // empty: pinned by CUDA
  std::vector<Retiring> retiring_;
  std::vector<void*> freeable_;  // retired shadows nothing touches any more: for free_retired()
  std::deque<HostRange> hosts_;  // of every write posted and not done, in post order
  std::vector<uint8_t> out_done_;  // per request slot: its copy_out is done (1) or pending (0)
  const int64_t stall_ns_ = knob_int(Knob::MK_TIMEOUT_MS) * 500000;  // half the kernels' wait bound
  int64_t said_ns_ = -1;        // when stalled() last warned
  int64_t quiet_said_ns_ = -1;  // when it last spoke quietly (no kernel of this rank pushed since)
  uint64_t pushes_ = 0;         // this rank's kernels' commands taken (pushed())
  int64_t seen_t_ = -1;         // the oldest waiting slot's time when stalled() last looked
  uint64_t pushes_at_seen_ = 0;  // pushes_ when stalled() first saw that slot as the oldest
  size_t out_pending_ = 0;      // copies out posted and not done
};

}  // namespace

std::shared_ptr<StageOps> make_agent_stage_ops(int cuda_device, const char* label) {
  return std::make_shared<AgentStageOps>(cuda_device, label);
}

std::shared_ptr<StageOps> make_agent_stage_ops_on(const DeliveryRing& ring, HostMemoryHooks host) {
  return std::make_shared<AgentStageOps>(ring, std::move(host));
}

std::shared_ptr<StageOps> make_stage_ops(int cuda_device, const char* label) {
  if (knob_str(Knob::MK_FABRIC_STAGE) == "cuda") return make_cuda_stage_ops(cuda_device);
  return make_agent_stage_ops(cuda_device, label);
}

}  // namespace mk::net::fabric
