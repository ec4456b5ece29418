// mkernel: device opening and memory registration shared by the verbs
// backend's RC and SRD paths (verbs_common.hpp).
#include "src/net/verbs/verbs_common.hpp"

#include "mkernel/bootstrap.hpp"
#include "src/net/verbs/endpoint.hpp"
#include "src/net/nic_affinity.hpp"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "mkernel/error.hpp"
#include "mkernel/knobs.hpp"
#include "src/runtime/cuda_driver.hpp"
#include "src/runtime/device_health.hpp"

namespace mk::net::verbs {

std::string errno_str(int e) { return cat(std::strerror(e), " (errno ", e, ")"); }

OpenedDevice open_device(const IbvApi& a, const std::string& want, const std::string& gpu_pci_path,
                         int local_rank) {
  const std::vector<std::string> names = nic_name_list(want);
  int n = 0;
  ibv_device** list = a.get_device_list(&n);
  if (!list || n == 0) {
    if (list) a.free_device_list(list);
    fail("verbs: no RDMA device found (libibverbs lists none); use MK_NET=fabric or emu");
  }
  std::string seen;
  std::vector<std::string> present;
  // Every wanted device is opened to learn whether it has an active port (NCCL's IB transport opens every
  // device too, and keeps them): the choice by PCI distance is among those, and the others are closed at once.
  // Asking sysfs instead would skip the opens where it exists, at the cost of a second path, untested where it
  // does not (softverbs): not worth a few milliseconds at set-up.
  std::vector<OpenedDevice> open;  // every wanted device with an active port
  for (int i = 0; i < n; ++i) {
    const std::string name = a.get_device_name(list[i]);
    seen += (seen.empty() ? "" : ", ") + name;
    present.push_back(name);
    if (!names.empty() && std::find(names.begin(), names.end(), name) == names.end()) continue;
    ibv_context* ctx = a.open_device(list[i]);
    if (!ctx) continue;
    OpenedDevice d;
    ibv_device_attr da{};
    if (a.query_device(ctx, &da) == 0) {
      for (int p = 1; p <= da.phys_port_cnt; ++p) {
        ibv_port_attr pa{};
        if (a.query_port(ctx, static_cast<uint8_t>(p), &pa) == 0 && pa.state == IBV_PORT_ACTIVE) {
          d = {ctx, name, p, pa};
          break;
        }
      }
    }
    if (d.ctx)
      open.push_back(d);
    else
      a.close_device(ctx);
  }
  a.free_device_list(list);
  for (const auto& w : names)  // (a misspelt name is said, even where another named device is there)
    if (std::find(present.begin(), present.end(), w) == present.end()) {
      for (const auto& d : open) a.close_device(d.ctx);
      fail("verbs: no RDMA device named '", w, "' (MK_IB_DEVICE); present: ", seen);
    }
  if (open.empty()) {
    fail("verbs: no RDMA device with an active port", names.empty() ? "" : cat(" named ", want),
         " (present: ", seen, ")");
  }
  std::vector<NicCandidate> cands;
  for (const auto& d : open) cands.push_back({d.name, ib_device_pci_path(d.name)});
  const size_t pick = choose_nic(cands, gpu_pci_path, local_rank);
  for (size_t i = 0; i < open.size(); ++i)
    if (i != pick) a.close_device(open[i].ctx);
  if (open.size() > 1) log(LogLevel::Info, cat("verbs: ", nic_choice_line(cands, pick, gpu_pci_path, local_rank)));
  return open[pick];
}

bool is_efa_device(const IbvApi& a, const OpenedDevice& dev) {
#if MK_HAVE_EFADV
  efadv_device_attr ea{};
  if (a.efadv_query_device && a.efadv_query_device(dev.ctx, &ea, sizeof(ea)) == 0) return true;
#else
  (void)a;
#endif
  return dev.name.rfind("efa", 0) == 0;
}

ibv_mr* register_memory(const IbvApi& a, ibv_pd* pd, const std::string& dev_name, const Region& r,
                        int access) {
  ibv_mr* mr = nullptr;
  std::string why;
  if (r.device) {
    // DMA-BUF first (upstream kernel path), then ibv_reg_mr on the device
    // pointer (needs the nvidia-peermem module).
    const long page = sysconf(_SC_PAGESIZE);
    const uint64_t base = reinterpret_cast<uint64_t>(r.base);
    const uint64_t lo = base & ~static_cast<uint64_t>(page - 1);
    const uint64_t hi = (base + r.bytes + page - 1) & ~static_cast<uint64_t>(page - 1);
    if (a.reg_dmabuf_mr) {
      try {
        int fd = -1;
        CUresult cr;
        {
          const DeviceScope on(r.cuda_device, std::nothrow);
          cr = drv::api().cuMemGetHandleForAddressRange(&fd, static_cast<CUdeviceptr>(lo), hi - lo,
                                                        CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
        }
        if (cr != CUDA_SUCCESS) {
          why = cat("cuMemGetHandleForAddressRange: CUresult ", static_cast<int>(cr));
        } else {
          mr = a.reg_dmabuf_mr(pd, base - lo, r.bytes, base, fd, access);
          if (!mr) why = cat("ibv_reg_dmabuf_mr: ", errno_str(errno));
          ::close(fd);  // the MR holds its own reference
        }
      } catch (const Error& e) {
        why = error_reason(e);
      }
    } else {
      why = "ibv_reg_dmabuf_mr missing (rdma-core < 34)";
    }
  }
  if (!mr) {
    mr = a.reg_mr(pd, r.base, r.bytes, access);
    if (mr && r.device)
      log(LogLevel::Info, cat("verbs: region ", r.id, " (GPU memory) registered by address on ", dev_name,
                              " (not by DMA-BUF: ", why, ")"));
    if (!mr)
      fail("verbs: cannot register region ", r.id, " (", r.bytes, " bytes of ",
           r.device ? "GPU" : "host", " memory) on ", dev_name, ": ibv_reg_mr: ", errno_str(errno),
           why.empty() ? "" : "; " + why,
           r.device ? " (GPU memory needs DMA-BUF support or the nvidia-peermem module)" : "");
  }
  return mr;
}

ibv_mr* register_and_exchange(const IbvApi& a, ibv_pd* pd, const std::string& dev_name, Bootstrap& bs,
                              const Region& r, int access, RegionTable& regions, std::vector<ibv_mr*>& owned,
                              const std::function<void()>& prepare) {
  RegionInfo mine;
  mine.id = r.id;
  ibv_mr* mr = nullptr;
  try {
    if (r.id < 0) fail("verbs: region id ", r.id, " is negative");
    if (prepare) prepare();
    if (r.bytes > 0) {
      mr = register_memory(a, pd, dev_name, r, access);
      owned.push_back(mr);
    }
    mine.addr = reinterpret_cast<uint64_t>(r.base);
    mine.bytes = r.bytes;
    mine.rkey = mr ? mr->rkey : 0;
  } catch (const std::exception& e) {  // (not only mk::Error: `prepare` may throw others)
    mine = {};
    mine.ok = false;
    mine.id = r.id;
    mine.error = error_reason(e);
  }
  auto drop_mr = [&] {  // this rank's registration goes with a failed exchange
    if (!mr) return;
    owned.erase(std::remove(owned.begin(), owned.end(), mr), owned.end());
    a.dereg_mr(mr);
    mr = nullptr;
  };
  std::vector<RegionInfo> infos;
  std::string err;
  try {  // (the exchange timing out or a peer's blob malformed: nothing of the region may stay registered)
    const std::vector<std::string> all = bs.allgather(encode(mine), "verbs: register_region");
    for (int p = 0; p < bs.world() && err.empty(); ++p) {
      infos.push_back(decode_region(all[p], p));
      if (!infos.back().ok) err = cat("verbs: register_region failed on rank ", p, ": ", infos.back().error);
      else if (infos.back().id != r.id)
        err = cat("verbs: register_region: rank ", p, " registered region ", infos.back().id,
                  " while this rank registered ", r.id, " (same order on every rank)");
    }
  } catch (...) {
    drop_mr();
    throw;
  }
  if (!err.empty()) {  // on every rank alike: this rank's registration goes too
    drop_mr();
    fail(err);
  }
  regions.set_local(r.id, {mine.addr, mine.bytes, mr ? mr->lkey : 0, true});
  for (int p : regions.peers()) regions.set_remote(p, r.id, {infos[p].addr, infos[p].bytes, infos[p].rkey, true});
  return mr;
}

}  // namespace mk::net::verbs
