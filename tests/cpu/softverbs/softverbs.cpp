// softverbs: a stand-in libibverbs.so.1 for the CPU tests. It runs RC queue
// pairs in user space between the processes of one host, so that mkernel's
// `verbs` transport (src/net/verbs/verbs_transport.cpp) and the proxy on top
// of it run end to end without an RDMA NIC. Tests put its directory first on
// LD_LIBRARY_PATH; ibv_loader.cpp then dlopens it as libibverbs.so.1.
//
// What it emulates, and checks as a NIC and the kernel driver would:
// - One RoCE device, "softverbs0", port 1 active (Ethernet link layer, MTU
//   4096). GID 0 is a RoCE v1 entry, GID 1 the RoCE v2 one that addresses
//   this process (its pid and a random word).
// - RC QPs: RESET -> INIT -> RTR -> RTS with the attribute masks the kernel
//   requires for each step (EINVAL otherwise); posts only in RTS; at most
//   max_send_wr WRs outstanding, an unsignalled WR retired only when a later
//   signalled WR's completion is polled (ENOMEM past that, as an overflowing
//   send queue); inline data up to the QP's max_inline_data, copied at post.
// - RDMA WRITE and ATOMIC FETCH_AND_ADD, applied in post order per QP by the
//   target process's NIC thread; the completion comes when the target
//   acknowledged. lkeys, rkeys, bounds, access flags, protection domains,
//   8-byte alignment of atomics, the QP pairing (dest QPN), the PSNs and the
//   path MTU are checked: a violation completes that WR with the error a NIC
//   reports and moves the QP to the error state, where every later WR is
//   flushed (IBV_WC_WR_FLUSH_ERR).
// - A target process that died (its socket closed or refused): the WRs to it
//   complete with IBV_WC_RETRY_EXC_ERR after the QP's retry time, (4.096 us <<
//   timeout) x (retry_cnt + 1), as a NIC's transport retries would.
// - A CQ that would overflow makes ibv_poll_cq fail.
// Not emulated: receives, SEND, RDMA READ, UD/SRD, extended QPs (the EFA
// path, efa_srd.cpp), memory registration of GPU memory (DMA-BUF).
//
// The wire is one UNIX stream socket (abstract namespace) per ordered pair of
// processes, driven by one NIC thread per process through poll(); all state
// sits under one mutex. Slow, and fine for tests.
#include <infiniband/verbs.h>
// verbs.h turns these names into macros over inline wrappers; this library
// defines the exported functions themselves.
#undef ibv_reg_mr
#undef ibv_query_port

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kGidV2Index = 1;
constexpr uint32_t kMaxQpWr = 16384;
constexpr uint32_t kMaxInline = 64;
constexpr size_t kMaxQueuedBytes = 8u << 20;  // per connection, before the NIC stops taking WRs for it

enum MsgType : uint32_t { kWrite = 1, kFetchAdd = 2, kAck = 3 };
struct Hdr {
  uint32_t type, dst_qpn, src_qpn, status;
  uint64_t index, raddr, value;
  uint32_t rkey, len, psn, mtu;
};

struct Mr {
  ibv_mr mr{};
  int access = 0;
};

struct Cq {
  ibv_cq cq{};
  struct Entry {
    ibv_wc wc;
    uint32_t qpn;
    uint64_t index;
  };
  std::deque<Entry> entries;
  bool overrun = false;
};

struct SendWr {
  uint64_t wr_id = 0, index = 0;
  ibv_wr_opcode opcode = IBV_WR_RDMA_WRITE;
  bool signaled = false, inline_data = false;
  uint64_t laddr = 0, raddr = 0, add = 0;
  uint32_t len = 0, lkey = 0, rkey = 0;
  std::string inl;  // inline payload, copied at post
};

struct Qp {
  ibv_qp qp{};
  ibv_qp_state state = IBV_QPS_RESET;
  int access = 0;
  uint32_t max_send_wr = 0, max_inline = 0;
  uint64_t posted = 0, retired = 0;  // WR indices: posted so far; retired by polled completions
  uint64_t peer_key = 0;             // the target process (from the RTR dgid)
  uint32_t dest_qpn = 0, rq_psn = 0, sq_psn = 0;
  int mtu = 0, timeout = 0, retry_cnt = 0;
  std::deque<SendWr> unsent, unacked;
  Clock::time_point dead_since{};  // its target process is gone: fail after the retry time
};

struct Conn {
  int fd = -1;
  uint64_t key = 0;  // outgoing: the target's key; incoming: 0
  std::string in, out;
  bool dead = false;
  Clock::time_point dead_since{};
};

struct Nic {
  std::mutex mu;
  uint64_t key = 0;  // this process: pid << 32 | random
  int listen_fd = -1, wake[2] = {-1, -1};
  uint32_t next_qpn = 0, next_key = 0;
  std::map<uint32_t, Qp*> qps;
  std::map<uint32_t, Mr*> mrs;  // by key (lkey == rkey)
  std::map<uint64_t, Conn*> out_conns;
  std::vector<Conn*> in_conns;
  ibv_device dev{};
  ibv_device* list[2] = {&dev, nullptr};
};

Nic* g = nullptr;  // leaked on purpose: its thread runs until the process exits

std::string sock_name(uint64_t key) {
  char b[64];
  std::snprintf(b, sizeof b, "mk-softverbs-%016llx", static_cast<unsigned long long>(key));
  return b;
}
sockaddr_un sock_addr(uint64_t key, socklen_t* len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const std::string n = sock_name(key);
  std::memcpy(a.sun_path + 1, n.data(), n.size());  // abstract: sun_path[0] == 0
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n.size());
  return a;
}
void set_nonblock(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }
void wake_nic() {
  char c = 1;
  (void)!write(g->wake[1], &c, 1);
}

ibv_gid gid_of(uint64_t key) {
  ibv_gid gid{};
  gid.raw[0] = 0xfe;
  gid.raw[1] = 0x80;
  std::memcpy(gid.raw + 8, &key, 8);
  return gid;
}
uint64_t key_of(const ibv_gid& gid) {
  uint64_t k;
  std::memcpy(&k, gid.raw + 8, 8);
  return k;
}

Mr* find_mr(uint32_t key) {
  auto it = g->mrs.find(key);
  return it == g->mrs.end() ? nullptr : it->second;
}
bool covers(const Mr* m, uint64_t addr, uint64_t len) {
  const auto base = reinterpret_cast<uint64_t>(m->mr.addr);
  return addr >= base && len <= m->mr.length && addr - base <= m->mr.length - len;
}

// Completion queue side (g->mu held).
void push_cqe(Qp& q, const SendWr& w, ibv_wc_status st) {
  Cq* cq = reinterpret_cast<Cq*>(q.qp.send_cq);
  if (cq->entries.size() >= static_cast<size_t>(cq->cq.cqe)) {
    cq->overrun = true;
    return;
  }
  ibv_wc wc{};
  wc.wr_id = w.wr_id;
  wc.status = st;
  wc.opcode = w.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ? IBV_WC_FETCH_ADD : IBV_WC_RDMA_WRITE;
  wc.byte_len = w.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ? 8 : w.len;
  wc.qp_num = q.qp.qp_num;
  wc.vendor_err = st == IBV_WC_SUCCESS ? 0 : 0x5f;
  cq->entries.push_back({wc, q.qp.qp_num, w.index});
}
// The QP fails: `w` with `st`, everything behind it flushed.
void fail_qp(Qp& q, const SendWr& w, ibv_wc_status st) {
  push_cqe(q, w, st);
  q.state = IBV_QPS_ERR;
  q.qp.state = IBV_QPS_ERR;
  for (auto* d : {&q.unacked, &q.unsent})
    for (const SendWr& x : *d)
      if (x.index != w.index && x.signaled) push_cqe(q, x, IBV_WC_WR_FLUSH_ERR);
  q.unacked.clear();
  q.unsent.clear();
}

Conn* out_conn(uint64_t key) {
  auto it = g->out_conns.find(key);
  if (it != g->out_conns.end()) return it->second;
  Conn* c = new Conn;
  c->key = key;
  c->fd = socket(AF_UNIX, SOCK_STREAM, 0);
  socklen_t len = 0;
  sockaddr_un a = sock_addr(key, &len);
  if (c->fd < 0 || connect(c->fd, reinterpret_cast<sockaddr*>(&a), len) != 0) {
    c->dead = true;
    c->dead_since = Clock::now();
  } else {
    set_nonblock(c->fd);
  }
  g->out_conns[key] = c;
  return c;
}

double retry_seconds(const Qp& q) { return 4.096e-6 * double(1ull << q.timeout) * (q.retry_cnt + 1); }

// Moves the QPs' WRs onto their connections (g->mu held).
void send_work() {
  for (auto& [qpn, q] : g->qps) {
    if (q->state != IBV_QPS_RTS || (q->unsent.empty() && q->unacked.empty())) continue;
    Conn* c = out_conn(q->peer_key);
    if (c->dead) {
      if (q->dead_since == Clock::time_point{}) q->dead_since = c->dead_since;
      const double waited = std::chrono::duration<double>(Clock::now() - q->dead_since).count();
      if (waited >= retry_seconds(*q)) {
        const SendWr w = !q->unacked.empty() ? q->unacked.front() : q->unsent.front();
        fail_qp(*q, w, IBV_WC_RETRY_EXC_ERR);
      }
      continue;
    }
    while (!q->unsent.empty() && c->out.size() < kMaxQueuedBytes) {
      SendWr w = std::move(q->unsent.front());
      q->unsent.pop_front();
      const bool atomic = w.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
      if (!w.inline_data && (w.len > 0 || atomic)) {
        const Mr* m = find_mr(w.lkey);
        if (!m || !covers(m, w.laddr, atomic ? 8 : w.len) || (atomic && !(m->access & IBV_ACCESS_LOCAL_WRITE)) ||
            m->mr.pd != q->qp.pd) {
          fail_qp(*q, w, IBV_WC_LOC_PROT_ERR);
          break;
        }
      }
      Hdr h{};
      h.type = atomic ? kFetchAdd : kWrite;
      h.dst_qpn = q->dest_qpn;
      h.src_qpn = q->qp.qp_num;
      h.index = w.index;
      h.raddr = w.raddr;
      h.value = w.add;
      h.rkey = w.rkey;
      h.len = atomic ? 0 : w.len;
      h.psn = q->sq_psn;
      h.mtu = static_cast<uint32_t>(q->mtu);
      c->out.append(reinterpret_cast<const char*>(&h), sizeof h);
      if (!atomic) {
        if (w.inline_data) c->out += w.inl;
        else c->out.append(reinterpret_cast<const char*>(w.laddr), w.len);
      }
      q->unacked.push_back(std::move(w));
    }
  }
}

// A request from another process (g->mu held): applied, acknowledged on `c`.
void on_request(Conn* c, const Hdr& h, const char* payload) {
  Hdr a{};
  a.type = kAck;
  a.dst_qpn = h.src_qpn;
  a.index = h.index;
  a.status = IBV_WC_SUCCESS;
  auto qit = g->qps.find(h.dst_qpn);
  Qp* q = qit == g->qps.end() ? nullptr : qit->second;
  const bool atomic = h.type == kFetchAdd;
  const int need = atomic ? IBV_ACCESS_REMOTE_ATOMIC : IBV_ACCESS_REMOTE_WRITE;
  const Mr* m = find_mr(h.rkey);
  if (!q || (q->state != IBV_QPS_RTR && q->state != IBV_QPS_RTS) || q->dest_qpn != h.src_qpn) {
    a.status = IBV_WC_REM_INV_REQ_ERR;
  } else if (h.psn != q->rq_psn || static_cast<int>(h.mtu) != q->mtu) {
    a.status = IBV_WC_RETRY_EXC_ERR;  // a NIC drops such packets until the sender gives up
  } else if (!atomic && h.len == 0) {
    // a zero-length write touches no memory: no key is checked
  } else if (!(q->access & need) || !m || !(m->access & need) || m->mr.pd != q->qp.pd ||
             !covers(m, h.raddr, atomic ? 8 : h.len) || (atomic && h.raddr % 8 != 0)) {
    a.status = IBV_WC_REM_ACCESS_ERR;
  } else if (atomic) {
    a.value = __atomic_fetch_add(reinterpret_cast<uint64_t*>(h.raddr), h.value, __ATOMIC_SEQ_CST);
  } else if (h.len == 8 && h.raddr % 8 == 0) {  // a signal word: one store, as a NIC's aligned 8-byte write
    uint64_t v;
    std::memcpy(&v, payload, 8);
    __atomic_store_n(reinterpret_cast<uint64_t*>(h.raddr), v, __ATOMIC_RELEASE);
  } else if (h.len > 0) {
    std::memcpy(reinterpret_cast<void*>(h.raddr), payload, h.len);
    std::atomic_thread_fence(std::memory_order_release);
  }
  c->out.append(reinterpret_cast<const char*>(&a), sizeof a);
}

// An acknowledgement of this process's WR (g->mu held).
void on_ack(const Hdr& h) {
  auto qit = g->qps.find(h.dst_qpn);
  if (qit == g->qps.end()) return;  // destroyed since
  Qp& q = *qit->second;
  if (q.unacked.empty() || q.unacked.front().index != h.index) return;  // flushed since
  SendWr w = std::move(q.unacked.front());
  q.unacked.pop_front();
  if (h.status != IBV_WC_SUCCESS) {
    fail_qp(q, w, static_cast<ibv_wc_status>(h.status));
    return;
  }
  if (w.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) std::memcpy(reinterpret_cast<void*>(w.laddr), &h.value, 8);
  if (w.signaled) push_cqe(q, w, IBV_WC_SUCCESS);
}

// Parses whole messages from c->in (g->mu held).
void consume(Conn* c) {
  size_t off = 0;
  while (c->in.size() - off >= sizeof(Hdr)) {
    Hdr h;
    std::memcpy(&h, c->in.data() + off, sizeof h);
    const size_t body = h.type == kWrite ? h.len : 0;
    if (c->in.size() - off - sizeof h < body) break;
    if (h.type == kAck) on_ack(h);
    else on_request(c, h, c->in.data() + off + sizeof h);
    off += sizeof h + body;
  }
  c->in.erase(0, off);
}

void close_conn(Conn* c) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  c->dead = true;
  c->dead_since = Clock::now();
}

void nic_loop() {
  std::vector<pollfd> fds;
  std::vector<Conn*> of;
  std::vector<char> buf(1 << 20);
  for (;;) {
    fds.clear();
    of.clear();
    {
      std::lock_guard<std::mutex> lk(g->mu);
      send_work();
      fds.push_back({g->listen_fd, POLLIN, 0});
      fds.push_back({g->wake[0], POLLIN, 0});
      of.push_back(nullptr);
      of.push_back(nullptr);
      auto add = [&](Conn* c) {
        if (c->fd < 0) return;
        fds.push_back({c->fd, static_cast<short>(POLLIN | (c->out.empty() ? 0 : POLLOUT)), 0});
        of.push_back(c);
      };
      for (auto& [k, c] : g->out_conns) add(c);
      for (Conn* c : g->in_conns) add(c);
    }
    poll(fds.data(), fds.size(), 1);
    std::lock_guard<std::mutex> lk(g->mu);
    if (fds[0].revents & POLLIN) {
      const int fd = accept(g->listen_fd, nullptr, nullptr);
      if (fd >= 0) {
        set_nonblock(fd);
        Conn* c = new Conn;
        c->fd = fd;
        g->in_conns.push_back(c);
      }
    }
    if (fds[1].revents & POLLIN) {
      char tmp[256];
      while (read(g->wake[0], tmp, sizeof tmp) > 0) {
      }
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      Conn* c = of[i];
      if (c->fd < 0) continue;
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        for (;;) {
          const ssize_t n = read(c->fd, buf.data(), buf.size());
          if (n > 0) {
            c->in.append(buf.data(), static_cast<size_t>(n));
            continue;
          }
          if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) close_conn(c);
          break;
        }
        consume(c);
      }
      while (c->fd >= 0 && !c->out.empty()) {
        const ssize_t n = send(c->fd, c->out.data(), c->out.size(), MSG_NOSIGNAL);
        if (n > 0) {
          c->out.erase(0, static_cast<size_t>(n));
          continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) close_conn(c);
        break;
      }
    }
    for (size_t i = 0; i < g->in_conns.size();) {  // a closed incoming connection is forgotten
      if (g->in_conns[i]->fd < 0) {
        delete g->in_conns[i];
        g->in_conns.erase(g->in_conns.begin() + static_cast<long>(i));
      } else {
        ++i;
      }
    }
  }
}

void start_nic() {
  static std::once_flag once;
  std::call_once(once, [] {
    g = new Nic;
    std::random_device rd;
    g->key = (static_cast<uint64_t>(getpid()) << 32) | rd();
    g->next_qpn = (rd() & 0xfff) << 8 | 1;
    g->next_key = rd() & 0xffff0000u;
    std::snprintf(g->dev.name, sizeof g->dev.name, "softverbs0");
    std::snprintf(g->dev.dev_name, sizeof g->dev.dev_name, "uverbs0");
    g->dev.node_type = IBV_NODE_CA;
    g->dev.transport_type = IBV_TRANSPORT_IB;
    if (pipe(g->wake) != 0) std::abort();
    set_nonblock(g->wake[0]);
    set_nonblock(g->wake[1]);
    g->listen_fd = socket(AF_UNIX, SOCK_STREAM, 0);
    socklen_t len = 0;
    sockaddr_un a = sock_addr(g->key, &len);
    if (g->listen_fd < 0 || bind(g->listen_fd, reinterpret_cast<sockaddr*>(&a), len) != 0 ||
        listen(g->listen_fd, 64) != 0) {
      std::perror("softverbs: listen");
      std::abort();
    }
    set_nonblock(g->listen_fd);
    std::thread(nic_loop).detach();
  });
}

uint32_t max_msg_sz() {
  static const uint32_t v = [] {
    const char* m = std::getenv("SOFTVERBS_MAX_MSG_SZ");
    return m ? static_cast<uint32_t>(std::strtoul(m, nullptr, 10)) : 1u << 31;
  }();
  return v;
}

// ---- the data path, reached through ibv_context::ops ----

int sv_post_send(ibv_qp* ibqp, ibv_send_wr* wr, ibv_send_wr** bad) {
  std::lock_guard<std::mutex> lk(g->mu);
  Qp& q = *reinterpret_cast<Qp*>(ibqp);
  for (; wr; wr = wr->next) {
    int err = 0;
    if (q.state != IBV_QPS_RTS && q.state != IBV_QPS_ERR) err = EINVAL;
    else if (q.posted - q.retired >= q.max_send_wr) err = ENOMEM;
    else if (wr->num_sge != 1 || (wr->opcode != IBV_WR_RDMA_WRITE && wr->opcode != IBV_WR_ATOMIC_FETCH_AND_ADD))
      err = EINVAL;
    else if ((wr->send_flags & IBV_SEND_INLINE) &&
             (wr->opcode != IBV_WR_RDMA_WRITE || wr->sg_list[0].length > q.max_inline))
      err = EINVAL;
    else if (wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD && wr->sg_list[0].length != 8)
      err = EINVAL;
    else if (wr->sg_list[0].length > max_msg_sz())
      err = EINVAL;  // a NIC completes it with a length error; no caller may post one
    if (err) {
      *bad = wr;
      return err;
    }
    SendWr w;
    w.wr_id = wr->wr_id;
    w.index = q.posted++;
    w.opcode = wr->opcode;
    w.signaled = (wr->send_flags & IBV_SEND_SIGNALED) != 0 || q.qp.qp_type != IBV_QPT_RC;
    w.inline_data = (wr->send_flags & IBV_SEND_INLINE) != 0;
    w.laddr = wr->sg_list[0].addr;
    w.len = wr->sg_list[0].length;
    w.lkey = wr->sg_list[0].lkey;
    if (w.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
      w.raddr = wr->wr.atomic.remote_addr;
      w.rkey = wr->wr.atomic.rkey;
      w.add = wr->wr.atomic.compare_add;
    } else {
      w.raddr = wr->wr.rdma.remote_addr;
      w.rkey = wr->wr.rdma.rkey;
    }
    if (w.inline_data) w.inl.assign(reinterpret_cast<const char*>(w.laddr), w.len);
    if (q.state == IBV_QPS_ERR) {
      if (w.signaled) push_cqe(q, w, IBV_WC_WR_FLUSH_ERR);
      continue;
    }
    q.unsent.push_back(std::move(w));
  }
  wake_nic();
  return 0;
}

int sv_post_recv(ibv_qp*, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  *bad = wr;
  return ENOSYS;
}

int sv_poll_cq(ibv_cq* ibcq, int n, ibv_wc* wc) {
  std::lock_guard<std::mutex> lk(g->mu);
  Cq& cq = *reinterpret_cast<Cq*>(ibcq);
  if (cq.overrun) {
    std::fprintf(stderr, "softverbs: CQ overrun (%d entries): more signalled WRs in flight than the CQ holds\n",
                 cq.cq.cqe);
    return -EOVERFLOW;
  }
  int got = 0;
  while (got < n && !cq.entries.empty()) {
    const Cq::Entry e = cq.entries.front();
    cq.entries.pop_front();
    wc[got++] = e.wc;
    auto it = g->qps.find(e.qpn);  // the send queue slots up to this WR are free again
    if (it != g->qps.end() && it->second->retired < e.index + 1) it->second->retired = e.index + 1;
  }
  return got;
}

bool mask_has(int mask, int need) { return (mask & need) == need; }

}  // namespace

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
  a->max_cqe = 1 << 22;
  a->max_mr = 1 << 16;
  a->max_pd = 1 << 10;
  a->max_qp_rd_atom = 16;
  a->max_qp_init_rd_atom = 16;
  a->atomic_cap = IBV_ATOMIC_HCA;
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
  a->gid_tbl_len = 2;
  a->max_msg_sz = max_msg_sz();  // SOFTVERBS_MAX_MSG_SZ: smaller, so that tests see large writes split
  a->pkey_tbl_len = 1;
  a->lid = 0;
  a->link_layer = IBV_LINK_LAYER_ETHERNET;
  a->phys_state = 5;  // LinkUp
  return 0;
}

int ibv_query_gid(ibv_context*, uint8_t port, int index, ibv_gid* gid) {
  if (port != 1 || index < 0 || index > kGidV2Index) return EINVAL;
  *gid = gid_of(g->key);
  if (index == 0) gid->raw[2] = 1;  // the RoCE v1 entry: another address
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

ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t len, int access) {
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
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = len;
  m->mr.lkey = m->mr.rkey = ++g->next_key;
  m->access = access;
  g->mrs[m->mr.lkey] = m;
  return &m->mr;
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
    if (q->qp.send_cq == cq || q->qp.recv_cq == cq) return EBUSY;
  delete reinterpret_cast<Cq*>(cq);
  return 0;
}

ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* ia) {
  if (ia->qp_type != IBV_QPT_RC || !ia->send_cq || ia->cap.max_send_wr < 1 || ia->cap.max_send_wr > kMaxQpWr ||
      ia->cap.max_send_sge > 1 || ia->cap.max_inline_data > kMaxInline) {
    errno = EINVAL;
    return nullptr;
  }
  std::lock_guard<std::mutex> lk(g->mu);
  auto* q = new Qp;
  q->qp.context = pd->context;
  q->qp.pd = pd;
  q->qp.send_cq = ia->send_cq;
  q->qp.recv_cq = ia->recv_cq;
  q->qp.qp_type = ia->qp_type;
  q->qp.qp_num = g->next_qpn++ & 0xffffff;
  q->qp.state = IBV_QPS_RESET;
  q->max_send_wr = ia->cap.max_send_wr;
  q->max_inline = ia->cap.max_inline_data;
  g->qps[q->qp.qp_num] = q;
  return &q->qp;
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
    // Only the RoCE v2 entry addresses the emulated network: v1 frames do not route.
    if (at->ah_attr.grh.sgid_index != kGidV2Index) return EINVAL;
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
  q.qp.state = q.state;
  return 0;
}

int ibv_destroy_qp(ibv_qp* ibqp) {
  std::lock_guard<std::mutex> lk(g->mu);
  g->qps.erase(ibqp->qp_num);
  delete reinterpret_cast<Qp*>(ibqp);
  return 0;
}

ibv_ah* ibv_create_ah(ibv_pd*, ibv_ah_attr*) {
  errno = ENOSYS;  // UD/SRD address handles: not emulated
  return nullptr;
}
int ibv_destroy_ah(ibv_ah*) { return ENOSYS; }

const char* ibv_wc_status_str(ibv_wc_status s) {
  switch (s) {
    case IBV_WC_SUCCESS: return "success";
    case IBV_WC_LOC_PROT_ERR: return "local protection error";
    case IBV_WC_WR_FLUSH_ERR: return "Work Request Flushed Error";
    case IBV_WC_REM_ACCESS_ERR: return "remote access error";
    case IBV_WC_REM_INV_REQ_ERR: return "remote invalid request error";
    case IBV_WC_RETRY_EXC_ERR: return "transport retry counter exceeded";
    default: return "softverbs: other error";
  }
}

}  // extern "C"
