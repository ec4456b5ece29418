// mkernel: `emu`, an emulated RDMA NIC between GPUs of one host (2 GPUs acting
// as 2 nodes with MK_RANKS_PER_NODE=1). A write is a one-sided copy into the
// peer GPU's memory (through the symmetric heap's host-wide mapping) on a
// copy stream owned by the proxy thread; its signal is written after the data
// in stream order (a stream memory op for Set, a one-thread kernel doing a
// system-scope atomic for Add), so it is never visible before the data.
//
// Pacing: one emulated link per GPU at MK_EMU_GBPS with MK_EMU_LATENCY_US.
// A write of B bytes occupies the link for B / rate after the link is free,
// and must not be visible before `latency` after it left the link. The real
// path (stream launch, copy engine, memory op) takes time of its own, measured
// once at start (overhead_ns_); an op is issued at delivery - overhead, so the
// emulated latency is max(configured, real) rather than their sum. Reports
// made with it say "emulated".
//
// Batching: at most one batch of ops is in flight on the stream; when it
// completes, every op whose time has come goes out as the next batch (its
// copies, then its signals in op order: adds coalesced into one kernel, sets
// as stream memory operations, then one event). Each stream operation costs
// microseconds of GPU-side latency, so batching is what lets small messages
// approach the emulated rate; an idle link still sends a lone op at once.
//
// NOTES: every kernel the proxy may launch (the signal-add kernel, and the
// runtime's own copy kernels for unaligned copies) is loaded before any user
// kernel can wait on the network: with CUDA's lazy loading, a first launch
// from the proxy can wait for the running user kernel, which waits for this
// very signal (a deadlock).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>

#include "mkernel/error.hpp"
#include "mkernel/knobs.hpp"
#include "mkernel/topology.hpp"
#include "src/net/transport.hpp"
#include "src/runtime/cuda_driver.hpp"

namespace mk::net {

namespace {

// Signal adds of one issue batch, applied after the batch's copies (stream
// order); passed by value so a batch costs one launch and no copy.
struct AddBatch {
  static constexpr int kMax = 32;
  unsigned long long* addr[kMax];
  unsigned long long delta[kMax];
  int n;
};

__global__ void emu_signal_add_batch(AddBatch b) {
  if (static_cast<int>(threadIdx.x) < b.n) atomicAdd_system(b.addr[threadIdx.x], b.delta[threadIdx.x]);
  __threadfence_system();
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

constexpr size_t kMaxQueuedOps = 8192;

class EmuTransport final : public Transport {
 public:
  explicit EmuTransport(const TransportConfig& cfg) : cfg_(cfg) {
    if (cfg.cuda_device < 0) fail("emu: the emulated NIC moves GPU memory and needs a CUDA device");
    bytes_per_ns_ = static_cast<double>(knob_int(Knob::MK_EMU_GBPS));  // GB/s == bytes/ns
    latency_ns_ = knob_int(Knob::MK_EMU_LATENCY_US) * 1000;
    MK_CUDA_CHECK(cudaSetDevice(cfg.cuda_device));
    MK_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking));
    calibrate();
  }
  ~EmuTransport() override { close(); }

  std::string name() const override {
    return cat("emu (emulated NIC: ", bytes_per_ns_, " GB/s, ", latency_ns_ / 1000, " us; real path ",
               overhead_ns_ / 1000.0, " us)");
  }
  bool emulated() const override { return true; }

  void connect(Bootstrap& bs, const std::vector<int>& peers) override {
    char pci[32] = {};
    MK_CUDA_CHECK(cudaDeviceGetPCIBusId(pci, sizeof(pci), cfg_.cuda_device));
    auto hosts = bs.allgather(local_host_id());
    auto pcis = bs.allgather(pci);
    for (int p : peers) {
      if (p < 0 || p >= bs.world()) fail("emu: peer rank ", p, " is outside [0, ", bs.world(), ")");
      if (hosts[p] != hosts[bs.rank()])
        fail("emu: rank ", p, " is on another host; the emulated NIC only joins GPUs of one host (use MK_NET=verbs or fabric)");
      // Without peer access enabled in this context the runtime stages
      // copies to another GPU through host memory (slow, and blocking).
      int dev = -1;
      if (cudaDeviceGetByPCIBusId(&dev, pcis[p].c_str()) != cudaSuccess) {
        cudaGetLastError();
        fail("emu: rank ", p, "'s GPU ", pcis[p], " is not visible to this process (CUDA_VISIBLE_DEVICES?)");
      }
      cudaError_t e = cudaDeviceEnablePeerAccess(dev, 0);
      if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled)
        fail("emu: cannot enable peer access to rank ", p, "'s GPU ", pcis[p], ": ", cuda_error_string(e));
      cudaGetLastError();
    }
    peers_ = peers;
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
    if (r.id == kSignalRegion) {
      // Load the runtime's peer-copy kernels now (see NOTES): odd sizes and
      // alignments into the unused padding of each peer's control header.
      for (int p : peers_) warm_copies(reg.peer_base[p] + 16, static_cast<const char*>(r.base) + 16, 96);
      MK_CUDA_CHECK(cudaStreamSynchronize(copy_));
    }
    bs.barrier();  // collective like the other backends: every rank has registered
  }

  bool post(const WriteReq& w) override {
    auto rit = regions_.find(w.region);
    if (rit == regions_.end()) fail("emu: write to unregistered region ", w.region);
    const Reg& reg = rit->second;
    if (reg.peer_base.find(w.peer) == reg.peer_base.end()) fail("emu: rank ", w.peer, " is not a connected peer");
    if (w.src_off + w.bytes < w.src_off || w.dst_off + w.bytes < w.dst_off || w.src_off + w.bytes > reg.r.bytes ||
        w.dst_off + w.bytes > reg.r.bytes)
      fail("emu: write of ", w.bytes, " bytes at src ", w.src_off, " / dst ", w.dst_off, " exceeds region ", w.region,
           " (", reg.r.bytes, " bytes)");
    if (w.sig_op != SigOp::None) {
      auto sit = regions_.find(kSignalRegion);
      if (sit == regions_.end()) fail("emu: signal before the signal region was registered");
      if (w.sig_off % 8 || w.sig_off + 8 > sit->second.r.bytes) fail("emu: signal offset ", w.sig_off, " is invalid");
    }
    if (ops_.size() >= kMaxQueuedOps) return false;
    const int64_t now = now_ns();
    const int64_t start = std::max(now, link_free_ns_);
    link_free_ns_ = start + static_cast<int64_t>(static_cast<double>(w.bytes) / bytes_per_ns_);
    Op op;
    op.w = w;
    op.deliver_ns = link_free_ns_ + latency_ns_ - overhead_ns_;
    ops_.push_back(op);
    return true;
  }

  int poll(Completion* out, int max) override {
    // A batch is complete when the event on its last op is.
    for (size_t k = done_; k < issued_; ++k) {
      if (!ops_[k].ev) continue;
      cudaError_t e = cudaEventQuery(ops_[k].ev);
      if (e == cudaErrorNotReady) break;
      if (e != cudaSuccess) fail("emu: copy to rank ", ops_[k].w.peer, " failed: ", cuda_error_string(e));
      events_.push_back(ops_[k].ev);
      ops_[k].ev = nullptr;
      done_ = k + 1;
    }
    // Issue every op whose time has come, once nothing is in flight.
    if (done_ == issued_) {
      const int64_t now = now_ns();
      size_t last = issued_;
      while (last < ops_.size() && ops_[last].deliver_ns <= now) ++last;
      if (last > issued_) issue_batch(issued_, last);
    }
    int n = 0;
    while (n < max && done_ > 0) {
      out[n++] = Completion{ops_.front().w.cookie, 0};
      ops_.pop_front();
      --done_;
      --issued_;
    }
    return n;
  }

  void close() override {
    if (!copy_) return;
    cudaStreamSynchronize(copy_);
    for (auto& op : ops_)
      if (op.ev) events_.push_back(op.ev);
    ops_.clear();
    issued_ = done_ = 0;
    for (auto e : events_) cudaEventDestroy(e);
    events_.clear();
    cudaStreamDestroy(copy_);
    copy_ = nullptr;
  }

 private:
  struct Reg {
    Region r;
    std::map<int, char*> peer_base;
  };
  struct Op {
    WriteReq w;
    int64_t deliver_ns = 0;
    cudaEvent_t ev = nullptr;  // on the last op of each issue batch
  };

  cudaEvent_t take_event() {
    if (events_.empty()) {
      cudaEvent_t e;
      MK_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      return e;
    }
    cudaEvent_t e = events_.back();
    events_.pop_back();
    return e;
  }

  // Copies of odd sizes and alignments, so that the runtime loads its copy
  // kernels for this path now rather than behind a waiting user kernel.
  void warm_copies(char* dst, const char* src, size_t room) {
    for (size_t off : {size_t(0), size_t(1), size_t(3), size_t(8)})
      for (size_t len : {size_t(1), size_t(7), size_t(13), size_t(24), size_t(64)})
        if (off + len <= room)
          MK_CUDA_CHECK(cudaMemcpyAsync(dst + off, src + ((off + 5) % 16), len, cudaMemcpyDeviceToDevice, copy_));
  }

  // Loads the add kernel and measures how long a small copy + signal takes
  // from the host's call to completion (median of a few, on local memory).
  void calibrate() {
    cudaFuncAttributes attr{};
    MK_CUDA_CHECK(cudaFuncGetAttributes(&attr, emu_signal_add_batch));
    void* scratch = nullptr;
    MK_CUDA_CHECK(cudaMalloc(&scratch, 4096));
    char* p = static_cast<char*>(scratch);
    warm_copies(p + 1024, p, 512);
    cudaEvent_t e = take_event();
    std::vector<int64_t> t;
    for (int i = 0; i < 21; ++i) {
      const int64_t t0 = now_ns();
      MK_CUDA_CHECK(cudaMemcpyAsync(p + 2048, p, 64, cudaMemcpyDeviceToDevice, copy_));
      CUresult r = drv::api().cuStreamWriteValue64(reinterpret_cast<CUstream>(copy_),
                                                   reinterpret_cast<CUdeviceptr>(p + 4088), i, 0);
      if (r != CUDA_SUCCESS) fail("emu: cuStreamWriteValue64 is not supported here (CUresult ", int(r), ")");
      MK_CUDA_CHECK(cudaEventRecord(e, copy_));
      while (cudaEventQuery(e) == cudaErrorNotReady) {
      }
      t.push_back(now_ns() - t0);
    }
    AddBatch one{};
    one.addr[0] = reinterpret_cast<unsigned long long*>(p + 4080);
    one.delta[0] = 1;
    one.n = 1;
    emu_signal_add_batch<<<1, 32, 0, copy_>>>(one);
    MK_CUDA_CHECK(cudaGetLastError());
    MK_CUDA_CHECK(cudaStreamSynchronize(copy_));
    events_.push_back(e);
    cudaFree(scratch);
    std::sort(t.begin(), t.end());
    overhead_ns_ = std::min<int64_t>(t[t.size() / 2], latency_ns_);
  }

  // Copies of ops [first, last), then their signals in op order (adds
  // coalesced into one launch, sets as stream memory operations), then one
  // event on the last op: stream order puts every signal after its data.
  void issue_batch(size_t first, size_t last) {
    // One runtime call for all copies of the batch: a copy call per op costs
    // microseconds of host time each, which caps small-message throughput.
    dsts_.clear();
    srcs_.clear();
    sizes_.clear();
    for (size_t i = first; i < last; ++i) {
      const WriteReq& w = ops_[i].w;
      if (!w.bytes) continue;
      const Reg& reg = regions_.at(w.region);
      dsts_.push_back(reg.peer_base.at(w.peer) + w.dst_off);
      srcs_.push_back(static_cast<char*>(reg.r.base) + w.src_off);
      sizes_.push_back(w.bytes);
    }
    if (!sizes_.empty()) {
      cudaMemcpyAttributes attr{};
      attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
      size_t attr_idx = 0;
      MK_CUDA_CHECK(cudaMemcpyBatchAsync(dsts_.data(), srcs_.data(), sizes_.data(), sizes_.size(), &attr, &attr_idx, 1,
                                         copy_));
    }
    AddBatch adds{};
    auto flush_adds = [&] {
      if (adds.n == 0) return;
      emu_signal_add_batch<<<1, 32, 0, copy_>>>(adds);
      MK_CUDA_CHECK(cudaGetLastError());
      adds = AddBatch{};
    };
    for (size_t i = first; i < last; ++i) {
      const WriteReq& w = ops_[i].w;
      if (w.sig_op == SigOp::None) continue;
      auto* sig = reinterpret_cast<unsigned long long*>(regions_.at(kSignalRegion).peer_base.at(w.peer) + w.sig_off);
      if (w.sig_op == SigOp::Set) {
        flush_adds();  // keep set/add order
        CUresult r = drv::api().cuStreamWriteValue64(reinterpret_cast<CUstream>(copy_),
                                                     reinterpret_cast<CUdeviceptr>(sig), w.sig_value, 0);
        if (r != CUDA_SUCCESS) fail("emu: signal write to rank ", w.peer, " failed (CUresult ", int(r), ")");
        continue;
      }
      if (adds.n > 0 && adds.addr[adds.n - 1] == sig) {
        adds.delta[adds.n - 1] += w.sig_value;
        continue;
      }
      if (adds.n == AddBatch::kMax) flush_adds();
      adds.addr[adds.n] = sig;
      adds.delta[adds.n] = w.sig_value;
      ++adds.n;
    }
    flush_adds();
    cudaEvent_t ev = take_event();
    MK_CUDA_CHECK(cudaEventRecord(ev, copy_));
    ops_[last - 1].ev = ev;
    issued_ = last;
  }

  TransportConfig cfg_;
  double bytes_per_ns_ = 50;
  int64_t latency_ns_ = 3000;
  int64_t overhead_ns_ = 0;  // real issue-to-visible time, taken out of the emulated latency
  cudaStream_t copy_ = nullptr;
  std::vector<int> peers_;
  std::map<int, Reg> regions_;
  std::deque<Op> ops_;   // [0, done_) complete, [0, issued_) issued, the rest waiting for their time
  size_t issued_ = 0, done_ = 0;
  std::vector<cudaEvent_t> events_;
  std::vector<void*> dsts_;
  std::vector<const void*> srcs_;
  std::vector<size_t> sizes_;
  int64_t link_free_ns_ = 0;
};

}  // namespace

std::unique_ptr<Transport> make_emu(const TransportConfig& cfg) { return std::make_unique<EmuTransport>(cfg); }

}  // namespace mk::net
