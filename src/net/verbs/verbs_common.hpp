// mkernel: what the RC (verbs_transport.cpp) and EFA/SRD (efa_srd.cpp) paths
// of the verbs backend share: opening a device, telling EFA apart, and
// registering host or GPU memory.
#pragma once

#include <functional>
#include <memory>
#include <vector>
#include <string>

#include "src/net/transport.hpp"
#include "src/net/verbs/ibv_loader.hpp"
#include "src/net/verbs/wr_batcher.hpp"

namespace mk::net::verbs {

std::string errno_str(int e);

// An opened RDMA device and its first active port.
struct OpenedDevice {
  ibv_context* ctx = nullptr;
  std::string name;
  int port = 1;
  ibv_port_attr port_attr{};
};
// Opens the device this rank uses: among those with an active port (only the names in `want`, MK_IB_DEVICE's
// comma list, where it is not empty), the nearest to the GPU at `gpu_pci_path` (sysfs, "" unknown), ties shared
// out by `local_rank` (nic_affinity.hpp). Throws mk::Error ("verbs: no RDMA device ...") when there is none.
OpenedDevice open_device(const IbvApi& a, const std::string& want, const std::string& gpu_pci_path = "",
                         int local_rank = 0);

// True when `dev` is an EFA device (efadv answers, or its name says so).
bool is_efa_device(const IbvApi& a, const OpenedDevice& dev);

// Registers r (r.bytes > 0): GPU memory by DMA-BUF first, then ibv_reg_mr
// (nvidia-peermem); host memory by ibv_reg_mr. Throws mk::Error naming the
// region and every reason tried.
ibv_mr* register_memory(const IbvApi& a, ibv_pd* pd, const std::string& dev_name, const Region& r,
                        int access);

// Collective half of register_region shared by RC and SRD: runs `prepare`
// then registers `r` (when it has bytes) into `owned`, exchanges (addr, bytes,
// rkey) with every rank and fills `regions`. A local failure is sent to every
// rank first, so that no rank waits on a partner that already failed.
ibv_mr* register_and_exchange(const IbvApi& a, ibv_pd* pd, const std::string& dev_name, Bootstrap& bs,
                              const Region& r, int access, RegionTable& regions, std::vector<ibv_mr*>& owned,
                              const std::function<void()>& prepare = {});

// The EFA/SRD transport (efa_srd.cpp); takes ownership of `dev`. Throws
// mk::Error (closing dev) when the SRD path cannot run on it.
std::unique_ptr<Transport> make_efa_srd(const TransportConfig& cfg, const OpenedDevice& dev);

}  // namespace mk::net::verbs
