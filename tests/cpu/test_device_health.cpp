// Which CUDA errors count as a failed device (src/runtime/device_health.hpp):
// teardown leaves out its waits for other ranks only after those, so a rank
// whose synchronisation failed for a passing reason stays in step.
#include <gtest/gtest.h>

#include "src/runtime/device_health.hpp"

using mk::cuda_error_is_fatal;

TEST(DeviceHealth, KernelFaultsAreFatal) {
  // A trapped kernel (every timed-out bounded wait traps) reports cudaErrorLaunchFailure.
  for (cudaError_t e : {cudaErrorLaunchFailure, cudaErrorIllegalAddress, cudaErrorIllegalInstruction,
                        cudaErrorMisalignedAddress, cudaErrorInvalidPc, cudaErrorAssert, cudaErrorHardwareStackError,
                        cudaErrorInvalidAddressSpace, cudaErrorLaunchTimeout, cudaErrorECCUncorrectable,
                        cudaErrorNvlinkUncorrectable, cudaErrorContextIsDestroyed})
    EXPECT_TRUE(cuda_error_is_fatal(e)) << cudaGetErrorName(e);
}

TEST(DeviceHealth, PassingErrorsAreNot) {
  for (cudaError_t e : {cudaSuccess, cudaErrorNotReady, cudaErrorMemoryAllocation, cudaErrorStreamCaptureUnsupported,
                        cudaErrorStreamCaptureImplicit, cudaErrorInvalidValue, cudaErrorInvalidDevice,
                        cudaErrorNoDevice, cudaErrorLaunchOutOfResources, cudaErrorPeerAccessAlreadyEnabled})
    EXPECT_FALSE(cuda_error_is_fatal(e)) << cudaGetErrorName(e);
}
