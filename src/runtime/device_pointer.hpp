// mkernel: the check of the raw pointers and streams a call takes (C++ and C ABI), before anything is enqueued.
// The Python layer checks its tensors itself; a raw pointer from host memory or another GPU would otherwise fault
// inside the fused kernel, leaving this rank's context unusable and its peers waiting out MK_TIMEOUT_MS.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace mk {

// Whether [a, a + an) and [b, b + bn) share a byte: a null or empty range shares none. The ops' checks that an
// output is apart from what the kernel reads while writing it (one definition for the GEMMs, attention and the
// fused plans).
inline bool overlap(const void* a, size_t an, const void* b, size_t bn) {
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return a && b && an && bn && x < y + bn && y < x + an;
}

// Throws mk::Error naming `op` and `what` unless p and p + bytes - 1 are both memory of CUDA device `device`
// (cudaMalloc'ed, VMM-mapped or managed): host memory (pinned too), memory of another GPU or an address that no
// allocation covers are refused. A pointer that passed with the same size and device in one of the process's
// last 64 checks is not asked again (two runtime queries otherwise; a training loop passes the same buffers).
// Null and empty buffers pass: the callers' own checks say what they need.
void check_device_pointer(const char* op, const char* what, const void* p, size_t bytes, int device);

// Throws mk::Error naming `op` unless `stream` belongs to CUDA device `device` (the legacy and per-thread default
// streams belong to the current device, which the caller checked). A stream being captured is not asked (the
// runtime refuses the question there, and invalidates the capture); one that passed lately is not asked again.
void check_stream_device(const char* op, cudaStream_t stream, int device);

}  // namespace mk
