// mkernel: the `verbs` transport: libibverbs RC queue pairs (InfiniBand and
// RoCE), GPU memory registered through DMA-BUF, data+signal chained on one QP
// (DESIGN.md §5). Planning lives in wr_batcher.{hpp,cpp}; this file only
// talks to the NIC. EFA devices take the SRD path instead (efa_srd.cpp);
// device opening and memory registration are shared (verbs_common.cpp).
//
// NOTES:
// - Doorbells: post() queues a request's WR chain on its QP and rings the
//   doorbell at once when the QP is idle on the wire or a full signalling
//   period (MK_IB_SIGNAL_EVERY) is queued; otherwise the chain is posted by
//   the next poll(), which first flushes every QP. Callers must poll (the
//   proxy loop does) — the contract already requires it for completions.
// - A failed completion is sticky: every later post()/poll() rethrows it
//   (the QP is in the error state and all later WRs flush).
// - Relaxed ordering is NOT requested on registrations: with it, the PCIe
//   write of a signal could overtake the data it follows into GPU memory.
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <random>

#include "mkernel/error.hpp"
#include "mkernel/knobs.hpp"
#include "mkernel/topology.hpp"
#include "src/net/nic_affinity.hpp"
#include "src/net/transport.hpp"
#include "src/net/verbs/endpoint.hpp"
#include "src/net/verbs/qp_transport.hpp"
#include "src/net/verbs/verbs_common.hpp"
#include "src/net/verbs/ibv_loader.hpp"
#include "src/net/verbs/wr_batcher.hpp"
#include "src/runtime/cuda_driver.hpp"
#include "src/runtime/device_support.hpp"

namespace mk::net {

namespace verbs {
namespace {

constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                        IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
constexpr int kPollBatch = 32;


// The GID type of table entry `idx`: through _ibv_query_gid_ex when this
// rdma-core has it, else sysfs.
bool gid_is_roce_v2(const IbvApi& a, ibv_context* ctx, const std::string& dev, int port, int idx) {
  if (a.query_gid_ex) {
    ibv_gid_entry e{};
    if (a.query_gid_ex(ctx, port, idx, &e, 0, sizeof(e)) == 0) return e.gid_type == IBV_GID_TYPE_ROCE_V2;
    return false;
  }
  std::ifstream f(cat("/sys/class/infiniband/", dev, "/ports/", port, "/gid_attrs/types/", idx));
  std::string s;
  std::getline(f, s);
  return s.find("v2") != std::string::npos;
}

class VerbsTransport final : public QpTransport {
 public:
  // Takes ownership of `dev` (closed by close(), also when this throws).
  VerbsTransport(const TransportConfig& cfg, OpenedDevice dev) : QpTransport(cfg, dev) {
    try {
      if (a_.query_device(dev_.ctx, &dev_attr_) != 0) fail("verbs: ibv_query_device failed on ", dev_.name);
      // Add signals are remote fetch-adds: a NIC without atomics (or with non-host-endian ones, which mlx5
      // reports as none: an add of 1 would land as 2^56) cannot carry them.
      const int rd_atom = std::min(dev_attr_.max_qp_rd_atom, dev_attr_.max_qp_init_rd_atom);
      if (dev_attr_.atomic_cap == IBV_ATOMIC_NONE || rd_atom < 1)
        fail("verbs: ", dev_.name, " offers no usable remote atomics (atomic_cap ",
             static_cast<int>(dev_attr_.atomic_cap), ", max_qp_rd_atom ", dev_attr_.max_qp_rd_atom,
             ", max_qp_init_rd_atom ", dev_attr_.max_qp_init_rd_atom,
             "), which RC's Add signals need; choose another device (MK_IB_DEVICE) or MK_NET=fabric");
      pd_ = a_.alloc_pd(dev_.ctx);
      if (!pd_) fail("verbs: ibv_alloc_pd failed on ", dev_.name, ": ", errno_str(errno));
      pick_address();
      // The atomics' fetched old values land here; nobody reads them.
      scratch_mr_ = a_.reg_mr(pd_, scratch_, sizeof(scratch_), IBV_ACCESS_LOCAL_WRITE);
      if (!scratch_mr_) fail("verbs: ibv_reg_mr of the atomic scratch word failed: ", errno_str(errno));
    } catch (...) {
      close();
      throw;
    }
  }
  ~VerbsTransport() override { close(); }

  std::string name() const override { return "verbs:" + dev_.name; }

  void connect(Bootstrap& bs, const std::vector<int>& peers) override;
  void register_region(Bootstrap& bs, const Region& r) override;
  int poll(Completion* out, int max) override;
  void close() override;

 private:
  void flush(int q) override;
  void pick_address();
  void create_qps(const std::vector<int>& peers);
  void to_rtr_rts(int q, const PortInfo& remote, uint32_t qpn, uint32_t psn);

  int gid_index_ = 0;
  alignas(8) uint64_t scratch_[1] = {};
  ibv_mr* scratch_mr_ = nullptr;
  std::vector<ibv_qp*> qps_;          // flat: peer_index * qps_per_peer + k
  std::vector<uint32_t> psn_;         // our initial send PSN per QP
  std::vector<ibv_send_wr> wr_buf_;   // reused per flush
  std::vector<ibv_sge> sge_buf_;
};

void VerbsTransport::pick_address() {
  const ibv_port_attr& pa = dev_.port_attr;
  my_port_.lid = pa.lid;
  my_port_.link_layer = pa.link_layer;
  my_port_.mtu = static_cast<uint8_t>(pa.active_mtu);
  const int knob = static_cast<int>(knob_int(Knob::MK_IB_GID_INDEX));
  if (pa.link_layer == IBV_LINK_LAYER_ETHERNET) {  // RoCE: addressed by GID
    if (knob >= 0) {
      gid_index_ = knob;
    } else {
      std::vector<GidCandidate> table;
      for (int i = 0; i < pa.gid_tbl_len; ++i) {
        GidCandidate c;
        c.index = i;
        ibv_gid g{};
        if (a_.query_gid(dev_.ctx, static_cast<uint8_t>(dev_.port), i, &g) != 0) continue;
        std::memcpy(c.gid.data(), g.raw, 16);
        c.roce_v2 = gid_is_roce_v2(a_, dev_.ctx, dev_.name, dev_.port, i);
        table.push_back(c);
      }
      gid_index_ = pick_roce_gid(table);
      if (gid_index_ < 0)
        fail("verbs: ", dev_.name, " port ", dev_.port,
             " has no RoCE v2 GID; set MK_IB_GID_INDEX (see show_gids)");
    }
  } else {  // InfiniBand: addressed by LID; the GID only matters across subnets
    gid_index_ = knob >= 0 ? knob : 0;
  }
  ibv_gid g{};
  if (a_.query_gid(dev_.ctx, static_cast<uint8_t>(dev_.port), gid_index_, &g) != 0)
    fail("verbs: cannot read GID index ", gid_index_, " of ", dev_.name, " port ", dev_.port,
         " (MK_IB_GID_INDEX)");
  std::memcpy(my_port_.gid.data(), g.raw, 16);
}

void VerbsTransport::create_qps(const std::vector<int>& peers) {
  BatcherConfig bc;
  bc.qps_per_peer = static_cast<int>(knob_int(Knob::MK_IB_QPS_PER_PEER));
  bc.max_inflight = static_cast<int>(
      std::min<int64_t>(knob_int(Knob::MK_IB_MAX_INFLIGHT), dev_attr_.max_qp_wr));
  bc.signal_every = static_cast<int>(knob_int(Knob::MK_IB_SIGNAL_EVERY));
  bc.max_wr_bytes = std::min<uint64_t>(dev_.port_attr.max_msg_sz ? dev_.port_attr.max_msg_sz : 1u << 30,
                                       1ull << 30);
  bc = bc.normalized();
  const int nq = static_cast<int>(peers.size()) * bc.qps_per_peer;

  // NOTES: only signalled WRs produce CQEs, at most one per WR in flight.
  const int64_t want_cqe = static_cast<int64_t>(nq) * bc.max_inflight + 16;
  check_queue_shape(nq, want_cqe, cat(bc.max_inflight, " in flight: MK_IB_MAX_INFLIGHT"));
  const int cqe = static_cast<int>(want_cqe);
  cq_ = a_.create_cq(dev_.ctx, cqe, nullptr, nullptr, 0);
  if (!cq_) fail("verbs: ibv_create_cq(", cqe, ") failed on ", dev_.name, ": ", errno_str(errno));

  std::mt19937 rng(std::random_device{}());
  for (int q = 0; q < nq; ++q) {
    ibv_qp_init_attr ia{};
    ia.send_cq = cq_;
    ia.recv_cq = cq_;
    ia.qp_type = IBV_QPT_RC;
    ia.sq_sig_all = 0;  // selective signalling
    ia.cap.max_send_wr = bc.max_inflight;
    ia.cap.max_recv_wr = 1;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    ia.cap.max_inline_data = 16;
    ibv_qp* qp = a_.create_qp(pd_, &ia);
    if (!qp)
      fail("verbs: ibv_create_qp for rank ", peers[q / bc.qps_per_peer], " failed on ", dev_.name,
           ": ", errno_str(errno));
    qps_.push_back(qp);
    if (ia.cap.max_inline_data < 8)
      fail("verbs: ", dev_.name, " does not support 8-byte inline sends (signals need them)");
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_INIT;
    at.pkey_index = 0;
    at.port_num = static_cast<uint8_t>(dev_.port);
    at.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    int rc = a_.modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (rc) fail("verbs: QP to INIT failed (rank ", peers[q / bc.qps_per_peer], "): ", errno_str(rc));
    psn_.push_back(rng() & 0xffffff);
  }
  regions_ = RegionTable(peers);
  tracker_ = std::make_unique<InflightTracker>(nq, bc.max_inflight);
  batcher_ = std::make_unique<WrBatcher>(bc, peers, *tracker_);
  is_dirty_.assign(nq, 0);
}

void VerbsTransport::to_rtr_rts(int q, const PortInfo& remote, uint32_t qpn, uint32_t psn) {
  const int peer = batcher_->peer_of_qp(q);
  const int rd_atom = std::max(1, std::min(16, std::min(dev_attr_.max_qp_rd_atom, dev_attr_.max_qp_init_rd_atom)));
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_RTR;
  at.path_mtu = static_cast<ibv_mtu>(std::min(my_port_.mtu, remote.mtu));
  at.dest_qp_num = qpn;
  at.rq_psn = psn;
  at.max_dest_rd_atomic = static_cast<uint8_t>(rd_atom);
  at.min_rnr_timer = 12;
  at.ah_attr.port_num = static_cast<uint8_t>(dev_.port);
  at.ah_attr.sl = 0;
  if (my_port_.link_layer == IBV_LINK_LAYER_ETHERNET) {
    at.ah_attr.is_global = 1;
    std::memcpy(at.ah_attr.grh.dgid.raw, remote.gid.data(), 16);
    at.ah_attr.grh.sgid_index = static_cast<uint8_t>(gid_index_);
    at.ah_attr.grh.hop_limit = 255;
  } else {
    at.ah_attr.dlid = remote.lid;
  }
  int rc = a_.modify_qp(qps_[q], &at,
                        IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                            IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (rc) fail("verbs: QP to RTR failed for rank ", peer, ": ", errno_str(rc));
  at = {};
  at.qp_state = IBV_QPS_RTS;
  at.timeout = 14;   // 4.096 us * 2^14 = 67 ms per try
  at.retry_cnt = 7;  // a dead peer surfaces as a failed completion within ~0.5 s
  at.rnr_retry = 7;
  at.sq_psn = psn_[q];
  at.max_rd_atomic = static_cast<uint8_t>(rd_atom);
  rc = a_.modify_qp(qps_[q], &at,
                    IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                        IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
  if (rc) fail("verbs: QP to RTS failed for rank ", peer, ": ", errno_str(rc));
}

// Every rank contributes a blob even when its setup failed, so that all
// ranks fail together with the failing rank's reason instead of timing out.
void VerbsTransport::connect(Bootstrap& bs, const std::vector<int>& peers) {
  const std::vector<ConnectInfo> infos = exchange_connect(bs, peers, [&](ConnectInfo& mine) {
    create_qps(peers);
    mine.qps_per_peer = batcher_->config().qps_per_peer;
    mine.port = my_port_;
    for (size_t i = 0; i < peers.size(); ++i) {
      PeerQps pq;
      pq.peer = peers[i];
      for (int k = 0; k < mine.qps_per_peer; ++k) {
        const int q = batcher_->qp_of(peers[i], k);
        pq.qpn.push_back(qps_[q]->qp_num);
        pq.psn.push_back(psn_[q]);
      }
      mine.peers.push_back(std::move(pq));
    }
  });
  const ConnectInfo& mine = infos[bs.rank()];
  std::string err;
  try {
    for (int p : peers) {
      const ConnectInfo& ci = infos[p];
      if (ci.qps_per_peer != mine.qps_per_peer)
        fail("verbs: rank ", p, " uses MK_IB_QPS_PER_PEER=", ci.qps_per_peer, ", this rank ",
             mine.qps_per_peer, "; set it equally on all ranks");
      auto it = std::find_if(ci.peers.begin(), ci.peers.end(), [&](const PeerQps& x) { return x.peer == bs.rank(); });
      if (it == ci.peers.end())
        fail("verbs: rank ", p, " did not list rank ", bs.rank(), " as a peer (peer lists must be symmetric)");
      if (ci.port.link_layer != my_port_.link_layer)
        fail("verbs: rank ", p, " is on a different link layer (InfiniBand vs RoCE)");
      for (int k = 0; k < mine.qps_per_peer; ++k)
        to_rtr_rts(batcher_->qp_of(p, k), ci.port, it->qpn[k], it->psn[k]);
    }
  } catch (const Error& e) {
    err = error_reason(e);
  }
  // Second round: everyone knows everyone reached RTS (a write must not reach
  // a QP that is not yet RTR) or learns who failed.
  agree_connected(bs, err);
}

void VerbsTransport::register_region(Bootstrap& bs, const Region& r) {
  if (!batcher_) fail("verbs: register_region before connect()");
  // On RC the NIC writes data and then its signal straight into GPU memory, where a kernel polls the signal: no
  // proxy sees the one-sided writes to flush them (EFA's path does: efa_srd.cpp rdma_flush_for), so the GPU must
  // order them for its kernels itself. (softverbs, the tests' stand-in, writes GPU memory by CUDA copies in order.)
  // (in the exchange's preparation: a rank failing it fails every rank alike)
  const bool softverbs = dev_.name.rfind("softverbs", 0) == 0;
  auto ordered = [&] {
    if (r.id == kSignalRegion && r.device && !softverbs && !gpu_orders_rdma_writes(r.cuda_device))
      fail("verbs: GPU ", r.cuda_device, " does not order GPUDirect RDMA writes for its own kernels ",
           "(cudaDevAttrGPUDirectRDMAWritesOrdering below owner): a signal could overtake its data on RC; use ",
           "MK_NET=fabric, which stages GPU memory through the host there");
  };
  if (ibv_mr* mr = register_and_exchange(a_, pd_, dev_.name, bs, r, kAccess, regions_, mrs_, ordered))
    mr_of_[r.id] = mr;
}

void VerbsTransport::flush(int q) {
  const std::vector<WrDesc> d = batcher_->take(q);
  if (d.empty()) return;
  wr_buf_.assign(d.size(), ibv_send_wr{});
  sge_buf_.assign(d.size(), ibv_sge{});
  for (size_t i = 0; i < d.size(); ++i) {
    const WrDesc& x = d[i];
    ibv_send_wr& wr = wr_buf_[i];
    ibv_sge& sg = sge_buf_[i];
    wr.wr_id = make_wr_id(q, x.seq);
    wr.next = i + 1 < d.size() ? &wr_buf_[i + 1] : nullptr;
    wr.sg_list = &sg;
    wr.num_sge = 1;
    wr.send_flags = (x.signaled ? IBV_SEND_SIGNALED : 0) | (x.fence ? IBV_SEND_FENCE : 0) |
                    (x.inline_data ? IBV_SEND_INLINE : 0);
    const RemoteRegion& rr = regions_.remote(x.peer, x.region);
    switch (x.kind) {
      case WrKind::Write: {
        const LocalRegion& lr = regions_.local(x.region);
        sg = {lr.base + x.src_off, static_cast<uint32_t>(x.bytes), lr.lkey};
        wr.opcode = IBV_WR_RDMA_WRITE;
        wr.wr.rdma = {rr.addr + x.dst_off, rr.rkey};
        break;
      }
      case WrKind::SignalSet:  // inline: the NIC copies the value at post time
        sg = {reinterpret_cast<uint64_t>(&d[i].value), 8, 0};
        wr.opcode = IBV_WR_RDMA_WRITE;
        wr.wr.rdma = {rr.addr + x.dst_off, rr.rkey};
        break;
      case WrKind::SignalAdd:
        sg = {reinterpret_cast<uint64_t>(scratch_), 8, scratch_mr_->lkey};
        wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
        wr.wr.atomic.remote_addr = rr.addr + x.dst_off;
        wr.wr.atomic.compare_add = x.value;
        wr.wr.atomic.swap = 0;
        wr.wr.atomic.rkey = rr.rkey;
        break;
      case WrKind::WriteImm:
      case WrKind::SignalRecord:
        fatal(cat("verbs: internal: SRD WR on an RC QP (rank ", x.peer, ")"));
    }
  }
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(qps_[q], wr_buf_.data(), &bad);
  if (rc)
    fatal(cat("verbs: ibv_post_send to rank ", batcher_->peer_of_qp(q), " failed on ", dev_.name,
              ": ", errno_str(rc)));
}

int VerbsTransport::poll(Completion* out, int max) {
  check_usable();
  flush_dirty();
  int n = tracker_->take_ready(out, max);
  ibv_wc wc[kPollBatch];
  while (n < max) {
    const int got = ibv_poll_cq(cq_, kPollBatch, wc);
    if (got < 0) fatal(cat("verbs: ibv_poll_cq failed on ", dev_.name, " (returned ", got, ")"));
    for (int i = 0; i < got; ++i) {
      const int q = wr_id_qp(wc[i].wr_id);
      const int peer = q < batcher_->num_qps() ? batcher_->peer_of_qp(q) : -1;
      if (wc[i].status != IBV_WC_SUCCESS)
        fatal(cat("verbs: write to peer rank ", peer, " failed on ", dev_.name, ": ",
                  a_.wc_status_str(wc[i].status), " (status ", static_cast<int>(wc[i].status),
                  ", vendor error 0x", std::hex, wc[i].vendor_err, std::dec,
                  "); is that rank alive and its port up?"));
      tracker_->on_completion(q, wr_id_seq(wc[i].wr_id));
    }
    n += tracker_->take_ready(out + n, max - n);
    if (got < kPollBatch) break;
  }
  return n;
}

void VerbsTransport::close() {
  if (closed_) return;
  closed_ = true;
  release_verbs(qps_, scratch_mr_, [] {});
}

}  // namespace
}  // namespace verbs

// EFA devices take the SRD path (efa_srd.cpp); everything else RC.
std::unique_ptr<Transport> make_verbs(const TransportConfig& cfg) {
  const verbs::IbvApi& a = verbs::ibv();
  // The NIC nearest this rank's GPU (nic_affinity.hpp); without a GPU (CPU tests) the ranks of a node spread.
  verbs::OpenedDevice dev =
      verbs::open_device(a, knob_str(Knob::MK_IB_DEVICE), gpu_pci_path(cfg.cuda_device), host_index(cfg));
  bool efa = false;
  try {
    efa = verbs::is_efa_device(a, dev);
  } catch (...) {
    a.close_device(dev.ctx);
    throw;
  }
  if (efa) return verbs::make_efa_srd(cfg, dev);
  return std::make_unique<verbs::VerbsTransport>(cfg, dev);
}

}  // namespace mk::net
