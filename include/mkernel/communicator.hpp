// mkernel: the communicator. Creating one is collective: it rendezvouses the
// ranks, groups them into nodes, selects this rank's GPU, and sets up the
// symmetric control region (signal pool + abort words) every kernel uses.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "device/ctx.hpp"
#include "mkernel/bootstrap.hpp"
#include "mkernel/comm_plan.hpp"
#include "mkernel/launch_env.hpp"
#include "mkernel/launch_order.hpp"
#include "mkernel/signal_lease.hpp"
#include "mkernel/symmetric.hpp"
#include "mkernel/topology.hpp"

namespace mk {

class SymmetricHeap;
class Network;
class SignalPool;

class Communicator {
 public:
  // NCCL style: `id` from get_unique_id() on one rank, shared by the caller.
  // device < 0: keep the current CUDA device.
  Communicator(int rank, int world, const UniqueId& id, int device = -1);
  // From the launcher's environment (torchrun/mkrun, OpenMPI, Slurm).
  // device < 0: LOCAL_RANK-style local rank modulo the visible GPUs.
  explicit Communicator(const LaunchInfo& launch, int device = -1);
  // The same; without a launcher, a single rank (device < 0: the current CUDA device).
  static std::unique_ptr<Communicator> from_env(int device = -1);
  // Collective. Destroy every plan made on it first (AgGemm, GemmRs, GemmAr, RingAttention: they hold a reference
  // to it and release their buffers and signal words through it); plans still alive are released here, newest
  // first, with a warning, and their calls fail afterwards (mkernel/comm_plan.hpp). The C ABI's mk_comm_destroy
  // refuses while a plan handle is open; Python's close() closes its plans first.
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return topo_.rank; }
  int world() const { return topo_.world; }
  int device() const { return device_; }
  const Topology& topology() const { return topo_; }
  Bootstrap& bootstrap() { return *bs_; }

  // Collective. Freed by free_symmetric (collective) or with the communicator.
  SymmetricBuffer& alloc_symmetric(size_t bytes);
  void free_symmetric(SymmetricBuffer& buf);
  bool uses_vmm() const;
  // Bytes of symmetric memory this rank holds now (each buffer as mapped,
  // rounded up to the allocation granularity); MK_SYMM_MAX_BYTES bounds it.
  size_t symmetric_bytes() const;

  // The device-side context (signals, abort words, diagnostics, timeout).
  const DeviceCtx& device_ctx() const { return ctx_; }
  // Reserves `n` consecutive signal words, all 0; every rank must make the
  // same sequence of reservations and releases (plans do). Returns the first
  // index. Runs released earlier are reused first (first fit), so a process
  // that makes and destroys plans for ever new shapes stays within the pool.
  int reserve_signals(int n);
  // Gives back a run reserve_signals handed out, whole: zeroed here, then
  // free for a later reservation. Collective in effect: call it on every rank
  // in the same order, only once no kernel of any rank and no network
  // operation can touch the words any more (plans: after free_symmetric's
  // exchange; every signal a plan's call sends, across nodes too, is awaited
  // within that call: bench/results/cross-node-signals-audit-20261204.md),
  // then pass a barrier before any rank writes into words it reserves
  // afterwards (SignalLease does). Not a run held now: mk::Error, nothing
  // changed.
  void release_signals(int base, int n);
  // Signal words held now (reserved, not released).
  int signals_in_use() const;
  // A new epoch for a call: strictly increasing, starting at 1. A host-side count: a kernel that takes it as an
  // argument and is captured into a CUDA graph gets the same epoch on every replay (the library's plans keep
  // their epochs on the device instead: device/epoch.cuh). For tests and hand-written kernels launched eagerly.
  uint64_t next_epoch() { return ++epoch_; }
  // The order every plan of this communicator launches in (mkernel/launch_order.hpp): calls issued on several
  // streams run in the order they were issued.
  LaunchChain& launch_chain() { return launch_chain_; }
  // A plan made on this communicator, once its constructor succeeded; it leaves in its destructor.
  void attach_plan(CommPlan* plan);
  void detach_plan(CommPlan* plan) noexcept;

  // Throws mk::Error for a failed CUDA call, adding the device-side failure
  // record (who waited for what) when there is one.
  void check(int cuda_error, const char* what) const;
  // The device-side failure record as text, then the network proxy's first
  // error (the peer and operation it failed on), or "" when there is neither.
  std::string device_failure() const;
  // Synchronises this rank's GPU (the calling thread's current device is
  // kept). "" when it can still be used; else the fatal CUDA error (a kernel
  // trapped, as a timed-out wait does: every later CUDA call fails too,
  // src/runtime/device_health.hpp), after which teardown leaves out what
  // waits for other ranks (Network::deregister_buffer, SignalLease,
  // free_symmetric; the destructor leaves the bootstrap with an abort that
  // the other ranks hear at once). Such a communicator is of no further use
  // to any rank of the job: make a new one in a new process.
  std::string fatal_device_error() const;
  // Raises this rank's abort word from the host (e.g. a proxy error): every
  // bounded device wait of this rank exits with a diagnostic. Writes the
  // host word and, through a stream of its own (a stream memory operation that
  // needs no SM), the device word, which the waits read at every check; they
  // read the host word only as a fallback (device/signals.cuh, abort_word).
  void raise_abort();
  void barrier() { bs_->barrier("Communicator::barrier"); }

  // The network layer (transport + host proxy), created collectively on the
  // first call by every rank. See mkernel/network.hpp.
  Network& network();
  // Network::bytes_put: the payload of the puts this rank's proxy has taken
  // so far (see there for when a call's count is exact); 0 while no op has
  // created the network (one node). Not collective.
  uint64_t network_bytes_put() const;
  // The control region (abort word + signal pool); the network registers it
  // as region 0.
  const SymmetricBuffer& control_buffer() const { return *control_; }

 private:
  friend class SignalLease;  // return_unused_signals (SignalLease::abandon, ::reset), zero_signals (::reset)
  // Gives back a run that no kernel and no peer ever touched (a plan that
  // failed in its collective check, before any call): its words are still
  // 0, so no zeroing and no synchronisation. The same on every rank, like
  // release_signals. Not a run held now: mk::Error, nothing changed.
  void return_unused_signals(int base, int n);
  // Zeroes a run of this rank's signal words on this communicator's GPU, after
  // synchronising it (no kernel of this rank adds to them any more). Local.
  void zero_signals(int base, int n);
  void init(int device, int launcher_local_rank);
  // init(); on a throw, leaves the bootstrap with Bootstrap::abort, so that
  // ranks waiting in a step for this one fail at once, with its reason.
  void init_or_abort(int device, int launcher_local_rank);

  std::unique_ptr<Bootstrap> bs_;
  Topology topo_;
  int device_ = -1;
  uint64_t job_ = 0;
  std::unique_ptr<SymmetricHeap> heap_;
  std::unique_ptr<Network> net_;
  SymmetricBuffer* control_ = nullptr;
  void* host_block_ = nullptr;  // mapped pinned: abort word + WaitDiag
  void* abort_stream_ = nullptr;  // cudaStream_t: raise_abort's write of the device word
  DeviceCtx ctx_{};
  std::unique_ptr<SignalPool> signal_pool_;
  uint64_t epoch_ = 0;
  LaunchChain launch_chain_{"the communicator's launch-order events"};
  std::mutex plans_mu_;
  std::vector<CommPlan*> plans_;  // alive, oldest first
};

}  // namespace mk
