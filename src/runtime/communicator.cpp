#include "mkernel/communicator.hpp"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <random>

#include "mkernel/error.hpp"
#include "mkernel/knobs.hpp"
#include "mkernel/network.hpp"
#include "src/runtime/cuda_driver.hpp"
#include "src/runtime/device_health.hpp"
#include "src/runtime/device_support.hpp"
#include "src/runtime/signal_pool.hpp"
#include "src/runtime/step_status.hpp"
#include "src/runtime/symmetric_heap.hpp"
#include "src/runtime/wait_diag_text.hpp"

namespace mk {

namespace {

constexpr size_t kControlHeader = kControlHeaderBytes;

struct PeerInfo {
  char host[192];
  char pci[32];
  int32_t pid;
  int32_t device;
  int32_t cc;  // compute capability, 10 * major + minor
};

void warn_unknown_knobs() {
  auto unknown = validate_knobs(process_env(), mk_variables_in_environment());
  for (auto& n : unknown)
    log(LogLevel::Warn, cat("warning: ", n, " is set but is not an mkernel knob (see `mkbench --print-config`)"));
}

}  // namespace

// The knobs are checked in init, after the bootstrap (which reads only its own): a bad value on one rank then
// reaches the others through init_or_abort's abort at once, not as a rank missing at the bootstrap's bound.
Communicator::Communicator(int rank, int world, const UniqueId& id, int device) {
  bs_ = std::make_unique<Bootstrap>(rank, world, id);
  init_or_abort(device, -1);
}

Communicator::Communicator(const LaunchInfo& launch, int device) {
  bs_ = std::make_unique<Bootstrap>(launch);
  init_or_abort(device, launch.local_rank);
}

void Communicator::init_or_abort(int device, int launcher_local_rank) {
  try {
    init(device, launcher_local_rank);
  } catch (const std::exception& e) {
    // A rank that fails alone (its own device, memory or a local step) would otherwise leave with an empty
    // goodbye: the others, waiting for it in the step's exchange, would hear only that it left. Where every
    // rank fails alike (a collective step's error), each has its own message already; the abort changes nothing.
    try {
      bs_->abort(cat("its communicator could not be made: ", error_reason(e)));
    } catch (...) {
    }
    throw;
  }
}

std::unique_ptr<Communicator> Communicator::from_env(int device) {
  auto li = detect_launch();
  if (!li) {
    LaunchInfo single;
    single.launcher = "single";
    single.rank = 0;
    single.world = 1;
    single.local_rank = -1;  // no launcher: the current device (init), as a single process set it, not GPU 0
    single.local_world = 1;
    return std::make_unique<Communicator>(single, device);
  }
  return std::make_unique<Communicator>(*li, device);
}

void Communicator::init(int device, int launcher_local_rank) {
  const int rank = bs_->rank(), world = bs_->world();
  warn_unknown_knobs();  // throws on a malformed value, naming the variable
  // The first exchange: the knobs that decide collective steps, compared on every rank, which fails alike where
  // they differ (a knob set on one node only would split the topology or the transport). Before any CUDA call,
  // so a CPU test sees it too (cpu.communicator_knob_mismatch).
  if (world > 1)
    if (const std::string bad =
            collective_knob_mismatch(bs_->allgather(collective_knob_values(), "the collective knobs' exchange"));
        !bad.empty())
      fail(bad);
  // Eager module loading unless the user chose (takes effect only if CUDA is
  // not initialised yet): a proxy that calls CUDA (fabric staging, EFA's
  // signal adds) waits for a kernel load, and a load for the running kernels
  // (README, Network); eager loading makes the library's own loads happen here. Set only where it can still
  // matter: setenv can race getenv on the process's other threads, and a driver initialised already (torch's,
  // say) has read the variable.
  if (!std::getenv("CUDA_MODULE_LOADING") && !drv::driver_initialised()) setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  int count = 0;
  cudaError_t ce = cudaGetDeviceCount(&count);
  if (ce != cudaSuccess) cudaGetLastError();  // thrown below, not left set
  if (ce != cudaSuccess || count == 0)
    fail("rank ", rank, ": no CUDA device visible (", ce == cudaSuccess ? "0 devices" : cuda_error_string(ce), ")");
  if (device < 0) {
    if (launcher_local_rank >= 0) {
      device = launcher_local_rank % count;
    } else {
      MK_CUDA_CHECK(cudaGetDevice(&device));
    }
  }
  if (device >= count) fail("rank ", rank, ": device ", device, " does not exist (", count, " visible)");
  device_ = device;
  MK_CUDA_CHECK(cudaSetDevice(device_));

  PeerInfo me{};
  std::string host = local_host_id();
  std::strncpy(me.host, host.c_str(), sizeof(me.host) - 1);
  MK_CUDA_CHECK(cudaDeviceGetPCIBusId(me.pci, sizeof(me.pci), device_));
  me.pid = getpid();
  me.device = device_;
  me.cc = compute_capability(device_);
  auto all = bs_->allgather(std::string(reinterpret_cast<const char*>(&me), sizeof(me)), "the devices' exchange");
  std::vector<PeerInfo> infos(world);
  std::vector<std::string> hosts(world);
  for (int r = 0; r < world; ++r) {
    if (all[r].size() != sizeof(PeerInfo))
      fail("rank ", r, " sent ", all[r].size(), " bytes where its device description takes ", sizeof(PeerInfo),
           ": it runs another mkernel build; use one build on every rank");
    std::memcpy(&infos[r], all[r].data(), sizeof(PeerInfo));
    hosts[r] = infos[r].host;
  }
  // Every rank names every GPU the kernels cannot run on, before anything is
  // allocated (one rank failing alone would leave the others to time out).
  std::string unsupported;
  for (int r = 0; r < world; ++r) {
    const std::string why = unsupported_gpu_reason(infos[r].cc / 10, infos[r].cc % 10);
    if (!why.empty())
      unsupported += cat(unsupported.empty() ? "" : "; ", "rank ", r, " (host ", infos[r].host, ", GPU ",
                         infos[r].device, " at ", infos[r].pci, ") has ", why);
  }
  if (!unsupported.empty()) fail(unsupported);
  const bool share_gpus = knob_bool(Knob::MK_SHARE_GPUS);
  for (int a = 0; a < world && !share_gpus; ++a)
    for (int b = a + 1; b < world; ++b)
      if (hosts[a] == hosts[b] && std::strcmp(infos[a].pci, infos[b].pci) == 0)
        fail("ranks ", a, " and ", b, " on one host both use GPU ", infos[a].pci,
             "; give each rank its own GPU (LOCAL_RANK / device argument)");

  topo_ = compute_topology(hosts, rank, static_cast<int>(knob_int(Knob::MK_RANKS_PER_NODE)));
  if (topo_.local_size > kMaxLocalRanks)
    fail("node ", topo_.node, " has ", topo_.local_size, " ranks; at most ", kMaxLocalRanks,
         " are supported per node (set MK_RANKS_PER_NODE)");
  // Node peers must reach each other by peer mappings.
  std::string hidden;  // node peers whose GPU this process cannot see (CUDA_VISIBLE_DEVICES of one GPU per rank)
  for (int peer : topo_.node_ranks[topo_.node]) {
    if (peer == rank) continue;
    int pdev = -1;
    if (cudaDeviceGetByPCIBusId(&pdev, infos[peer].pci) != cudaSuccess) {
      cudaGetLastError();
      hidden += cat(hidden.empty() ? "" : ", ", peer, " (", infos[peer].pci, ")");
      continue;  // not visible to this process: mapping its memory (symmetric_heap) tells
    }
    if (pdev == device_) continue;  // a shared GPU (MK_SHARE_GPUS): its memory is ours
    int ok = 0;
    MK_CUDA_CHECK(cudaDeviceCanAccessPeer(&ok, device_, pdev));
    if (!ok)
      fail("ranks ", rank, " and ", peer, " share node ", topo_.node, " but GPUs ", me.pci, " and ",
           infos[peer].pci, " have no peer access; set MK_RANKS_PER_NODE to keep them on separate nodes");
  }
  log(LogLevel::Info, cat("rank ", rank, ": GPU ", me.pci, ", ", topo_.describe()));
  if (!hidden.empty())
    log(LogLevel::Info, cat("rank ", rank, ": the GPUs of node peers ", hidden, " are not visible to this process, so "
                            "peer access to them is not checked here; mapping their memory will tell"));

  uint64_t job = 0;
  if (rank == 0) job = std::random_device{}() ^ (static_cast<uint64_t>(getpid()) << 32);
  std::string jb = bs_->broadcast(std::string(reinterpret_cast<const char*>(&job), sizeof(job)), 0, "the job id");
  std::memcpy(&job_, jb.data(), sizeof(job_));

  // This rank's own resources first, before the collective ones: a step that
  // fails on this rank alone then leaves no symmetric heap, whose teardown
  // in IPC mode is a barrier the other ranks would not join. A throwing
  // constructor runs no destructor: what was made here is given back here.
  // (knobs read before anything is allocated: a throw here leaves nothing to give back)
  const int num_signals = static_cast<int>(knob_int(Knob::MK_SIGNAL_SLOTS));
  MK_CUDA_CHECK(cudaHostAlloc(&host_block_, 4096, cudaHostAllocMapped | cudaHostAllocPortable));
  std::memset(host_block_, 0, 4096);
  void* host_dev = nullptr;
  cudaStream_t abort_stream = nullptr;
  const auto give_back = [&] {
    if (abort_stream) teardown_call(cudaStreamDestroy(abort_stream), "the abort word's stream");
    abort_stream_ = nullptr;
    teardown_call(cudaFreeHost(host_block_), "the communicator's pinned host block");
    host_block_ = nullptr;
  };
  try {
    MK_CUDA_CHECK(cudaHostGetDevicePointer(&host_dev, host_block_, 0));
    MK_CUDA_CHECK(cudaStreamCreateWithFlags(&abort_stream, cudaStreamNonBlocking));
    abort_stream_ = abort_stream;
    // Collective: every rank makes the heap and its control region, or fails alike (step_status).
    heap_ = std::make_unique<SymmetricHeap>(*bs_, topo_, device_, job_, knob_str(Knob::MK_SYMM_MODE));
    control_ = heap_->alloc(kControlHeader + sizeof(uint64_t) * num_signals);
  } catch (...) {
    heap_.reset();
    give_back();
    throw;
  }

  ctx_ = DeviceCtx{};
  ctx_.rank = rank;
  ctx_.world = world;
  ctx_.node = topo_.node;
  ctx_.local_rank = topo_.local_rank;
  ctx_.local_size = topo_.local_size;
  ctx_.num_signals = num_signals;
  signal_pool_ = std::make_unique<SignalPool>(num_signals);
  ctx_.timeout_ns = static_cast<uint64_t>(knob_int(Knob::MK_TIMEOUT_MS)) * 1000000ull;
  ctx_.abort_host = static_cast<uint32_t*>(host_dev);
  ctx_.diag = reinterpret_cast<WaitDiag*>(static_cast<char*>(host_dev) + 64);
  ctx_.abort_dev = static_cast<uint32_t*>(control_->local);
  ctx_.diag_claim = static_cast<uint32_t*>(control_->local) + 1;
  ctx_.signals = reinterpret_cast<uint64_t*>(static_cast<char*>(control_->local) + kControlHeader);
  for (int i = 0; i < topo_.local_size; ++i) {
    ctx_.abort_peer[i] = static_cast<uint32_t*>(control_->peer[i]);
    ctx_.peer_signals[i] = reinterpret_cast<uint64_t*>(static_cast<char*>(control_->peer[i]) + kControlHeader);
  }
}

void Communicator::attach_plan(CommPlan* plan) {
  const std::lock_guard<std::mutex> g(plans_mu_);
  plans_.push_back(plan);
}

void Communicator::detach_plan(CommPlan* plan) noexcept {
  const std::lock_guard<std::mutex> g(plans_mu_);
  const auto it = std::find(plans_.begin(), plans_.end(), plan);
  if (it != plans_.end()) plans_.erase(it);
}

bool CommPlan::leave_communicator(Communicator& comm) noexcept {
  if (gone_) return false;
  comm.detach_plan(this);
  return true;
}

Communicator::~Communicator() {
  // Plans still alive are released first, newest first, while everything they release through is here
  // (mkernel/comm_plan.hpp); every rank holds the same plans, made in the same order.
  std::vector<CommPlan*> alive;
  {
    const std::lock_guard<std::mutex> g(plans_mu_);
    alive.swap(plans_);
  }
  if (!alive.empty())
    warn_noexcept([&] {
      return cat("rank ", rank(), ": destroying the communicator with ", alive.size(), " of its plans still alive: ",
                 "they are released now, and their calls fail; destroy plans before their communicator");
    });
  for (auto it = alive.rbegin(); it != alive.rend(); ++it) {
    (*it)->release_with_communicator();
    (*it)->gone_ = true;
  }
  try {
    // This rank's kernels end before their memory goes (a VMM unmap does not
    // wait for them; their waits are bounded). A synchronisation refused
    // without the device failing (a stream capture in global mode on another
    // thread) confirms nothing: the symmetric memory then stays mapped until
    // the process ends.
    const cudaError_t synced =
        device_ >= 0 ? synchronize_device(device_, cat("rank ", rank(), ": destroying the communicator"))
                     : cudaSuccess;
    const bool kernels_done =
        synced == cudaSuccess || cuda_error_is_fatal(synced) || synced == cudaErrorCudartUnloading;
    if (!kernels_done)
      log(LogLevel::Warn, cat("rank ", rank(), ": destroying the communicator: its device synchronisation failed (",
                              cuda_error_string(synced), "): its symmetric memory stays mapped until the process ",
                              "ends"));
    // A failed device first tells the other ranks (their bootstrap steps fail
    // at once, naming this rank) and stops this rank's bootstrap root, if it
    // hosts it, from waiting up to MK_BOOTSTRAP_TIMEOUT_MS for ranks stuck in
    // their own waits to leave.
    if (bs_ && cuda_error_is_fatal(synced))
      leave_after_device_failure(*bs_, cuda_error_string(synced));
    const DeviceScope on(device_, std::nothrow);  // (the caller's current device restored at the end)
    net_.reset();  // proxies stop and deregister before memory goes away
    if (abort_stream_) {  // a pending write of the device abort word lands before the memory goes
      // (reported: with CUDA_DEVICE_MAX_CONNECTIONS=1 the write queues behind whatever work was queued since the
      // synchronisation above, which no MK_* bound covers)
      cudaError_t waited = cudaSuccess;
      try {
        const int64_t ms = device_wait_report_ms();
        run_reported(cat("rank ", rank(), ": destroying the communicator (the abort word's stream)"),
                     cat("the abort word's write on its own stream of GPU ", device_, " (behind work queued since the "
                         "device synchronisation, where CUDA_DEVICE_MAX_CONNECTIONS=1 puts every stream in one queue)"),
                     ms, ms,
                     [&] { waited = cudaStreamSynchronize(static_cast<cudaStream_t>(abort_stream_)); });
      } catch (const std::exception&) {  // (the report's text: no memory) unreported
        waited = cudaStreamSynchronize(static_cast<cudaStream_t>(abort_stream_));
      }
      if (waited != cudaSuccess && !cuda_error_is_fatal(waited)) cudaGetLastError();  // (the destroy below says it)
      teardown_call(cudaStreamDestroy(static_cast<cudaStream_t>(abort_stream_)), "the abort word's stream");
      abort_stream_ = nullptr;
    }
    if (kernels_done)
      heap_.reset();  // unmaps peers' memory (VMM: no barrier needed; IPC: one, before the frees)
    else
      (void)heap_.release();  // (left to the process's end, kernels may still use it)
    if (host_block_) teardown_call(cudaFreeHost(host_block_), "the communicator's pinned host block");
    bs_.reset();
  } catch (...) {
  }
}

SymmetricBuffer& Communicator::alloc_symmetric(size_t bytes) { return *heap_->alloc(bytes); }

Network& Communicator::network() {
  if (!net_) net_ = std::make_unique<Network>(*this);
  return *net_;
}
uint64_t Communicator::network_bytes_put() const { return net_ ? net_->bytes_put() : 0; }
void Communicator::free_symmetric(SymmetricBuffer& buf) { heap_->free(&buf); }
bool Communicator::uses_vmm() const { return heap_->mode() == SymmetricHeap::Mode::Vmm; }
size_t Communicator::symmetric_bytes() const { return heap_->bytes(); }

int Communicator::reserve_signals(int n) {
  if (n <= 0) fail("reserve_signals(", n, "): n must be at least 1");
  const int base = signal_pool_->reserve(n);
  if (base < 0)
    fail("reserve_signals(", n, "): no run of ", n, " free signal words: ", signal_pool_->in_use(), " of ",
         ctx_.num_signals, " are held, the longest free run is ", signal_pool_->largest_free(),
         " (raise MK_SIGNAL_SLOTS, or destroy plans no longer used: Python mkernel.close_plans())");
  return base;
}

void Communicator::zero_signals(int base, int n) {
  // Zeroed before they can be handed out again: a later plan's first call
  // waits for counts from 1, and stale counts would let it pass early.
  // Synchronised first: no kernel of this rank may still add to them. On
  // this communicator's GPU, whatever the thread's current one is.
  DeviceScope on(device_);  // (the caller's current device restored)
  const std::string what = cat("rank ", rank(), ": zeroing signals [", base, ", ", base + n, ") of an ended plan");
  MK_DEVICE_SYNC(what);
  MK_CUDA_CHECK(cudaMemset(ctx_.signals + base, 0, size_t(n) * sizeof(uint64_t)));
  MK_DEVICE_SYNC(what);
}

void Communicator::release_signals(int base, int n) {
  const std::string why = signal_pool_->releasable(base, n);
  if (!why.empty()) fail("release_signals: ", why);
  zero_signals(base, n);
  signal_pool_->release(base, n);
}

void Communicator::return_unused_signals(int base, int n) {
  const std::string why = signal_pool_->releasable(base, n);
  if (!why.empty()) fail("return_unused_signals: ", why);
  signal_pool_->release(base, n);
}

int Communicator::signals_in_use() const { return signal_pool_->in_use(); }

void SignalLease::abandon() noexcept {
  for (auto it = runs_.rbegin(); it != runs_.rend(); ++it) {
    try {
      comm_->return_unused_signals(it->first, it->second);
    } catch (...) {  // (not a run held: nothing to give back)
    }
  }
  runs_.clear();
}

int SignalLease::take(Communicator& comm, int n) {
  comm_ = &comm;
  if (runs_.empty()) uncaught_at_take_ = std::uncaught_exceptions();
  const int base = comm.reserve_signals(n);
  runs_.emplace_back(base, n);
  return base;
}

void SignalLease::reset() noexcept {
  if (runs_.empty()) return;
  // Kept (reserved for the communicator's life, as before 2026-12-04) with
  // MK_SIGNAL_REUSE=0 (a collective knob: alike on every rank). Reuse needs
  // every signal a plan's calls send to be awaited within its call, across
  // nodes too (a late network signal would land in a reused word):
  // bench/results/cross-node-signals-audit-20261204.md.
  // Kept too when this rank's device failed (a fatal error): zeroing them
  // cannot work, and the barrier below would wait for ranks that may be
  // stuck in their own waits (Communicator::fatal_device_error).
  // A malformed value (refused at init; set afterwards, from Python's os.environ say) keeps them too, saying so:
  // else the pool's eventual "no run of n free signal words" would not name the knob.
  bool reuse = true;
  try {
    reuse = knob_bool(Knob::MK_SIGNAL_REUSE);
  } catch (const std::exception& e) {
    reuse = false;
    warn_noexcept([&] {
      return cat("rank ", comm_->rank(), ": ", e.what(), ": a plan's signal words stay reserved, as with ",
                 "MK_SIGNAL_REUSE=0 (set it alike on every rank)");
    });
  }
  if (reuse) {
    const std::string dead = comm_->fatal_device_error();
    if (!dead.empty()) {
      log(LogLevel::Warn, cat("rank ", comm_->rank(), ": signals of a plan stay reserved, without waiting for the other ",
                              "ranks: this rank's device failed (", dead, ")"));
      leave_after_device_failure(comm_->bootstrap(), dead);  // (of no further use: its peers hear it now)
      reuse = false;
    }
  }
  if (!reuse) {
    runs_.clear();
    return;
  }
  // Every rank zeroes its words, then every rank learns whether every rank
  // did before any rank gives them back to its pool: a peer must not write
  // into them for a later plan before this rank zeroed them, and the pools
  // must stay alike on every rank (a rank that kept a run while the others
  // released it handed out other words from then on; session 38's review).
  // One exchange whenever reuse was decided, so every rank makes as many.
  // A rank destroying the lease while an exception unwinds (a plan going out
  // of scope on one rank's error path) keeps its words, so every rank keeps
  // them: it says so in the same exchange. Before session 47 it skipped the
  // exchange, alone, and the ranks' collective calls went out of step (its
  // peers' next collective met its next one; the plan's free_symmetric
  // before this is collective either way).
  constexpr step_status::Tags kTags{"signals-zeroed:", "signals-not-zeroed:"};
  std::string mine = kTags.ok;
  const bool unwinding = std::uncaught_exceptions() > uncaught_at_take_;  // (relative: the header says why)
  if (unwinding) {
    mine = cat(kTags.failed, "it released them while an exception unwound (they stay reserved on every rank)");
  } else {
    try {
      for (auto it = runs_.rbegin(); it != runs_.rend(); ++it) comm_->zero_signals(it->first, it->second);
    } catch (const std::exception& e) {
      mine = step_status::failed(e, kTags);
    }
  }
  std::string err;
  try {
    constexpr const char* kStep = "releasing a plan's signals";
    err = step_status::step_error(comm_->bootstrap().allgather(mine, kStep), comm_->rank(), kStep,
                                  "did not zero them", kTags);
  } catch (const std::exception& e) {
    err = cat("the exchange after zeroing failed: ", error_reason(e));
  }
  for (auto it = runs_.rbegin(); it != runs_.rend(); ++it) {
    if (!err.empty()) {  // (said as info on a rank whose own error is on its way: a plan failing on every rank)
      log(unwinding ? LogLevel::Info : LogLevel::Warn,
          cat("rank ", comm_->rank(), ": signals [", it->first, ", ", it->first + it->second,
              ") stay reserved on every rank (not reusable): ", err));
      continue;
    }
    try {
      comm_->return_unused_signals(it->first, it->second);
    } catch (const std::exception& e) {  // (not a run held: nothing to give back)
      log(LogLevel::Warn, cat("signals [", it->first, ", ", it->first + it->second, "): ", error_reason(e)));
    }
  }
  runs_.clear();
}

std::string Communicator::device_failure() const {
  if (!host_block_) return "";
  const auto* d = reinterpret_cast<const volatile WaitDiag*>(static_cast<const char*>(host_block_) + 64);
  WaitDiag copy;
  std::memcpy(&copy, const_cast<const WaitDiag*>(d), sizeof(copy));
  std::string s = format_diag(copy);
  uint32_t ab = *static_cast<const volatile uint32_t*>(host_block_);
  if (s.empty() && ab) s = cat("abort raised by rank ", ab - 1);
  // The proxy's error names the peer, queue and operation that failed, which the device record cannot (its
  // own abort, or a kernel's wait for a network queue): without it the caller read only "abort raised by
  // rank <self>", the cause being in a log line.
  const std::string net = net_ ? net_->error() : std::string();
  if (!net.empty()) s += cat(s.empty() ? "" : "; ", "rank ", rank(), "'s network proxy: ", net);
  // A device wait that timed out before the proxy's own bound (MK_TIMEOUT_MS is below MK_NET_TIMEOUT_MS by
  // default) finds no proxy error yet: what the queues still hold (a write no delivery agent claimed: no kernel
  // runs one, or MK_NET_FREE_SMS left its CTAs no room) is often the cause.
  if (net.empty() && !s.empty() && net_) {
    const std::string held = net_->in_flight();
    if (!held.empty()) s += cat("; rank ", rank(), "'s network, in flight: ", held);
  }
  return s;
}

std::string Communicator::fatal_device_error() const {
  if (device_ < 0) return "";
  const cudaError_t e = synchronize_device(device_, cat("rank ", rank(), ": the communicator's teardown check"));
  return cuda_error_is_fatal(e) ? cuda_error_string(e) : std::string();
}

void Communicator::check(int cuda_error, const char* what) const {
  std::string diag = device_failure();
  if (cuda_error == 0 && diag.empty()) return;
  std::string msg = cat("rank ", rank(), ": ", what);
  if (cuda_error != 0) msg += cat(" failed: ", cuda_error_string(cuda_error));
  if (!diag.empty()) msg += cat("; device: ", diag);
  fail(msg);
}

void Communicator::raise_abort() {
  auto* w = static_cast<volatile uint32_t*>(host_block_);
  if (*w != 0) return;  // raised before (by a kernel of this rank, which raised the device word too, or here)
  const uint32_t mark = static_cast<uint32_t>(rank()) + 1;
  *w = mark;
  // The device word, from any host thread (the proxy's): a stream memory
  // operation on a stream of its own, which runs beside a kernel that holds
  // every SM (unless CUDA_DEVICE_MAX_CONNECTIONS=1 puts every stream in one
  // hardware queue: then it waits for that kernel). Either way the waits also
  // read the host word, once per kHostAbortPollNs (device/signals.cuh,
  // abort_word). NOTES: unconditional; if a node peer's kernel raised this
  // rank's device word first, the report names this rank as the aborter.
  CUresult r = CUDA_ERROR_NOT_INITIALIZED;
  int prev = -1;
  const bool have_prev = cudaGetDevice(&prev) == cudaSuccess;
  try {
    if (abort_stream_ && cudaSetDevice(device_) == cudaSuccess)
      r = drv::api().cuStreamWriteValue32(static_cast<CUstream>(abort_stream_),
                                          reinterpret_cast<CUdeviceptr>(ctx_.abort_dev), mark,
                                          CU_STREAM_WRITE_VALUE_DEFAULT);
  } catch (const std::exception&) {  // no driver entry point: the host word alone
  }
  if (have_prev && prev != device_) cudaSetDevice(prev);
  if (r != CUDA_SUCCESS)
    log(LogLevel::Warn, cat("rank ", rank(), ": raise_abort could not write the device abort word (CUresult ", int(r),
                            "); waits see the host word within ", kHostAbortPollNs / 1000000, " ms"));
}

}  // namespace mk
