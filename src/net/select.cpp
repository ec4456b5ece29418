// mkernel: picks the network backend (MK_NET) and what it needs of the GPU.
#include "mkernel/error.hpp"
#include "mkernel/knobs.hpp"
#include "src/net/fabric/fabric_transport.hpp"
#include "src/net/transport.hpp"

namespace mk::net {

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
    tried += std::string("\n  verbs: ") + e.what();
  }
  if (knob_str(Knob::MK_FI_PROVIDER).empty()) {
    try {
      fabric::FabricOptions efa;
      efa.provider = "efa";
      return fabric::make_fabric_with(cfg, efa);
    } catch (const Error& e) {
      tried += std::string("\n  fabric (efa): ") + e.what();
    }
  }
  bool one_host = cfg.topo != nullptr;
  if (cfg.topo)
    for (int h : cfg.topo->host_of) one_host = one_host && h == cfg.topo->host_of[0];
  if (one_host && cfg.cuda_device >= 0) {
    try {
      return make_emu(cfg);
    } catch (const Error& e) {
      tried += std::string("\n  emu: ") + e.what();
    }
  }
  try {
    return make_fabric(cfg);
  } catch (const Error& e) {
    tried += std::string("\n  fabric: ") + e.what();
  }
  fail("MK_NET=auto found no usable network transport:", tried);
}

// Under MPS other processes' kernels share the GPU at the same time, and 1-4
// SMs left free were too few for emu's copies (they never ran: GemmAr at 62
// of 66 CTAs stopped, at 60 it ran; bench/results/emu-mps-free-sms-20261203.md).
int transport_free_sms(const std::string& family, int knob, bool mps) {
  if (family != "emu" && family != "fabric") return 0;
  if (knob > 0) return knob;
  return mps ? 8 : 1;
}

}  // namespace mk::net
