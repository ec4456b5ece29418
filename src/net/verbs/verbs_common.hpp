// mkernel: what the RC (verbs_transport.cpp) and EFA/SRD (efa_srd.cpp) paths
// of the verbs backend share: opening a device, telling EFA apart, and
// registering host or GPU memory.
#pragma once

#include <memory>
#include <string>

#include "src/net/transport.hpp"
#include "src/net/verbs/ibv_loader.hpp"

namespace mk::net::verbs {

std::string errno_str(int e);

// Opens MK_IB_DEVICE, or the first device with an active port.
struct OpenedDevice {
  ibv_context* ctx = nullptr;
  std::string name;
  int port = 1;
  ibv_port_attr port_attr{};
};
// Throws mk::Error ("verbs: no RDMA device ...") when there is none.
OpenedDevice open_device(const IbvApi& a, const std::string& want);

// True when `dev` is an EFA device (efadv answers, or its name says so).
bool is_efa_device(const IbvApi& a, const OpenedDevice& dev);

// Registers r (r.bytes > 0): GPU memory by DMA-BUF first, then ibv_reg_mr
// (nvidia-peermem); host memory by ibv_reg_mr. Throws mk::Error naming the
// region and every reason tried.
ibv_mr* register_memory(const IbvApi& a, ibv_pd* pd, const std::string& dev_name, const Region& r,
                        int access);

// The EFA/SRD transport (efa_srd.cpp); takes ownership of `dev`. Throws
// mk::Error (closing dev) when the SRD path cannot run on it.
std::unique_ptr<Transport> make_efa_srd(const TransportConfig& cfg, const OpenedDevice& dev);

}  // namespace mk::net::verbs
