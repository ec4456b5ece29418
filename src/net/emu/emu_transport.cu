// mkernel: `emu`, an emulated RDMA NIC between GPUs of one host (2 GPUs acting
// as 2 nodes with MK_RANKS_PER_NODE=1). A write is one-sided: its bytes go
// from this rank's region into the peer's (through the symmetric heap's
// host-wide mapping), then its signal (set or add) is written, never before
// the bytes.
//
// Who moves the bytes: the delivery agent, a CTA of the very kernel that
// pushed the command (device/net/agent.cuh). This proxy thread makes no CUDA
// call on the data path: at the time a write is due it writes it into the
// queue's delivery ring in pinned host memory (device/net/delivery.hpp); an
// agent claims it, copies it with the whole CTA over NVLink (or within the
// GPU when ranks share one), writes the signal with a system-scope release
// and marks it done; poll() sees the done word.
// Why not copies and kernels on a proxy stream, as until 2026-12-03: the
// driver maps a process's streams onto a few in-order hardware work queues,
// and the proxy's copy, memory op or signal kernel could sit behind work the
// user queued after the op that waits for it: a deadlock until the timeouts,
// every time with CUDA_DEVICE_MAX_CONNECTIONS=1 (what Megatron-LM sets), in
// most runs under MPS (bench/results/emu-work-queue-20261203.md). The same
// made a kernel load or a pageable copy on the legacy stream in another
// thread block the proxy (emu-pageable-20261201.md): gone with it.
// The price: the data moves on an SM of the sender (the one the grid leaves
// to the transport, MK_NET_FREE_SMS), which a real NIC would not use, and
// every kernel that pushes commands runs an agent (NetCtx::agent).
//
// Pacing: one emulated link per GPU at MK_EMU_GBPS with MK_EMU_LATENCY_US.
// A write of B bytes occupies the link for B / rate after the link is free,
// and is published at that time plus the latency less the real path's own
// time (the agent's poll, copy and signal, as the proxy sees it), so that the
// emulated latency is max(configured, real) rather than their sum. The real
// path is estimated from writes of at most 4 KiB published onto an empty ring
// (no wait behind other writes in it: the median of a window), starting from
// kRealStartNs; name() reports the configuration.
// Reports made with it say "emulated".
//
// Completion: in publication order (a prefix), once the slot's done word
// holds its sequence + 1: the agent read the source (it may be reused) and
// wrote the data and the signal.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <vector>

#include "device/net/delivery.hpp"
#include "mkernel/error.hpp"
#include "mkernel/knobs.hpp"
#include "mkernel/topology.hpp"
#include "src/net/transport.hpp"

namespace mk::net {

namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

constexpr size_t kMaxQueuedOps = 8192;
constexpr uint32_t kRingSlots = 1024;           // writes published and not yet done, at most
constexpr int64_t kRealStartNs = 2000;          // the real path before any measurement
constexpr uint64_t kSmallWriteBytes = 4096;     // writes whose time estimates the real path
constexpr size_t kRealWindow = 32;              // samples per estimate (median)

class EmuTransport final : public Transport {
 public:
  explicit EmuTransport(const TransportConfig& cfg) : cfg_(cfg) {
    if (cfg.cuda_device < 0) fail("emu: the emulated NIC moves GPU memory and needs a CUDA device");
    bytes_per_ns_ = static_cast<double>(knob_int(Knob::MK_EMU_GBPS));  // GB/s == bytes/ns
    latency_ns_ = knob_int(Knob::MK_EMU_LATENCY_US) * 1000;
    MK_CUDA_CHECK(cudaSetDevice(cfg.cuda_device));
    void* host = nullptr;
    const size_t host_bytes = kRingSlots * sizeof(DeliverySlot) + kRingSlots * 8 + 64;
    MK_CUDA_CHECK(cudaHostAlloc(&host, host_bytes, cudaHostAllocMapped | cudaHostAllocPortable));
    std::memset(host, 0, host_bytes);
    host_mem_ = host;
    ring_.slots = static_cast<DeliverySlot*>(host);
    ring_.done = reinterpret_cast<uint64_t*>(ring_.slots + kRingSlots);
    ring_.claimed = ring_.done + kRingSlots;
    void* claim = nullptr;
    MK_CUDA_CHECK(cudaMalloc(&claim, 8));
    ring_.claim = static_cast<uint64_t*>(claim);
    // Zeroed on a stream of its own: the network may be created while the
    // user's kernels run, which a device-wide synchronisation would wait for.
    cudaStream_t s = nullptr;
    MK_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    MK_CUDA_CHECK(cudaMemsetAsync(claim, 0, 8, s));
    const cudaError_t zeroed = cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
    MK_CUDA_CHECK(zeroed);
    ring_.size = kRingSlots;
    // The GPU addresses pinned host memory by the same pointer (UVA); checked.
    void* dev = nullptr;
    MK_CUDA_CHECK(cudaHostGetDevicePointer(&dev, host, 0));
    if (dev != host) fail("emu: mapped host memory has a different device address (no unified addressing?)");
  }
  ~EmuTransport() override { close(); }

  std::string name() const override {
    return cat("emu (emulated NIC: ", bytes_per_ns_, " GB/s, ", latency_ns_ / 1000,
               " us; delivered by the kernels' agent CTA)");
  }
  bool emulated() const override { return true; }
  uint32_t inline_bytes() const override { return static_cast<uint32_t>(kMaxInlineBytes); }
  DeliveryRing delivery_ring() const override { return ring_; }

  // The oldest write not done: published or still waiting for its time.
  std::string in_flight() const override {
    if (ops_.empty()) return {};
    const Op& o = ops_.front();
    // The agents' last claim as one of them wrote it (plain stores of several
    // agents: approximate).
    const uint64_t claimed = __atomic_load_n(ring_.claimed, __ATOMIC_ACQUIRE);
    if (published_ == done_)
      return cat("; emu: ", ops_.size(), " writes wait for their emulated time (the first due in ",
                 std::max<int64_t>(0, o.deliver_ns - now_ns()) / 1000, " us)");
    return cat("; emu: write #", done_, " (", o.w.bytes, " bytes to rank ", o.w.peer, ") was published to the "
               "delivery ring ", (now_ns() - o.published_ns) / 1000000, " ms ago and is not done (",
               published_ - done_, " published, agents claimed up to #", claimed,
               claimed > done_ ? ": claimed, not finished: its agent is stuck or was stopped)"
                               : ": not claimed: no kernel of this rank that runs the delivery agent is running, or "
                                 "its agent CTA is not resident: MK_NET_FREE_SMS)");
  }

  void connect(Bootstrap& bs, const std::vector<int>& peers) override {
    char pci[32] = {};
    MK_CUDA_CHECK(cudaDeviceGetPCIBusId(pci, sizeof(pci), cfg_.cuda_device));
    auto hosts = bs.allgather(local_host_id());
    auto pcis = bs.allgather(pci);
    for (int p : peers) {
      if (p < 0 || p >= bs.world()) fail("emu: peer rank ", p, " is outside [0, ", bs.world(), ")");
      if (hosts[p] != hosts[bs.rank()])
        fail("emu: rank ", p, " is on another host; the emulated NIC only joins GPUs of one host (use MK_NET=verbs or fabric)");
      // The agent stores into the peer GPU's memory: peer access is needed.
      int dev = -1;
      if (cudaDeviceGetByPCIBusId(&dev, pcis[p].c_str()) != cudaSuccess) {
        cudaGetLastError();
        fail("emu: rank ", p, "'s GPU ", pcis[p], " is not visible to this process (CUDA_VISIBLE_DEVICES?)");
      }
      if (dev == cfg_.cuda_device) continue;  // a shared GPU (MK_SHARE_GPUS): no peer access needed
      cudaError_t e = cudaDeviceEnablePeerAccess(dev, 0);
      if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled)
        fail("emu: cannot enable peer access to rank ", p, "'s GPU ", pcis[p], ": ", cuda_error_string(e));
      cudaGetLastError();
    }
    peers_ = peers;
  }

  void deregister_region(int id) override {
    if (id == kSignalRegion) fail("emu: region 0 (signals) cannot be deregistered");
    regions_.erase(id);  // later writes to it fail as unregistered (post)
  }

  void register_region(Bootstrap& bs, const Region& r) override {
    if (!r.device) fail("emu: region ", r.id, " is host memory; the emulated NIC moves GPU memory only");
    if (!r.host_peer_ptrs) fail("emu: region ", r.id, " has no host-wide peer mappings (not a symmetric buffer)");
    Reg reg;
    reg.r = r;
    for (int p : peers_) {
      void* ptr = p < static_cast<int>(r.host_peer_ptrs->size()) ? (*r.host_peer_ptrs)[p] : nullptr;
      if (!ptr) fail("emu: rank ", p, "'s region ", r.id, " is not mapped here (GPUs without peer access?)");
      reg.peer_base[p] = static_cast<char*>(ptr);
    }
    regions_[r.id] = reg;
    bs.barrier();  // collective like the other backends: every rank has registered
  }

  bool post(const WriteReq& w) override {
    auto rit = regions_.find(w.region);
    if (rit == regions_.end()) fail("emu: write to unregistered region ", w.region);
    const Reg& reg = rit->second;
    auto pit = reg.peer_base.find(w.peer);
    if (pit == reg.peer_base.end()) fail("emu: rank ", w.peer, " is not a connected peer");
    if (w.src_off + w.bytes < w.src_off || w.dst_off + w.bytes < w.dst_off || w.src_off + w.bytes > reg.r.bytes ||
        w.dst_off + w.bytes > reg.r.bytes)
      fail("emu: write of ", w.bytes, " bytes at src ", w.src_off, " / dst ", w.dst_off, " exceeds region ", w.region,
           " (", reg.r.bytes, " bytes)");
    if (w.has_inline && w.bytes > kMaxInlineBytes)
      fail("emu: inline write of ", w.bytes, " bytes (at most ", kMaxInlineBytes, ")");
    if (w.bytes > kDeliveryBytesMask) fail("emu: write of ", w.bytes, " bytes is too large for one delivery");
    Op op;
    op.w = w;
    op.dst = reinterpret_cast<uint64_t>(pit->second + w.dst_off);
    op.src = reinterpret_cast<uint64_t>(static_cast<char*>(reg.r.base) + w.src_off);
    if (w.sig_op != SigOp::None) {
      auto sit = regions_.find(kSignalRegion);
      if (sit == regions_.end()) fail("emu: signal before the signal region was registered");
      if (w.sig_off % 8 || w.sig_off + 8 > sit->second.r.bytes) fail("emu: signal offset ", w.sig_off, " is invalid");
      op.sig = reinterpret_cast<uint64_t>(sit->second.peer_base.at(w.peer) + w.sig_off);
    }
    if (ops_.size() >= kMaxQueuedOps) return false;
    const int64_t now = now_ns();
    const int64_t start = std::max(now, link_free_ns_);
    link_free_ns_ = start + static_cast<int64_t>(static_cast<double>(w.bytes) / bytes_per_ns_);
    op.deliver_ns = link_free_ns_ + std::max<int64_t>(0, latency_ns_ - real_ns_);
    ops_.push_back(op);
    return true;
  }

  int poll(Completion* out, int max) override {
    // Completions: the done prefix of the published writes.
    int n = 0;
    while (n < max && done_ < published_ &&
           __atomic_load_n(ring_.done + (done_ & (kRingSlots - 1)), __ATOMIC_ACQUIRE) == done_ + 1) {
      const Op& o = ops_.front();
      if (o.sample) sample_real_path(now_ns() - o.published_ns);
      out[n++] = Completion{o.w.cookie, 0};
      ops_.pop_front();
      ++done_;
    }
    // Publication: every write whose time has come, while the ring has room.
    const int64_t now = now_ns();
    while (published_ - done_ < ops_.size() && published_ - done_ < kRingSlots) {
      Op& o = ops_[published_ - done_];
      if (o.deliver_ns > now) break;
      publish(o);
    }
    return n;
  }

  void close() override {
    // Called at teardown, with no kernel running: the proxy has stopped, so a
    // kernel still running here would wait in its agent for completions that
    // never come, until MK_TIMEOUT_MS (and cudaFree below would wait for it).
    ops_.clear();
    if (ring_.claim) cudaFree(ring_.claim);
    if (host_mem_) cudaFreeHost(host_mem_);
    ring_ = DeliveryRing{};
    host_mem_ = nullptr;
  }

 private:
  struct Reg {
    Region r;
    std::map<int, char*> peer_base;
  };
  struct Op {
    WriteReq w;
    uint64_t src = 0, dst = 0, sig = 0;  // as the GPU addresses them
    int64_t deliver_ns = 0;
    int64_t published_ns = 0;
    bool sample = false;  // times the real path (see Pacing)
  };

  void publish(Op& o) {
    o.sample = published_ == done_ && o.w.bytes <= kSmallWriteBytes;
    const uint64_t seq = published_++;
    DeliverySlot& s = ring_.slots[seq & (kRingSlots - 1)];
    const bool inl = o.w.has_inline;
    s.w[1] = delivery_meta(o.w.bytes, o.w.sig_op, inl);
    s.w[2] = inl ? 0 : o.src;
    s.w[3] = o.dst;
    s.w[4] = o.sig;
    s.w[5] = o.w.sig_value;
    s.w[6] = inl ? o.w.inline_data[0] : 0;
    s.w[7] = inl ? o.w.inline_data[1] : 0;
    __atomic_store_n(&s.w[0], seq + 1, __ATOMIC_RELEASE);
    o.published_ns = now_ns();
  }

  // The real path, estimated as the median of the last kRealWindow small
  // writes' publish-to-done times.
  void sample_real_path(int64_t ns) {
    window_.push_back(ns);
    if (window_.size() < kRealWindow) return;
    std::nth_element(window_.begin(), window_.begin() + kRealWindow / 2, window_.end());
    real_ns_ = window_[kRealWindow / 2];
    window_.clear();
  }

  TransportConfig cfg_;
  double bytes_per_ns_ = 50;
  int64_t latency_ns_ = 3000;
  int64_t real_ns_ = kRealStartNs;
  std::vector<int64_t> window_;
  void* host_mem_ = nullptr;  // the ring's slots, done words and claimed word
  DeliveryRing ring_;
  std::vector<int> peers_;
  std::map<int, Reg> regions_;
  std::deque<Op> ops_;           // not done yet, in post order: [0, published_ - done_) published
  uint64_t published_ = 0, done_ = 0;  // writes published to the ring / done, since the start
  int64_t link_free_ns_ = 0;
};

}  // namespace

std::unique_ptr<Transport> make_emu(const TransportConfig& cfg) { return std::make_unique<EmuTransport>(cfg); }

}  // namespace mk::net
