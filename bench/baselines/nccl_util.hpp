// NCCL for the baselines: error check and a communicator over mkernel's
// ranks, bootstrapped through mkernel's own rendezvous. NVLink SHARP
// (multicast) stays off: NCCL_NVLS_ENABLE=0.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "mkernel/mkernel.hpp"

#define MKB_NCCL(x)                                                           \
  do {                                                                        \
    ncclResult_t r_ = (x);                                                    \
    if (r_ != ncclSuccess) mk::fail(#x, " failed: ", ncclGetErrorString(r_)); \
  } while (0)

namespace mkb {

inline ncclComm_t make_nccl_comm(mk::Communicator& c) {
  setenv("NCCL_NVLS_ENABLE", "0", 1);  // never NVLink multicast
  ncclUniqueId id;
  if (c.rank() == 0) MKB_NCCL(ncclGetUniqueId(&id));
  std::string s = c.bootstrap().broadcast(std::string(reinterpret_cast<const char*>(&id), sizeof(id)), 0);
  std::memcpy(&id, s.data(), sizeof(id));
  ncclComm_t nc;
  MKB_NCCL(ncclCommInitRank(&nc, c.world(), id, c.rank()));
  return nc;
}

// Whether two of the ranks run on one GPU (MK_SHARE_GPUS: the one-GPU
// correctness runs). NCCL refuses such ranks ("Duplicate GPU detected"), so
// the benchmarks then use mkernel's own collectives for their baselines and a
// host barrier, and their times mean nothing (the report's config says so).
// Collective: every rank calls it at the same point.
inline bool ranks_share_a_gpu(mk::Communicator& c) {
  if (c.world() < 2) return false;
  int dev = 0;
  cudaDeviceProp p{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&p, dev) != cudaSuccess)
    mk::fail("mkbench: the UUID of this rank's GPU could not be read");
  // The GPU's UUID (unique across hosts: two hosts' GPUs at the same PCI bus id are different GPUs).
  const auto all = c.bootstrap().allgather(std::string(p.uuid.bytes, sizeof(p.uuid.bytes)), "mkbench: the ranks' GPUs");
  return std::set<std::string>(all.begin(), all.end()).size() < all.size();
}

// An untimed barrier for time_interleaved's `before`: a 1-element
// all-reduce on `stream`, so that every rank starts the next timed call
// together (a call that waits on other ranks does not absorb their lag from
// the call before; NVLink multicast stays off, see make_nccl_comm). Made
// with a bootstrap instead (ranks sharing a GPU: no NCCL), the stream is
// drained and the ranks meet on the host.
struct NcclBarrier {
  ncclComm_t nc = nullptr;
  mk::Bootstrap* bs = nullptr;
  float* buf = nullptr;
  cudaStream_t stream = nullptr;
  NcclBarrier(ncclComm_t c, cudaStream_t s) : nc(c), stream(s) {
    if (cudaMalloc(&buf, sizeof(float)) != cudaSuccess) mk::fail("cudaMalloc of the barrier word failed");
    if (cudaMemset(buf, 0, sizeof(float)) != cudaSuccess) mk::fail("cudaMemset of the barrier word failed");
  }
  NcclBarrier(mk::Bootstrap* b, cudaStream_t s) : bs(b), stream(s) {}
  ~NcclBarrier() { cudaFree(buf); }
  NcclBarrier(const NcclBarrier&) = delete;
  NcclBarrier& operator=(const NcclBarrier&) = delete;
  void operator()(int) const {
    if (bs) {
      if (cudaStreamSynchronize(stream) != cudaSuccess) mk::fail("mkbench: the barrier's stream failed");
      bs->barrier("mkbench: the host barrier between timed calls");
      return;
    }
    MKB_NCCL(ncclAllReduce(buf, buf, 1, ncclFloat, ncclSum, nc, stream));
  }
};

// make_nccl_comm, or null where the ranks share a GPU (NCCL would refuse them).
inline ncclComm_t make_nccl_comm_unless_shared(mk::Communicator& c, bool shared) {
  return shared ? nullptr : make_nccl_comm(c);
}

}  // namespace mkb
