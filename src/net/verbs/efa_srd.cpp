// mkernel: the EFA path of the `verbs` transport: SRD datagram QPs created
// through efadv, RDMA write (+ write-with-immediate) and inline SENDs, with
// signals applied by the RECEIVER (DESIGN.md §5). The signal protocol and
// its ordering argument are in srd_signal.hpp; planning in wr_batcher.cpp.
//
// NOTES:
// - One SRD QP per (peer, k), like RC, so the batcher/tracker accounting is
//   shared; SRD is connectionless, each WR names its peer by address handle
//   + remote QPN + Q-key (exchanged in the connect blob). My QP
//   qp_of(peer, k) sends to, and only receives from, the peer's
//   qp_of(me, k): receive completions on it belong to that peer.
// - Every send WR is signalled and the tracker is unordered (SRD completes
//   out of order); a cookie is reported when all of its request's WRs did.
// - Receives: every WRITE_WITH_IMM and SEND consumes one receive WR of the
//   target QP. Each QP keeps kRecvDepth receive buffers posted and reposts
//   a buffer right after its completion was handled in poll(). A sender can
//   outrun reposting (its send completes when the peer NIC took the
//   receive, not when the peer's proxy reposted it): the QP's RNR retry
//   (rnr_retry = 7: the device must have EFADV_DEVICE_ATTR_CAPS_RNR_RETRY)
//   turns that into a delay, never a lost signal.
// - Signals into GPU memory are applied after cuFlushGPUDirectRDMAWrites
//   (unless the GPU orders GPUDirect RDMA writes itself: rdma_flush_for),
//   so that the NIC's writes of the data are visible to the GPU before the
//   signal, through fabric's staging ops (fabric::StageOps::deliver, no
//   bytes): by the kernels' delivery agents (MK_FABRIC_STAGE=agent, the
//   default: the proxy issues no CUDA work, and a kernel that waits for
//   signals runs the agent, as the ops' kernels do) or on one CUDA stream
//   (cuda: Set by cuStreamWriteValue64, Add by a preloaded kernel). Into
//   host memory with a host atomic after the same flush. Agents may apply
//   two signals in either order (SRD delivers them in none either): the
//   ops send a word's next Set only after a handshake shows the receiver
//   saw the last (device/roles/allgather_push.cuh, kv_push.cuh,
//   reduce_scatter.cuh), and Adds commute. The flush stays a driver call
//   on the proxy thread (no stream work).
#include "src/net/verbs/ibv_loader.hpp"

#if MK_HAVE_EFADV

#include <arpa/inet.h>
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>

#include "mkernel/error.hpp"
#include "mkernel/knobs.hpp"
#include "src/net/fabric/fabric_stage.hpp"
#include "src/net/verbs/endpoint.hpp"
#include "src/net/verbs/qp_transport.hpp"
#include "src/net/verbs/verbs_common.hpp"
#include "src/net/verbs/wr_batcher.hpp"

namespace mk::net::verbs {
namespace {

// Not in rdma-core < 45's efadv.h; the value is the efadv ABI's.
constexpr uint32_t kEfaCapsRdmaWrite = 1u << 3;
constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
constexpr int kPollBatch = 32;
// Batches one poll() takes at most: each receive is reposted at once, so peers that keep sending could keep
// a full batch coming; what is left is taken on the next poll(), after the proxy has posted its own commands
// and checked their ages (poll() never waits, transport.hpp).
constexpr int kMaxBatchesPerPoll = 8;
constexpr size_t kRecvSlot = 32;  // >= sizeof(SrdRecord)

using FlushFn = CUresult (*)(CUflushGPUDirectRDMAWritesTarget, CUflushGPUDirectRDMAWritesScope);

// What makes the NIC's writes into GPU `dev` visible to it before a signal
// the proxy applies after their completions: nothing when the GPU orders them
// itself (GPUDirect RDMA writes ordering >= owner: CUDA documents the flush
// as a no-op then, so no driver call each poll), else
// cuFlushGPUDirectRDMAWrites where the GPU offers it; neither: mk::Error,
// since a signal could overtake its data. Errors of the queries are cleared
// (the library's runtime keeps none: src/runtime/device_health.hpp).
FlushFn rdma_flush_for(int dev) {
  auto attr = [dev](cudaDeviceAttr a) {  // 0 when the query fails (its error cleared)
    int v = 0;
    if (cudaDeviceGetAttribute(&v, a, dev) == cudaSuccess) return v;
    cudaGetLastError();
    return 0;
  };
  const int order = attr(cudaDevAttrGPUDirectRDMAWritesOrdering);
  if (order >= cudaGPUDirectRDMAWritesOrderingOwner) return nullptr;
  const int opts = attr(cudaDevAttrGPUDirectRDMAFlushWritesOptions);
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult qr{};
  if ((opts & cudaFlushGPUDirectRDMAWritesOptionHost) &&
      cudaGetDriverEntryPointByVersion("cuFlushGPUDirectRDMAWrites", &fn, 12000, cudaEnableDefault, &qr) ==
          cudaSuccess &&
      qr == cudaDriverEntryPointSuccess && fn)
    return reinterpret_cast<FlushFn>(fn);
  cudaGetLastError();
  fail("verbs/efa: GPU ", dev, " neither orders GPUDirect RDMA writes for its own kernels "
       "(cudaDevAttrGPUDirectRDMAWritesOrdering = ", order, ") nor offers cuFlushGPUDirectRDMAWrites "
       "(cudaDevAttrGPUDirectRDMAFlushWritesOptions = ", opts, "): a received signal could overtake its data");
}

class SrdTransport final : public QpTransport {
 public:
  SrdTransport(const TransportConfig& cfg, const OpenedDevice& dev) : QpTransport(cfg, dev) {
    try {
      if (!a_.efadv_query_device || !a_.efadv_create_qp_ex)
        fail("verbs: ", dev_.name, " is an EFA device but libefa.so.1 (efadv) could not be loaded; "
             "install rdma-core's libefa1 or use MK_NET=fabric");
      if (!a_.qp_to_qp_ex) fail("verbs: libibverbs lacks ibv_qp_to_qp_ex (rdma-core too old for EFA SRD)");
      if (a_.query_device(dev_.ctx, &dev_attr_) != 0) fail("verbs: ibv_query_device failed on ", dev_.name);
      if (a_.efadv_query_device(dev_.ctx, &efa_, sizeof(efa_)) != 0)
        fail("verbs: efadv_query_device failed on ", dev_.name);
      if (!(efa_.device_caps & kEfaCapsRdmaWrite))
        fail("verbs: EFA device ", dev_.name, " has no RDMA write (EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE); "
             "this backend needs it, use MK_NET=fabric");
      // Without RNR retry a sender that outruns the receiver's reposting (its proxy busy, or paused in a
      // registration) fails with RNR_RETRY_EXC_ERR: a signal lost, not delayed (the header's "Receives").
      if (!(efa_.device_caps & EFADV_DEVICE_ATTR_CAPS_RNR_RETRY))
        fail("verbs: EFA device ", dev_.name, " has no RNR retry (EFADV_DEVICE_ATTR_CAPS_RNR_RETRY): a signal "
             "could be lost when its receiver is slow to repost; this backend needs it, use MK_NET=fabric");
      if (efa_.inline_buf_size < sizeof(SrdRecord))
        fail("verbs: EFA device ", dev_.name, " inlines ", efa_.inline_buf_size, " bytes, signal records need ",
             sizeof(SrdRecord));
      pd_ = a_.alloc_pd(dev_.ctx);
      if (!pd_) fail("verbs: ibv_alloc_pd failed on ", dev_.name, ": ", errno_str(errno));
      ibv_gid g{};
      if (a_.query_gid(dev_.ctx, static_cast<uint8_t>(dev_.port), 0, &g) != 0)
        fail("verbs: cannot read GID 0 of ", dev_.name);
      std::memcpy(my_port_.gid.data(), g.raw, 16);
      my_port_.link_layer = dev_.port_attr.link_layer;
      qkey_ = std::random_device{}() & 0x7fffffff;  // high bit set = privileged Q-key
    } catch (...) {
      close();
      throw;
    }
  }
  ~SrdTransport() override { close(); }

  std::string name() const override { return "verbs:" + dev_.name + "(srd)"; }
  // Signals into GPU memory: the staging ops' stream and kernel (cuda), or none (agent).
  bool proxy_calls_cuda() const override { return gpu_ != nullptr && gpu_->calls_cuda(); }
  DeliveryRing delivery_ring() const override { return gpu_ ? gpu_->delivery_ring() : DeliveryRing{}; }
  std::string in_flight() const override { return gpu_ ? gpu_->describe() : std::string(); }
  void connect(Bootstrap& bs, const std::vector<int>& peers) override;
  void register_region(Bootstrap& bs, const Region& r) override;
  int poll(Completion* out, int max) override;
  void close() override;

 private:
  void posted() override {
    if (gpu_) gpu_->pushed();
  }
  void flush(int q) override;
  void create_qps(const std::vector<int>& peers);
  void post_recv(int q, int slot, int peer);  // (peer: for its error)
  void on_recv(const ibv_wc& wc);
  void apply_pending_signals();

  efadv_device_attr efa_{};
  uint32_t qkey_ = 0;
  int recv_depth_ = 0;
  std::vector<ibv_qp*> qps_;
  std::vector<ibv_qp_ex*> qpx_;
  std::vector<ibv_ah*> ah_;             // per peer index
  std::vector<uint32_t> remote_qpn_;    // per flat QP
  std::vector<uint32_t> remote_qkey_;   // per peer index
  std::vector<uint8_t> recv_buf_;       // [q][slot][kRecvSlot], registered
  ibv_mr* recv_mr_ = nullptr;
  Region sig_region_;                   // this rank's region 0 (where received signals land)
  SrdAssembler assembler_;
  std::vector<ImmSignal> to_apply_;     // released signals of this poll()
  std::shared_ptr<fabric::StageOps> gpu_;  // region 0 in GPU memory: who applies its signals
  FlushFn flush_rdma_ = nullptr;  // null: the GPU orders the NIC's writes itself (rdma_flush_for), or no GPU
  bool flush_checked_ = false;
};

void SrdTransport::create_qps(const std::vector<int>& peers) {
  BatcherConfig bc;
  bc.imm_signals = true;
  bc.qps_per_peer = static_cast<int>(knob_int(Knob::MK_IB_QPS_PER_PEER));
  bc.max_inflight = static_cast<int>(std::min<int64_t>(knob_int(Knob::MK_IB_MAX_INFLIGHT), efa_.max_sq_wr));
  // NOTES: max_rdma_size bounds one RDMA write; larger writes are split
  // (signalled ones into record-form parts, see srd_signal.hpp).
  bc.max_wr_bytes = std::max<uint64_t>(1, std::min<uint64_t>(efa_.max_rdma_size, 1ull << 30));
  bc = bc.normalized();
  const int nq = static_cast<int>(peers.size()) * bc.qps_per_peer;
  recv_depth_ = static_cast<int>(std::min<uint32_t>(efa_.max_rq_wr, 2u * bc.max_inflight));
  // Sends (all signalled) + receives, each at most its queue depth.
  const int64_t want = static_cast<int64_t>(nq) * (bc.max_inflight + recv_depth_) + 16;
  check_queue_shape(nq, want, cat(bc.max_inflight, " sends in flight + ", recv_depth_, " receives"));
  const int cqe = static_cast<int>(want);
  cq_ = a_.create_cq(dev_.ctx, cqe, nullptr, nullptr, 0);
  if (!cq_) fail("verbs: ibv_create_cq(", cqe, ") failed on ", dev_.name, ": ", errno_str(errno));

  recv_buf_.assign(static_cast<size_t>(nq) * recv_depth_ * kRecvSlot, 0);
  recv_mr_ = a_.reg_mr(pd_, recv_buf_.data(), recv_buf_.size(), IBV_ACCESS_LOCAL_WRITE);
  if (!recv_mr_) fail("verbs: ibv_reg_mr of the SRD receive buffers failed: ", errno_str(errno));

  for (int q = 0; q < nq; ++q) {
    const int peer = peers[q / bc.qps_per_peer];
    // NOTES: SRD needs efadv_create_qp_ex (exported by libefa, dlsym'ed);
    // ibv_create_qp_ex of verbs.h cannot ask for the SRD driver type.
    ibv_qp_init_attr_ex ia{};
    ia.qp_type = IBV_QPT_DRIVER;
    ia.send_cq = cq_;
    ia.recv_cq = cq_;
    ia.pd = pd_;
    ia.cap.max_send_wr = bc.max_inflight;
    ia.cap.max_recv_wr = recv_depth_;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    ia.cap.max_inline_data = sizeof(SrdRecord);
    ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    ia.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND;
    efadv_qp_init_attr ea{};
    ea.driver_qp_type = EFADV_QP_DRIVER_TYPE_SRD;
    ibv_qp* qp = a_.efadv_create_qp_ex(dev_.ctx, &ia, &ea, sizeof(ea));
    if (!qp) fail("verbs: efadv_create_qp_ex (SRD) for rank ", peer, " failed on ", dev_.name, ": ", errno_str(errno));
    qps_.push_back(qp);
    ibv_qp_ex* x = a_.qp_to_qp_ex(qp);
    if (!x) fail("verbs: ibv_qp_to_qp_ex failed for an SRD QP on ", dev_.name);
    qpx_.push_back(x);
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_INIT;
    at.pkey_index = 0;
    at.port_num = static_cast<uint8_t>(dev_.port);
    at.qkey = qkey_;
    int rc = a_.modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
    if (rc) fail("verbs: SRD QP to INIT failed (rank ", peer, "): ", errno_str(rc));
    at = {};
    at.qp_state = IBV_QPS_RTR;
    rc = a_.modify_qp(qp, &at, IBV_QP_STATE);
    if (rc) fail("verbs: SRD QP to RTR failed (rank ", peer, "): ", errno_str(rc));
    at = {};
    at.qp_state = IBV_QPS_RTS;
    at.sq_psn = 0;
    at.rnr_retry = 7;  // 7 = retry without limit
    rc = a_.modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_RNR_RETRY);  // (the device has it: checked)
    if (rc) fail("verbs: SRD QP to RTS failed (rank ", peer, "): ", errno_str(rc));
    for (int s = 0; s < recv_depth_; ++s) post_recv(q, s, peer);
  }
  regions_ = RegionTable(peers);
  tracker_ = std::make_unique<InflightTracker>(nq, bc.max_inflight, /*ordered=*/false);
  batcher_ = std::make_unique<WrBatcher>(bc, peers, *tracker_);
  assembler_ = SrdAssembler(nq);
  is_dirty_.assign(nq, 0);
}

void SrdTransport::post_recv(int q, int slot, int peer) {
  uint8_t* buf = recv_buf_.data() + (static_cast<size_t>(q) * recv_depth_ + slot) * kRecvSlot;
  ibv_sge sg{reinterpret_cast<uint64_t>(buf), static_cast<uint32_t>(kRecvSlot), recv_mr_->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = make_wr_id(q, static_cast<uint64_t>(slot));
  wr.sg_list = &sg;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  const int rc = ibv_post_recv(qps_[q], &wr, &bad);
  if (rc)
    fatal(cat("verbs: ibv_post_recv on the SRD QP of peer rank ", peer, " on ", dev_.name,
              " failed: ", errno_str(rc)));
}

// Same two-round shape as the RC connect: every rank contributes a blob even
// when its setup failed, so that all ranks fail together naming the cause.
void SrdTransport::connect(Bootstrap& bs, const std::vector<int>& peers) {
  const std::vector<ConnectInfo> infos = exchange_connect(bs, peers, [&](ConnectInfo& mine) {
    create_qps(peers);
    mine.qps_per_peer = batcher_->config().qps_per_peer;
    mine.port = my_port_;
    mine.srd = true;
    mine.qkey = qkey_;
    for (int p : peers) {
      PeerQps pq;
      pq.peer = p;
      for (int k = 0; k < mine.qps_per_peer; ++k) {
        pq.qpn.push_back(qps_[batcher_->qp_of(p, k)]->qp_num);
        pq.psn.push_back(0);
      }
      mine.peers.push_back(std::move(pq));
    }
  });
  const ConnectInfo& mine = infos[bs.rank()];
  std::string err;
  try {
    remote_qpn_.assign(qps_.size(), 0);
    for (int p : peers) {
      const ConnectInfo& ci = infos[p];
      if (!ci.srd) fail("verbs: rank ", p, " uses RC queue pairs, this rank EFA SRD (mixed devices)");
      if (ci.qps_per_peer != mine.qps_per_peer)
        fail("verbs: rank ", p, " uses MK_IB_QPS_PER_PEER=", ci.qps_per_peer, ", this rank ",
             mine.qps_per_peer, "; set it equally on all ranks");
      auto it = std::find_if(ci.peers.begin(), ci.peers.end(), [&](const PeerQps& x) { return x.peer == bs.rank(); });
      if (it == ci.peers.end())
        fail("verbs: rank ", p, " did not list rank ", bs.rank(), " as a peer (peer lists must be symmetric)");
      ibv_ah_attr ah{};
      ah.is_global = 1;
      ah.port_num = static_cast<uint8_t>(dev_.port);
      std::memcpy(ah.grh.dgid.raw, ci.port.gid.data(), 16);
      ibv_ah* h = a_.create_ah(pd_, &ah);
      if (!h) fail("verbs: ibv_create_ah for rank ", p, " failed on ", dev_.name, ": ", errno_str(errno));
      ah_.push_back(h);  // peer index order = `peers` order
      remote_qkey_.push_back(ci.qkey);
      for (int k = 0; k < mine.qps_per_peer; ++k) remote_qpn_[batcher_->qp_of(p, k)] = it->qpn[k];
    }
  } catch (const Error& e) {
    err = error_reason(e);
  }
  // Second round: every rank has its receives posted and its AHs made
  // before anyone writes.
  agree_connected(bs, err);
}

void SrdTransport::register_region(Bootstrap& bs, const Region& r) {
  if (!batcher_) fail("verbs: register_region before connect()");
  ibv_mr* mr = register_and_exchange(a_, pd_, dev_.name, bs, r, kAccess, regions_, mrs_, [&] {
    if (r.id == kSignalRegion) {
      sig_region_ = r;
      if (r.device && r.bytes > 0) {
        // Received signals are applied by the fabric staging machinery
        // (MK_FABRIC_STAGE). Region 0 is registered before Network reads
        // the transports' delivery rings (network.cpp).
        gpu_ = fabric::make_stage_ops(r.cuda_device >= 0 ? r.cuda_device : cfg_.cuda_device, "efa signals");
      }
      if (cfg_.cuda_device >= 0 && !flush_checked_) {
        flush_rdma_ = rdma_flush_for(r.cuda_device >= 0 ? r.cuda_device : cfg_.cuda_device);
        flush_checked_ = true;
      }
    }
  });
  if (mr) mr_of_[r.id] = mr;
}

void SrdTransport::flush(int q) {
  std::vector<WrDesc> d = batcher_->take(q);
  if (d.empty()) return;
  const int pi = regions_.peer_index(batcher_->peer_of_qp(q));
  ibv_qp_ex* x = qpx_[q];
  ibv_wr_start(x);
  // Between start and complete the QP's send lock is held (rdma-core): whatever throws in between (a region
  // deregistered while its WRs were queued) aborts the batch first, else the next ibv_wr_start would spin.
  try {
    for (WrDesc& w : d) {
      x->wr_id = make_wr_id(q, w.seq);
      x->wr_flags = IBV_SEND_SIGNALED;  // SRD: every WR (unordered tracker)
      switch (w.kind) {
        case WrKind::Write:
        case WrKind::WriteImm: {
          const RemoteRegion& rr = regions_.remote(w.peer, w.region);
          const LocalRegion& lr = regions_.local(w.region);
          if (w.kind == WrKind::Write)
            ibv_wr_rdma_write(x, rr.rkey, rr.addr + w.dst_off);
          else
            ibv_wr_rdma_write_imm(x, rr.rkey, rr.addr + w.dst_off, htonl(w.imm));
          ibv_wr_set_ud_addr(x, ah_[pi], remote_qpn_[q], remote_qkey_[pi]);
          ibv_wr_set_sge(x, lr.lkey, lr.base + w.src_off, static_cast<uint32_t>(w.bytes));
          break;
        }
        case WrKind::SignalRecord: {
          SrdRecord rec;
          rec.op = static_cast<uint8_t>(w.sig_op);
          rec.nparts = static_cast<uint16_t>(w.nparts);
          rec.msg_id = w.imm;
          rec.sig_off = w.dst_off;
          rec.value = w.value;
          x->wr_flags |= IBV_SEND_INLINE;
          ibv_wr_send(x);
          ibv_wr_set_ud_addr(x, ah_[pi], remote_qpn_[q], remote_qkey_[pi]);
          ibv_wr_set_inline_data(x, &rec, sizeof(rec));  // copied now
          break;
        }
        default:
          fatal(cat("verbs: internal: ", to_string(w.kind), " WR on an EFA SRD QP (rank ", w.peer, ")"));
      }
    }
  } catch (...) {
    ibv_wr_abort(x);
    throw;
  }
  const int rc = ibv_wr_complete(x);
  if (rc)
    fatal(cat("verbs: posting to rank ", batcher_->peer_of_qp(q), " failed on ", dev_.name, ": ", errno_str(rc)));
}

// A receive completion: the payload of that one operation is in place
// (srd_signal.hpp); signals released by it are applied after this poll's CQ
// batch, then the buffer is reposted.
void SrdTransport::on_recv(const ibv_wc& wc) {
  const int q = wr_id_qp(wc.wr_id);
  const int slot = static_cast<int>(wr_id_seq(wc.wr_id));
  if (q >= static_cast<int>(qps_.size()) || slot >= recv_depth_)
    fatal(cat("verbs: internal: receive completion with bad wr_id 0x", std::hex, wc.wr_id));
  const int peer = batcher_->peer_of_qp(q);
  if (wc.src_qp != remote_qpn_[q])
    fatal(cat("verbs/efa: receive on the QP of rank ", peer, " from unexpected QPN ", wc.src_qp));
  ImmSignal s;
  bool released = false;
  if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
    const DecodedImm d = decode_imm(ntohl(wc.imm_data));
    if (d.kind == ImmKind::Inline) {
      s = d.sig;
      released = true;
    } else if (d.kind == ImmKind::Part) {
      released = assembler_.on_part(q, d.msg_id, &s);
    } else {
      fatal(cat("verbs/efa: rank ", peer, " sent an invalid immediate 0x", std::hex, ntohl(wc.imm_data)));
    }
  } else if (wc.opcode == IBV_WC_RECV) {
    const uint8_t* buf = recv_buf_.data() + (static_cast<size_t>(q) * recv_depth_ + slot) * kRecvSlot;
    released = assembler_.on_record(q, parse_record(buf, wc.byte_len, peer), &s);
  } else {
    fatal(cat("verbs/efa: unexpected receive opcode ", static_cast<int>(wc.opcode), " from rank ", peer));
  }
  if (released) {
    if (s.sig_off > sig_region_.bytes || sig_region_.bytes - s.sig_off < 8)  // (no wrap for a huge offset)
      fatal(cat("verbs/efa: rank ", peer, " signalled offset ", s.sig_off, " beyond the signal region"));
    to_apply_.push_back(s);
  }
  post_recv(q, slot, peer);
}

void SrdTransport::apply_pending_signals() {
  if (to_apply_.empty()) return;
  // NOTES: one flush covers every data write whose completion was polled
  // before it, i.e. all data of the signals below.
  if (flush_rdma_) {
    const CUresult r = flush_rdma_(CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX,
                                   CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER);
    if (r != CUDA_SUCCESS) fatal(cat("verbs/efa: cuFlushGPUDirectRDMAWrites failed (CUresult ", int(r), ")"));
  }
  for (const ImmSignal& s : to_apply_) {
    void* word = static_cast<uint8_t*>(sig_region_.base) + s.sig_off;
    if (gpu_) {
      gpu_->deliver(nullptr, nullptr, 0, word, s.op, s.value);
    } else {
      std::atomic_ref<uint64_t> a(*static_cast<uint64_t*>(word));
      if (s.op == SigOp::Set)
        a.store(s.value, std::memory_order_release);
      else
        a.fetch_add(s.value, std::memory_order_acq_rel);
    }
  }
  to_apply_.clear();
}

int SrdTransport::poll(Completion* out, int max) {
  check_usable();
  if (gpu_) {
    gpu_->progress();
    const fabric::StageOps::Stall s = gpu_->stalled();
    if (!s.line.empty())
      log(s.warn ? LogLevel::Warn : LogLevel::Info, cat("verbs/efa: rank ", cfg_.rank, ": ", s.line));
  }
  flush_dirty();
  int n = tracker_->take_ready(out, max);
  ibv_wc wc[kPollBatch];
  // NOTES: receive completions are taken (they carry peers' signals) even
  // when `out` is full, up to kMaxBatchesPerPoll batches a call.
  for (int b = 0; b < kMaxBatchesPerPoll; ++b) {
    const int got = ibv_poll_cq(cq_, kPollBatch, wc);
    if (got < 0) fatal(cat("verbs: ibv_poll_cq failed on ", dev_.name, " (returned ", got, ")"));
    for (int i = 0; i < got; ++i) {
      const int q = wr_id_qp(wc[i].wr_id);
      const int peer = q < batcher_->num_qps() ? batcher_->peer_of_qp(q) : -1;
      const bool recv = (wc[i].opcode & IBV_WC_RECV) != 0;
      if (wc[i].status != IBV_WC_SUCCESS)
        fatal(cat("verbs/efa: ", recv ? "receive from" : "write to", " peer rank ", peer, " failed on ",
                  dev_.name, ": ", a_.wc_status_str(wc[i].status), " (status ", static_cast<int>(wc[i].status),
                  ", vendor error 0x", std::hex, wc[i].vendor_err, std::dec, "); is that rank alive?"));
      if (recv)
        on_recv(wc[i]);
      else
        tracker_->on_completion(q, wr_id_seq(wc[i].wr_id));
    }
    apply_pending_signals();
    n += tracker_->take_ready(out + n, max - n);
    if (got < kPollBatch) break;
  }
  return n;
}

void SrdTransport::close() {
  if (closed_) return;
  closed_ = true;
  if (gpu_ && !gpu_->drain())
    log(LogLevel::Warn, cat("verbs/efa: rank ", cfg_.rank, ": closed with received signals not applied",
                            gpu_->describe()));
  gpu_.reset();
  qpx_.clear();  // views of qps_
  release_verbs(qps_, recv_mr_, [&] {
    for (ibv_ah* h : ah_) a_.destroy_ah(h);
    ah_.clear();
  });
}

}  // namespace

std::unique_ptr<Transport> make_efa_srd(const TransportConfig& cfg, const OpenedDevice& dev) {
  return std::make_unique<SrdTransport>(cfg, dev);
}

}  // namespace mk::net::verbs

#else  // !MK_HAVE_EFADV

#include "mkernel/error.hpp"
#include "src/net/verbs/verbs_common.hpp"

namespace mk::net::verbs {

std::unique_ptr<Transport> make_efa_srd(const TransportConfig&, const OpenedDevice& dev) {
  ibv().close_device(dev.ctx);
  fail("verbs: ", dev.name, " is an EFA device and this build has no <infiniband/efadv.h>; "
       "rebuild with rdma-core's headers or use MK_NET=fabric");
}

}  // namespace mk::net::verbs

#endif
