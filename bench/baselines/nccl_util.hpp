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

}  // namespace mkb
