// Test helper: a delivery ring (device/net/delivery.hpp) in zeroed host
// memory, for CPU tests whose host threads stand in for the delivery agents.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
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

// The agents' part, on the host: one thread taking every published slot in
// order, as device/net/agent.cuh makes it (copy, signal, done word).
// hook(seq, 0) runs after the claim of slot seq, hook(seq, 1) after its body
// is read (before the copy): a test can hold the agent there.
class HostAgent {
 public:
  explicit HostAgent(HostRing& r, std::function<void(uint64_t, int)> hook = {})
      : r_(r), hook_(std::move(hook)), t_([this] { run(); }) {}
  ~HostAgent() {
    stop_ = true;
    t_.join();
  }

 private:
  void run() {
    while (!stop_) {
      const uint64_t c = r_.claim;
      net::DeliverySlot& s = r_.slots[c % r_.ring.size];
      if (__atomic_load_n(&s.w[0], __ATOMIC_ACQUIRE) != c + 1) {
        std::this_thread::yield();
        continue;
      }
      r_.claim = c + 1;
      if (hook_) hook_(c, 0);
      // The body once, as an agent reads it (a retire may rewrite the meta
      // word meanwhile: then all of the old write, or nothing).
      const uint64_t meta = __atomic_load_n(&s.w[1], __ATOMIC_RELAXED);
      if (hook_) hook_(c, 1);
      const uint64_t bytes = net::delivery_bytes(meta);
      if (bytes) std::memcpy(reinterpret_cast<void*>(s.w[3]), reinterpret_cast<const void*>(s.w[2]), bytes);
      auto* sig = reinterpret_cast<uint64_t*>(s.w[4]);
      const net::SigOp op = net::delivery_sig_op(meta);
      if (op == net::SigOp::Set) __atomic_store_n(sig, s.w[5], __ATOMIC_RELEASE);
      if (op == net::SigOp::Add) __atomic_fetch_add(sig, s.w[5], __ATOMIC_ACQ_REL);
      __atomic_store_n(&r_.done[c % r_.ring.size], c + 1, __ATOMIC_RELEASE);
    }
  }
  HostRing& r_;
  std::function<void(uint64_t, int)> hook_;
  std::atomic<bool> stop_{false};
  std::thread t_;
};

}  // namespace mk::test
