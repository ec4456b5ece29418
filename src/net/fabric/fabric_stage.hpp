// mkernel fabric backend: staging GPU regions through pinned host buffers
// when the provider has no FI_HMEM (DESIGN.md §5: "GPU memory through
// FI_HMEM where the provider supports it, else staged through pinned host
// buffers").
//
// A staged region is a GPU region whose pinned host shadow (same size) is
// what libfabric registers and what peers write into. The GPU side of
// staging is behind StageOps so that the fabric data path holds no CUDA call
// (CPU tests run it with a host-memory fake, see tests/cpu/test_fabric.cpp);
// the CUDA implementation is make_cuda_stage_ops() (fabric_stage_cuda.cpp).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "device/net/delivery.hpp"
#include "src/net/transport.hpp"

namespace mk::net::fabric {

// The staging ops' clock (stall reports).
inline int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// GPU-side operations of staging. Called with the transport's lock held, from
// the thread that calls post()/poll() (the proxy thread, whose current CUDA
// device is the transport's), or, for alloc_host/free_host/drain/retire,
// from the thread that sets up, deregisters a region or closes (still with
// the transport's lock held).
class StageOps {
 public:
  virtual ~StageOps() = default;
  // Pinned host memory for a shadow; registered with libfabric as host memory.
  virtual void* alloc_host(size_t bytes) = 0;
  virtual void free_host(void* p) noexcept = 0;
  // Sender: starts copying `bytes` from GPU `dev` to host `host`
  // asynchronously, in issue order with earlier copy_out calls, tagged with
  // `slot` (a request slot; one copy per slot at a time).
  virtual void copy_out(int slot, void* host, const void* dev, size_t bytes) = 0;
  // True once slot's copy_out finished (its bytes are in host memory).
  // Throws mk::Error when the copy failed. Never blocks.
  virtual bool copied(int slot) = 0;
  // Receiver: copies host -> GPU, then signal() applies a signal to the
  // 8-byte GPU word `dev_word`, both asynchronously on ONE in-order queue
  // (the CUDA ops; the agents' ops have no such queue and refuse both: use
  // deliver). NOTES: this queue order is what makes a signal visible only
  // after the data copied in before it (the staged ordering guarantee).
  virtual void copy_in(void* dev, const void* host, size_t bytes) = 0;
  virtual void signal(void* dev_word, SigOp op, uint64_t value) = 0;
  // Receiver, one staged write: its bytes host -> GPU (none when bytes is 0),
  // then its signal (none when op is None), visible only after those bytes.
  // The transport contract needs no more order than that (src/net/
  // transport.hpp); copy_in then signal gives it. The only order between
  // separate deliver calls' signals and bytes: none.
  virtual void deliver(void* dev, const void* host, size_t bytes, void* dev_word, SigOp op, uint64_t value) {
    if (bytes) copy_in(dev, host, bytes);
    if (op != SigOp::None) signal(dev_word, op, value);
  }
  // Called at every poll() of the transport: work that waits for room or
  // completion moves on. Never blocks.
  virtual void progress() {}
  // The delivery ring the kernels' agents serve (agent staging), else none.
  virtual DeliveryRing delivery_ring() const { return {}; }
  // Whether the calls above issue CUDA work from the proxy thread.
  virtual bool calls_cuda() const { return true; }
  // What the oldest unfinished copy or delivery waits for, for reports
  // ("; ..."); empty: nothing to add.
  virtual std::string describe() const { return {}; }
  // This rank's kernels just pushed a command (the transport's post()): a
  // kernel of the rank runs now.
  virtual void pushed() {}
  // Once per stalled delivery: a line saying that the oldest delivery has
  // waited longer than it should for whoever makes it (a kernel's agent);
  // empty otherwise. warn: a kernel of this rank ran meanwhile (it pushed a
  // command since, or the stalled work is its own staging copy), so the
  // agent should have come: a warning; else the rank is simply not there
  // yet (a peer ahead of it sent early: ranks out of step), said at Info
  // level. Never blocks.
  struct Stall {
    std::string line;
    bool warn = true;
  };
  virtual Stall stalled() { return {}; }
  // Waits (bounded: kDrainBoundNs) for every issued copy and signal (close);
  // never throws. False: some were not made, and a shadow they read must
  // stay allocated.
  static constexpr int64_t kDrainBoundNs = 1000000000;
  virtual bool drain() noexcept = 0;
  // A shadow [host, host + bytes) goes away (its region is deregistered):
  // the deliveries from it not made yet are dropped where the ops can (the
  // agents': they then deliver nothing, not even their signal, so that no
  // later kernel's agent writes into the region's former GPU memory). Never
  // throws. dropped: the deliveries dropped (data that arrived for the
  // region and that no kernel of this rank waited for). Who frees the
  // shadow: the caller (free_host) when `freeable` (no copy touches it any
  // more), or these ops when `deferred` (once the copies that may still
  // touch it are done: at a later retire or free_retired(), else at their
  // destruction; never in progress(), which runs on the proxy thread while
  // a kernel may run, and cudaFreeHost may wait for that kernel); neither:
  // some copies were not made and the shadow must stay allocated until
  // close. By default (the CUDA ops, whose copies are queued on streams
  // already and cannot be dropped): drain(), bounded.
  struct Retired {
    bool freeable = true;
    bool deferred = false;
    size_t dropped = 0;
  };
  virtual Retired retire(void* host, size_t bytes) noexcept {
    (void)host, (void)bytes;
    return {drain(), false, 0};
  }
  // Frees the deferred shadows that nothing touches any more (retire does it
  // too). Not for the proxy thread while kernels may run (see retire).
  virtual void free_retired() noexcept {}
};

// CUDA streams on `cuda_device` (non-blocking, so that they never wait for a
// user kernel on the legacy stream), pinned shadows by cudaHostAlloc, Set by
// cuStreamWriteValue64, Add by a one-thread kernel preloaded here (CUDA lazy
// loading would otherwise load it at its first launch, which can wait behind
// the user kernel that waits for this very signal). Throws mk::Error.
std::shared_ptr<StageOps> make_cuda_stage_ops(int cuda_device);

// The kernels' delivery agents (device/net/agent.cuh) make the copies and
// signals instead: the proxy publishes them into a delivery ring and issues
// no CUDA work at all after setup, so nothing the process queues or loads can
// stand in its way (the hazards of README's "Proxies that call CUDA"). Every
// kernel that pushes commands runs the agent (NetCtx::agent), and staged data
// for a rank is delivered only while some kernel of it runs one: a kernel
// that waits for network data must run one too (net::with_agent; the ops'
// kernels all do). A delivery left waiting longer than half MK_TIMEOUT_MS is
// said once (stalled()): a warning when a kernel of the rank ran meanwhile.
// `label` names them in reports ("fabric staging", "efa signals").
std::shared_ptr<StageOps> make_agent_stage_ops(int cuda_device, const char* label = "fabric staging");
// The same on a ring the caller made (zeroed, outliving the ops): CPU tests,
// with a host thread in the agents' place; shadows from `alloc` / `free`
// (default: pinned by CUDA, as above).
struct HostMemoryHooks {
  std::function<void*(size_t)> alloc;
  std::function<void(void*)> free;
};
std::shared_ptr<StageOps> make_agent_stage_ops_on(const DeliveryRing& ring, HostMemoryHooks host = {});
// MK_FABRIC_STAGE: agent (default) or cuda.
std::shared_ptr<StageOps> make_stage_ops(int cuda_device, const char* label = "fabric staging");

// The signal-Add kernel is compiled by nvcc in fabric_signal_add.cu, which
// fills these hooks during static initialisation of libmkernel.so. They stay
// null when that file is not part of the build; make_cuda_stage_ops() then
// fails with a clear message instead of the library failing to link.
struct AddKernelHooks {
  void (*preload)() = nullptr;  // loads the kernel (cudaFuncGetAttributes); throws
  // Enqueues word += delta (system-scope atomic) on `stream` (a cudaStream_t).
  void (*launch)(void* stream, unsigned long long* word, unsigned long long delta) = nullptr;
};
AddKernelHooks& add_kernel_hooks();

// What a request needs because of staging (pure; unit-tested).
struct StagePlan {
  bool copy_out = false;   // source is a staged GPU region: GPU -> shadow first
  bool note = false;       // the peer must be told (kMsgNote) instead of a plain signal
  bool note_data = false;  // the note carries the data range (peer's region is staged)
};
// src_staged: this rank's region w.region is staged; peer_dst_staged: the
// peer's region w.region is; peer_sig_staged: the peer's region 0 is.
StagePlan plan_staging(const WriteReq& w, bool src_staged, bool peer_dst_staged, bool peer_sig_staged);

}  // namespace mk::net::fabric
