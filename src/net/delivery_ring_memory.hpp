// mkernel: the memory of one delivery ring (device/net/delivery.hpp): pinned,
// mapped host slots, done words and the `claimed` mirror, and the device
// words `claim` and `busy`, all zeroed. Shared by the transports whose writes
// the kernels' delivery agents make (emu; fabric's staging with agents).
#pragma once

#include <cstdint>

#include "device/net/delivery.hpp"

namespace mk::net {

class DeliveryRingMemory {
 public:
  // `slots`: a power of two. Throws mk::Error (CUDA failures, no unified
  // addressing). Zeroes the device words on a stream of its own: a network may
  // be created while the user's kernels run, which a device-wide
  // synchronisation would wait for.
  DeliveryRingMemory(int cuda_device, uint32_t slots);
  ~DeliveryRingMemory() { release(); }
  DeliveryRingMemory(const DeliveryRingMemory&) = delete;
  DeliveryRingMemory& operator=(const DeliveryRingMemory&) = delete;

  const DeliveryRing& ring() const { return ring_; }
  // Frees it (no kernel may run an agent on it any more); idempotent.
  void release() noexcept;

 private:
  void allocate(int cuda_device, uint32_t slots);

  DeliveryRing ring_;
  void* host_ = nullptr;
};

}  // namespace mk::net
