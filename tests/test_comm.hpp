// Shared by the gpu and dist tiers: one communicator per process, from the
// launcher environment (a single rank when there is none).
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "mkernel/mkernel.hpp"

namespace mk::test {

inline Communicator& comm() {
  static std::unique_ptr<Communicator> c = Communicator::from_env();
  return *c;
}

// Runs f, with a stream capture in global mode open on this thread while it
// runs when `capturing` (a device synchronisation inside f is then refused
// without the device failing); the capture, invalidated by that, is ended and
// dropped, and its error cleared in this program's CUDA runtime (the library
// links its own and clears there what its refused calls left:
// mk::pending_cuda_error), also when f throws.
template <typename F>
void with_global_capture(bool capturing, F&& f) {
  struct Capture {
    cudaStream_t s = nullptr;
    ~Capture() {
      if (!s) return;
      cudaGraph_t g = nullptr;
      cudaStreamEndCapture(s, &g);  // invalidated by the refused sync: an error, cleared below
      if (g) cudaGraphDestroy(g);
      cudaGetLastError();
      cudaStreamDestroy(s);
    }
  } c;
  if (capturing) {
    comm().check(static_cast<int>(cudaStreamCreateWithFlags(&c.s, cudaStreamNonBlocking)), "cudaStreamCreateWithFlags");
    comm().check(static_cast<int>(cudaStreamBeginCapture(c.s, cudaStreamCaptureModeGlobal)), "cudaStreamBeginCapture");
  }
  f();
}

}  // namespace mk::test
