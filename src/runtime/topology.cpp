#include "mkernel/topology.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <map>

#include "mkernel/error.hpp"
#include "mkernel/knobs.hpp"

namespace mk {

Topology compute_topology(const std::vector<std::string>& host_ids, int rank, int ranks_per_node) {
  const int world = static_cast<int>(host_ids.size());
  if (world < 1) fail("topology: empty world");
  if (rank < 0 || rank >= world) fail("topology: rank ", rank, " outside [0, ", world, ")");
  if (ranks_per_node < 0) fail("MK_RANKS_PER_NODE=", ranks_per_node, " must be >= 0");

  // Hosts in order of their lowest rank.
  std::vector<std::string> hosts;
  std::map<std::string, std::vector<int>> by_host;
  for (int r = 0; r < world; ++r) {
    auto& v = by_host[host_ids[r]];
    if (v.empty()) hosts.push_back(host_ids[r]);
    v.push_back(r);
  }

  Topology t;
  t.rank = rank;
  t.world = world;
  t.node_of.assign(world, -1);
  t.local_rank_of.assign(world, -1);
  for (const auto& h : hosts) {
    const auto& ranks = by_host[h];
    int k = ranks_per_node > 0 ? ranks_per_node : static_cast<int>(ranks.size());
    if (ranks.size() % k != 0)
      fail("MK_RANKS_PER_NODE=", ranks_per_node, " does not divide the ", ranks.size(),
           " ranks on host '", h, "'");
    if (ranks_per_node > 0 && k < static_cast<int>(ranks.size())) t.forced = true;
    for (size_t i = 0; i < ranks.size(); i += k) {
      std::vector<int> node(ranks.begin() + i, ranks.begin() + i + k);
      for (int j = 0; j < k; ++j) {
        t.node_of[node[j]] = static_cast<int>(t.node_ranks.size());
        t.local_rank_of[node[j]] = j;
      }
      t.node_ranks.push_back(std::move(node));
    }
  }
  // Renumber nodes by lowest rank (hosts are already in that order, and the
  // chunks of one host are in rank order, but a later host may interleave).
  std::vector<int> order(t.node_ranks.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return t.node_ranks[a][0] < t.node_ranks[b][0]; });
  std::vector<std::vector<int>> sorted;
  std::vector<int> new_id(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    new_id[order[i]] = static_cast<int>(i);
    sorted.push_back(t.node_ranks[order[i]]);
  }
  t.node_ranks = std::move(sorted);
  for (auto& n : t.node_of) n = new_id[n];

  t.host_of.assign(world, -1);
  for (size_t h = 0; h < hosts.size(); ++h)
    for (int r : by_host[hosts[h]]) t.host_of[r] = static_cast<int>(h);
  t.host_ranks = by_host[host_ids[rank]];
  t.num_nodes = static_cast<int>(t.node_ranks.size());
  t.node = t.node_of[rank];
  t.local_rank = t.local_rank_of[rank];
  t.local_size = static_cast<int>(t.node_ranks[t.node].size());
  for (const auto& n : t.node_ranks)
    if (static_cast<int>(n.size()) != t.local_size) t.uniform = false;
  return t;
}

std::string Topology::describe() const {
  std::string s = cat(world, " ranks on ", num_nodes, " node(s)", forced ? " (MK_RANKS_PER_NODE split)" : "", ":");
  for (int n = 0; n < num_nodes; ++n) {
    s += cat(" node", n, "={");
    for (size_t i = 0; i < node_ranks[n].size(); ++i) s += cat(i ? "," : "", node_ranks[n][i]);
    s += "}";
  }
  return s;
}

std::string host_id_of(const std::string& host, const std::vector<std::string>& id_paths) {
  for (const auto& path : id_paths) {
    std::string id;
    std::ifstream f(path);
    if (std::getline(f, id) && !id.empty()) return host + "/" + id;
  }
  static std::atomic<bool> said{false};
  if (!said.exchange(true)) {
    std::string tried;
    for (const auto& path : id_paths) tried += cat(tried.empty() ? "" : " nor ", path);
    log(LogLevel::Warn, cat("warning: neither ", tried, " is readable: this host is told apart from others by its ",
                            "name alone ('", host, "'); hosts of one name would be taken for one"));
  }
  return host + "/";
}

std::string local_host_id() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  // The kernel's boot id tells hosts of one name apart (containers keep the host's); the machine id where /proc
  // hides it. Without either, two hosts of one name would be taken for one (wrong nodes, or a false "both use GPU"
  // refusal): said once, so such a result can be traced.
  return host_id_of(host, {"/proc/sys/kernel/random/boot_id", "/etc/machine-id"});
}

}  // namespace mk
