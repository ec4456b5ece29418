// Which GPUs mkernel's kernels run on (src/runtime/device_support.hpp): the
// message a user on another GPU gets before anything is allocated.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>

#include "src/runtime/cuda_driver.hpp"
#include "src/runtime/device_support.hpp"

namespace {

TEST(DeviceSupport, HopperRunsTheKernels) { EXPECT_EQ(mk::unsupported_gpu_reason(9, 0), ""); }

TEST(DeviceSupport, OtherGpusAreNamedWithWhy) {
  // Ampere, Ada, Blackwell (data centre and consumer), and a later Hopper-numbered part.
  for (auto [major, minor] : {std::pair{8, 0}, {8, 9}, {10, 0}, {12, 0}, {9, 1}}) {
    const std::string why = mk::unsupported_gpu_reason(major, minor);
    EXPECT_NE(why.find("compute capability " + std::to_string(major) + "." + std::to_string(minor)),
              std::string::npos)
        << why;
    EXPECT_NE(why.find("sm_90a only"), std::string::npos) << why;
    EXPECT_NE(why.find("H100"), std::string::npos) << why;
  }
}

}  // namespace

// Where no GPU runs (this tier's machines), CUDA's driver reads as not initialised, and asking loads nothing (the
// communicator then sets CUDA_MODULE_LOADING; on a GPU, once CUDA runs, it reads as initialised: CApiGpu's test).
TEST(DeviceSupport, TheDriverReadsAsNotInitialisedWhereNoGpuRuns) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  cudaGetLastError();
  if (e == cudaSuccess && n > 0) GTEST_SKIP() << "a GPU is here";
  EXPECT_FALSE(mk::drv::driver_initialised());
}
