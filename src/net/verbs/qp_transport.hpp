// mkernel: what the RC (verbs_transport.cpp) and EFA/SRD (efa_srd.cpp)
// transports share: the device, protection domain and completion queue, the
// region table, the work-request batcher and in-flight tracker, and the
// post() path that queues a request and rings the doorbell when it is due.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "mkernel/error.hpp"
#include "src/net/transport.hpp"
#include "src/net/verbs/endpoint.hpp"
#include "src/net/verbs/ibv_loader.hpp"
#include "src/net/verbs/verbs_common.hpp"
#include "src/net/verbs/wr_batcher.hpp"

namespace mk::net::verbs {

class QpTransport : public Transport {
 public:
  // Non-blocking: queues `w` on its QP; the QP's batch is posted now when it
  // is due (should_flush), else at the start of the next poll().
  bool post(const WriteReq& w) final {
    check_usable();
    regions_.check(w);
    const int q = batcher_->add(w);
    if (q == -1) return false;
    if (q >= 0) {
      if (batcher_->should_flush(q)) {
        flush(q);
      } else if (!is_dirty_[q]) {
        is_dirty_[q] = 1;
        dirty_.push_back(q);
      }
    }
    return true;
  }

 protected:
  QpTransport(const TransportConfig& cfg, const OpenedDevice& dev) : cfg_(cfg), a_(ibv()), dev_(dev) {}

  // Posts the queued work requests of QP q.
  virtual void flush(int q) = 0;
  // Start of every poll(): posts every QP with queued requests.
  void flush_dirty() {
    for (int q : dirty_) {
      is_dirty_[q] = 0;
      flush(q);
    }
    dirty_.clear();
  }
  void check_usable() const {
    if (!sticky_error_.empty()) throw Error(sticky_error_);
    if (closed_) fail("verbs: transport used after close()");
    if (!batcher_) fail("verbs: post/poll before connect()");
  }
  // A failed completion poisons the transport: every later call rethrows.
  [[noreturn]] void fatal(std::string msg) {
    if (sticky_error_.empty()) sticky_error_ = "mkernel: " + msg;
    throw Error(sticky_error_);
  }

  TransportConfig cfg_;
  const IbvApi& a_;
  OpenedDevice dev_;
  ibv_device_attr dev_attr_{};
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  PortInfo my_port_;
  std::vector<ibv_mr*> mrs_;
  RegionTable regions_;
  std::unique_ptr<InflightTracker> tracker_;
  std::unique_ptr<WrBatcher> batcher_;
  std::vector<int> dirty_;            // QPs with queued WRs
  std::vector<uint8_t> is_dirty_;
  std::string sticky_error_;
  bool closed_ = false;
};

}  // namespace mk::net::verbs
