#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>
#include <string>

#include "mkernel/topology.hpp"
#include "tests/cpu/env_map.hpp"

using namespace mk;

TEST(Topology, OneHostIsOneNode) {
  auto t = compute_topology({"a", "a", "a", "a"}, 2, 0);
  EXPECT_EQ(t.num_nodes, 1);
  EXPECT_EQ(t.local_size, 4);
  EXPECT_EQ(t.local_rank, 2);
  EXPECT_TRUE(t.uniform);
  EXPECT_FALSE(t.forced);
}

TEST(Topology, GroupsByHostInRankOrder) {
  // Interleaved placement: ranks 0,2 on host x; 1,3 on host y.
  std::vector<std::string> h = {"x", "y", "x", "y"};
  auto t = compute_topology(h, 3, 0);
  EXPECT_EQ(t.num_nodes, 2);
  EXPECT_EQ(t.node_ranks[0], (std::vector<int>{0, 2}));
  EXPECT_EQ(t.node_ranks[1], (std::vector<int>{1, 3}));
  EXPECT_EQ(t.node, 1);
  EXPECT_EQ(t.local_rank, 1);
  EXPECT_TRUE(t.same_node(0, 2));
  EXPECT_FALSE(t.same_node(0, 1));
  EXPECT_EQ(t.rank_at(1, 0), 1);
}

TEST(Topology, UnevenHostsAreNotUniform) {
  auto t = compute_topology({"a", "a", "a", "b"}, 3, 0);
  EXPECT_EQ(t.num_nodes, 2);
  EXPECT_FALSE(t.uniform);
  EXPECT_EQ(t.local_size, 1);
}

TEST(Topology, OverrideSplitsAHostIntoNodes) {
  std::vector<std::string> h(8, "host");
  auto t = compute_topology(h, 5, 4);
  EXPECT_TRUE(t.forced);
  EXPECT_EQ(t.num_nodes, 2);
  EXPECT_EQ(t.node, 1);
  EXPECT_EQ(t.local_rank, 1);
  EXPECT_EQ(t.local_size, 4);
  EXPECT_EQ(t.node_ranks[1], (std::vector<int>{4, 5, 6, 7}));

  auto one = compute_topology({"h", "h"}, 1, 1);  // 2x1 emulated nodes
  EXPECT_EQ(one.num_nodes, 2);
  EXPECT_EQ(one.local_size, 1);
  EXPECT_EQ(one.local_rank, 0);
  EXPECT_FALSE(one.same_node(0, 1));
}

TEST(Topology, OverrideAcrossHostsSplitsEachHost) {
  std::vector<std::string> h = {"a", "a", "a", "a", "b", "b", "b", "b"};
  auto t = compute_topology(h, 6, 2);
  EXPECT_EQ(t.num_nodes, 4);
  EXPECT_EQ(t.node, 3);
  EXPECT_EQ(t.node_ranks[2], (std::vector<int>{4, 5}));
  EXPECT_EQ(t.host_ranks, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(t.host_of[3], 0);
  EXPECT_EQ(t.host_of[6], 1);
}

TEST(Topology, OverrideEqualToHostSizeIsNotForced) {
  auto t = compute_topology({"a", "a"}, 0, 2);
  EXPECT_FALSE(t.forced);
  EXPECT_EQ(t.num_nodes, 1);
}

TEST(Topology, OverrideThatDoesNotDivideIsAnError) {
  EXPECT_EQ(mk::test::expect_error([] { compute_topology({"a", "a", "a", "a"}, 0, 3); },
                                   {"MK_RANKS_PER_NODE=3", "does not divide", "4 ranks", "'a'"}),
            "");
}

TEST(Topology, BadArgumentsAreErrors) {
  EXPECT_EQ(mk::test::expect_error([] { compute_topology({}, 0, 0); }, {"empty"}), "");
  EXPECT_EQ(mk::test::expect_error([] { compute_topology({"a"}, 1, 0); }, {"rank 1"}), "");
}

// The host's name and its boot id (containers on one machine share it; another machine's differs), or the
// machine id where /proc hides the boot id: what tells two hosts of one name apart.
TEST(Topology, HostIdIsTheHostNameAndItsBootId) {
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
  const std::string id = local_host_id();
  EXPECT_EQ(id, local_host_id());
  EXPECT_EQ(id, host_id_of(host, {"/proc/sys/kernel/random/boot_id", "/etc/machine-id"}));
  EXPECT_EQ(id.rfind(std::string(host) + "/", 0), 0u) << id;
}

// Two hosts of one name with different boot ids are two hosts; the machine id stands in for an unreadable or
// empty boot id; neither readable leaves the name alone.
TEST(Topology, HostsOfOneNameAreToldApartByTheirIds) {
  const std::string dir = ::testing::TempDir();
  const auto file = [&](const std::string& name, const std::string& text) {
    const std::string path = dir + "/mk_host_id_" + name;
    std::ofstream(path) << text;
    return path;
  };
  const std::string boot_a = file("boot_a", "1111-aaaa\n"), boot_b = file("boot_b", "2222-bbbb\n");
  const std::string empty = file("empty", ""), machine = file("machine", "m-9\n");
  const std::string missing = dir + "/mk_host_id_missing";
  EXPECT_EQ(host_id_of("node", {boot_a, machine}), "node/1111-aaaa");
  EXPECT_NE(host_id_of("node", {boot_a, machine}), host_id_of("node", {boot_b, machine}));
  EXPECT_EQ(host_id_of("node", {missing, machine}), "node/m-9");
  EXPECT_EQ(host_id_of("node", {empty, machine}), "node/m-9");
  EXPECT_EQ(host_id_of("node", {missing, empty}), "node/");
  EXPECT_NE(host_id_of("node", {boot_a}), host_id_of("other", {boot_a}));
}
