// Launched by tools/mkrun in ctest: joins the job from the launcher's
// environment, checks collectives and topology, and can play a dying rank.
//   --expect-nodes N   the topology must have N nodes (MK_RANKS_PER_NODE)
//   --die-rank R       rank R exits abruptly after joining; the others must
//                      get an error that names it
//   --set-on-rank R NAME=VALUE --expect-error S
//                      rank R sets NAME=VALUE, then every rank makes an
//                      mk::Communicator, which must fail with a message
//                      containing S on every rank (collective knobs)
//   --relayed          with --set-on-rank: only rank R finds the error itself;
//                      the others must hear it relayed ("rank R left the
//                      job: ... S") within 10 s, not at the bootstrap's bound
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "mkernel/mkernel.hpp"

int main(int argc, char** argv) {
  int expect_nodes = -1, die_rank = -1, set_rank = -1;
  bool relayed = false;
  std::string set_var, expect_error;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--expect-nodes") && i + 1 < argc) expect_nodes = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--die-rank") && i + 1 < argc) die_rank = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--set-on-rank") && i + 2 < argc) set_rank = std::atoi(argv[++i]), set_var = argv[++i];
    else if (!std::strcmp(argv[i], "--expect-error") && i + 1 < argc) expect_error = argv[++i];
    else if (!std::strcmp(argv[i], "--relayed")) relayed = true;
    else {
      std::cerr << "usage: " << argv[0]
                << " [--expect-nodes N] [--die-rank R] [--set-on-rank R NAME=VALUE --expect-error S [--relayed]]\n";
      return 2;
    }
  }
  try {
    auto li = mk::detect_launch();
    if (!li) {
      std::cerr << "bootstrap_probe: no launcher environment (run under tools/mkrun)\n";
      return 1;
    }
    if (!expect_error.empty()) {
      const size_t eq = set_var.find('=');
      if (li->rank == set_rank && eq != std::string::npos)
        setenv(set_var.substr(0, eq).c_str(), set_var.substr(eq + 1).c_str(), 1);
      const auto t0 = std::chrono::steady_clock::now();
      try {
        mk::Communicator c(*li);
      } catch (const mk::Error& e) {
        const std::string msg = e.what();
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        // Its own finding, not a peer's relayed ("rank R left the job: ..."): every rank must see it; with
        // --relayed, only rank R, and the others hear it from R at once.
        const bool own = msg.find("left the job") == std::string::npos;
        const bool want_own = !relayed || li->rank == set_rank;
        const std::string relay = "rank " + std::to_string(set_rank) + " left the job";
        if (msg.find(expect_error) != std::string::npos && own == want_own &&
            (own || msg.find(relay) != std::string::npos) && s < 10) {
          std::cout << "rank " << li->rank << ": got the expected error after " << s << " s: " << msg << "\n";
          return 0;
        }
        std::cerr << "rank " << li->rank << ": wrong error after " << s << " s: " << msg << "\n";
        return 1;
      }
      std::cerr << "rank " << li->rank << ": the communicator was made; expected \"" << expect_error << "\"\n";
      return 1;
    }
    mk::Bootstrap b(*li);
    if (b.rank() == die_rank) std::_Exit(0);
    if (die_rank >= 0) {
      try {
        b.barrier();
      } catch (const mk::Error& e) {
        std::string msg = e.what();
        if (msg.find("rank " + std::to_string(die_rank) + " disconnected") != std::string::npos) {
          std::cout << "rank " << b.rank() << ": got the expected error: " << msg << "\n";
          return 0;
        }
        std::cerr << "rank " << b.rank() << ": wrong error: " << msg << "\n";
        return 1;
      }
      std::cerr << "rank " << b.rank() << ": barrier succeeded although rank " << die_rank << " died\n";
      return 1;
    }
    auto hosts = b.allgather(mk::local_host_id());
    auto topo = mk::compute_topology(hosts, b.rank(), static_cast<int>(mk::knob_int(mk::Knob::MK_RANKS_PER_NODE)));
    auto ranks = b.allgather(std::to_string(b.rank()));
    for (int r = 0; r < b.world(); ++r)
      if (ranks[r] != std::to_string(r)) {
        std::cerr << "allgather slot " << r << " holds " << ranks[r] << "\n";
        return 1;
      }
    if (li->local_rank != topo.local_rank && expect_nodes < 0) {
      std::cerr << "launcher local rank " << li->local_rank << " != topology local rank " << topo.local_rank << "\n";
      return 1;
    }
    if (expect_nodes >= 0 && topo.num_nodes != expect_nodes) {
      std::cerr << "expected " << expect_nodes << " nodes, got " << topo.describe() << "\n";
      return 1;
    }
    if (b.rank() == 0) std::cout << "bootstrap ok: " << topo.describe() << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}
