// mkernel: `emu`, an emulated RDMA NIC between GPUs of one host (2 GPUs acting
// as 2 nodes with MK_RANKS_PER_NODE=1). A write is one-sided: its bytes go
// from this rank's region into the peer's (through the symmetric heap's
// host-wide mapping), then its signal (set or add) is written, never before
// the bytes.
//
// Who moves the bytes: the delivery agents, MK_EMU_AGENTS CTAs of the very
// kernel that pushed the command (device/net/agent.cuh). This proxy thread makes no CUDA
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
// The price: the data moves on SMs of the sender (those the grid leaves to
// the transport, MK_NET_FREE_SMS), which a real NIC would not use, and every
// kernel that pushes commands runs its agents (NetCtx::agent).
//
// Pacing (MK_EMU_GBPS, MK_EMU_LATENCY_US), publication (early chunks:
// MK_EMU_CHUNK_KB) and completion are EmuRing's (src/net/emu/emu_ring.hpp,
// tested on the CPU). Reports made with it say "emulated".
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "device/net/delivery.hpp"
#include "mkernel/error.hpp"
#include "mkernel/knobs.hpp"
#include "mkernel/topology.hpp"
#include "src/net/delivery_ring_memory.hpp"
#include "src/net/emu/emu_ring.hpp"
#include "src/net/transport.hpp"
#include "src/runtime/device_health.hpp"
#include "src/runtime/step_status.hpp"

namespace mk::net {

namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

constexpr uint32_t kRingSlots = 1024;  // writes published and not yet done, at most

// The emulated NIC's link of GPU `device` in this process: one, whatever the
// number of proxy threads (MK_NET_THREADS), so MK_EMU_GBPS is the GPU's rate.
std::shared_ptr<EmuLink> link_of_gpu(int device) {
  static std::mutex mu;
  static std::map<int, std::weak_ptr<EmuLink>> links;
  std::lock_guard<std::mutex> g(mu);
  std::shared_ptr<EmuLink> l = links[device].lock();
  if (!l) links[device] = l = std::make_shared<EmuLink>();
  return l;
}

class EmuTransport final : public Transport {
 public:
  explicit EmuTransport(const TransportConfig& cfg) : cfg_(cfg) {
    if (cfg.cuda_device < 0) fail("emu: the emulated NIC moves GPU memory and needs a CUDA device");
    const double bytes_per_ns = static_cast<double>(knob_int(Knob::MK_EMU_GBPS));  // GB/s == bytes/ns
    const int64_t latency_ns = knob_int(Knob::MK_EMU_LATENCY_US) * 1000;
    const uint64_t chunk_bytes = static_cast<uint64_t>(knob_int(Knob::MK_EMU_CHUNK_KB)) << 10;
    const int agents = static_cast<int>(knob_int(Knob::MK_EMU_AGENTS));
    name_ = cat("emu (emulated NIC: ", bytes_per_ns, " GB/s, ", latency_ns / 1000, " us; delivered by ", agents,
                agents == 1 ? " agent CTA" : " agent CTAs", " a kernel",
                chunk_bytes ? cat(", early chunks from ", chunk_bytes >> 10, " KB") : std::string(), ")");
    const DeviceScope on(cfg.cuda_device);  // (the caller's current device restored)
    mem_ = std::make_unique<DeliveryRingMemory>(cfg.cuda_device, kRingSlots);
    ring_ = mem_->ring();
    pacer_ = std::make_unique<EmuRing>(ring_, bytes_per_ns, latency_ns, chunk_bytes, agents,
                                       link_of_gpu(cfg.cuda_device));
  }
  ~EmuTransport() override { close(); }

  std::string name() const override { return name_; }
  bool emulated() const override { return true; }
  uint32_t inline_bytes() const override { return static_cast<uint32_t>(kMaxInlineBytes); }
  DeliveryRing delivery_ring() const override { return ring_; }

  // The oldest write not done: published or still waiting for its time.
  std::string in_flight() const override { return pacer_ ? pacer_->describe(now_ns()) : std::string(); }

  // connect's checks of this rank's peers: one host, peer access enabled where this process sees the GPU.
  void connect_peers(Bootstrap& bs, const std::vector<int>& peers, const std::vector<std::string>& hosts,
                     const std::vector<std::string>& pcis) {
    for (int p : peers) {
      if (p < 0 || p >= bs.world()) fail("emu: peer rank ", p, " is outside [0, ", bs.world(), ")");
      if (hosts[p] != hosts[bs.rank()])
        fail("emu: rank ", p, " is on another host; the emulated NIC only joins GPUs of one host (use MK_NET=verbs or fabric)");
      // The agent stores into the peer GPU's memory through the symmetric
      // heap's mappings of it, which grant this GPU access themselves (VMM:
      // cuMemSetAccess; IPC: the lazy peer access of cudaIpcOpenMemHandle).
      // Enabling peer access here covers a GPU this process sees; one it
      // does not see (a launcher that gives each rank only its own GPU in
      // CUDA_VISIBLE_DEVICES) is left to those mappings, as the
      // communicator's node peers are, and register_region refuses a region
      // with no mapping of a peer.
      int dev = -1;
      if (cudaDeviceGetByPCIBusId(&dev, pcis[p].c_str()) != cudaSuccess) {
        cudaGetLastError();
        continue;
      }
      if (dev == cfg_.cuda_device) continue;  // a shared GPU (MK_SHARE_GPUS): no peer access needed
      cudaError_t e = cudaDeviceEnablePeerAccess(dev, 0);
      if (e != cudaSuccess) cudaGetLastError();  // (already enabled is fine; a failure is thrown, not left set)
      if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled)
        fail("emu: cannot enable peer access to rank ", p, "'s GPU ", pcis[p], ": ", cuda_error_string(e));
    }
  }

  // Collective: every rank's outcome is exchanged (step_status), as the other backends' connect, so a rank that
  // cannot reach a peer (peer access refused) fails every rank at once, named, instead of leaving them to wait in
  // the next exchange until the bootstrap bound.
  void connect(Bootstrap& bs, const std::vector<int>& peers) override {
    std::string mine = step_status::kOk;
    char pci[32] = {};
    try {
      MK_CUDA_CHECK(cudaDeviceGetPCIBusId(pci, sizeof(pci), cfg_.cuda_device));
    } catch (const std::exception& e) {
      mine = step_status::failed(e);
    }
    auto hosts = bs.allgather(local_host_id(), "emu connect: hosts");
    auto pcis = bs.allgather(pci, "emu connect: devices");
    try {
      if (mine == step_status::kOk) connect_peers(bs, peers, hosts, pcis);
    } catch (const std::exception& e) {
      mine = step_status::failed(e);
    }
    const std::string err =
        step_status::step_error(bs.allgather(mine, "emu connect"), cfg_.rank, "emu connect", "could not connect");
    if (!err.empty()) fail(err);
    peers_ = peers;
  }

  void deregister_region(int id) override {
    if (id == kSignalRegion) fail("emu: region 0 (signals) cannot be deregistered");
    regions_.erase(id);  // later writes to it fail as unregistered (post)
  }

  // Collective like the other backends: every rank's outcome is exchanged
  // (step_status), so a check failing on one rank fails it on every rank.
  void register_region(Bootstrap& bs, const Region& r) override {
    Reg reg;
    std::string mine = step_status::kOk;
    try {
      if (!r.device) fail("emu: region ", r.id, " is host memory; the emulated NIC moves GPU memory only");
      if (!r.host_peer_ptrs) fail("emu: region ", r.id, " has no host-wide peer mappings (not a symmetric buffer)");
      reg.r = r;
      for (int p : peers_) {
        void* ptr = p < static_cast<int>(r.host_peer_ptrs->size()) ? (*r.host_peer_ptrs)[p] : nullptr;
        if (!ptr) fail("emu: rank ", p, "'s region ", r.id, " is not mapped here (GPUs without peer access?)");
        reg.peer_base[p] = static_cast<char*>(ptr);
      }
    } catch (const std::exception& e) {
      mine = step_status::failed(e);
    }
    const std::string err = step_status::step_error(bs.allgather(mine, "emu: register_region"), cfg_.rank,
                                                    cat("emu: register_region ", r.id),
                                                    "could not register it");
    if (!err.empty()) fail(err);
    regions_[r.id] = reg;
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
    EmuWrite e;
    e.dst = reinterpret_cast<uint64_t>(pit->second + w.dst_off);
    e.src = reinterpret_cast<uint64_t>(static_cast<char*>(reg.r.base) + w.src_off);
    if (w.sig_op != SigOp::None) {
      auto sit = regions_.find(kSignalRegion);
      if (sit == regions_.end()) fail("emu: signal before the signal region was registered");
      if (w.sig_off % 8 || w.sig_off + 8 > sit->second.r.bytes) fail("emu: signal offset ", w.sig_off, " is invalid");
      e.sig = reinterpret_cast<uint64_t>(sit->second.peer_base.at(w.peer) + w.sig_off);
    }
    e.bytes = w.bytes;
    e.sig_op = w.sig_op;
    e.sig_value = w.sig_value;
    e.has_inline = w.has_inline;
    e.inline_data[0] = w.inline_data[0];
    e.inline_data[1] = w.inline_data[1];
    e.cookie = w.cookie;
    return pacer_->post(e, now_ns());
  }

  int poll(Completion* out, int max) override {
    uint64_t cookies[64];
    const int n = pacer_->progress(now_ns(), cookies, std::min(max, 64));
    for (int i = 0; i < n; ++i) out[i] = Completion{cookies[i], 0};
    return n;
  }

  void close() override {
    // Called at teardown, with no kernel running: the proxy has stopped, so a
    // kernel still running here would wait in its agent for completions that
    // never come, until MK_TIMEOUT_MS (and cudaFree below would wait for it).
    pacer_.reset();
    mem_.reset();
    ring_ = DeliveryRing{};
  }

 private:
  struct Reg {
    Region r;
    std::map<int, char*> peer_base;
  };
  TransportConfig cfg_;
  std::string name_;
  std::unique_ptr<DeliveryRingMemory> mem_;  // the ring's memory
  DeliveryRing ring_;
  std::unique_ptr<EmuRing> pacer_;  // pacing, publication, completion
  std::vector<int> peers_;
  std::map<int, Reg> regions_;
};

}  // namespace

std::unique_ptr<Transport> make_emu(const TransportConfig& cfg) { return std::make_unique<EmuTransport>(cfg); }

}  // namespace mk::net
