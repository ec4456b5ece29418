// mkernel: what the RC (verbs_transport.cpp) and EFA/SRD (efa_srd.cpp)
// transports share: the device, protection domain and completion queue, the
// region table, the work-request batcher and in-flight tracker, and the
// post() path that queues a request and rings the doorbell when it is due.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "mkernel/bootstrap.hpp"
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
    posted();
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

  // See Transport::deregister_region: the MR goes, and the region table
  // entries (so post() rejects the id as unregistered).
  void deregister_region(int id) final {
    if (id == kSignalRegion) fail("verbs: region 0 (signals) cannot be deregistered");
    auto it = mr_of_.find(id);
    if (it != mr_of_.end()) {
      mrs_.erase(std::remove(mrs_.begin(), mrs_.end(), it->second), mrs_.end());
      a_.dereg_mr(it->second);
      mr_of_.erase(it);
    }
    regions_.erase(id);
  }

 protected:
  QpTransport(const TransportConfig& cfg, const OpenedDevice& dev) : cfg_(cfg), a_(ibv()), dev_(dev) {}

  // The queue pairs' shape fits what the code and the device take: a work request's id carries the flat QP index
  // in 16 bits (make_wr_id), and the one completion queue must hold every completion that can be outstanding
  // (a CQ capped below that overflows under a burst the proxy does not poll in time). `want_cqe`: that count.
  void check_queue_shape(int nq, int64_t want_cqe, const std::string& per_qp) const {
    if (nq > 0xffff)
      fail("verbs: ", nq, " queue pairs (peers x MK_IB_QPS_PER_PEER) exceed the 65535 a work request's id can ",
           "name; lower MK_IB_QPS_PER_PEER");
    if (want_cqe > dev_attr_.max_cqe)
      fail("verbs: ", dev_.name, " offers completion queues of at most ", dev_attr_.max_cqe, " entries; ", nq,
           " queue pairs x (", per_qp, ") + 16 need ", want_cqe, ": lower MK_IB_QPS_PER_PEER or MK_IB_MAX_INFLIGHT");
  }

  // Connect, round 1: checks `peers`, lets `build` create the QPs and fill
  // this rank's ConnectInfo, and exchanges it. A rank whose build threw sends
  // its error instead, so that every rank fails naming it rather than waiting.
  std::vector<ConnectInfo> exchange_connect(Bootstrap& bs, const std::vector<int>& peers,
                                            const std::function<void(ConnectInfo&)>& build) {
    if (batcher_) fail("verbs: connect() called twice");
    ConnectInfo mine;
    mine.rank = bs.rank();
    try {  // (a bad peer list too: its error travels in the exchange, as build's)
      for (int p : peers)
        if (p < 0 || p >= bs.world() || p == bs.rank())
          fail("verbs: connect: peer rank ", p, " is out of range or this rank");
      build(mine);
    } catch (const std::exception& e) {  // (any: std::random_device, bad_alloc; the peers must hear it too)
      mine = {};
      mine.ok = false;
      mine.rank = bs.rank();
      mine.error = error_reason(e);
    }
    const std::vector<std::string> all = bs.allgather(encode(mine), "verbs connect: queue pairs");
    std::vector<ConnectInfo> infos;
    for (int r = 0; r < bs.world(); ++r) {
      infos.push_back(decode_connect(all[r], r));
      if (!infos.back().ok) fail("verbs: connect failed on rank ", r, ": ", infos.back().error);
    }
    return infos;
  }
  // Connect, round 2: every rank learns whether every rank finished (`err`
  // empty) before anyone writes.
  static void agree_connected(Bootstrap& bs, const std::string& err) {
    const std::vector<std::string> done = bs.allgather(err, "verbs connect");
    for (int r = 0; r < bs.world(); ++r)
      if (!done[r].empty()) fail("verbs: connect failed on rank ", r, ": ", done[r]);
  }

  // Posts the queued work requests of QP q.
  virtual void flush(int q) = 0;
  // A request this rank's kernels pushed was taken (EFA: a kernel of the
  // rank runs, for its delivery agent's stall report).
  virtual void posted() {}
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
  // Tears the verbs objects down in dependency order (each holds the next):
  // QPs, whatever `after_qps` releases (e.g. address handles), CQ, MRs (and
  // `extra_mr`), PD, device context.
  template <typename F>
  void release_verbs(std::vector<ibv_qp*>& qps, ibv_mr*& extra_mr, F&& after_qps) {
    for (ibv_qp* qp : qps) a_.destroy_qp(qp);
    qps.clear();
    after_qps();
    if (cq_) a_.destroy_cq(cq_);
    cq_ = nullptr;
    for (ibv_mr* mr : mrs_) a_.dereg_mr(mr);
    mrs_.clear();
    if (extra_mr) a_.dereg_mr(extra_mr);
    extra_mr = nullptr;
    if (pd_) a_.dealloc_pd(pd_);
    pd_ = nullptr;
    if (dev_.ctx) a_.close_device(dev_.ctx);
    dev_.ctx = nullptr;
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
  std::unordered_map<int, ibv_mr*> mr_of_;  // region id -> its MR (regions with bytes)
  RegionTable regions_;
  std::unique_ptr<InflightTracker> tracker_;
  std::unique_ptr<WrBatcher> batcher_;
  std::vector<int> dirty_;            // QPs with queued WRs
  std::vector<uint8_t> is_dirty_;
  std::string sticky_error_;
  bool closed_ = false;
};

}  // namespace mk::net::verbs
