// mkernel: per-plan epochs kept on the device, so that a CUDA graph replay
// (whose kernel arguments are frozen at capture) still runs with a fresh
// epoch: every CTA reads the counter when it starts (this launch's epoch is
// counter + 1) and the last CTA to finish increments it. Launches of a plan
// are stream-ordered, so the next one sees the new value.
//
// NOTES: the counter changes only after every CTA of the launch finished,
// hence after every read of it; each rank's counter advances once per call,
// so ranks agree on the epoch of a call without talking.
#pragma once

#include <cstdint>

namespace mk::dev {

struct DeviceEpoch {
  uint64_t* counter;  // calls completed
  uint32_t* done;     // CTAs of the running launch that finished (back to 0 after)
  uint64_t* tiles = nullptr;  // optional: the GEMM's dynamic tile counter (GemmParams::tile_counter), back to 0 after
  uint64_t* items = nullptr;  // optional: a second work counter (e.g. the all-reduce's gather items), back to 0 after
};

__device__ __forceinline__ uint64_t epoch_of_launch(const DeviceEpoch& e) {
  return *reinterpret_cast<volatile const uint64_t*>(e.counter) + 1;
}

// Called once by every CTA of the launch, by all its threads, at its end.
__device__ __forceinline__ void epoch_finish(const DeviceEpoch& e) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(e.done, 1u) == gridDim.x - 1) {
      *reinterpret_cast<volatile uint64_t*>(e.counter) = *reinterpret_cast<volatile uint64_t*>(e.counter) + 1;
      *reinterpret_cast<volatile uint32_t*>(e.done) = 0;
      if (e.tiles) *reinterpret_cast<volatile uint64_t*>(e.tiles) = 0;
      if (e.items) *reinterpret_cast<volatile uint64_t*>(e.items) = 0;
      __threadfence();
    }
  }
}

}  // namespace mk::dev
