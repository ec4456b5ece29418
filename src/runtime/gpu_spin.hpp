// A timed GPU spin on a stream: one thread waits as long as `cycles` SM cycles take at the device's top clock,
// measured on the global timer (%globaltimer, ns), not by counting cycles. Benchmarks queue it before a timed
// call so that the host's launches of the call are queued before its start event; ranks whose GPUs run at
// different SM clocks (one at its power cap) leave it together, where a spin of cycles let them start apart and
// the early one's wait for its peers inside the call counted in the max over ranks. The C ABI's mk_gpu_spin;
// mkbench's --lead-cycles.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace mk {

inline constexpr int64_t kMaxSpinCycles = int64_t(1) << 40;  // (~9 minutes at 2 GHz: a bound, not a use)

// Refuses cycles outside [0, kMaxSpinCycles] (the error names `caller`); 0 queues nothing. Throws mk::Error on a
// CUDA error.
void gpu_spin(int64_t cycles, cudaStream_t stream, const char* caller = "gpu_spin");

}  // namespace mk
