// mkernel fabric backend: the CUDA side of staging GPU regions through
// pinned host buffers (see fabric_stage.hpp). Only transports that stage
// (a CUDA device and a provider without FI_HMEM) create it, so host-only
// use (CPU tests) never calls CUDA.
#include <cuda_runtime_api.h>

#include <chrono>
#include <deque>
#include <thread>
#include <vector>

#include "mkernel/error.hpp"
#include "mkernel/knobs.hpp"
#include "src/net/fabric/fabric_stage.hpp"
#include "src/runtime/cuda_driver.hpp"
#include "src/runtime/device_health.hpp"

namespace mk::net::fabric {

AddKernelHooks& add_kernel_hooks() {
  static AddKernelHooks hooks;
  return hooks;
}

StagePlan plan_staging(const WriteReq& w, bool src_staged, bool peer_dst_staged, bool peer_sig_staged) {
  StagePlan p;
  p.copy_out = w.bytes > 0 && src_staged;
  p.note_data = w.bytes > 0 && peer_dst_staged;
  // A signal into a staged signal region must be applied by the peer on its
  // GPU queue: an RMA write or atomic would only reach the host shadow.
  p.note = p.note_data || (w.sig_op != SigOp::None && peer_sig_staged);
  return p;
}

namespace {

class CudaStageOps final : public StageOps {
 public:
  explicit CudaStageOps(int dev) : dev_(dev) {
    const AddKernelHooks& k = add_kernel_hooks();
    if (!k.preload || !k.launch)
      fail("fabric: staging GPU memory needs src/net/fabric/fabric_signal_add.cu in the build (its kernel "
           "applies signal Adds); add src/net/fabric/*.cu to the CMake source glob");
    DeviceScope g(dev_);
    k.preload();
    MK_CUDA_CHECK(cudaStreamCreateWithFlags(&out_, cudaStreamNonBlocking));
    try {  // (a constructor that throws runs no destructor: the first stream is given back here)
      MK_CUDA_CHECK(cudaStreamCreateWithFlags(&in_, cudaStreamNonBlocking));
    } catch (...) {
      teardown_call(cudaStreamDestroy(out_), "a fabric staging stream");
      throw;
    }
  }
  ~CudaStageOps() override {
    drain();
    DeviceScope g(dev_);
    for (cudaEvent_t e : ev_)
      if (e) teardown_call(cudaEventDestroy(e), "a fabric staging event");
    for (const Mark& m : in_marks_) teardown_call(cudaEventDestroy(m.ev), "a fabric staging event");
    for (cudaEvent_t e : spare_)
      if (e) teardown_call(cudaEventDestroy(e), "a fabric staging event");
    if (out_) teardown_call(cudaStreamDestroy(out_), "a fabric staging stream");
    if (in_) teardown_call(cudaStreamDestroy(in_), "a fabric staging stream");
  }

  void* alloc_host(size_t bytes) override {
    DeviceScope g(dev_);
    void* p = nullptr;
    cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
    if (e != cudaSuccess && !cuda_error_is_fatal(e)) cudaGetLastError();  // thrown, not left set
    if (e != cudaSuccess)
      fail("fabric: cannot allocate a pinned host shadow of ", bytes, " bytes for a GPU region: ",
           cuda_error_string(e));
    return p;
  }
  void free_host(void* p) noexcept override {
    if (p) teardown_call(cudaFreeHost(p), "a fabric staging shadow");
  }

  void copy_out(int slot, void* host, const void* dev, size_t bytes) override {
    if (slot >= static_cast<int>(ev_.size())) ev_.resize(slot + 1, nullptr);
    if (!ev_[slot]) MK_CUDA_CHECK(cudaEventCreateWithFlags(&ev_[slot], cudaEventDisableTiming));
    MK_CUDA_CHECK(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, out_));
    MK_CUDA_CHECK(cudaEventRecord(ev_[slot], out_));
  }
  bool copied(int slot) override {
    cudaError_t e = cudaEventQuery(ev_.at(slot));
    if (e == cudaErrorNotReady) return false;
    if (e != cudaSuccess) fail("fabric: GPU -> host staging copy failed: ", cuda_error_string(e));
    return true;
  }

  void copy_in(void* dev, const void* host, size_t bytes) override {
    MK_CUDA_CHECK(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, in_));
  }
  void signal(void* dev_word, SigOp op, uint64_t value) override {
    if (op == SigOp::Set) {
      CUresult r = drv::api().cuStreamWriteValue64(reinterpret_cast<CUstream>(in_),
                                                   reinterpret_cast<CUdeviceptr>(dev_word), value, 0);
      if (r != CUDA_SUCCESS)
        fail("fabric: staged signal Set (cuStreamWriteValue64) failed (CUresult ", int(r), ")");
      return;
    }
    add_kernel_hooks().launch(in_, static_cast<unsigned long long*>(dev_word), value);
  }
  // The receive side's queue is watched as the send side's requests are (the
  // transport's timeout): the deliveries' end is marked by events, so a
  // peer's data that arrived but whose copy into this GPU (or its signal)
  // does not run -- queued behind a kernel that waits for it, in a shared
  // hardware work queue -- is said (stalled) instead of being reported by
  // the waiting kernel as a signal its peer never sent. One event covers the
  // deliveries queued since the last poll (the stream is in order), not one
  // each: the proxy's hot path.
  void deliver(void* dev, const void* host, size_t bytes, void* dev_word, SigOp op, uint64_t value) override {
    StageOps::deliver(dev, host, bytes, dev_word, op, value);
    if (unmarked_ == 0) unmarked_t_ = steady_ns();
    ++unmarked_;
  }
  void progress() override {
    cudaError_t e = mark();
    if (e == cudaSuccess) e = reap();
    if (e == cudaSuccess || e == cudaErrorNotReady) return;
    if (cuda_error_is_fatal(e))
      fail("fabric: staged deliveries into this GPU cannot run: this rank's device failed (", cuda_error_string(e),
           ")");
    fail("fabric: host -> GPU staging copy or signal failed: ", cuda_error_string(e));
  }
  std::string describe() const override {
    if (waiting() == 0) return {};
    return cat("; ", waiting(), " staged deliveries into this GPU not run yet, the oldest queued ",
               (steady_ns() - oldest_ns()) / 1000000, " ms ago");
  }
  Stall stalled() override {
    if (waiting() == 0) return {};
    const int64_t t = oldest_ns(), now = steady_ns();
    if (t <= said_ns_ || now - t <= stall_ns_) return {};
    said_ns_ = now;
    return {cat("a peer's data or signal arrived ", (now - t) / 1000000, " ms ago (half MK_TIMEOUT_MS) and its ",
                "copy into this GPU has not run (", waiting(), " deliveries wait on the proxy's CUDA stream, ",
                "MK_FABRIC_STAGE=cuda): a kernel of this rank waiting for it will time out blaming its peer; ",
                work_queue_cause()),
            true};
  }
  // Bounded, as the interface says (kDrainBoundNs): a copy or
  // add kernel queued behind other work in a shared hardware work queue may
  // not finish (cudaStreamSynchronize would wait for it without end, on the
  // thread that deregisters or closes, with the proxy paused: a helper's
  // read-only audit, 2026-12-04). False then: the shadows stay allocated
  // (until close, which frees them anyway: cudaFreeHost then waits for the
  // copies, outside the proxy's pause); a deregistered region's GPU memory
  // is freed by free_symmetric after its own device sync, so a late copy-in
  // still lands before it.
  bool drain() noexcept override {
    const auto t0 = std::chrono::steady_clock::now();
    for (;;) {
      const cudaError_t o = out_ ? cudaStreamQuery(out_) : cudaSuccess;
      const cudaError_t i = in_ ? cudaStreamQuery(in_) : cudaSuccess;
      if (o == cudaSuccess && i == cudaSuccess) {  // every delivery ran, marked or not
        unmarked_ = 0;
        reap();
        return true;
      }
      if ((o != cudaSuccess && o != cudaErrorNotReady) || (i != cudaSuccess && i != cudaErrorNotReady)) return false;
      if (std::chrono::steady_clock::now() - t0 > std::chrono::nanoseconds(kDrainBoundNs)) return reap(), false;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

 private:
  // Marks the deliveries queued since the last mark with one event on in_;
  // the error if that fails (they stay unmarked). Never throws.
  cudaError_t mark() noexcept {
    if (unmarked_ == 0) return cudaSuccess;
    cudaEvent_t e = nullptr;
    if (!spare_.empty()) {
      e = spare_.back();
      spare_.pop_back();
    } else if (const cudaError_t c = cudaEventCreateWithFlags(&e, cudaEventDisableTiming); c != cudaSuccess) {
      return c;
    }
    if (const cudaError_t r = cudaEventRecord(e, in_); r != cudaSuccess) {
      teardown_call(cudaEventDestroy(e), "a fabric staging event");
      return r;
    }
    in_marks_.push_back(Mark{e, unmarked_t_, unmarked_});
    unmarked_ = 0;
    return cudaSuccess;
  }
  // Deliveries not seen finished, and when the oldest of them was queued.
  size_t waiting() const {
    size_t n = unmarked_;
    for (const Mark& m : in_marks_) n += m.n;
    return n;
  }
  int64_t oldest_ns() const { return in_marks_.empty() ? unmarked_t_ : in_marks_.front().t_ns; }
  // Forgets the finished deliveries, oldest first (the stream is in order):
  // cudaSuccess when none is left, cudaErrorNotReady when one still waits,
  // else the error. Never throws.
  cudaError_t reap() noexcept {
    while (!in_marks_.empty()) {
      const cudaError_t e = cudaEventQuery(in_marks_.front().ev);
      if (e != cudaSuccess) return e;
      spare_.push_back(in_marks_.front().ev);
      in_marks_.pop_front();
    }
    return cudaSuccess;
  }

  int dev_;
  cudaStream_t out_ = nullptr;  // GPU -> shadow copies of outgoing writes
  cudaStream_t in_ = nullptr;   // shadow -> GPU copies of incoming writes, then their signals
  std::vector<cudaEvent_t> ev_;  // per request slot: its copy_out finished
  struct Mark {
    cudaEvent_t ev;  // recorded on in_ after its deliveries
    int64_t t_ns;    // when the first of them was queued
    size_t n;        // how many
  };
  std::deque<Mark> in_marks_;      // deliveries queued on in_, oldest first, not seen finished
  std::vector<cudaEvent_t> spare_;  // finished marks' events, for reuse
  size_t unmarked_ = 0;             // deliveries queued since the last mark
  int64_t unmarked_t_ = 0;          // when the first of them was queued
  const int64_t stall_ns_ = knob_int(Knob::MK_TIMEOUT_MS) * 500000;  // half the kernels' wait bound
  int64_t said_ns_ = -1;  // when stalled() last spoke: once per stalled delivery
};

}  // namespace

std::shared_ptr<StageOps> make_cuda_stage_ops(int cuda_device) {
  return std::make_shared<CudaStageOps>(cuda_device);
}

}  // namespace mk::net::fabric
