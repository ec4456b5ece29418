// NCCL for the baselines: error check and a communicator over mkernel's
// ranks, bootstrapped through mkernel's own rendezvous. NVLink SHARP
// (multicast) stays off: NCCL_NVLS_ENABLE=0.
#pragma once

#include <nccl.h>

#include <cstdlib>
#include <cstring>
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

// An untimed device barrier for time_interleaved's `before`: a 1-element
// all-reduce on `stream`, so that every rank starts the next timed call
// together (a call that waits on other ranks does not absorb their lag from
// the call before; NVLink multicast stays off, see make_nccl_comm).
struct NcclBarrier {
  ncclComm_t nc = nullptr;
  float* buf = nullptr;
  cudaStream_t stream = nullptr;
  NcclBarrier(ncclComm_t c, cudaStream_t s) : nc(c), stream(s) {
    if (cudaMalloc(&buf, sizeof(float)) != cudaSuccess) mk::fail("cudaMalloc of the barrier word failed");
    if (cudaMemset(buf, 0, sizeof(float)) != cudaSuccess) mk::fail("cudaMemset of the barrier word failed");
  }
  ~NcclBarrier() { cudaFree(buf); }
  NcclBarrier(const NcclBarrier&) = delete;
  NcclBarrier& operator=(const NcclBarrier&) = delete;
  void operator()(int) const { MKB_NCCL(ncclAllReduce(buf, buf, 1, ncclFloat, ncclSum, nc, stream)); }
};

}  // namespace mkb
