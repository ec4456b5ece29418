#include "mkernel/network.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <thread>

#include "mkernel/communicator.hpp"
#include "mkernel/error.hpp"
#include "mkernel/knobs.hpp"
#include "src/net/proxy.hpp"
#include "src/runtime/device_health.hpp"
#include "src/runtime/step_status.hpp"

namespace mk {

Network::Network(Communicator& comm) : comm_(comm) {
  const DeviceScope on(comm.device());  // queues and streams belong to the rank's GPU (the caller's device given back)
  const Topology& t = comm.topology();
  for (int r = 0; r < t.world; ++r) {
    if (t.same_node(r, t.rank)) continue;
    peers_.push_back(r);
    if (t.local_rank_of[r] == t.local_rank) rail_peers_.push_back(r);
  }
  const int threads = static_cast<int>(knob_int(Knob::MK_NET_THREADS));
  if (threads > net::kMaxNetQueues) fail("MK_NET_THREADS=", threads, " exceeds ", net::kMaxNetQueues);
  net::TransportConfig tc;
  tc.rank = t.rank;
  tc.world = t.world;
  tc.cuda_device = comm.device();
  tc.topo = &comm.topology();
  std::vector<std::unique_ptr<net::Transport>> transports;
  for (int i = 0; i < threads; ++i) {
    // Opening a transport can fail on some ranks only (a node whose NIC lacks what the transport needs, no
    // device, a library missing there): every rank learns it in the exchange of the transports' names and
    // fails naming the rank and why, rather than waiting for it in connect until the bootstrap bound.
    std::string mine;
    try {
      transports.push_back(net::make_transport(tc));
      mine = step_status::kOk + net::transport_kind(transports.back()->name());
    } catch (const std::exception& x) {
      mine = step_status::failed(x);
    }
    auto got = comm.bootstrap().allgather(mine, "the network's transport names");
    const std::string err =
        step_status::step_error(got, t.rank, "creating the network", "could not open its transport");
    if (!err.empty()) fail(err);
    if (i == 0) name_ = transports[0]->name();
    // (every thread's: before 2026-12-06 thread 0's only, so a later thread's other fallback went unnoticed)
    net::check_transport_kinds(step_status::payloads(std::move(got)), t.rank, i, net::transport_kind(name_));
    transports.back()->connect(comm.bootstrap(), peers_);
  }
  // NOTES: emu needed eager module loading until its proxy stopped calling
  // CUDA (2026-12-03: its writes are made by the kernels' delivery agent): a
  // kernel loaded while another waited on the network blocked the proxy's
  // copies until that kernel timed out. Checked since with
  // CUDA_MODULE_LOADING=LAZY (bench/results/emu-agent-20261203.md).
  // Region 0: the communicator's control region (signal pool).
  const SymmetricBuffer& ctl = comm.control_buffer();
  net::Region r0;
  r0.id = net::kSignalRegion;
  r0.base = ctl.local;
  r0.bytes = ctl.region.bytes;
  r0.device = true;
  r0.cuda_device = comm.device();
  r0.host_peer_ptrs = &ctl.host_peer;
  for (auto& tr : transports) tr->register_region(comm.bootstrap(), r0);
  next_region_ = 1;
  for (auto& tr : transports) proxy_calls_cuda_ = proxy_calls_cuda_ || tr->proxy_calls_cuda();
  // Small puts travel inline when every proxy thread's transport asks for it.
  uint32_t inline_max = static_cast<uint32_t>(net::kMaxInlineBytes);
  for (auto& tr : transports) inline_max = std::min(inline_max, tr->inline_bytes());
  ctx_.inline_max = inline_max & ~3u;
  ctx_.region_base[net::kSignalRegion] = ctl.local;

  net::ProxyConfig pc;
  pc.rank = t.rank;
  uint64_t depth = 1;
  while (depth < static_cast<uint64_t>(knob_int(Knob::MK_NET_QUEUE_DEPTH))) depth <<= 1;
  pc.depth = static_cast<uint32_t>(depth);
  pc.timeout_ms = knob_int(Knob::MK_NET_TIMEOUT_MS);
  pc.cuda_device = comm.device();
  pc.peers = peers_;
  pc.rail_peers = rail_peers_;
  pc.signal_base = kControlHeaderBytes;
  char pci[32] = {};
  std::vector<int> near;
  if (cudaDeviceGetPCIBusId(pci, sizeof(pci), comm.device()) == cudaSuccess) near = net::cpus_near_gpu(pci);
  // Pin near the GPU only where the CPUs of its NUMA node that this process may run on offer two per proxy thread
  // of every rank on this host (net::proxy_pin_cpus says why). "May run on": the affinity of the thread that makes
  // the communicator's network (its first op across nodes), which its proxy threads inherit.
  const std::vector<int> allowed = net::allowed_cpus();
  const size_t threads_on_host = static_cast<size_t>(threads) * t.host_ranks.size();
  pc.cpus = net::proxy_pin_cpus(near, allowed, threads_on_host);
  if (pc.cpus.empty())
    log(LogLevel::Info, cat("rank ", t.rank, ": not pinning proxy threads (", near.size(), " CPUs near GPU ", pci, ", ",
                            net::usable_cpus(near, allowed).size(), " of them among the ", allowed.size(),
                            " this process may run on, for ", threads_on_host, " proxy threads on this host)"));
  pc.on_error = [&comm](const std::string& msg) {
    log(LogLevel::Warn, msg);
    comm.raise_abort();
  };
  // The proxy and what the device context takes from the transports: steps that can fail on one rank alone
  // (pinned memory, a thread under a process limit, a ring count, too few SMs), so their outcome travels in the
  // exchange of the free SMs below: every rank fails at once naming the rank and why, rather than waiting for
  // it in that exchange until the bootstrap bound.
  const std::string family = net::transport_family(name_);  // "emu", "fabric", "verbs"
  int mps = 0;
  std::string mine;
  try {
    proxy_ = std::make_unique<net::Proxy>(std::move(pc), std::move(transports));
    ctx_.num_queues = proxy_->num_queues();
    for (int i = 0; i < ctx_.num_queues; ++i) ctx_.queues[i] = proxy_->queue(i);
    // Delivery rings (emu; fabric's staging and EFA's GPU signals by agents):
    // every queue's transport has one, or none does.
    int queue = 0, rings = 0;
    proxy_->with_transports([&](net::Transport& tr) {  // in queue order
      const net::DeliveryRing r = tr.delivery_ring();
      if (queue < net::kMaxNetQueues) ctx_.delivery[queue] = r;
      ++queue;
      rings += r.size != 0;
    });
    if (rings != 0 && rings != ctx_.num_queues)
      fail("network ", name_, ": ", rings, " of ", ctx_.num_queues,
           " proxy threads deliver through rings; all or none must");
    // Rings: emu (MK_EMU_AGENTS agents a kernel), fabric's staging and EFA's
    // GPU signals by agents (MK_FABRIC_STAGE=agent: one, which keeps up).
    ctx_.agent = rings == 0 ? 0 : family == "emu" ? static_cast<int32_t>(knob_int(Knob::MK_EMU_AGENTS)) : 1;
    if (ctx_.agent > 0) {  // the ops' grids keep 2 CTAs beside their agents (tp::grid_free_sms)
      int sms = 0;
      MK_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, comm.device()));
      if (ctx_.agent > sms - 2)
        fail("network ", name_, ": ", ctx_.agent, " delivery agent CTAs a kernel (MK_EMU_AGENTS for emu), but this "
             "GPU has ", sms, " SMs: at most ", std::max(sms - 2, 0), " (2 stay for the ops' other roles)");
    }
    ctx_.rank = t.rank;
    ctx_.num_rail_peers = static_cast<int32_t>(rail_peers_.size());
    ctx_.emulated = family == "emu" ? 1 : 0;
    // The GPU's contexts are shared through MPS: other processes' kernels run
    // beside ours. A driver that does not know the attribute: taken as no.
    if (cudaDeviceGetAttribute(&mps, cudaDevAttrMpsEnabled, comm.device()) != cudaSuccess) {
      (void)cudaGetLastError();
      mps = 0;
    }
    ctx_.free_sms = net::transport_free_sms(family, static_cast<int>(knob_int(Knob::MK_NET_FREE_SMS)),
                                            mps != 0, ctx_.agent, proxy_calls_cuda_);
    mine = step_status::kOk + std::to_string(ctx_.free_sms);
  } catch (const std::exception& x) {
    mine = step_status::failed(x);
  }
  auto got = comm.bootstrap().allgather(mine, "the network's free SMs");
  const std::string err = step_status::step_error(got, t.rank, "creating the network", "could not start its proxy");
  if (!err.empty()) fail(err);
  // The same on every rank (the largest): plans size their grids from it,
  // and ranks on GPUs with and without MPS must still make the same plan.
  for (const std::string& v : step_status::payloads(std::move(got)))
    ctx_.free_sms = std::max(ctx_.free_sms, std::stoi(v));
  const std::string queues = net::work_queue_warning(family, proxy_calls_cuda_, mps != 0,
                                                     process_env()("CUDA_DEVICE_MAX_CONNECTIONS"));
  if (!queues.empty()) log(LogLevel::Warn, cat("rank ", t.rank, ": ", queues));
  if (ctx_.free_sms > 0)
    log(LogLevel::Info, cat("rank ", t.rank, ": ops leave up to ", ctx_.free_sms, " SMs free for the ", family,
                            ctx_.agent ? cat(" transport's ", ctx_.agent, " delivery agent CTA(s)") : std::string(" transport's kernels"), " (MK_NET_FREE_SMS", mps ? "; the GPU is shared through MPS" : "",
                            ")"));
  MK_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&ctx_dev_), sizeof(net::NetCtx)));
  try {
    sync_device_ctx();
    comm.bootstrap().barrier("the network's set-up");
  } catch (...) {  // (a throwing constructor runs no destructor: the device context would leak)
    teardown_call(cudaFree(ctx_dev_), "the network's device context");
    ctx_dev_ = nullptr;
    throw;
  }
  log(LogLevel::Info, cat("rank ", t.rank, ": network ", name_, ", ", peers_.size(), " peers, ", threads, " proxy thread(s)"));
}

Network::~Network() {
  proxy_.reset();
  if (ctx_dev_) teardown_call(cudaFree(ctx_dev_), "the network's device context");
}

void Network::sync_device_ctx() {
  MK_CUDA_CHECK(cudaMemcpy(ctx_dev_, &ctx_, sizeof(net::NetCtx), cudaMemcpyHostToDevice));
}

int Network::register_buffer(const SymmetricBuffer& buf) {
  // Commands carry the region in 16 bits (net::CmdFields::region), and ids are
  // never reused (a late note for a deregistered region must not find a new
  // one under its id): the 65536th registration of a communicator's life fails
  // here instead of wrapping. Each plan across nodes registers one buffer.
  constexpr int kMaxRegionId = std::numeric_limits<decltype(net::CmdFields::region)>::max();
  if (next_region_ > kMaxRegionId)
    fail("Network::register_buffer: this communicator registered ", kMaxRegionId,
         " buffers in its life (plans across nodes register one each); region ids are not reused: make a new "
         "communicator");
  net::Region r;
  r.id = next_region_;
  r.base = buf.local;
  r.bytes = buf.region.bytes;
  r.device = true;
  r.cuda_device = comm_.device();
  r.host_peer_ptrs = &buf.host_peer;
  // Each transport's registration fails on every rank alike when it fails on
  // one (the ranks exchange their outcome: Transport::register_region), and
  // leaves nothing registered. Then the transports that had registered it let
  // it go, those after it never see the id, and the id is used up on every
  // rank, so the ranks' next registration still agrees on its id.
  int registered = 0;
  auto let_go = [&] {  // this rank's transports that registered it let it go (a local step)
    int i = 0;
    proxy_->with_transports([&](net::Transport& t) {
      if (i++ < registered) {
        try {
          t.deregister_region(r.id);
        } catch (const std::exception&) {
        }
      }
    });
  };
  try {
    proxy_->with_transports([&](net::Transport& t) {
      t.register_region(comm_.bootstrap(), r);
      ++registered;
    });
  } catch (...) {
    let_go();
    ++next_region_;
    throw;
  }
  // The id is used up first: a device copy that fails below must not leave
  // this rank's next id behind its peers'.
  ++next_region_;
  if (live_.size() <= static_cast<size_t>(r.id)) live_.resize(static_cast<size_t>(r.id) + 1, 0);
  live_[static_cast<size_t>(r.id)] = 1;
  if (r.id < net::kMaxInlineRegions) {
    ctx_.region_base[r.id] = buf.local;
    try {
      sync_device_ctx();  // setup time; running kernels read only entries that do not change
    } catch (...) {  // (the device failed: the caller gets no id to deregister, so it is let go here)
      ctx_.region_base[r.id] = nullptr;
      live_[static_cast<size_t>(r.id)] = 0;
      let_go();
      throw;
    }
  }
  return r.id;
}

void Network::deregister_buffer(int id) {
  if (id <= 0 || id >= next_region_ || static_cast<size_t>(id) >= live_.size() || !live_[static_cast<size_t>(id)])
    fail("Network::deregister_buffer: region ", id, " is not a registered buffer (",
         id > 0 && id < next_region_ ? "it was deregistered before or its registration failed; " : "",
         "ids 1..", next_region_ - 1, " were given out, ", registered_buffers(), " of them registered now)");
  // This rank's kernels are done first (they may still put from the region).
  // NOTES: when the device failed (a fatal error: a kernel trapped, as a
  // timed-out wait or an abort does) nothing of this rank runs on it again,
  // so the exchange (no peer still writes into the region) is left out: the
  // peers' ops fail or time out on their own, and their puts into the gone
  // registration fail on their side. Waiting for them held a failed rank in
  // a plan's destructor up to the bootstrap bound (60 s: a peer stuck in its
  // own sync never came; bench/results/teardown-after-failure-20261204.md).
  const cudaError_t e =
      synchronize_device(comm_.device(), cat("rank ", comm_.rank(), ": deregistering network region ", id));
  if (e == cudaErrorCudartUnloading) MK_CUDA_CHECK(e);  // the process is exiting: its peers may be gone
  if (e == cudaSuccess) drain_proxy(id);
  if (cuda_error_is_fatal(e)) {
    log(LogLevel::Warn, cat("rank ", comm_.rank(), ": network region ", id, " deregistered without waiting for the ",
                            "other ranks: this rank's device failed (", cuda_error_string(e), ")"));
    leave_after_device_failure(comm_.bootstrap(), cuda_error_string(e));  // (its peers hear it now)
  } else {
    // Then every rank learns whether every rank's GPU is done with the
    // region before any rank lets it go. A sync that failed without taking
    // the device down (a stream capture in progress in global mode, say)
    // fails the call on every rank alike, and the region stays registered
    // everywhere: a kernel of that rank may still put from it, or wait for a
    // peer's puts into it. Before (session 35) such a rank passed the
    // barrier and every rank let the region go.
    // Tagged apart from the other steps' answers (step_status::Tags): a rank
    // in another exchange at this point reads them as out of step.
    constexpr step_status::Tags kTags{"deregister-ok:", "deregister-failed:"};
    const std::string err = step_status::step_error(
        comm_.bootstrap().allgather(sync_answer(e, kTags), "deregister_buffer"), comm_.rank(),
        cat("deregister_buffer of network region ", id),
        "could not finish with it (the region stays registered on every rank)", kTags);
    if (!err.empty()) fail(err);
  }
  // From here on nothing throws: every rank has let the region go (the
  // exchange passed), and the caller goes on to free the buffer, a
  // collective step its peers take too. A transport that fails to release
  // its registration is said in a warning and keeps it until close.
  live_[static_cast<size_t>(id)] = 0;
  auto warn = [&](const char* what, const std::string& why) noexcept {
    warn_noexcept([&] {
      return cat("rank ", comm_.rank(), ": network region ", id, ": ", what, " failed (", why,
                 "); the region is let go on every rank, this part of it stays until the communicator closes");
    });
  };
  try {
    proxy_->with_transports([&](net::Transport& t) {
      try {
        t.deregister_region(id);
      } catch (const std::exception& x) {
        warn("a transport's deregistration", error_reason(x));
      }
    });
  } catch (const std::exception& x) {
    warn("pausing the proxy for the deregistration", error_reason(x));
  }
  if (id < net::kMaxInlineRegions) {
    ctx_.region_base[id] = nullptr;
    try {
      if (!cuda_error_is_fatal(e)) sync_device_ctx();  // (a failed device takes no copy)
    } catch (const std::exception& x) {
      warn("updating the device's copy of the network context", error_reason(x));
    }
  }
}

// The kernels are done (the device synchronised), but the proxy may not have completed what they pushed: a put
// whose signal its peer already saw can still have its completion unreaped, or a command nobody waits for can
// still wait for room, and the transport's contract (deregister_region) is that nothing is in flight. Waits,
// bounded by MK_NET_TIMEOUT_MS and a second, until every queue has completed what was pushed into it, or the
// proxy failed (its error then reaches the communicator); past the bound a warning names the queue.
void Network::drain_proxy(int id) {
  const DeviceScope on(comm_.device(), std::nothrow);  // (the queues' head words are this GPU's memory)
  const int64_t bound_ms = knob_int(Knob::MK_NET_TIMEOUT_MS) + 1000;
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(bound_ms);
  for (int q = 0; q < proxy_->num_queues(); ++q) {
    uint64_t pushed = 0;
    try {
      pushed = proxy_->pushed(q);
    } catch (const std::exception& x) {
      log(LogLevel::Warn, cat("rank ", comm_.rank(), ": deregistering network region ", id, ": the proxy queue ", q,
                              "'s head could not be read (", error_reason(x), "); not waiting for it"));
      continue;
    }
    while (proxy_->completed(q) < pushed && proxy_->error().empty()) {
      if (std::chrono::steady_clock::now() > end) {
        log(LogLevel::Warn, cat("rank ", comm_.rank(), ": deregistering network region ", id, ": proxy queue ", q,
                                " completed ", proxy_->completed(q), " of the ", pushed, " commands pushed into it ",
                                "within ", bound_ms, " ms (MK_NET_TIMEOUT_MS + 1 s); deregistering anyway"));
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

int Network::registered_buffers() const {
  return static_cast<int>(std::count(live_.begin(), live_.end(), uint8_t{1}));
}

void Network::warn_legacy(const char* op) const {
  log(LogLevel::Warn,
      cat(op, " runs on the legacy default stream over the ", net::transport_family(name_),
          " network, whose host proxy makes CUDA "
          "calls: while the op runs, a copy of a result into pageable host memory on that stream (PyTorch: "
          "tensor.cpu(), .item()) or a first kernel load (e.g. cuBLAS meeting a new shape) blocks the proxy until "
          "the op times out (MK_TIMEOUT_MS). Launch on a side stream (torch.cuda.stream(torch.cuda.Stream())) or "
          "synchronize before such copies (README, Network). Said once."));
}

void Network::check() const {
  std::string e = error();
  if (!e.empty()) throw Error(e);
}

std::string Network::error() const { return proxy_ ? proxy_->error() : std::string(); }

std::string Network::in_flight() {
  try {
    return proxy_ ? proxy_->state() : std::string();
  } catch (const std::exception& e) {  // (a transport's report could not be made: said, not thrown over the error)
    return cat("(not read: ", error_reason(e), ")");
  }
}

uint64_t Network::bytes_put() const {
  uint64_t n = 0;
  for (int q = 0; q < proxy_->num_queues(); ++q) n += proxy_->put_bytes(q);
  return n;
}

}  // namespace mk
