// mkernel: `emu`, an emulated RDMA NIC between GPUs of one host (2 GPUs acting
// as 2 nodes with MK_RANKS_PER_NODE=1). A write is a one-sided copy (or, for
// a few bytes, stream memory writes) into the peer GPU's memory (through the
// symmetric heap's host-wide mapping) on a stream owned by the proxy thread;
// its signal is written after the data in stream order (a stream memory op
// for Set, a one-thread kernel doing a system-scope atomic for Add), so it is
// never visible before the data.
//
// Pacing: one emulated link per GPU at MK_EMU_GBPS with MK_EMU_LATENCY_US.
// A write of B bytes occupies the link for B / rate after the link is free,
// and must not be visible before `latency` after it left the link. The real
// path (host calls, copy engine, stream memory ops) takes time of its own,
// measured once at start for each of the two paths below (real_*_ns_); an op
// is issued at delivery - real path, so the emulated latency is
// max(configured, real) rather than their sum. name() reports both real
// paths as measured, even when they exceed the configured latency. Reports
// made with it say "emulated".
//
// Two paths for the data of a write, both ordered before its signal:
// - inline: a PUT_INLINE (<= 16 bytes, device/net/cmd.hpp) to a 4-byte
//   aligned destination is written as stream memory ops carrying the bytes
//   (cuStreamBatchMemOp WRITE_VALUE entries): no copy engine, no kernel, one
//   host call for data, signal and completion together. The GPU read the
//   source when it pushed the command, so nothing here reads it.
// - copy: everything else is a copy on the copy stream (one
//   cudaMemcpyBatchAsync per batch).
// Ordering: a batch's signals follow all of its data. Copies: stream order
// runs a signal op only after the copy before it completed, and a copy
// completes once its bytes are written (as before this path existed). Inline
// data words are posted writes of the stream's front end, and the v2 stream
// memory op API (the one the driver entry points give) gives a WRITE_VALUE no
// memory fence of its own that could be relied on (its
// CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER flag is "not supported in the v2
// API"; an explicit CU_STREAM_MEM_OP_BARRIER is): so when a batch has inline
// words, one system-scope CU_STREAM_MEM_OP_BARRIER follows them, before the
// first signal (set as a memory op, or add as a kernel) and after any copies
// of the batch; every inline word is visible at the peer before any signal
// write of the batch is issued. One barrier costs about a microsecond of GPU
// time (a round trip over NVLink), once per batch.
//
// Batching: at most one batch of ops is in flight on the stream; when it
// completes, every op whose time has come goes out as the next batch (its
// copies, its inline data words, then its signals in op order: adds coalesced
// into one kernel, sets as stream memory ops, then a completion word). Each
// stream operation costs microseconds of GPU-side latency, so batching is
// what lets small messages approach the emulated rate; an idle link still
// sends a lone op at once.
//
// Completion: the batch's last stream op (a memory op, or the add kernel)
// writes the batch's sequence number into a word of pinned host memory, which
// poll() reads (a plain load; an event query costs a microsecond of host time
// per poll). A stream that failed never writes it: poll() asks the stream for
// errors now and then while a batch is outstanding. A batch with data and
// signal adds also writes its number into a second word before the add
// kernel (in the memory ops that precede it), so that a batch which does not
// complete is reported (in_flight) as stuck before or past its data
// (bench/results/emu-work-queue-20261203.md).
//
// NOTES: every kernel the proxy may launch (the signal-add kernel, and the
// runtime's own copy kernels for unaligned copies) is loaded before any user
// kernel can wait on the network: with CUDA's lazy loading, a first launch
// from the proxy can wait for the running user kernel, which waits for this
// very signal (a deadlock). The same holds for the other threads of the
// process: a kernel load there (cuBLAS loads one the first time it meets a
// shape, whatever CUDA_MODULE_LOADING says) waits for the running kernels
// and blocks this proxy's copy call until they end; a kernel waiting on this
// proxy then ends only by timing out (seen in the 2x1 AG benchmark: bench/
// results/mkbench-20261130T1218Z-2x1-ag-hang-proxy-in-copy-call.log). Such
// libraries must meet their shapes before a kernel waits on the network;
// the warning below names this when a copy call blocks. The other cause,
// measured (mkbench api_block, bench/results/emu-pageable-20261201.md): a
// copy into pageable host memory on the legacy default stream (PyTorch's
// `.cpu()` / `.item()` on its default stream) issued while the kernel runs
// holds the context's submission lock until that kernel ends: every copy and
// kernel launch of every other thread of the process waits (memory ops and
// stream queries do not; the same copy on a non-blocking stream, or into
// pinned memory, or after a synchronize, blocks nothing). A second context
// would not wait, but its copies and kernels then time-slice with the user's
// kernel (2.3 ms a round trip, same table), so the proxy keeps the primary
// context and users keep such copies off the legacy stream while an op runs
// (README, Network). Real NICs (verbs, fabric without staging) make no copies
// or launches on the proxy; EFA's signal adds and fabric's staging do.
// Hardware work queues (found 2026-12-03, bench/results/emu-work-queue-
// 20261203.md): the driver maps the process's streams onto a few hardware
// work queues, in order within each. When the proxy's stream shares one with
// a stream that has work queued behind a kernel waiting on this network (a
// user's next copy or kernel after the op), the proxy's copy, memory op or add
// kernel waits behind that work, which waits for the kernel, which waits for
// the proxy: it ends only at the timeouts. With CUDA_DEVICE_MAX_CONNECTIONS=1
// (one queue) it happens every time; under MPS (clients share one pool of
// connections) most runs; with the default 8 queues and no MPS it has not
// been seen. A stream of the greatest priority does not avoid it (measured).
// The way out (not built): a data path that makes no such call while a
// kernel waits. A copy kernel launched beside the fused kernel would be a
// launch into the same queues; the delivery has to run inside a kernel that
// is already resident: a role of the op's own kernel (on the SM the grid
// leaves to emu) that reads descriptors the proxy writes into mapped host
// memory, copies over the host-wide mapping, adds the signals itself and
// stays until every command its kernel posted is delivered (bounded).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <vector>

#include "mkernel/error.hpp"
#include "mkernel/knobs.hpp"
#include "mkernel/topology.hpp"
#include "src/net/transport.hpp"
#include "src/runtime/cuda_driver.hpp"

namespace mk::net {

namespace {

// Signal adds of one issue batch, applied after the batch's copies (stream
// order); passed by value so a batch costs one launch and no copy. When the
// launch ends the batch, it also writes the batch's completion word.
struct AddBatch {
  static constexpr int kMax = 32;
  unsigned long long* addr[kMax];
  unsigned long long delta[kMax];
  int n;
  unsigned long long* done;  // completion word (pinned host), or nullptr
  unsigned long long done_value;
};

__global__ void emu_signal_add_batch(AddBatch b) {
  if (static_cast<int>(threadIdx.x) < b.n) atomicAdd_system(b.addr[threadIdx.x], b.delta[threadIdx.x]);
  __threadfence_system();
  __syncthreads();
  if (threadIdx.x == 0 && b.done) *reinterpret_cast<volatile unsigned long long*>(b.done) = b.done_value;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

constexpr size_t kMaxQueuedOps = 8192;
constexpr unsigned kMaxMemOpsPerCall = 128;  // cuStreamBatchMemOp takes fewer than 256

double round_us(int64_t ns) { return static_cast<double>((ns + 50) / 100) / 10.0; }

class EmuTransport final : public Transport {
 public:
  explicit EmuTransport(const TransportConfig& cfg) : cfg_(cfg) {
    if (cfg.cuda_device < 0) fail("emu: the emulated NIC moves GPU memory and needs a CUDA device");
    bytes_per_ns_ = static_cast<double>(knob_int(Knob::MK_EMU_GBPS));  // GB/s == bytes/ns
    latency_ns_ = knob_int(Knob::MK_EMU_LATENCY_US) * 1000;
    MK_CUDA_CHECK(cudaSetDevice(cfg.cuda_device));
    MK_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking));
    void* host = nullptr;
    MK_CUDA_CHECK(cudaHostAlloc(&host, 64, cudaHostAllocMapped | cudaHostAllocPortable));
    done_word_ = static_cast<uint64_t*>(host);
    done_word_[0] = done_word_[1] = 0;
    void* dev = nullptr;
    MK_CUDA_CHECK(cudaHostGetDevicePointer(&dev, host, 0));
    done_word_dev_ = dev;
    calibrate();
  }
  ~EmuTransport() override { close(); }

  std::string name() const override {
    if (!inline_ok_)
      return cat("emu (emulated NIC: ", bytes_per_ns_, " GB/s, ", latency_ns_ / 1000, " us; real path ",
                 round_us(real_copy_ns_), " us copy, no inline path)");
    return cat("emu (emulated NIC: ", bytes_per_ns_, " GB/s, ", latency_ns_ / 1000, " us; real path ",
               round_us(real_inline_ns_), " us inline, ", round_us(real_copy_ns_), " us copy)");
  }
  bool emulated() const override { return true; }
  bool proxy_calls_cuda() const override { return true; }  // every write is a copy on the proxy's stream
  uint32_t inline_bytes() const override { return inline_ok_ ? static_cast<uint32_t>(kMaxInlineBytes) : 0; }

  // The outstanding batch: what it holds and how far its stream got (the
  // stage word, see Completion), and the known causes of a stall.
  std::string in_flight() const override {
    if (issued_ == done_ || !done_word_) return {};
    const uint64_t done = __atomic_load_n(done_word_, __ATOMIC_ACQUIRE);
    const uint64_t staged = __atomic_load_n(done_word_ + 1, __ATOMIC_ACQUIRE);
    const std::string what = cat("; emu: batch ", batch_seq_, " (", issued_ - done_, " requests: ", batch_copies_,
                                 " copies of ", batch_bytes_, " bytes, ", batch_inline_, " inline, ", batch_adds_,
                                 " signal adds) issued ", (now_ns() - batch_issued_ns_) / 1000000, " ms ago");
    if (done >= batch_seq_) return cat(what, " completed just now");
    const bool data = batch_copies_ || batch_inline_;
    const char* where = !batch_adds_                    ? "in its copies or memory ops (it has no add kernel)"
                        : !data || staged >= batch_seq_ ? "past its data, in its signals (an add kernel or memory ops)"
                                                        : "before its add kernel (copies, inline words or memory ops)";
    return cat(what, " is stuck ", where, " (completion word ", done, ", stage word ", staged,
               "). Known causes: ", work_queue_cause(), "; no SM free for its kernels (MK_NET_FREE_SMS); a kernel "
               "load or a pageable copy on the legacy stream (README, Network)");
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
      // Without peer access enabled in this context the runtime stages
      // copies to another GPU through host memory (slow, and blocking).
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
    if (w.has_inline && w.bytes > kMaxInlineBytes)
      fail("emu: inline write of ", w.bytes, " bytes (at most ", kMaxInlineBytes, ")");
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
    // Stream memory ops write 4-byte words: the inline path needs 4-byte
    // granules at a 4-byte aligned destination (else: a copy from src_off).
    const uintptr_t dst = reinterpret_cast<uintptr_t>(reg.peer_base.at(w.peer)) + w.dst_off;
    op.inline_data = inline_ok_ && w.has_inline && w.bytes % 4 == 0 && dst % 4 == 0;
    const int64_t real = (w.bytes == 0 || op.inline_data) ? real_inline_ns_ : real_copy_ns_;
    op.deliver_ns = link_free_ns_ + std::max<int64_t>(0, latency_ns_ - real);
    ops_.push_back(op);
    return true;
  }

  int poll(Completion* out, int max) override {
    // The outstanding batch is complete when its completion word arrived.
    if (issued_ > done_) {
      if (__atomic_load_n(done_word_, __ATOMIC_ACQUIRE) >= batch_seq_) {
        done_ = issued_;
      } else if ((++idle_polls_ & 1023u) == 0) {
        cudaError_t e = cudaStreamQuery(copy_);
        if (e == cudaSuccess) {
          done_ = issued_;  // idle stream: its last op ran
        } else if (e != cudaErrorNotReady) {
          fail("emu: write to rank ", ops_[issued_ - 1].w.peer, " failed: ", cuda_error_string(e));
        }
      }
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
    ops_.clear();
    issued_ = done_ = 0;
    cudaStreamDestroy(copy_);
    copy_ = nullptr;
    if (done_word_) cudaFreeHost(done_word_);
    done_word_ = nullptr;
  }

 private:
  struct Reg {
    Region r;
    std::map<int, char*> peer_base;
  };
  struct Op {
    WriteReq w;
    int64_t deliver_ns = 0;
    bool inline_data = false;  // data goes as stream memory ops (w.inline_data)
  };

  // Copies of odd sizes and alignments, so that the runtime loads its copy
  // kernels for this path now rather than behind a waiting user kernel.
  void warm_copies(char* dst, const char* src, size_t room) {
    for (size_t off : {size_t(0), size_t(1), size_t(3), size_t(8)})
      for (size_t len : {size_t(1), size_t(7), size_t(13), size_t(24), size_t(64)})
        if (off + len <= room)
          MK_CUDA_CHECK(cudaMemcpyAsync(dst + off, src + ((off + 5) % 16), len, cudaMemcpyDeviceToDevice, copy_));
  }

  // A WRITE_VALUE (default flags; see Ordering above).
  void push_write(const void* addr, uint64_t value, bool wide) {
    CUstreamBatchMemOpParams p{};
    p.writeValue.operation = wide ? CU_STREAM_MEM_OP_WRITE_VALUE_64 : CU_STREAM_MEM_OP_WRITE_VALUE_32;
    p.writeValue.address = reinterpret_cast<CUdeviceptr>(addr);
    if (wide)
      p.writeValue.value64 = value;
    else
      p.writeValue.value = static_cast<cuuint32_t>(value);
    p.writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
    memops_.push_back(p);
  }

  // A system-scope memory barrier: every earlier write of the stream is
  // visible everywhere before any later one is issued.
  void push_barrier() {
    CUstreamBatchMemOpParams p{};
    p.memoryBarrier.operation = CU_STREAM_MEM_OP_BARRIER;
    p.memoryBarrier.flags = CU_STREAM_MEMORY_BARRIER_TYPE_SYS;
    memops_.push_back(p);
  }

  void flush_memops() {
    for (size_t i = 0; i < memops_.size(); i += kMaxMemOpsPerCall) {
      const unsigned n = static_cast<unsigned>(std::min<size_t>(kMaxMemOpsPerCall, memops_.size() - i));
      CUresult r = drv::api().cuStreamBatchMemOp(reinterpret_cast<CUstream>(copy_), n, memops_.data() + i, 0);
      if (r != CUDA_SUCCESS) fail("emu: stream memory operations failed (CUresult ", int(r), ")");
    }
    memops_.clear();
  }

  // The inline bytes of op w as 4-byte words at dst (4-byte aligned), 8 bytes
  // at a time where aligned.
  void push_inline_data(char* dst, const WriteReq& w) {
    const unsigned words = static_cast<unsigned>(w.bytes / 4);
    auto word = [&](unsigned k) { return (w.inline_data[k / 2] >> (32 * (k % 2))) & 0xffffffffull; };
    for (unsigned k = 0; k < words;) {
      char* a = dst + 4 * k;
      if (reinterpret_cast<uintptr_t>(a) % 8 == 0 && k + 1 < words) {
        push_write(a, word(k) | (word(k + 1) << 32), true);
        k += 2;
      } else {
        push_write(a, word(k), false);
        k += 1;
      }
    }
  }

  // Waits (bounded) for the completion word to reach `seq`.
  void wait_done(uint64_t seq, const char* what) {
    const int64_t t0 = now_ns();
    while (__atomic_load_n(done_word_, __ATOMIC_ACQUIRE) < seq) {
      if (now_ns() - t0 > 5'000'000'000ll) {
        cudaError_t e = cudaStreamQuery(copy_);
        fail("emu: ", what, " did not complete in 5 s (stream: ", cuda_error_string(e), ")");
      }
    }
  }

  // Loads the add kernel and measures, from the host's first call until the
  // completion word arrives, the two real paths of a small write + signal
  // (median of 21 after 3 warm-ups, on local memory): stream memory ops alone
  // (inline data) and a copy followed by them. The peer is not connected
  // yet; writes over NVLink to it take somewhat longer, so this errs on the
  // short side. Kept as measured (never clamped): when the real path exceeds
  // the configured latency, the emulated latency is the real one, and name()
  // says so.
  void calibrate() {
    cudaFuncAttributes attr{};
    MK_CUDA_CHECK(cudaFuncGetAttributes(&attr, emu_signal_add_batch));
    void* scratch = nullptr;
    MK_CUDA_CHECK(cudaMalloc(&scratch, 4096));
    char* p = static_cast<char*>(scratch);
    warm_copies(p + 1024, p, 512);
    MK_CUDA_CHECK(cudaStreamSynchronize(copy_));
    auto measure = [&](bool copy) {
      std::vector<int64_t> t;
      for (int i = 0; i < 24; ++i) {
        const int64_t t0 = now_ns();
        if (copy) MK_CUDA_CHECK(cudaMemcpyAsync(p + 2048, p, 64, cudaMemcpyDeviceToDevice, copy_));
        else push_write(p + 2048, uint64_t(i), true);
        if (!copy) push_barrier();  // as issue_batch() does it
        push_write(p + 4088, uint64_t(i), true);
        push_write(done_word_dev_, ++batch_seq_, true);
        flush_memops();
        wait_done(batch_seq_, "calibration");
        if (i >= 3) t.push_back(now_ns() - t0);  // the first ones warm up
      }
      std::sort(t.begin(), t.end());
      return t[t.size() / 2];
    };
    try {
      real_inline_ns_ = measure(false);
    } catch (const Error& e) {
      // This driver refuses the stream memory ops of the inline path: every
      // write takes the copy path instead (correct, only slower).
      memops_.clear();
      cudaGetLastError();
      inline_ok_ = false;
      log(LogLevel::Warn, cat("emu: small puts go as copies: ", e.what()));
    }
    real_copy_ns_ = measure(true);
    AddBatch one{};
    one.addr[0] = reinterpret_cast<unsigned long long*>(p + 4080);
    one.delta[0] = 1;
    one.n = 1;
    emu_signal_add_batch<<<1, 32, 0, copy_>>>(one);
    MK_CUDA_CHECK(cudaGetLastError());
    MK_CUDA_CHECK(cudaStreamSynchronize(copy_));
    cudaFree(scratch);
  }

  // Ops [first, last): their copies, their inline data words and a barrier,
  // the stage word when any op adds to a signal (see Completion), then their
  // signals in op order (adds coalesced into one launch, sets as
  // stream memory ops), then the completion word; stream order and the
  // barrier put every signal after its data (see Ordering above).
  void issue_batch(size_t first, size_t last) {
    dsts_.clear();
    srcs_.clear();
    sizes_.clear();
    memops_.clear();
    for (size_t i = first; i < last; ++i) {
      const WriteReq& w = ops_[i].w;
      if (!w.bytes || ops_[i].inline_data) continue;
      const Reg& reg = regions_.at(w.region);
      dsts_.push_back(reg.peer_base.at(w.peer) + w.dst_off);
      srcs_.push_back(static_cast<char*>(reg.r.base) + w.src_off);
      sizes_.push_back(w.bytes);
    }
    if (!sizes_.empty()) {
      // One runtime call for all copies of the batch: a copy call per op costs
      // microseconds of host time each, which caps small-message throughput.
      const int64_t t0 = now_ns();
      // PreferOverlapWithCompute (a hint: keep these copies off the SMs).
      // Behind a persistent kernel that leaves one SM free, ring attention at
      // S_local 2k ran 3.5 ms a call whatever MK_EMU_GBPS said, 1.1 ms with
      // half the SMs free; in one back-to-back A/B the hint cut 2.85 to 1.04
      // ms, but later runs with it took 2.7-5.5 ms (GPU-side command posts
      // then took ~180 us each): the rest of that slowness is open.
      // bench/results/emu-copy-path-20261201T0220Z.md.
      cudaMemcpyAttributes attr{};
      attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
      attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
      size_t attr_idx = 0;
      MK_CUDA_CHECK(cudaMemcpyBatchAsync(dsts_.data(), srcs_.data(), sizes_.data(), sizes_.size(), &attr, &attr_idx,
                                         1, copy_));
      const int64_t took = now_ns() - t0;
      if (took > 100000000 && !warned_slow_copy_) {
        warned_slow_copy_ = true;
        log(LogLevel::Warn,
            cat("emu: issuing ", sizes_.size(), " copies (first ", sizes_[0], " bytes) blocked the proxy for ",
                took / 1000000, " ms in the CUDA runtime, behind another thread of this process that waited for "
                "a kernel waiting on the network: a copy into pageable host memory on the legacy default stream "
                "(PyTorch: tensor.cpu() or .item() on the default stream; synchronize first, or run on a side "
                "stream), or a first kernel load (e.g. cuBLAS's first call for a shape; make it once before) "
                "(src/net/emu NOTES)"));
      }
    }
    batch_copies_ = sizes_.size();
    batch_bytes_ = 0;
    for (size_t b : sizes_) batch_bytes_ += b;
    batch_adds_ = batch_inline_ = 0;
    for (size_t i = first; i < last; ++i) {
      batch_adds_ += ops_[i].w.sig_op == SigOp::Add;
      batch_inline_ += ops_[i].inline_data;
    }
    batch_issued_ns_ = now_ns();
    // The inline data words (after the copies in stream order), then one
    // barrier before any signal. Then adds and memory ops alternate in op
    // order: each kind is flushed before the other is issued, so at most one
    // is pending.
    for (size_t i = first; i < last; ++i)
      if (ops_[i].inline_data)
        push_inline_data(regions_.at(ops_[i].w.region).peer_base.at(ops_[i].w.peer) + ops_[i].w.dst_off, ops_[i].w);
    if (!memops_.empty()) push_barrier();
    // The stage word (see Completion): written once the copies, inline words
    // and barrier before it are; only when there are both data and adds (a
    // batch of signals alone has nothing to tell apart). It costs batches of
    // copies and adds one more cuStreamBatchMemOp call (not in calibrate()).
    if (batch_adds_ && (batch_copies_ || batch_inline_))
      push_write(static_cast<uint64_t*>(done_word_dev_) + 1, batch_seq_ + 1, true);
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
        push_write(sig, w.sig_value, true);
        continue;
      }
      flush_memops();  // data words and earlier sets go first
      if (adds.n > 0 && adds.addr[adds.n - 1] == sig) {
        adds.delta[adds.n - 1] += w.sig_value;
        continue;
      }
      if (adds.n == AddBatch::kMax) flush_adds();
      adds.addr[adds.n] = sig;
      adds.delta[adds.n] = w.sig_value;
      ++adds.n;
    }
    ++batch_seq_;
    if (adds.n > 0) {  // the add launch ends the batch: it writes the completion word
      adds.done = static_cast<unsigned long long*>(done_word_dev_);
      adds.done_value = batch_seq_;
      flush_adds();
    } else {
      push_write(done_word_dev_, batch_seq_, true);
      flush_memops();
    }
    issued_ = last;
    idle_polls_ = 0;
  }

  TransportConfig cfg_;
  double bytes_per_ns_ = 50;
  int64_t latency_ns_ = 3000;
  // Measured issue-to-complete time of a small write + signal, taken out of
  // the emulated latency: stream memory ops alone, and a copy before them.
  int64_t real_inline_ns_ = 0, real_copy_ns_ = 0;
  bool inline_ok_ = true;  // the driver takes the inline path's memory ops
  bool warned_slow_copy_ = false;
  cudaStream_t copy_ = nullptr;
  uint64_t* done_word_ = nullptr;  // pinned host: sequence of the last completed batch
  void* done_word_dev_ = nullptr;  // the same, as the GPU addresses it
  uint64_t batch_seq_ = 0;         // sequence of the last issued batch
  // The last issued batch, for in_flight().
  size_t batch_copies_ = 0, batch_bytes_ = 0, batch_inline_ = 0, batch_adds_ = 0;
  int64_t batch_issued_ns_ = 0;
  uint32_t idle_polls_ = 0;
  std::vector<int> peers_;
  std::map<int, Reg> regions_;
  std::deque<Op> ops_;  // [0, done_) complete, [0, issued_) issued, the rest waiting for their time
  size_t issued_ = 0, done_ = 0;
  std::vector<void*> dsts_;
  std::vector<const void*> srcs_;
  std::vector<size_t> sizes_;
  std::vector<CUstreamBatchMemOpParams> memops_;
  int64_t link_free_ns_ = 0;
};

}  // namespace

std::unique_ptr<Transport> make_emu(const TransportConfig& cfg) { return std::make_unique<EmuTransport>(cfg); }

}  // namespace mk::net
