// softverbs, the EFA part (SOFTVERBS_EFA=1): efadv_query_device and
// efadv_create_qp_ex (libefa.so.1 is a link to this library), SRD queue
// pairs driven through the extended-QP builder (ibv_wr_start ..
// ibv_wr_complete), address handles, and receives. What mkernel's SRD path
// (src/net/verbs/efa_srd.cpp) meets here, as on an EFA device:
// - Connectionless QPs: each WR names its target by address handle, remote
//   QPN and Q-key; a Q-key that does not match the target QP's is refused.
// - Unordered delivery: each ibv_wr_complete batch is sent in a random order,
//   and a WR that finds no receive posted is answered "receiver not ready"
//   and sent again later (rnr_retry 7: without limit), so completions at both
//   ends come in any order.
// - RDMA write with immediate and (inline) SEND each consume one receive WR of
//   the target QP, whose completion carries the immediate or the payload
//   length and the source QPN. A SEND longer than the receive buffer fails.
// - Every WR must be signalled to free its send-queue slot (they retire one
//   completion each); the queue depths, inline size and largest RDMA write
//   are efadv's answers, checked at post.
#include "softverbs.hpp"

#if __has_include(<infiniband/efadv.h>)
#include <infiniband/efadv.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

namespace softverbs {
namespace {

constexpr uint32_t kMaxSqWr = 256, kMaxRqWr = 4096, kInlineBuf = 32;
constexpr uint32_t kCapsRdmaWrite = 1u << 3;  // EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE (rdma-core >= 45)

struct Ah {
  ibv_ah ah{};
  uint64_t peer_key = 0;
};

Qp& qp_of(ibv_qp_ex* x) { return *reinterpret_cast<Qp*>(x); }
uint32_t max_rdma_size() { return std::min<uint32_t>(max_msg_sz(), 1u << 30); }

// The builder calls touch only q.batch, which only the posting thread uses
// until wr_complete hands it to the NIC under the lock.
void add(ibv_qp_ex* x, ibv_wr_opcode op, uint64_t ops_flag) {
  Qp& q = qp_of(x);
  SendWr w;
  w.wr_id = x->wr_id;
  w.opcode = op;
  w.signaled = (x->wr_flags & IBV_SEND_SIGNALED) != 0;
  w.inline_data = (x->wr_flags & IBV_SEND_INLINE) != 0;
  if (!(q.send_ops & ops_flag)) q.batch_bad = true;  // an op the QP was not created for
  q.batch.push_back(std::move(w));
}
SendWr* last(ibv_qp_ex* x) {
  Qp& q = qp_of(x);
  if (q.batch.empty()) {
    q.batch_bad = true;
    return nullptr;
  }
  return &q.batch.back();
}

void sv_wr_start(ibv_qp_ex* x) {
  qp_of(x).batch.clear();
  qp_of(x).batch_bad = false;
}
void sv_wr_rdma_write(ibv_qp_ex* x, uint32_t rkey, uint64_t raddr) {
  add(x, IBV_WR_RDMA_WRITE, IBV_QP_EX_WITH_RDMA_WRITE);
  qp_of(x).batch.back().rkey = rkey;
  qp_of(x).batch.back().raddr = raddr;
}
void sv_wr_rdma_write_imm(ibv_qp_ex* x, uint32_t rkey, uint64_t raddr, __be32 imm) {
  add(x, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM);
  qp_of(x).batch.back().rkey = rkey;
  qp_of(x).batch.back().raddr = raddr;
  qp_of(x).batch.back().imm = imm;
}
void sv_wr_send(ibv_qp_ex* x) { add(x, IBV_WR_SEND, IBV_QP_EX_WITH_SEND); }
void sv_wr_set_ud_addr(ibv_qp_ex* x, ibv_ah* ah, uint32_t qpn, uint32_t qkey) {
  if (SendWr* w = last(x)) {
    w->peer_key = ah ? reinterpret_cast<Ah*>(ah)->peer_key : 0;
    w->dest_qpn = qpn;
    w->qkey = qkey;
  }
}
void sv_wr_set_sge(ibv_qp_ex* x, uint32_t lkey, uint64_t addr, uint32_t len) {
  if (SendWr* w = last(x)) {
    if (w->inline_data) qp_of(x).batch_bad = true;  // IBV_SEND_INLINE takes wr_set_inline_data
    w->lkey = lkey;
    w->laddr = addr;
    w->len = len;
  }
}
void sv_wr_set_inline_data(ibv_qp_ex* x, void* addr, size_t len) {
  if (SendWr* w = last(x)) {
    if (!w->inline_data || len > qp_of(x).max_inline) qp_of(x).batch_bad = true;
    w->inl.assign(static_cast<const char*>(addr), len);  // copied now, as the NIC's inline buffer
    w->len = static_cast<uint32_t>(len);
  }
}
void sv_wr_abort(ibv_qp_ex* x) { qp_of(x).batch.clear(); }
// Builder calls SRD has or softverbs does not emulate: the batch fails at wr_complete (EINVAL).
void bad(ibv_qp_ex* x) { qp_of(x).batch_bad = true; }
void sv_wr_rdma_read(ibv_qp_ex* x, uint32_t, uint64_t) { bad(x); }
void sv_wr_send_imm(ibv_qp_ex* x, __be32) { bad(x); }
void sv_wr_atomic_fetch_add(ibv_qp_ex* x, uint32_t, uint64_t, uint64_t) { bad(x); }
void sv_wr_atomic_cmp_swp(ibv_qp_ex* x, uint32_t, uint64_t, uint64_t, uint64_t) { bad(x); }
void sv_wr_set_sge_list(ibv_qp_ex* x, size_t, const ibv_sge*) { bad(x); }
void sv_wr_set_inline_data_list(ibv_qp_ex* x, size_t, const ibv_data_buf*) { bad(x); }

int sv_wr_complete(ibv_qp_ex* x) {
  std::lock_guard<std::mutex> lk(g->mu);
  Qp& q = qp_of(x);
  std::vector<SendWr> b;
  b.swap(q.batch);
  int err = q.batch_bad ? EINVAL : 0;
  if (!err && q.state != IBV_QPS_RTS) err = EINVAL;
  if (!err && q.posted - q.retired + b.size() > q.max_send_wr) err = ENOMEM;
  for (const SendWr& w : b) {
    if (err) break;
    if (!w.peer_key || (w.opcode == IBV_WR_SEND && !w.inline_data) ||
        (w.opcode != IBV_WR_SEND && w.len > max_rdma_size()))
      err = EINVAL;
  }
  if (err) return err;
  static thread_local std::mt19937 rng(std::random_device{}());
  const Clock::time_point leave = Clock::now() + wire_delay();
  for (SendWr& w : b) {
    w.index = q.posted++;
    w.not_before = leave;
  }
  std::shuffle(b.begin(), b.end(), rng);  // SRD keeps no order
  for (SendWr& w : b) q.unsent.push_back(std::move(w));
  wake_nic();
  return 0;
}

}  // namespace

void init_srd_ops(Qp& q) {
  q.x.wr_start = sv_wr_start;
  q.x.wr_rdma_write = sv_wr_rdma_write;
  q.x.wr_rdma_write_imm = sv_wr_rdma_write_imm;
  q.x.wr_send = sv_wr_send;
  q.x.wr_set_ud_addr = sv_wr_set_ud_addr;
  q.x.wr_set_sge = sv_wr_set_sge;
  q.x.wr_set_inline_data = sv_wr_set_inline_data;
  q.x.wr_complete = sv_wr_complete;
  q.x.wr_abort = sv_wr_abort;
  q.x.wr_rdma_read = sv_wr_rdma_read;
  q.x.wr_send_imm = sv_wr_send_imm;
  q.x.wr_atomic_fetch_add = sv_wr_atomic_fetch_add;
  q.x.wr_atomic_cmp_swp = sv_wr_atomic_cmp_swp;
  q.x.wr_set_sge_list = sv_wr_set_sge_list;
  q.x.wr_set_inline_data_list = sv_wr_set_inline_data_list;
}

uint32_t srd_receive(Qp& q, const Hdr& h, const char* payload) {
  if (q.recvs.empty()) return kRnr;
  const RecvWr r = q.recvs.front();
  ibv_wc wc{};
  wc.wr_id = r.wr_id;
  wc.status = IBV_WC_SUCCESS;
  wc.qp_num = q.qp().qp_num;
  wc.src_qp = h.src_qpn;
  wc.byte_len = h.len;
  uint32_t ack = IBV_WC_SUCCESS;
  if (h.type == kWriteImm) {
    ack = place_write(q, h, payload);
    if (ack != IBV_WC_SUCCESS) return ack;  // refused before it reached a receive
    wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
    wc.imm_data = h.imm;
    wc.wc_flags = IBV_WC_WITH_IMM;
  } else {
    wc.opcode = IBV_WC_RECV;
    const Mr* m = find_mr(r.lkey);
    if (h.len > r.len) {
      wc.status = IBV_WC_LOC_LEN_ERR;
      ack = IBV_WC_REM_INV_REQ_ERR;
    } else if (!m || !(m->access & IBV_ACCESS_LOCAL_WRITE) || !covers(m, r.addr, h.len) || m->mr.pd != q.qp().pd) {
      wc.status = IBV_WC_LOC_PROT_ERR;
      ack = IBV_WC_REM_OP_ERR;
    } else {
      if (m->device_ctx) device_write(m->device_ctx, r.addr, payload, h.len);
      else std::memcpy(reinterpret_cast<void*>(r.addr), payload, h.len);
    }
  }
  q.recvs.pop_front();
  Cq* cq = reinterpret_cast<Cq*>(q.qp().recv_cq);
  if (cq->entries.size() >= static_cast<size_t>(cq->cq.cqe)) cq->overrun = true;
  else cq->push({wc, q.qp().qp_num, kNoIndex});
  return ack;
}

}  // namespace softverbs

using namespace softverbs;

extern "C" {

int efadv_query_device(ibv_context*, efadv_device_attr* a, uint32_t inlen) {
  if (!efa_mode()) return EOPNOTSUPP;  // a RoCE device
  std::memset(a, 0, std::min<size_t>(inlen, sizeof *a));
  if (inlen < sizeof *a) return EINVAL;
  a->max_sq_wr = kMaxSqWr;
  a->max_rq_wr = kMaxRqWr;
  a->max_sq_sge = 2;
  a->max_rq_sge = 1;
  a->inline_buf_size = kInlineBuf;
  a->device_caps = kCapsRdmaWrite | (lacks("rnr_retry") ? 0u : uint32_t{EFADV_DEVICE_ATTR_CAPS_RNR_RETRY});
  a->max_rdma_size = max_rdma_size();
  return 0;
}

ibv_qp* efadv_create_qp_ex(ibv_context* ctx, ibv_qp_init_attr_ex* ia, efadv_qp_init_attr* ea, uint32_t inlen) {
  if (injected_failure("create_qp")) {
    errno = ENOMEM;
    return nullptr;
  }
  if (!efa_mode() || inlen < sizeof *ea || ea->driver_qp_type != EFADV_QP_DRIVER_TYPE_SRD ||
      ia->qp_type != IBV_QPT_DRIVER || !(ia->comp_mask & IBV_QP_INIT_ATTR_PD) || !ia->pd || !ia->send_cq ||
      !ia->recv_cq || ia->cap.max_send_wr < 1 || ia->cap.max_send_wr > kMaxSqWr || ia->cap.max_recv_wr > kMaxRqWr ||
      ia->cap.max_inline_data > kInlineBuf || ia->cap.max_send_sge > 2 || ia->cap.max_recv_sge > 1) {
    errno = EINVAL;
    return nullptr;
  }
  std::lock_guard<std::mutex> lk(g->mu);
  auto* q = new Qp;
  q->srd = true;
  q->qp().context = ctx;
  q->qp().pd = ia->pd;
  q->qp().send_cq = ia->send_cq;
  q->qp().recv_cq = ia->recv_cq;
  q->qp().qp_type = IBV_QPT_DRIVER;
  q->qp().qp_num = g->next_qpn++ & 0xffffff;
  q->qp().state = IBV_QPS_RESET;
  q->max_send_wr = ia->cap.max_send_wr;
  q->max_recv_wr = ia->cap.max_recv_wr;
  q->max_inline = ia->cap.max_inline_data;
  // Which builder calls the QP takes (checked at each call).
  q->send_ops = (ia->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) ? ia->send_ops_flags : 0;
  init_srd_ops(*q);
  g->qps[q->qp().qp_num] = q;
  return &q->qp();
}

ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* qp) {
  Qp* q = reinterpret_cast<Qp*>(qp);
  return q->srd ? &q->x : nullptr;
}

ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
  if (!efa_mode() || !attr->is_global || attr->port_num != 1) {
    errno = EINVAL;  // (the RC path makes none)
    return nullptr;
  }
  auto* a = new Ah;
  a->ah.context = pd->context;
  a->ah.pd = pd;
  a->peer_key = key_of(attr->grh.dgid);
  return &a->ah;
}
int ibv_destroy_ah(ibv_ah* ah) {
  delete reinterpret_cast<Ah*>(ah);
  return 0;
}

}  // extern "C"

#else  // no efadv.h: no EFA device (verbs.cmake leaves the EFA tests out)

namespace softverbs {
uint32_t srd_receive(Qp&, const Hdr&, const char*) { return IBV_WC_REM_INV_REQ_ERR; }
void init_srd_ops(Qp&) {}
}  // namespace softverbs

extern "C" {
ibv_ah* ibv_create_ah(ibv_pd*, ibv_ah_attr*) { return nullptr; }
int ibv_destroy_ah(ibv_ah*) { return 0; }
}

#endif
