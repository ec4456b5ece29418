// mkernel: nodes and local ranks. A node is a set of ranks that reach each
// other over NVLink peer mappings; traffic between nodes takes the network.
#pragma once

#include <string>
#include <vector>

namespace mk {

struct Topology {
  int rank = 0;
  int world = 1;
  int node = 0;         // this rank's node index
  int num_nodes = 1;
  int local_rank = 0;   // index inside the node ("rail")
  int local_size = 1;
  bool uniform = true;  // every node has local_size ranks
  bool forced = false;  // MK_RANKS_PER_NODE split hosts into several nodes
  std::vector<int> node_of;                // per rank
  std::vector<int> local_rank_of;          // per rank
  std::vector<std::vector<int>> node_ranks;  // per node, ranks in order
  std::vector<int> host_of;                // per rank: host index (order of lowest rank)
  std::vector<int> host_ranks;             // ranks on this rank's host (a superset of its node)

  bool same_node(int a, int b) const { return node_of.at(a) == node_of.at(b); }
  // Global rank of local rank `lr` on node `n`.
  int rank_at(int n, int lr) const { return node_ranks.at(n).at(lr); }
  std::string describe() const;
};

// Groups ranks into nodes. host_ids[r] identifies rank r's host; nodes are
// numbered by their lowest rank. ranks_per_node > 0 splits each host's ranks
// (in rank order) into nodes of that many ranks and must divide each host's
// count; otherwise mk::Error.
Topology compute_topology(const std::vector<std::string>& host_ids, int rank, int ranks_per_node);

// This host's identity: host name plus kernel boot id.
std::string local_host_id();
// local_host_id's rule, for a given name and id files (tests): "host/ID" with ID the first line of the first file
// that has a non-empty one, else "host/" (said once as a warning: hosts of one name would be taken for one).
std::string host_id_of(const std::string& host, const std::vector<std::string>& id_paths);

}  // namespace mk
