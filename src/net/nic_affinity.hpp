// mkernel: which NIC a rank's transport opens (DESIGN.md §4-5: one NIC per GPU, rail-aligned).
//
// A host with several NICs (8 GPUs and 8 NICs, each pair under one PCIe switch) must not put every rank on the
// first NIC: each rank takes the NIC nearest its GPU in the PCIe tree (the fewest hops between the two devices'
// sysfs paths); NICs equally near (or whose place is unknown: no sysfs, a CPU test) are shared out by the rank's
// index inside its node, so that the ranks spread over them. The verbs and fabric backends list their candidates
// (those with an active port, restricted to MK_IB_DEVICE's or the provider's names) and ask choose_nic.
#pragma once

#include <string>
#include <vector>

#include "src/net/transport.hpp"

namespace mk::net {

struct NicCandidate {
  std::string name;      // "mlx5_0", "rdmap16s27"
  std::string pci_path;  // its PCI device's sysfs path (resolved), "" unknown
};

// The sysfs path of a PCI device ("0000:1b:00.0" or CUDA's "00000000:1B:00.0"), resolved through the symlinks of
// <sysfs_root>/bus/pci/devices; "" when it is not there.
std::string pci_device_path(const std::string& bus_id, const std::string& sysfs_root = "/sys");

// The sysfs path of CUDA device `cuda_device`'s PCI function; "" for -1 (a CPU test) or where it is unknown.
std::string gpu_pci_path(int cuda_device);

// The resolved sysfs path of an RDMA device's PCI function (<sysfs_root>/class/infiniband/<name>/device); "".
std::string ib_device_pci_path(const std::string& name, const std::string& sysfs_root = "/sys");

// PCIe hops between two resolved sysfs paths: the components below their deepest common ancestor; -1 when either
// is unknown.
int pci_hops(const std::string& a, const std::string& b);

// The index of the candidate the rank takes: the nearest to gpu_pci_path, ties (and unknown places) shared out by
// local_rank. `candidates` must not be empty.
size_t choose_nic(const std::vector<NicCandidate>& candidates, const std::string& gpu_pci_path, int local_rank);

// The rank's index among the ranks of its host (the NICs are the host's, whatever MK_RANKS_PER_NODE says); 0
// without a topology.
int host_index(const TransportConfig& cfg);

// MK_IB_DEVICE's names: a comma list (spaces ignored), empty for any device.
std::vector<std::string> nic_name_list(const std::string& knob_value);

// One line for the logs: which NIC the rank took, and why.
std::string nic_choice_line(const std::vector<NicCandidate>& candidates, size_t chosen,
                            const std::string& gpu_pci_path, int local_rank);

}  // namespace mk::net
