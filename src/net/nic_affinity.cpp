// mkernel: which NIC a rank's transport opens (nic_affinity.hpp).
#include "src/net/nic_affinity.hpp"

#include <cuda_runtime_api.h>
#include <limits.h>
#include <stdlib.h>

#include <algorithm>
#include <cctype>
#include <sstream>

#include "mkernel/error.hpp"
#include "mkernel/topology.hpp"

namespace mk::net {

namespace {

std::string resolved(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) ? std::string(buf) : std::string();
}

std::vector<std::string> components(const std::string& path) {
  std::vector<std::string> out;
  std::stringstream ss(path);
  std::string part;
  while (std::getline(ss, part, '/'))
    if (!part.empty()) out.push_back(part);
  return out;
}

}  // namespace

std::string pci_device_path(const std::string& bus_id, const std::string& sysfs_root) {
  std::string id = bus_id;
  std::transform(id.begin(), id.end(), id.begin(), [](unsigned char c) { return std::tolower(c); });
  if (id.size() == 16 && id.compare(0, 4, "0000") == 0) id = id.substr(4);  // CUDA: "00000000:1b:00.0"
  if (id.empty()) return "";
  return resolved(sysfs_root + "/bus/pci/devices/" + id);
}

std::string gpu_pci_path(int cuda_device) {
  if (cuda_device < 0) return "";
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof(bus), cuda_device) != cudaSuccess) {
    cudaGetLastError();  // (not left set for the next call)
    return "";
  }
  return pci_device_path(bus);
}

std::string ib_device_pci_path(const std::string& name, const std::string& sysfs_root) {
  if (name.empty()) return "";
  return resolved(sysfs_root + "/class/infiniband/" + name + "/device");
}

int pci_hops(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty()) return -1;
  const auto ca = components(a), cb = components(b);
  size_t common = 0;
  while (common < ca.size() && common < cb.size() && ca[common] == cb[common]) ++common;
  return static_cast<int>((ca.size() - common) + (cb.size() - common));
}

size_t choose_nic(const std::vector<NicCandidate>& candidates, const std::string& gpu_pci_path, int local_rank) {
  if (candidates.empty()) fail("choose_nic: no candidate NIC");
  int best = -1;
  for (const auto& c : candidates) {
    const int h = pci_hops(c.pci_path, gpu_pci_path);
    if (h >= 0 && (best < 0 || h < best)) best = h;
  }
  std::vector<size_t> ties;
  for (size_t i = 0; i < candidates.size(); ++i)
    if (best < 0 || pci_hops(candidates[i].pci_path, gpu_pci_path) == best) ties.push_back(i);
  return ties[static_cast<size_t>(std::max(local_rank, 0)) % ties.size()];
}

int host_index(const TransportConfig& cfg) {
  if (!cfg.topo) return 0;
  const auto& h = cfg.topo->host_ranks;
  const auto it = std::find(h.begin(), h.end(), cfg.rank);
  return it == h.end() ? 0 : static_cast<int>(it - h.begin());
}

std::vector<std::string> nic_name_list(const std::string& knob_value) {
  std::vector<std::string> out;
  std::stringstream ss(knob_value);
  std::string part;
  while (std::getline(ss, part, ',')) {
    part.erase(std::remove_if(part.begin(), part.end(), [](unsigned char c) { return std::isspace(c); }),
               part.end());
    if (!part.empty() && std::find(out.begin(), out.end(), part) == out.end()) out.push_back(part);
  }
  return out;
}

std::string nic_choice_line(const std::vector<NicCandidate>& candidates, size_t chosen,
                            const std::string& gpu_pci_path, int local_rank) {
  std::string line = cat("NIC ", candidates[chosen].name, " of ", candidates.size(), " (");
  for (size_t i = 0; i < candidates.size(); ++i) {
    const int h = pci_hops(candidates[i].pci_path, gpu_pci_path);
    line += cat(i ? ", " : "", candidates[i].name,
                h >= 0 ? cat(": ", h, " PCIe hops") : std::string(": place unknown"));
  }
  return line + cat(") for local rank ", local_rank, ", GPU ", gpu_pci_path.empty() ? "place unknown" : gpu_pci_path);
}

}  // namespace mk::net
