// Dist tier entry point, one process per GPU under tools/mkrun or torchrun.
// Skips (exit 77) when the host has fewer GPUs than local ranks.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "mkernel/knobs.hpp"
#include "tests/test_env.hpp"

int run_abort_scenario();            // test_symmetric.cu
int run_failed_teardown_scenario();  // test_teardown.cu
int run_net_open_refused_scenario();  // net_open_scenario.cpp

int main(int argc, char** argv) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  const char* lws = std::getenv("LOCAL_WORLD_SIZE");
  int need = lws ? std::atoi(lws) : 2;
  // Ranks may share GPUs (MK_SHARE_GPUS=1, correctness only: 2x2 on 2 GPUs,
  // or every topology on a one-GPU machine), read by the library's parser: its every spelling (true, on, ...),
  // and a malformed value refused here, as the communicator would refuse it.
  try {
    if (mk::knob_bool(mk::Knob::MK_SHARE_GPUS)) need = 1;
  } catch (const std::exception& ex) {
    std::printf("mk_dist_tests: %s\n", ex.what());
    return 2;
  }
  // No GPU or no driver (a CPU machine, CI): skipped; any other failure to start CUDA is a failure.
  if (e != cudaSuccess && e != cudaErrorNoDevice &&
      (e != cudaErrorInsufficientDriver || mk::test::nvidia_driver_loaded())) {
    std::printf("FAILED: CUDA could not start: %s%s\n", cudaGetErrorString(e),
                e == cudaErrorInsufficientDriver ? " (an NVIDIA driver is loaded, older than this build's CUDA needs)"
                                                 : "");
    return 1;
  }
  if (e != cudaSuccess || n < need) {
    std::printf("SKIPPED: the dist test tier needs %d GPUs on this host and it has %d (%s)\n", need,
                e == cudaSuccess ? n : 0, e == cudaSuccess ? "ok" : cudaGetErrorString(e));
    return 77;
  }
  if (!std::getenv("RANK")) {
    std::printf("mk_dist_tests: launch with tools/mkrun -n 2 (or torchrun)\n");
    return 2;
  }
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--abort-scenario")) return run_abort_scenario();
    if (!std::strcmp(argv[i], "--failed-teardown-scenario")) return run_failed_teardown_scenario();
    if (!std::strcmp(argv[i], "--net-open-refused-scenario")) return run_net_open_refused_scenario();
  }
  ::testing::InitGoogleTest(&argc, argv);
  int rc = RUN_ALL_TESTS();
  std::fflush(stdout);
  return rc;
}
