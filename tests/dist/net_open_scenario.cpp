// A transport that one rank cannot open (run with --net-open-refused-scenario,
// 2 ranks on 2 nodes over verbs, softverbs lacking remote atomics on rank 1:
// SOFTVERBS_LACKS=atomics SOFTVERBS_LACKS_RANK=1; tools/gpu_test.sh's verbs
// part): every rank's Communicator::network() must fail at once with the same
// error, naming rank 1 and why. Before session 47 rank 1 threw alone and
// rank 0 waited in the transports' name exchange until the bootstrap bound.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>

#include "mkernel/mkernel.hpp"

using namespace mk;

int run_net_open_refused_scenario() {
  constexpr double kBoundS = 20.0;  // set-up of both ranks, far below the bootstrap's 60 s bound
  try {
    std::unique_ptr<Communicator> comm = Communicator::from_env();
    if (comm->world() != 2 || comm->topology().num_nodes != 2) {
      std::printf("SKIPPED: the refused-transport scenario needs 2 ranks on 2 nodes (MK_RANKS_PER_NODE=1); have %d "
                  "rank(s) on %d node(s)\n", comm->world(), comm->topology().num_nodes);
      return 77;
    }
    const int rank = comm->rank();
    const char* lacking = std::getenv("SOFTVERBS_LACKS_RANK");
    if (!lacking || std::string(lacking) != "1" || !std::getenv("SOFTVERBS_LACKS")) {
      std::printf("rank %d: the scenario needs SOFTVERBS_LACKS=atomics SOFTVERBS_LACKS_RANK=1 MK_NET=verbs\n", rank);
      return 2;
    }
    const auto t0 = std::chrono::steady_clock::now();
    std::string err;
    try {
      comm->network();
    } catch (const std::exception& e) {
      err = e.what();
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string want = "creating the network: rank 1 could not open its transport";
    const bool ok = err.find(want) != std::string::npos && err.find("remote atomics") != std::string::npos &&
                    s < kBoundS;
    std::printf("rank %d: network() %s after %.2f s%s%s -> %s\n", rank, err.empty() ? "succeeded" : "failed", s,
                err.empty() ? "" : ": ", err.c_str(), ok ? "OK" : "WRONG");
    std::fflush(stdout);
    comm.reset();
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("refused-transport scenario: %s\n", e.what());
    std::fflush(stdout);
    return 1;
  }
}
