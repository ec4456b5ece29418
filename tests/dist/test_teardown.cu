// Teardown after a failure (run with --failed-teardown-scenario, 2 ranks on 2
// nodes: MK_RANKS_PER_NODE=1): once a rank's device has failed (a kernel
// trapped, as a timed-out wait does; the error is sticky), releasing what a
// plan holds (its network region, its signal words) does not wait for the
// other ranks. Rank 0 traps and releases at once; rank 1 comes 8 s later.
// Before 2026-12-04 (session 33) rank 0 waited for rank 1 there, in
// Network::deregister_buffer's barrier and in SignalLease's, up to the
// bootstrap bound (60 s) when rank 1 never came: a fabric run whose rank 1
// sat in its own stream sync (bench/results/teardown-after-failure-20261204.md).
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <thread>

#include "mkernel/mkernel.hpp"
#include "mkernel/signal_lease.hpp"
#include "tests/test_comm.hpp"

using namespace mk;
using mk::test::comm;

namespace {

__global__ void trap_kernel() { __trap(); }

constexpr double kHealthyRankLateS = 8.0;
constexpr double kFailedRankBoundS = 3.0;

}  // namespace

int run_failed_teardown_scenario() {
  try {
    Communicator& c = comm();
    if (c.world() != 2 || c.topology().num_nodes != 2) {
      std::printf("SKIPPED: the failed-teardown scenario needs 2 ranks on 2 nodes (MK_RANKS_PER_NODE=1); have %d "
                  "rank(s) on %d node(s)\n", c.world(), c.topology().num_nodes);
      return 77;
    }
    SymmetricBuffer& buf = c.alloc_symmetric(1 << 20);
    Network& net = c.network();
    const int region = net.register_buffer(buf);
    SignalLease lease;
    lease.take(c, 4);
    c.barrier();
    const bool failed_rank = c.rank() == 0;
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
    try {
      net.deregister_buffer(region);
    } catch (const std::exception& e) {
      std::printf("rank %d: deregister_buffer: %s\n", c.rank(), e.what());
    }
    lease.reset();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // Rank 1's waits end when rank 0's process leaves (it hosts the bootstrap
    // root); only rank 0's time is the point.
    const bool ok = !failed_rank || secs < kFailedRankBoundS;
    std::printf("rank %d released its network region and signal words in %.2f s%s -> %s\n", c.rank(), secs,
                failed_rank ? " after its device failed" : "", ok ? "OK" : "WRONG (waited for the other rank)");
    std::fflush(stdout);
    std::_Exit(ok ? 0 : 1);
  } catch (const std::exception& e) {
    std::printf("failed-teardown scenario: %s\n", e.what());
    std::fflush(stdout);
    std::_Exit(1);
  }
}
