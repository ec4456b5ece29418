// mkernel: picks the network backend (MK_NET) and what it needs of the GPU.
#include <algorithm>
#include <cstdlib>

#include "mkernel/error.hpp"
#include "mkernel/knobs.hpp"
#include "src/net/transport.hpp"
#if !defined(MK_NET_HAVE_VERBS) || !defined(MK_NET_HAVE_FABRIC)
#error "MK_NET_HAVE_VERBS and MK_NET_HAVE_FABRIC come from CMakeLists.txt (MK_NET_BACKENDS)"
#endif
#if MK_NET_HAVE_FABRIC
#include "src/net/fabric/fabric_transport.hpp"
#endif

namespace mk::net {

// A backend this build left out (CMakeLists.txt: MK_NET_BACKENDS, "auto" leaves out those whose headers the
// building machine lacked) refuses here, saying so and how to get it.
[[maybe_unused]] [[noreturn]] static void refuse_absent(const char* backend, const char* header) {
  fail("this libmkernel was built without the ", backend, " network backend (its configure found no <",
       header, ">, or MK_NET_BACKENDS left it out); install that header and build again, or use another MK_NET");
}
#if !MK_NET_HAVE_VERBS
std::unique_ptr<Transport> make_verbs(const TransportConfig&) {
  refuse_absent("verbs", "infiniband/verbs.h");
}
#endif
#if !MK_NET_HAVE_FABRIC
std::unique_ptr<Transport> make_fabric(const TransportConfig&) {
  refuse_absent("fabric", "rdma/fabric.h");
}
#endif

std::unique_ptr<Transport> make_transport(const TransportConfig& cfg) {
  const std::string which = knob_str(Knob::MK_NET);
  if (which == "verbs") return make_verbs(cfg);
  if (which == "fabric") return make_fabric(cfg);
  if (which == "emu") return make_emu(cfg);
  // auto: a real RDMA NIC through verbs, then libfabric's efa provider, then
  // the emulated NIC when every rank shares this host, else libfabric over
  // tcp. An explicit MK_FI_PROVIDER skips the efa probe.
  std::string tried;
  try {
    return make_verbs(cfg);
  } catch (const Error& e) {
    tried += std::string("\n  verbs: ") + error_reason(e);
  }
#if MK_NET_HAVE_FABRIC
  if (knob_str(Knob::MK_FI_PROVIDER).empty()) {
    try {
      fabric::FabricOptions efa;
      efa.provider = "efa";
      return fabric::make_fabric_with(cfg, efa);
    } catch (const Error& e) {
      tried += std::string("\n  fabric (efa): ") + error_reason(e);
    }
  }
#endif
  bool one_host = cfg.topo != nullptr;
  if (cfg.topo)
    for (int h : cfg.topo->host_of) one_host = one_host && h == cfg.topo->host_of[0];
  if (one_host && cfg.cuda_device >= 0) {
    try {
      return make_emu(cfg);
    } catch (const Error& e) {
      tried += std::string("\n  emu: ") + error_reason(e);
    }
  }
  try {
    return make_fabric(cfg);
  } catch (const Error& e) {
    tried += std::string("\n  fabric: ") + error_reason(e);
  }
  fail("MK_NET=auto found no usable network transport:", tried);
}

std::string transport_kind(const std::string& name) {
  const std::string family = transport_family(name);
  if (family == "fabric") return name.substr(0, name.find_first_of(" ("));  // "fabric:<provider>"
  if (family == "verbs") return name.size() >= 5 && name.compare(name.size() - 5, 5, "(srd)") == 0 ? "verbs (srd)"
                                                                                                   : "verbs";
  return family;
}

void check_transport_kinds(const std::vector<std::string>& kinds, int rank, int thread,
                           const std::string& thread0_kind) {
  const std::string where = thread > 0 ? cat(" for proxy thread ", thread) : std::string();
  for (size_t r = 0; r < kinds.size(); ++r)
    if (kinds[r] != kinds[static_cast<size_t>(rank)])
      fail("ranks chose different network transports", where, " (rank ", rank, ": ", kinds[static_cast<size_t>(rank)],
           ", rank ", r, ": ", kinds[r], "); set MK_NET (and for fabric MK_FI_PROVIDER) the same on every rank");
  if (thread > 0 && kinds[static_cast<size_t>(rank)] != thread0_kind)
    fail("proxy thread ", thread, " opened another network transport (", kinds[static_cast<size_t>(rank)],
         ") than thread 0 (", thread0_kind, "), on every rank alike; set MK_NET to one transport, or MK_NET_THREADS=1");
}

// emu delivers with CTAs of the op's own grid (device/net/agent.cuh): an
// SM each (MK_EMU_AGENTS). fabric's signal-add kernels run beside the grid; under MPS other
// processes' kernels share the GPU at the same time, and 1-4 SMs left free
// were too few for such kernels (emu's copies before its agent: GemmAr at 62
// of 66 CTAs stopped, at 60 it ran; bench/results/emu-mps-free-sms-20261203.md).
int transport_free_sms(const std::string& family, int knob, bool mps, int agents, bool side_kernels) {
  if (family == "emu") return std::max(knob, std::max(agents, 1));  // every agent CTA needs its SM
  // fabric staged, or EFA's GPU signals applied, by delivery agents: no side kernels.
  if (agents > 0) return std::max(knob, agents);
  // fabric, and EFA with MK_FABRIC_STAGE=cuda: the proxy's signal kernels.
  if (family != "fabric" && !side_kernels) return 0;
  if (knob > 0) return knob;
  return mps ? 8 : 1;
}

std::string work_queue_cause() {
  return "the proxy's stream can share a hardware work queue with another stream of this process that has work "
         "queued behind a kernel waiting on this network (seen under MPS and with CUDA_DEVICE_MAX_CONNECTIONS=1: "
         "bench/results/emu-work-queue-20261203.md)";
}

std::string work_queue_warning(const std::string& net_family, bool proxy_calls_cuda, bool mps,
                               const std::optional<std::string>& max_connections) {
  if (!proxy_calls_cuda) return {};
  const std::string what = cat("the ", net_family, " network's proxy issues CUDA work (copies, signal kernels or ",
                               "memory ops) on a stream of its own; ");
  // The driver reads the variable as an integer; "01" or " 1" mean one queue too.
  long connections = 0;
  if (max_connections) {
    char* end = nullptr;
    connections = std::strtol(max_connections->c_str(), &end, 10);
    if (end == max_connections->c_str()) connections = 0;
  }
  const std::string why = cat(", so that work waits behind anything queued on another stream after an op that waits ",
                              "on it, and the op stops at MK_NET_TIMEOUT_MS / MK_TIMEOUT_MS");
  if (connections == 1)
    return cat(what, "CUDA_DEVICE_MAX_CONNECTIONS=1 puts every stream of this process in one hardware work queue", why,
               ". Unset it (or raise it) for jobs across nodes on this network (bench/results/",
               "emu-work-queue-20261203.md)");
  if (mps)
    return cat(what, "the GPU is shared through MPS, whose clients share one pool of hardware work queues: it can ",
               "share one with this process's streams", why, " (seen with emu: bench/results/emu-work-queue-",
               "20261203.md). Synchronize before queueing work behind an op, or run without MPS");
  return {};
}

}  // namespace mk::net
