// Which NIC a rank opens (src/net/nic_affinity.hpp), on a made-up sysfs tree: two PCIe switches, each with a GPU
// and a NIC below it, and a third NIC on another root complex.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "mkernel/error.hpp"
#include "mkernel/topology.hpp"
#include "src/net/nic_affinity.hpp"

namespace fs = std::filesystem;
using namespace mk::net;

namespace {

class FakeSysfs : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/mk_sysfs_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root = tmpl;
    const std::string sw0 = "devices/pci0000:00/0000:00:01.0/0000:01:00.0";
    const std::string sw1 = "devices/pci0000:00/0000:00:02.0/0000:11:00.0";
    add_pci("0000:02:00.0", sw0 + "/0000:02:00.0");  // GPU 0
    add_pci("0000:02:01.0", sw0 + "/0000:02:01.0");  // NIC mlx5_0, beside GPU 0
    add_pci("0000:12:00.0", sw1 + "/0000:12:00.0");  // GPU 1
    add_pci("0000:12:01.0", sw1 + "/0000:12:01.0");  // NIC mlx5_1, beside GPU 1
    add_pci("0000:81:00.0", "devices/pci0000:80/0000:80:01.0/0000:81:00.0");  // NIC mlx5_2, the other socket
    add_ib("mlx5_0", "0000:02:01.0");
    add_ib("mlx5_1", "0000:12:01.0");
    add_ib("mlx5_2", "0000:81:00.0");
  }
  void TearDown() override { fs::remove_all(root); }

  void add_pci(const std::string& id, const std::string& rel) {
    fs::create_directories(root + "/" + rel);
    fs::create_directories(root + "/bus/pci/devices");
    fs::create_directory_symlink(root + "/" + rel, root + "/bus/pci/devices/" + id);
  }
  void add_ib(const std::string& name, const std::string& id) {
    fs::create_directories(root + "/class/infiniband/" + name);
    fs::create_directory_symlink(root + "/bus/pci/devices/" + id, root + "/class/infiniband/" + name + "/device");
  }
  std::vector<NicCandidate> nics(std::initializer_list<const char*> names) const {
    std::vector<NicCandidate> out;
    for (const char* n : names) out.push_back({n, ib_device_pci_path(n, root)});
    return out;
  }
  std::string root;
};

TEST_F(FakeSysfs, PathsResolveAndCountPcieHops) {
  const std::string gpu0 = pci_device_path("0000:02:00.0", root);
  ASSERT_FALSE(gpu0.empty());
  EXPECT_EQ(pci_device_path("00000000:02:00.0", root), gpu0);  // CUDA's spelling (8-digit domain, upper case)
  EXPECT_EQ(pci_device_path("00000000:12:00.0", root), pci_device_path("0000:12:00.0", root));
  EXPECT_EQ(pci_device_path("0000:99:00.0", root), "");
  EXPECT_EQ(ib_device_pci_path("mlx5_9", root), "");
  EXPECT_EQ(pci_hops(gpu0, ib_device_pci_path("mlx5_0", root)), 2);  // up to the switch, down to the NIC
  EXPECT_EQ(pci_hops(gpu0, ib_device_pci_path("mlx5_1", root)), 6);
  EXPECT_EQ(pci_hops(gpu0, ib_device_pci_path("mlx5_2", root)), 7);  // across the root complexes
  EXPECT_EQ(pci_hops(gpu0, ""), -1);
}

// Each GPU takes the NIC beside it, whatever its rank's index (every rank on mlx5_0 before session 48).
TEST_F(FakeSysfs, EachGpuTakesTheNicBesideIt) {
  const auto all = nics({"mlx5_0", "mlx5_1", "mlx5_2"});
  for (int local = 0; local < 4; ++local) {
    EXPECT_EQ(all[choose_nic(all, pci_device_path("0000:02:00.0", root), local)].name, "mlx5_0") << local;
    EXPECT_EQ(all[choose_nic(all, pci_device_path("0000:12:00.0", root), local)].name, "mlx5_1") << local;
  }
  // Restricted to two (MK_IB_DEVICE=mlx5_2,mlx5_1): GPU 0's nearest of those.
  const auto two = nics({"mlx5_2", "mlx5_1"});
  EXPECT_EQ(two[choose_nic(two, pci_device_path("0000:02:00.0", root), 0)].name, "mlx5_1");
  const std::string line = nic_choice_line(all, 0, pci_device_path("0000:02:00.0", root), 0);
  EXPECT_NE(line.find("NIC mlx5_0 of 3 (mlx5_0: 2 PCIe hops, mlx5_1: 6 PCIe hops, mlx5_2: 7 PCIe hops)"),
            std::string::npos) << line;
}

// NICs equally near, or whose place is unknown (no sysfs: a CPU test, a container), are shared out by the rank's
// index on its host.
TEST_F(FakeSysfs, EquallyNearOrUnknownNicsAreSharedOutByIndex) {
  const std::vector<NicCandidate> unknown = {{"a", ""}, {"b", ""}, {"c", ""}};
  EXPECT_EQ(choose_nic(unknown, pci_device_path("0000:02:00.0", root), 0), 0u);
  EXPECT_EQ(choose_nic(unknown, "", 1), 1u);
  EXPECT_EQ(choose_nic(unknown, "", 5), 2u);
  EXPECT_EQ(choose_nic(unknown, "", -1), 0u);
  // A GPU on the root bus is as near to the NIC below either switch (4 hops each):
  add_pci("0000:00:05.0", "devices/pci0000:00/0000:00:05.0");
  const auto two = nics({"mlx5_0", "mlx5_1"});
  const std::string gpu = pci_device_path("0000:00:05.0", root);
  EXPECT_EQ(pci_hops(gpu, two[0].pci_path), pci_hops(gpu, two[1].pci_path));
  EXPECT_EQ(two[choose_nic(two, gpu, 0)].name, "mlx5_0");
  EXPECT_EQ(two[choose_nic(two, gpu, 1)].name, "mlx5_1");
  EXPECT_THROW(choose_nic({}, gpu, 0), mk::Error);
}

TEST(NicAffinity, NameListsAndHostIndex) {
  EXPECT_EQ(nic_name_list(""), std::vector<std::string>{});
  EXPECT_EQ(nic_name_list("mlx5_0"), std::vector<std::string>{"mlx5_0"});
  EXPECT_EQ(nic_name_list(" mlx5_0, mlx5_1,,mlx5_0 "), (std::vector<std::string>{"mlx5_0", "mlx5_1"}));
  // Ranks 1, 3 and 5 on one host (nodes split by MK_RANKS_PER_NODE or not): rank 5 is the host's third.
  mk::Topology t;
  t.host_ranks = {1, 3, 5};
  TransportConfig cfg;
  cfg.rank = 5;
  cfg.topo = &t;
  EXPECT_EQ(host_index(cfg), 2);
  cfg.topo = nullptr;
  EXPECT_EQ(host_index(cfg), 0);
}

}  // namespace
