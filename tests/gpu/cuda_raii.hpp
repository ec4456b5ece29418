// Host-only RAII helpers shared by the GPU tests (C++ and CUDA sources alike).
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

namespace mkt {

// A non-blocking stream, destroyed with the object (also when a failed ASSERT leaves the test early).
struct Stream {
  cudaStream_t s = nullptr;
  Stream() { EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess); }
  ~Stream() {
    if (s) cudaStreamDestroy(s);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  operator cudaStream_t() const { return s; }
};

}  // namespace mkt
