// softverbs: the exported verbs of its device, protection domains, memory
// regions, CQs and RC queue pairs (the control path; softverbs.cpp has the
// NIC, the wire and the data path, softverbs_srd.cpp the EFA part).
#include "softverbs.hpp"
// verbs.h turns these names into macros over inline wrappers; this library
// defines the exported functions themselves.
#undef ibv_reg_mr
#undef ibv_query_port

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

using namespace softverbs;

// ---- exported entry points (the subset ibv_loader.cpp resolves) ----

extern "C" {

ibv_device** ibv_get_device_list(int* n) {
  start_nic();
  if (n) *n = 1;
  return g->list;
}
void ibv_free_device_list(ibv_device**) {}
const char* ibv_get_device_name(ibv_device* d) { return d->name; }

ibv_context* ibv_open_device(ibv_device* d) {
  start_nic();
  auto* ctx = new ibv_context{};
  ctx->device = d;
  ctx->ops.post_send = sv_post_send;
  ctx->ops.post_recv = sv_post_recv;
  ctx->ops.poll_cq = sv_poll_cq;
  ctx->cmd_fd = -1;
  ctx->async_fd = -1;
  ctx->abi_compat = nullptr;  // not a verbs_context: callers take the exported entry points
  return ctx;
}
int ibv_close_device(ibv_context* ctx) {
  delete ctx;
  return 0;
}

int ibv_query_device(ibv_context*, ibv_device_attr* a) {
  std::memset(a, 0, sizeof *a);
  std::snprintf(a->fw_ver, sizeof a->fw_ver, "softverbs");
  a->max_qp = 1 << 16;
  a->max_qp_wr = kMaxQpWr;
  a->max_sge = 1;
  a->max_cq = 1 << 12;
  a->max_cqe = max_cqe();
  a->max_mr = 1 << 16;
  a->max_pd = 1 << 10;
  a->max_qp_rd_atom = 16;
  a->max_qp_init_rd_atom = 16;
  a->atomic_cap = lacks("atomics") ? IBV_ATOMIC_NONE : IBV_ATOMIC_HCA;
  a->phys_port_cnt = 1;
  return 0;
}

// The exported (compat) port query: its layout is ibv_port_attr's up to `flags`.
int ibv_query_port(ibv_context*, uint8_t port, struct _compat_ibv_port_attr* out) {
  if (port != 1) return EINVAL;
  auto* a = reinterpret_cast<ibv_port_attr*>(out);
  a->state = IBV_PORT_ACTIVE;
  a->max_mtu = IBV_MTU_4096;
  a->active_mtu = IBV_MTU_4096;
  a->gid_tbl_len = efa_mode() ? 1 : 2;
  a->max_msg_sz = max_msg_sz();  // SOFTVERBS_MAX_MSG_SZ: smaller, so that tests see large writes split
  a->pkey_tbl_len = 1;
  a->lid = 0;
  a->link_layer = efa_mode() ? IBV_LINK_LAYER_UNSPECIFIED : IBV_LINK_LAYER_ETHERNET;
  a->phys_state = 5;  // LinkUp
  return 0;
}

int ibv_query_gid(ibv_context*, uint8_t port, int index, ibv_gid* gid) {
  if (port != 1 || index < 0 || index > (efa_mode() ? 0 : kGidV2Index)) return EINVAL;
  *gid = gid_of(g->key);
  if (index == 0 && !efa_mode()) gid->raw[2] = 1;  // the RoCE v1 entry: another address
  return 0;
}
int _ibv_query_gid_ex(ibv_context* ctx, uint32_t port, uint32_t index, ibv_gid_entry* e, uint32_t, size_t) {
  if (ibv_query_gid(ctx, static_cast<uint8_t>(port), static_cast<int>(index), &e->gid) != 0) return EINVAL;
  e->gid_index = index;
  e->port_num = port;
  e->gid_type = index == kGidV2Index ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_ROCE_V1;
  return 0;
}

ibv_pd* ibv_alloc_pd(ibv_context* ctx) {
  auto* pd = new ibv_pd{};
  pd->context = ctx;
  return pd;
}
int ibv_dealloc_pd(ibv_pd* pd) {
  delete pd;
  return 0;
}

}  // extern "C"

namespace {

// An MR of [addr, addr + len) in this process (ctx: the CUDA context of GPU
// memory, else null), after the checks both registration calls make.
ibv_mr* make_mr(ibv_pd* pd, void* addr, size_t len, int access, void* ctx) {
  if (injected_failure("reg_mr")) {
    errno = ENOMEM;
    return nullptr;
  }
  if (!pd || !addr || len == 0) {
    errno = EINVAL;
    return nullptr;
  }
  if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(access & IBV_ACCESS_LOCAL_WRITE)) {
    errno = EINVAL;  // as the kernel: remote write or atomic needs local write
    return nullptr;
  }
  std::lock_guard<std::mutex> lk(g->mu);
  auto* m = new Mr;
  m->device_ctx = ctx;
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = len;
  m->mr.lkey = m->mr.rkey = ++g->next_key;
  m->access = access;
  g->mrs[m->mr.lkey] = m;
  return &m->mr;
}

// Whether fd is a DMA-BUF of at least `need` bytes (its size: lseek to its end, as the kernel gives it).
bool dmabuf_covers(int fd, uint64_t need) {
  char path[64], target[256] = {};
  std::snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(path, target, sizeof(target) - 1);
  if (n <= 0 || std::string(target).find("dmabuf") == std::string::npos) return false;
  const off_t size = lseek(fd, 0, SEEK_END);
  lseek(fd, 0, SEEK_SET);
  return size > 0 && static_cast<uint64_t>(size) >= need;
}

}  // namespace

extern "C" {

// SOFTVERBS_NO_PEERMEM=1: GPU memory cannot be registered by its address, as
// on a host without the nvidia-peermem module (ibv_reg_dmabuf_mr can).
ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t len, int access) {
  void* ctx = device_context(addr);  // (the driver call outside the lock)
  const char* no_peermem = std::getenv("SOFTVERBS_NO_PEERMEM");
  if (ctx && no_peermem && *no_peermem && std::strcmp(no_peermem, "0") != 0) {
    errno = EFAULT;
    return nullptr;
  }
  return make_mr(pd, addr, len, access, ctx);
}

// GPU memory by DMA-BUF (rdma-core >= 34). A NIC reaches the buffer's pages
// through the fd; softverbs cannot, so it takes the memory at `iova` as a
// virtual address of this process, which is what mkernel (and NCCL) pass,
// and checks that this is consistent with the fd: a DMA-BUF covering
// [offset, offset + length), exported from a page-aligned start
// (iova - offset) inside the CUDA allocation that holds iova. A caller whose
// offset and iova do not pair up fails here, as its writes would land at the
// wrong place on a NIC.
ibv_mr* ibv_reg_dmabuf_mr(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access) {
  if (fd < 0 || !dmabuf_covers(fd, offset + length) || iova < offset) {
    errno = EINVAL;
    return nullptr;
  }
  void* addr = reinterpret_cast<void*>(iova);
  void* ctx = device_context(addr);
  uint64_t base = 0;
  size_t size = 0;
  const uint64_t start = iova - offset;
  const long page = sysconf(_SC_PAGESIZE);
  if (!ctx || start % static_cast<uint64_t>(page) != 0 ||
      (device_allocation(addr, &base, &size) && (start < base || iova + length > base + size))) {
    std::fprintf(stderr, "softverbs: ibv_reg_dmabuf_mr: offset %llu, iova 0x%llx, length %zu do not pair up "
                 "(the DMA-BUF's start iova - offset is not a page-aligned address in iova's GPU allocation)\n",
                 static_cast<unsigned long long>(offset), static_cast<unsigned long long>(iova), length);
    errno = EINVAL;
    return nullptr;
  }
  return make_mr(pd, addr, length, access, ctx);
}
int ibv_dereg_mr(ibv_mr* mr) {
  std::lock_guard<std::mutex> lk(g->mu);
  g->mrs.erase(mr->lkey);
  delete reinterpret_cast<Mr*>(mr);
  return 0;
}

ibv_cq* ibv_create_cq(ibv_context* ctx, int cqe, void* user, ibv_comp_channel* ch, int) {
  if (cqe < 1 || cqe > (1 << 22)) {
    errno = EINVAL;
    return nullptr;
  }
  auto* c = new Cq;
  c->cq.context = ctx;
  c->cq.channel = ch;
  c->cq.cq_context = user;
  c->cq.cqe = cqe;
  return &c->cq;
}
int ibv_destroy_cq(ibv_cq* cq) {
  std::lock_guard<std::mutex> lk(g->mu);
  for (auto& [n, q] : g->qps)
    if (q->qp().send_cq == cq || q->qp().recv_cq == cq) return EBUSY;
  delete reinterpret_cast<Cq*>(cq);
  return 0;
}

ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* ia) {
  if (injected_failure("create_qp")) {
    errno = ENOMEM;
    return nullptr;
  }
  if (ia->qp_type != IBV_QPT_RC || !ia->send_cq || ia->cap.max_send_wr < 1 || ia->cap.max_send_wr > kMaxQpWr ||
      ia->cap.max_send_sge > 1 || ia->cap.max_inline_data > kMaxInline) {
    errno = EINVAL;
    return nullptr;
  }
  std::lock_guard<std::mutex> lk(g->mu);
  auto* q = new Qp;
  q->qp().context = pd->context;
  q->qp().pd = pd;
  q->qp().send_cq = ia->send_cq;
  q->qp().recv_cq = ia->recv_cq;
  q->qp().qp_type = ia->qp_type;
  q->qp().qp_num = g->next_qpn++ & 0xffffff;
  q->qp().state = IBV_QPS_RESET;
  q->max_send_wr = ia->cap.max_send_wr;
  q->max_inline = ia->cap.max_inline_data;
  g->qps[q->qp().qp_num] = q;
  return &q->qp();
}

int ibv_modify_qp(ibv_qp* ibqp, ibv_qp_attr* at, int mask) {
  std::lock_guard<std::mutex> lk(g->mu);
  Qp& q = *reinterpret_cast<Qp*>(ibqp);
  if (!(mask & IBV_QP_STATE)) return EINVAL;
  const ibv_qp_state to = at->qp_state;
  if (to == IBV_QPS_ERR || to == IBV_QPS_RESET) {
    if (to == IBV_QPS_ERR && q.state != IBV_QPS_ERR && (!q.unsent.empty() || !q.unacked.empty()))
      fail_qp(q, !q.unacked.empty() ? q.unacked.front() : q.unsent.front(), IBV_WC_WR_FLUSH_ERR);
    q.state = to;
  } else if (q.srd) {  // SRD: a Q-key at INIT, nothing at RTR, the send PSN at RTS
    if (q.state == IBV_QPS_RESET && to == IBV_QPS_INIT) {
      if (!mask_has(mask, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) || (mask & IBV_QP_ACCESS_FLAGS) ||
          at->port_num != 1)
        return EINVAL;
      q.qkey = at->qkey;
    } else if (q.state == IBV_QPS_INIT && to == IBV_QPS_RTR) {
      if (mask & ~IBV_QP_STATE) return EINVAL;
    } else if (q.state == IBV_QPS_RTR && to == IBV_QPS_RTS) {
      if (!mask_has(mask, IBV_QP_SQ_PSN) || (mask & ~(IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_RNR_RETRY)) ||
          ((mask & IBV_QP_RNR_RETRY) && at->rnr_retry > 7))
        return EINVAL;
    } else {
      return EINVAL;
    }
    q.state = to;
  } else if (q.state == IBV_QPS_RESET && to == IBV_QPS_INIT) {
    if (!mask_has(mask, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) || at->port_num != 1 ||
        at->pkey_index != 0)
      return EINVAL;
    q.access = at->qp_access_flags;
    q.state = to;
  } else if (q.state == IBV_QPS_INIT && to == IBV_QPS_RTR) {
    if (!mask_has(mask, IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                            IBV_QP_MIN_RNR_TIMER))
      return EINVAL;
    // RoCE: the address vector must be global and name a GID of this port.
    if (!at->ah_attr.is_global || at->ah_attr.port_num != 1 || at->ah_attr.grh.sgid_index > kGidV2Index ||
        at->path_mtu < IBV_MTU_256 || at->path_mtu > IBV_MTU_4096 || at->rq_psn > 0xffffff ||
        at->dest_qp_num > 0xffffff)
      return EINVAL;
    // Only the RoCE v2 entries (source and destination) address the emulated network: v1 frames do not route.
    if (at->ah_attr.grh.sgid_index != kGidV2Index || at->ah_attr.grh.dgid.raw[2] != 0) return EINVAL;
    q.peer_key = key_of(at->ah_attr.grh.dgid);
    q.dest_qpn = at->dest_qp_num;
    q.rq_psn = at->rq_psn;
    q.mtu = at->path_mtu;
    q.state = to;
  } else if (q.state == IBV_QPS_RTR && to == IBV_QPS_RTS) {
    if (!mask_has(mask, IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                            IBV_QP_MAX_QP_RD_ATOMIC) ||
        at->retry_cnt > 7 || at->rnr_retry > 7 || at->timeout > 31 || at->sq_psn > 0xffffff)
      return EINVAL;
    q.sq_psn = at->sq_psn;
    q.timeout = at->timeout;
    q.retry_cnt = at->retry_cnt;
    q.state = to;
  } else {
    return EINVAL;
  }
  q.qp().state = q.state;
  return 0;
}

int ibv_destroy_qp(ibv_qp* ibqp) {
  std::lock_guard<std::mutex> lk(g->mu);
  g->qps.erase(ibqp->qp_num);
  delete reinterpret_cast<Qp*>(ibqp);
  return 0;
}

const char* ibv_wc_status_str(ibv_wc_status s) {
  switch (s) {
    case IBV_WC_SUCCESS: return "success";
    case IBV_WC_LOC_PROT_ERR: return "local protection error";
    case IBV_WC_WR_FLUSH_ERR: return "Work Request Flushed Error";
    case IBV_WC_REM_ACCESS_ERR: return "remote access error";
    case IBV_WC_REM_INV_REQ_ERR: return "remote invalid request error";
    case IBV_WC_RETRY_EXC_ERR: return "transport retry counter exceeded";
    case IBV_WC_LOC_LEN_ERR: return "local length error";
    default: return "softverbs: other error";
  }
}

}  // extern "C"
