// GPU tier entry point: skips visibly (exit 77, "Skipped" in ctest) on a
// machine without a GPU; runs child scenarios for tests that must watch a
// kernel trap (a trapped context cannot be reused in the same process).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tests/test_env.hpp"

int run_signals_child_scenario(const char* name);  // test_signals.cu
#ifdef MK_TEST_HAVE_GEMM
int run_gemm_child_scenario(const char* name);  // test_gemm_hooks.cu
#endif
#ifdef MK_TEST_HAVE_ATTENTION
int run_attention_child_scenario(const char* name);  // test_attention_fail.cpp
#endif

static int run_child_scenario(const char* name) {
#ifdef MK_TEST_HAVE_GEMM
  if (std::strncmp(name, "gemm_", 5) == 0) return run_gemm_child_scenario(name);
#endif
#ifdef MK_TEST_HAVE_ATTENTION
  if (std::strncmp(name, "attn_", 5) == 0) return run_attention_child_scenario(name);
#endif
  return run_signals_child_scenario(name);
}

int main(int argc, char** argv) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  // No GPU or no driver (a CPU machine, CI): skipped. Any other failure to start CUDA is a broken GPU or driver
  // on a GPU machine: a failure, not a skip that a device session would count as passed.
  if (e != cudaSuccess && e != cudaErrorNoDevice &&
      (e != cudaErrorInsufficientDriver || mk::test::nvidia_driver_loaded())) {
    std::printf("FAILED: CUDA could not start: %s%s\n", cudaGetErrorString(e),
                e == cudaErrorInsufficientDriver ? " (an NVIDIA driver is loaded, older than this build's CUDA needs)"
                                                 : "");
    return 1;
  }
  if (e != cudaSuccess || n == 0) {
    std::printf("SKIPPED: the GPU test tier needs a CUDA GPU and this machine has none (%s)\n",
                e == cudaSuccess ? "0 devices" : cudaGetErrorString(e));
    return 77;
  }
  if (const char* child = std::getenv("MK_TEST_CHILD")) return run_child_scenario(child);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
