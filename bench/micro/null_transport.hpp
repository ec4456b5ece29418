// mkbench: a transport that completes every write at once, so that only the
// GPU side and the host proxy are on the clock (net_queue, net_post).
#pragma once

#include <deque>
#include <memory>
#include <vector>

#include "src/net/proxy.hpp"

namespace mkb {

class NullTransport : public mk::net::Transport {
 public:
  std::string name() const override { return "null"; }
  void connect(mk::Bootstrap&, const std::vector<int>&) override {}
  void register_region(mk::Bootstrap&, const mk::net::Region&) override {}
  void deregister_region(int) override {}
  bool post(const mk::net::WriteReq& w) override {
    done_.push_back(w.cookie);
    return true;
  }
  int poll(mk::net::Completion* out, int max) override {
    int n = 0;
    while (n < max && !done_.empty()) {
      out[n++] = mk::net::Completion{done_.front(), 0};
      done_.pop_front();
    }
    return n;
  }
  void close() override {}

 private:
  std::deque<uint64_t> done_;
};

// A host proxy over `threads` null transports for rank `rank` on `device`
// (one peer, rank 1; a 4096-deep ring) and the device view of its queues.
struct NullProxy {
  std::unique_ptr<mk::net::Proxy> proxy;
  mk::net::NetCtx nc{};
  NullProxy(int rank, int device, int threads) {
    mk::net::ProxyConfig pc;
    pc.rank = rank;
    pc.depth = 4096;
    pc.timeout_ms = 10000;
    pc.cuda_device = device;
    pc.peers = {1};
    std::vector<std::unique_ptr<mk::net::Transport>> tr;
    for (int i = 0; i < threads; ++i) tr.push_back(std::make_unique<NullTransport>());
    proxy = std::make_unique<mk::net::Proxy>(pc, std::move(tr));
    nc.num_queues = proxy->num_queues();
    for (int i = 0; i < nc.num_queues; ++i) nc.queues[i] = proxy->queue(i);
  }
};

}  // namespace mkb
