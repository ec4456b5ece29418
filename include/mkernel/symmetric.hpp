// mkernel: symmetric memory. A collective allocation gives every rank a buffer
// of the same size, plus device pointers to the buffers of its node peers
// (NVLink), plus a registration record for the network layer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "device/ctx.hpp"

namespace mk {

// What the network layer needs to register a buffer with a NIC.
struct MemRegion {
  void* base = nullptr;
  size_t bytes = 0;      // mapped size (rounded to the allocation granularity)
  int device = -1;       // CUDA device ordinal; -1 for host memory
  uint64_t id = 0;       // same on every rank for one collective allocation
  bool vmm = false;      // allocated through CUDA VMM (cuMemCreate)
  // Filled by the network layer when it registers the region (see src/net).
  void* net_handle = nullptr;
};

struct SymmetricBuffer {
  void* local = nullptr;                 // this rank's buffer
  size_t bytes = 0;                      // requested size, equal on all ranks
  void* peer[kMaxLocalRanks] = {};       // node peers' buffers by local rank (peer[local_rank] == local)
  int local_rank = 0;
  int local_size = 1;
  MemRegion region;
  // This buffer of every rank on this host, by global rank (nullptr where it
  // could not be mapped). Beyond the node it is for the emu NIC only: kernels
  // must not use it as an NVLink path across emulated nodes.
  std::vector<void*> host_peer;

  template <typename T = void>
  T* local_as() const { return static_cast<T*>(local); }
  template <typename T = void>
  T* peer_as(int lr) const { return static_cast<T*>(peer[lr]); }
};

}  // namespace mk
