// Teardown after a failure (run with --failed-teardown-scenario, 2 ranks on 2
// nodes: MK_RANKS_PER_NODE=1): once a rank's device has failed (a kernel
// trapped, as a timed-out wait does; the error is fatal), releasing what a
// plan holds (its network region, its signal words) and then its
// communicator do not wait for the other ranks. Rank 0 (which hosts the
// bootstrap root) traps and releases at once, and keeps its communicator 12 s
// more; rank 1 comes 8 s later, and its own release must not wait for rank 0.
// Before 2026-12-04 (session 33) rank 0 waited for rank 1 in
// Network::deregister_buffer's barrier, in SignalLease's, and in its root
// until rank 1 left: up to the bootstrap bound (60 s) when rank 1 sat in its
// own stream sync (a fabric run: bench/results/teardown-after-failure-20261204.md).
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <thread>

#include "mkernel/mkernel.hpp"
#include "mkernel/signal_lease.hpp"

using namespace mk;

namespace {

__global__ void trap_kernel() { __trap(); }

constexpr double kHealthyRankLateS = 8.0;
constexpr double kFailedRankBoundS = 3.0;

}  // namespace

int run_failed_teardown_scenario() {
  try {
    // A communicator of its own (not the tests' shared one): its destruction is timed too.
    std::unique_ptr<Communicator> comm = Communicator::from_env();
    Communicator& c = *comm;
    if (c.world() != 2 || c.topology().num_nodes != 2) {
      std::printf("SKIPPED: the failed-teardown scenario needs 2 ranks on 2 nodes (MK_RANKS_PER_NODE=1); have %d "
                  "rank(s) on %d node(s)\n", c.world(), c.topology().num_nodes);
      return 77;
    }
    const int rank = c.rank();
    SymmetricBuffer& buf = c.alloc_symmetric(1 << 20);
    Network& net = c.network();
    const int region = net.register_buffer(buf);
    auto lease = std::make_unique<SignalLease>();
    lease->take(c, 4);
    c.barrier();
    const bool failed_rank = rank == 0;
    if (failed_rank) {
      trap_kernel<<<1, 32>>>();
      const cudaError_t e = cudaDeviceSynchronize();
      if (e == cudaSuccess) {
        std::printf("rank 0: the trapping kernel did not fail\n");
        std::fflush(stdout);
        std::_Exit(1);
      }
      std::printf("rank 0: device failed as planned (%s)\n", cudaGetErrorString(e));
    } else {
      std::this_thread::sleep_for(std::chrono::duration<double>(kHealthyRankLateS));
    }
    const auto t0 = std::chrono::steady_clock::now();
    std::string err;
    try {
      net.deregister_buffer(region);
    } catch (const std::exception& e) {
      err = e.what();
    }
    lease.reset();
    const double release_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // The failed rank keeps its communicator past the healthy rank's teardown (a Python program holding it, say):
    // its release already told the peers (the bootstrap aborted, session 56), so the healthy rank's steps fail at
    // once; before, they waited for this rank until it destroyed the communicator (or the bootstrap bound).
    double kept_s = 0;
    if (failed_rank) {
      const auto k0 = std::chrono::steady_clock::now();
      std::this_thread::sleep_for(std::chrono::duration<double>(kHealthyRankLateS + kFailedRankBoundS + 1.0));
      kept_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - k0).count();
    }
    comm.reset();
    const double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() - kept_s;
    // The failed rank releases without an error and leaves at once; the
    // healthy one's steps with rank 0 fail at once (rank 0's process, which
    // hosts the bootstrap root, has left or aborted it).
    const bool ok = failed_rank ? err.empty() && total_s < kFailedRankBoundS : total_s < kFailedRankBoundS;
    std::printf("rank %d released its network region and signal words in %.2f s%s, its communicator after %.2f s%s%s "
                "-> %s\n", rank, release_s, failed_rank ? " after its device failed" : "", total_s,
                err.empty() ? "" : "; deregister_buffer: ", err.c_str(), ok ? "OK" : "WRONG");
    std::fflush(stdout);
    std::_Exit(ok ? 0 : 1);
  } catch (const std::exception& e) {
    std::printf("failed-teardown scenario: %s\n", e.what());
    std::fflush(stdout);
    std::_Exit(1);
  }
}
