// mkernel: the standalone bf16 GEMM (the engine every tensor-parallel and MoE
// op computes with, device/gemm/), for users and for baselines.
//
//   out[m x n] = a[m x k] * b[n x k]^T     bf16 in/out, fp32 accumulation
//
// b is in torch.nn.Linear's weight layout. Any m >= 1; n and k multiples of
// 64; a, b, out 16-byte aligned. Runs on the current CUDA device: a, b, out
// (and a workspace the call uses) must be its device or managed memory to the
// last byte the call needs, and the stream its stream; host memory, another GPU's
// or a buffer whose last needed byte is not this GPU's memory is refused by name
// before anything is queued, as is out (or a workspace the call uses) sharing a
// byte with a or b (best-effort: the first and last byte are asked, so a short
// buffer followed by another allocation passes; memoised as the TP plans'
// checks: mkernel/tp.hpp). Where the
// last wave of 128 x 256 tiles is short (at most half the SMs, k >= 4096),
// those tiles are computed in halves of k on two SMs, with scratch from a
// stream-ordered memory pool of the library's own, or in the caller's
// `workspace` (16-byte aligned, at least gemm_workspace_bytes(args) bytes,
// asked on the device that runs the call; a smaller one is refused; when that
// is 0 the call splits nothing and ignores the workspace). Inside a CUDA-graph
// capture only a given workspace splits (the pool's memory cannot belong to a
// graph): without one a captured call computes those tiles whole, so it may
// differ from an eager split call in their last bits (fp32 sums in another
// order); with one it splits as an eager call does, with the same bits. The
// call zeroes the workspace's control words (counters, flags) on `stream`;
// nothing else may use the workspace until the call is done. Calls on
// different streams may run concurrently.
//
// The kernel's waits are on its own work only, each bounded (its pipeline
// stages: 4 x MK_TIMEOUT_MS; a split tile's last part on its other parts'
// flags: 1 x): with no communicator to record who waited, one that runs
// out (a bug, never a peer) traps without a report, and the call's error is
// the device's launch failure at the next synchronisation (the TP plans' and
// ring attention's engines report such a wait by name: device/bounded_wait.cuh).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace mk {

enum class GemmOrder : int32_t { RowMajor = 0, Swizzled = 1 };

struct GemmArgs {
  const void* a = nullptr;
  const void* b = nullptr;
  void* out = nullptr;
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  int64_t ldo = 0;            // row stride of out in elements, even and >= n; 0 means n
  int num_compute_ctas = 0;   // CTAs (one per SM) that compute; 0 means every SM
  GemmOrder order = GemmOrder::Swizzled;
  int swizzle = 0;            // Swizzled: row-blocks per group; 0 means the default (8)
  void* workspace = nullptr;  // optional device memory for split tiles (above); null: the library's pool
  size_t workspace_bytes = 0;
};

// Bytes of workspace a call with these m, n, k and num_compute_ctas uses on the
// current device (0: it splits nothing); the pointers need not be set. Bad m,
// n, k (each at most 2^31 - 256) or num_compute_ctas throw; the call checks the rest.
size_t gemm_workspace_bytes(const GemmArgs& args);
void gemm_bf16(const GemmArgs& args, cudaStream_t stream = nullptr);

// Grouped GEMM (one launch, many problems of their own m, e.g. MoE experts):
// group g multiplies rows [r_g, r_g + m_per_group[g]) of a (r_g = sum of
// earlier groups) by b[g] (b holds num_groups [n x k] matrices back to back)
// into the same rows of out. Empty groups are allowed. Not capturable into a
// CUDA graph (the tile tables are built on the host at every call): a call
// on a capturing stream is refused, leaving the capture valid.
struct GroupedGemmArgs {
  const void* a = nullptr;
  const void* b = nullptr;
  void* out = nullptr;
  const int32_t* m_per_group = nullptr;  // host array, num_groups entries
  int num_groups = 0;
  int64_t n = 0;
  int64_t k = 0;
  int num_compute_ctas = 0;
  void* workspace = nullptr;  // device memory, grouped_gemm_workspace_bytes(num_groups)
};

// Bytes of workspace a grouped call of num_groups groups needs; a count outside [1, 2^25) throws, as the call.
size_t grouped_gemm_workspace_bytes(int num_groups);
void grouped_gemm_bf16(const GroupedGemmArgs& args, cudaStream_t stream = nullptr);

}  // namespace mk
