// Test helper: a delivery ring (device/net/delivery.hpp) in zeroed host
// memory, for CPU tests whose host threads stand in for the delivery agents.
#pragma once

#include <cstdint>
#include <thread>
#include <vector>

#include "device/net/delivery.hpp"

namespace mk::test {

struct HostRing {
  explicit HostRing(uint32_t size) : slots(size), done(size, 0) {
    ring.slots = slots.data();
    ring.done = done.data();
    ring.claim = &claim;
    ring.claimed = &claimed;
    ring.size = size;
  }
  // A fake agent's claim of the next slot, as the agent makes it (published
  // stamp, then compare-and-swap); false (after a yield) when none is.
  bool claim_one(uint64_t& c) {
    c = __atomic_load_n(&claim, __ATOMIC_ACQUIRE);
    if (__atomic_load_n(&slots[c % ring.size].w[0], __ATOMIC_ACQUIRE) != c + 1) {
      std::this_thread::yield();
      return false;
    }
    return __atomic_compare_exchange_n(&claim, &c, c + 1, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
  }
  std::vector<net::DeliverySlot> slots;
  std::vector<uint64_t> done;
  uint64_t claim = 0, claimed = 0;
  net::DeliveryRing ring;
};

}  // namespace mk::test
