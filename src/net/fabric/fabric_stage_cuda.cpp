// mkernel fabric backend: the CUDA side of staging GPU regions through
// pinned host buffers (see fabric_stage.hpp). Only transports that stage
// (a CUDA device and a provider without FI_HMEM) create it, so host-only
// use (CPU tests) never calls CUDA.
#include <cuda_runtime_api.h>

#include <chrono>
#include <thread>
#include <vector>

#include "mkernel/error.hpp"
#include "src/net/fabric/fabric_stage.hpp"
#include "src/runtime/cuda_driver.hpp"

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

// Makes `dev` current for a scope (setup and close may run on any thread).
class DeviceScope {
 public:
  explicit DeviceScope(int dev) {
    if (cudaGetDevice(&old_) != cudaSuccess) old_ = -1;
    MK_CUDA_CHECK(cudaSetDevice(dev));
  }
  ~DeviceScope() {
    if (old_ >= 0) cudaSetDevice(old_);
  }

 private:
  int old_ = -1;
};

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
    MK_CUDA_CHECK(cudaStreamCreateWithFlags(&in_, cudaStreamNonBlocking));
  }
  ~CudaStageOps() override {
    drain();
    DeviceScope g(dev_);
    for (cudaEvent_t e : ev_)
      if (e) cudaEventDestroy(e);
    if (out_) cudaStreamDestroy(out_);
    if (in_) cudaStreamDestroy(in_);
  }

  void* alloc_host(size_t bytes) override {
    DeviceScope g(dev_);
    void* p = nullptr;
    cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
    if (e != cudaSuccess)
      fail("fabric: cannot allocate a pinned host shadow of ", bytes, " bytes for a GPU region: ",
           cuda_error_string(e));
    return p;
  }
  void free_host(void* p) noexcept override {
    if (p) cudaFreeHost(p);
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
      if (o == cudaSuccess && i == cudaSuccess) return true;
      if ((o != cudaSuccess && o != cudaErrorNotReady) || (i != cudaSuccess && i != cudaErrorNotReady)) return false;
      if (std::chrono::steady_clock::now() - t0 > std::chrono::nanoseconds(kDrainBoundNs)) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

 private:
  int dev_;
  cudaStream_t out_ = nullptr;  // GPU -> shadow copies of outgoing writes
  cudaStream_t in_ = nullptr;   // shadow -> GPU copies of incoming writes, then their signals
  std::vector<cudaEvent_t> ev_;  // per request slot: its copy_out finished
};

}  // namespace

std::shared_ptr<StageOps> make_cuda_stage_ops(int cuda_device) {
  return std::make_shared<CudaStageOps>(cuda_device);
}

}  // namespace mk::net::fabric
