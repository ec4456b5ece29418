// softverbs: a stand-in libibverbs.so.1 (and libefa.so.1) for the CPU tests.
// It runs queue pairs in user space between the processes of one host, so
// that mkernel's `verbs` transport (src/net/verbs/) and the proxy on top of
// it run end to end without an RDMA NIC. Tests put its directory first on
// LD_LIBRARY_PATH; ibv_loader.cpp then dlopens it as libibverbs.so.1 (and,
// through the libefa.so.1 link beside it, as libefa.so.1).
//
// What it emulates, and checks as a NIC and the kernel driver would:
// - One device, port 1 active. By default "softverbs0", a RoCE device (MTU
//   4096): GID 0 is a RoCE v1 entry, GID 1 the RoCE v2 one that addresses
//   this process (its pid and a random word). With SOFTVERBS_EFA=1,
//   "softefa0", which answers efadv (softverbs_srd.cpp: SRD QPs).
// - RC QPs: RESET -> INIT -> RTR -> RTS with the attribute masks the kernel
//   requires for each step (EINVAL otherwise); posts only in RTS; at most
//   max_send_wr WRs outstanding, an unsignalled WR retired only when a later
//   signalled WR's completion is polled (ENOMEM past that, as an overflowing
//   send queue); inline data up to the QP's max_inline_data, copied at post.
// - RDMA WRITE and ATOMIC FETCH_AND_ADD, applied in post order per RC QP by
//   the target process's NIC thread; the completion comes when the target
//   acknowledged. lkeys, rkeys, bounds, access flags, protection domains,
//   8-byte alignment of atomics, the QP pairing (dest QPN), the PSNs and the
//   path MTU are checked: a violation completes that WR with the error a NIC
//   reports and moves the QP to the error state, where every later WR is
//   flushed (IBV_WC_WR_FLUSH_ERR).
// - A target process that died (its socket closed or refused): the WRs to it
//   complete with IBV_WC_RETRY_EXC_ERR after the QP's retry time, (4.096 us <<
//   timeout) x (retry_cnt + 1), as a NIC's transport retries would.
// - A CQ that would overflow makes ibv_poll_cq fail.
// - SOFTVERBS_MAX_MSG_SZ: a smaller largest message (port and EFA limits), so
//   that tests see large writes split into several WRs; SOFTVERBS_MAX_CQE: a
//   smaller largest completion queue (default 2^22); SOFTVERBS_WIRE_DELAY_MS:
//   every WR leaves this long after its post; SOFTVERBS_LACKS=<caps>
//   (a comma list: `atomics`, `rnr_retry`), with SOFTVERBS_LACKS_RANK=<r> in
//   the process whose RANK is r only: a device without them, for the
//   transport's refusals (a device that has no atomics gets no atomic WR).
// - GPU memory (softverbs_gpu.cpp), registered by address or by DMA-BUF
//   (ibv_reg_dmabuf_mr: the fd, its size and the offset/iova pairing are
//   checked, the memory is then taken at iova; SOFTVERBS_NO_PEERMEM=1 refuses
//   GPU memory by address, as a host without nvidia-peermem).
// Not emulated: RDMA READ, UD.
//
// The wire is one UNIX stream socket (abstract namespace) per ordered pair of
// processes, driven through poll() by the callers of ibv_poll_cq and, when
// they stop, by one NIC thread per process; all state sits under one mutex.
// Slow, and fine for tests. This file: the NIC, the wire and the data path;
// softverbs_api.cpp: the exported control path; softverbs_srd.cpp: EFA.
#include "softverbs.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace softverbs {

Nic* g = nullptr;

namespace {

constexpr size_t kMaxQueuedBytes = 8u << 20;  // per connection, before the NIC stops taking WRs for it
constexpr auto kRnrDelay = std::chrono::microseconds(100);

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

// RC: the QP's transport retries; SRD: a fixed half second.
double retry_seconds(const Qp& q) {
  return q.srd ? 0.5 : 4.096e-6 * double(1ull << q.timeout) * (q.retry_cnt + 1);
}

MsgType msg_type(ibv_wr_opcode op) {
  switch (op) {
    case IBV_WR_ATOMIC_FETCH_AND_ADD: return kFetchAdd;
    case IBV_WR_RDMA_WRITE_WITH_IMM: return kWriteImm;
    case IBV_WR_SEND: return kSend;
    default: return kWrite;
  }
}

// Moves the QPs' WRs onto their connections (g->mu held).
// A NIC keeps no order between its QPs. Each round visits the QPs in a
// random order and holds back one in three of them (its WRs go in a later
// round), so that WRs posted later on one QP overtake earlier ones on
// another: a transport that counted on an order between QPs (a signal on
// another QP than its data) fails here too.
void send_work() {
  const auto now = Clock::now();
  thread_local std::vector<Qp*> order;
  thread_local std::mt19937 rng(std::random_device{}());
  order.clear();
  for (auto& [qpn, q] : g->qps) order.push_back(q);
  std::shuffle(order.begin(), order.end(), rng);
  for (Qp* q : order) {
    if (q->state != IBV_QPS_RTS || (q->unsent.empty() && q->unacked.empty())) continue;
    const bool held = rng() % 3 == 0;  // (a dead target is still noticed below)
    // A WR to a process that is gone fails after the retry time; the QP flushes the rest.
    const SendWr* lost = nullptr;
    for (auto* d : {&q->unacked, &q->unsent})
      for (const SendWr& w : *d)
        if (!lost && out_conn(w.peer_key)->dead) lost = &w;
    if (lost) {
      if (q->dead_since == Clock::time_point{}) q->dead_since = out_conn(lost->peer_key)->dead_since;
      if (std::chrono::duration<double>(now - q->dead_since).count() >= retry_seconds(*q)) {
        const SendWr w = *lost;
        fail_qp(*q, w, IBV_WC_RETRY_EXC_ERR);
      }
      continue;
    }
    while (!held && !q->unsent.empty() && q->unsent.front().not_before <= now) {
      Conn* c = out_conn(q->unsent.front().peer_key);
      if (c->out.size() >= kMaxQueuedBytes) break;
      SendWr w = std::move(q->unsent.front());
      q->unsent.pop_front();
      const MsgType type = msg_type(w.opcode);
      const bool atomic = type == kFetchAdd;
      const Mr* src = nullptr;
      if (!w.inline_data && (w.len > 0 || atomic)) {
        src = find_mr(w.lkey);
        if (!src || !covers(src, w.laddr, atomic ? 8 : w.len) ||
            (atomic && !(src->access & IBV_ACCESS_LOCAL_WRITE)) || src->mr.pd != q->qp().pd) {
          fail_qp(*q, w, IBV_WC_LOC_PROT_ERR);
          break;
        }
      }
      Hdr h{};
      h.type = type;
      h.dst_qpn = w.dest_qpn;
      h.src_qpn = q->qp().qp_num;
      h.index = w.index;
      h.raddr = w.raddr;
      h.value = w.add;
      h.rkey = w.rkey;
      h.len = atomic ? 0 : w.len;
      h.psn = q->sq_psn;
      h.mtu = static_cast<uint32_t>(q->mtu);
      h.qkey = w.qkey;
      h.imm = w.imm;
      if (src && src->device_ctx && h.len > 0) {  // GPU memory: read through the driver
        append_msg(c, h, nullptr, 0);
        const size_t at = c->out.size();
        c->out.resize(at + h.len);
        device_read(src->device_ctx, c->out.data() + at, w.laddr, h.len);
      } else {
        append_msg(c, h, w.inline_data ? w.inl.data() : reinterpret_cast<const char*>(w.laddr), h.len);
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
  Qp* q = find_qp(h.dst_qpn);
  if (!q || (q->state != IBV_QPS_RTR && q->state != IBV_QPS_RTS)) {
    a.status = IBV_WC_REM_INV_REQ_ERR;
  } else if (q->srd) {
    if (h.qkey != q->qkey || h.type == kFetchAdd) a.status = IBV_WC_REM_INV_REQ_ERR;  // SRD: no atomics
    else if (h.type == kWrite) a.status = place_write(*q, h, payload);
    else a.status = srd_receive(*q, h, payload);
  } else if (q->dest_qpn != h.src_qpn || (h.type != kWrite && h.type != kFetchAdd)) {
    a.status = IBV_WC_REM_INV_REQ_ERR;
  } else if (h.psn != q->rq_psn || static_cast<int>(h.mtu) != q->mtu) {
    a.status = IBV_WC_RETRY_EXC_ERR;  // a NIC drops such packets until the sender gives up
  } else if (h.type == kWrite) {
    a.status = place_write(*q, h, payload);
  } else {
    const Mr* m = find_mr(h.rkey);
    if (!(q->access & IBV_ACCESS_REMOTE_ATOMIC) || !m || !(m->access & IBV_ACCESS_REMOTE_ATOMIC) ||
        m->mr.pd != q->qp().pd || !covers(m, h.raddr, 8) || h.raddr % 8 != 0)
      a.status = IBV_WC_REM_ACCESS_ERR;
    else if (m->device_ctx) {  // GPU memory: a read and a write, atomic against the NIC's other operations
      device_read(m->device_ctx, &a.value, h.raddr, 8);
      const uint64_t sum = a.value + h.value;
      device_write(m->device_ctx, h.raddr, &sum, 8);
    } else {
      a.value = __atomic_fetch_add(reinterpret_cast<uint64_t*>(h.raddr), h.value, __ATOMIC_SEQ_CST);
    }
  }
  append_msg(c, a, nullptr, 0);
}

// An acknowledgement of this process's WR (g->mu held). RC acknowledges a
// QP's WRs in order; SRD in any order, and a receiver without a receive
// posted answers kRnr: the WR goes again a little later.
void on_ack(const Hdr& h) {
  Qp* q = find_qp(h.dst_qpn);
  if (!q) return;  // destroyed since
  auto it = q->unacked.begin();
  if (q->srd)
    while (it != q->unacked.end() && it->index != h.index) ++it;
  if (it == q->unacked.end() || it->index != h.index) return;  // flushed since
  SendWr w = std::move(*it);
  q->unacked.erase(it);
  if (q->srd && h.status == kRnr) {
    w.not_before = Clock::now() + kRnrDelay;
    q->unsent.push_back(std::move(w));
    return;
  }
  if (h.status != IBV_WC_SUCCESS) {
    fail_qp(*q, w, static_cast<ibv_wc_status>(h.status));
    return;
  }
  if (w.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {  // the old value, into the WR's local buffer
    const Mr* m = find_mr(w.lkey);
    if (m && m->device_ctx) device_write(m->device_ctx, w.laddr, &h.value, 8);
    else std::memcpy(reinterpret_cast<void*>(w.laddr), &h.value, 8);
  }
  if (w.signaled) push_cqe(*q, w, IBV_WC_SUCCESS);
}

// Parses whole messages from c->in (g->mu held).
void consume(Conn* c) {
  size_t off = 0;
  while (c->in.size() - off >= sizeof(Hdr)) {
    Hdr h;
    std::memcpy(&h, c->in.data() + off, sizeof h);
    const size_t body = h.type == kAck || h.type == kFetchAdd ? 0 : h.len;
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

// One round of the NIC's work: WRs onto the wire, connections accepted,
// read, consumed and written, as far as none blocks (poll with `wait_ms`).
// Callers of ibv_poll_cq run the rounds (step_mu: one at a time), as a
// provider whose polling makes progress; the NIC thread runs one only when
// no caller did for 2 ms (a process that stopped polling still answers its
// peers, as a NIC would). With the NIC thread alone, threads that spin on
// the CQ (the proxy, a test's waits) kept it off the CPU for seconds at a
// time with 4 processes on 2 cores (a poll() of 1 ms returned after 1.09 s,
// WRs waited up to 6 s), and while it was off the CPU holding the lock,
// every thread waited for it.
std::mutex step_mu;
std::atomic<int64_t> last_step_ns{0};

// The sockets a round or a wait polls (g->mu held): the listener, the wake
// pipe, then every open connection (writable wanted while it has output);
// `of` names each entry's connection (null for the first two).
void collect_fds(std::vector<pollfd>& fds, std::vector<Conn*>& of) {
  fds.clear();
  of.clear();
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

void drain_wake() {
  char tmp[256];
  while (read(g->wake[0], tmp, sizeof tmp) > 0) {
  }
}

void nic_work(int wait_ms) {
  thread_local std::vector<pollfd> fds;
  thread_local std::vector<Conn*> of;
  thread_local std::vector<char> buf(1 << 20);
  {
    std::lock_guard<std::mutex> lk(g->mu);
    send_work();
    collect_fds(fds, of);
  }
  poll(fds.data(), fds.size(), wait_ms);
  last_step_ns.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
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
  if (fds[1].revents & POLLIN) drain_wake();
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

// The NIC thread waits for its sockets holding no lock (a caller may step
// meanwhile), then takes a round if no caller did lately.
void nic_loop() {
  std::vector<pollfd> fds;
  std::vector<Conn*> of;  // (not read: the wait only needs the sockets)
  for (;;) {
    {
      std::lock_guard<std::mutex> lk(g->mu);
      collect_fds(fds, of);
    }
    poll(fds.data(), fds.size(), 2);  // (a socket a caller's round closed meanwhile only wakes it early)
    if (fds[1].revents & POLLIN) drain_wake();  // (here too: a round skipped below leaves it readable)
    const int64_t now = Clock::now().time_since_epoch().count();
    if (now - last_step_ns.load(std::memory_order_relaxed) < 2000000) continue;  // the callers keep it going
    std::lock_guard<std::mutex> s(step_mu);
    nic_work(0);
  }
}

// A caller's round, at most one each 20 us and only when no other runs.
void caller_step() {
  const int64_t now = Clock::now().time_since_epoch().count();
  if (now - last_step_ns.load(std::memory_order_relaxed) < 20000 || !step_mu.try_lock()) return;
  nic_work(0);
  step_mu.unlock();
}

}  // namespace

ibv_gid gid_of(uint64_t key) {
  ibv_gid gid{};
  gid.raw[0] = 0xfe;
  gid.raw[1] = 0x80;
  std::memcpy(gid.raw + 8, &key, 8);
  return gid;
}

// ---- the RC data path, reached through ibv_context::ops ----

int sv_post_send(ibv_qp* ibqp, ibv_send_wr* wr, ibv_send_wr** bad) {
  std::lock_guard<std::mutex> lk(g->mu);
  Qp& q = *reinterpret_cast<Qp*>(ibqp);
  for (; wr; wr = wr->next) {
    int err = 0;
    if (q.srd || (q.state != IBV_QPS_RTS && q.state != IBV_QPS_ERR)) err = EINVAL;
    else if (q.posted - q.retired >= q.max_send_wr) err = ENOMEM;
    else if (wr->num_sge != 1 || (wr->opcode != IBV_WR_RDMA_WRITE && wr->opcode != IBV_WR_ATOMIC_FETCH_AND_ADD))
      err = EINVAL;
    else if ((wr->send_flags & IBV_SEND_INLINE) &&
             (wr->opcode != IBV_WR_RDMA_WRITE || wr->sg_list[0].length > q.max_inline))
      err = EINVAL;
    else if (wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD && (wr->sg_list[0].length != 8 || lacks("atomics")))
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
    w.signaled = (wr->send_flags & IBV_SEND_SIGNALED) != 0;
    w.inline_data = (wr->send_flags & IBV_SEND_INLINE) != 0;
    w.laddr = wr->sg_list[0].addr;
    w.len = wr->sg_list[0].length;
    w.lkey = wr->sg_list[0].lkey;
    w.peer_key = q.peer_key;
    w.dest_qpn = q.dest_qpn;
    if (w.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
      w.raddr = wr->wr.atomic.remote_addr;
      w.rkey = wr->wr.atomic.rkey;
      w.add = wr->wr.atomic.compare_add;
    } else {
      w.raddr = wr->wr.rdma.remote_addr;
      w.rkey = wr->wr.rdma.rkey;
    }
    if (w.inline_data) w.inl.assign(reinterpret_cast<const char*>(w.laddr), w.len);
    w.not_before = Clock::now() + wire_delay();
    if (q.state == IBV_QPS_ERR) {
      push_cqe(q, w, IBV_WC_WR_FLUSH_ERR);  // (a WR completed in error completes signalled or not)
      continue;
    }
    q.unsent.push_back(std::move(w));
  }
  wake_nic();
  return 0;
}

int sv_post_recv(ibv_qp* ibqp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  if (injected_failure("post_recv")) {
    *bad = wr;
    return ENOMEM;
  }
  std::lock_guard<std::mutex> lk(g->mu);
  Qp& q = *reinterpret_cast<Qp*>(ibqp);
  for (; wr; wr = wr->next) {
    // Receives are emulated for SRD only (the RC path posts none).
    if (!q.srd || q.state == IBV_QPS_RESET || wr->num_sge != 1 || q.recvs.size() >= q.max_recv_wr) {
      *bad = wr;
      return q.recvs.size() >= q.max_recv_wr ? ENOMEM : EINVAL;
    }
    q.recvs.push_back({wr->wr_id, wr->sg_list[0].addr, wr->sg_list[0].length, wr->sg_list[0].lkey});
  }
  return 0;
}

int sv_poll_cq(ibv_cq* ibcq, int n, ibv_wc* wc) {
  caller_step();
  Cq& cq = *reinterpret_cast<Cq*>(ibcq);
  if (cq.count.load(std::memory_order_acquire) == 0) return 0;  // (an overrun leaves entries: count > 0)
  std::lock_guard<std::mutex> lk(g->mu);
  if (cq.overrun) {
    std::fprintf(stderr, "softverbs: CQ overrun (%d entries): more completions pending than the CQ holds\n",
                 cq.cq.cqe);
    return -EOVERFLOW;
  }
  int got = 0;
  while (got < n && !cq.entries.empty()) {
    const Cq::Entry e = cq.entries.front();
    cq.entries.pop_front();
    cq.count.store(cq.entries.size(), std::memory_order_release);
    wc[got++] = e.wc;
    Qp* q = e.index == kNoIndex ? nullptr : find_qp(e.qpn);  // the send queue slots up to this WR are free again
    if (q && !q->srd && q->retired < e.index + 1) q->retired = e.index + 1;
    if (q && q->srd) ++q->retired;  // SRD: every WR is signalled and retires alone
  }
  return got;
}

bool mask_has(int mask, int need) { return (mask & need) == need; }

void wake_nic() {
  char c = 1;
  (void)!write(g->wake[1], &c, 1);
}

uint64_t key_of(const ibv_gid& gid) {
  uint64_t k;
  std::memcpy(&k, gid.raw + 8, 8);
  return k;
}

int max_cqe() {
  static const int v = [] {
    const char* m = std::getenv("SOFTVERBS_MAX_CQE");
    return m ? static_cast<int>(std::strtol(m, nullptr, 10)) : 1 << 22;
  }();
  return v;
}

uint32_t max_msg_sz() {
  static const uint32_t v = [] {
    const char* m = std::getenv("SOFTVERBS_MAX_MSG_SZ");
    return m ? static_cast<uint32_t>(std::strtoul(m, nullptr, 10)) : 1u << 31;
  }();
  return v;
}

bool efa_mode() {
  static const bool v = [] {
    const char* e = std::getenv("SOFTVERBS_EFA");
    return e && std::strcmp(e, "1") == 0;
  }();
  return v;
}

Clock::duration wire_delay() {
  static const Clock::duration v = [] {
    const char* m = std::getenv("SOFTVERBS_WIRE_DELAY_MS");
    return std::chrono::duration_cast<Clock::duration>(std::chrono::milliseconds(m ? std::strtol(m, nullptr, 10) : 0));
  }();
  return v;
}

bool lacks(const char* cap) {
  const char* list = std::getenv("SOFTVERBS_LACKS");
  const char* rank = std::getenv("SOFTVERBS_LACKS_RANK");
  const char* me = std::getenv("RANK");
  if (!list || (rank && (!me || std::strcmp(rank, me) != 0))) return false;
  const std::string s = std::string(",") + list + ",";
  return s.find(std::string(",") + cap + ",") != std::string::npos;
}

bool injected_failure(const char* call) {
  static std::mutex mu;
  static std::map<std::string, int> calls;
  const char* spec = std::getenv("SOFTVERBS_FAIL");
  const char* rank = std::getenv("SOFTVERBS_FAIL_RANK");
  const char* me = std::getenv("RANK");
  if (!spec || !rank || !me || std::strcmp(rank, me) != 0) return false;
  const std::string s = spec;
  const size_t colon = s.find(':');
  if (colon == std::string::npos || s.compare(0, colon, call) != 0) return false;
  std::lock_guard<std::mutex> lk(mu);
  return ++calls[call] == std::atoi(s.c_str() + colon + 1);
}

Mr* find_mr(uint32_t key) {
  auto it = g->mrs.find(key);
  return it == g->mrs.end() ? nullptr : it->second;
}
Qp* find_qp(uint32_t qpn) {
  auto it = g->qps.find(qpn);
  return it == g->qps.end() ? nullptr : it->second;
}
bool covers(const Mr* m, uint64_t addr, uint64_t len) {
  const auto base = reinterpret_cast<uint64_t>(m->mr.addr);
  return addr >= base && len <= m->mr.length && addr - base <= m->mr.length - len;
}

// An RDMA write's placement at this end; its status.
uint32_t place_write(const Qp& q, const Hdr& h, const char* payload) {
  if (h.len == 0) return IBV_WC_SUCCESS;  // a zero-length write touches no memory: no key is checked
  const Mr* m = find_mr(h.rkey);
  // (SRD QPs take no access flags: the MR's decide.)
  if ((!q.srd && !(q.access & IBV_ACCESS_REMOTE_WRITE)) || !m || !(m->access & IBV_ACCESS_REMOTE_WRITE) ||
      m->mr.pd != q.x.qp_base.pd || !covers(m, h.raddr, h.len))
    return IBV_WC_REM_ACCESS_ERR;
  if (m->device_ctx) {
    device_write(m->device_ctx, h.raddr, payload, h.len);  // waited for: the data lands before a later signal
  } else if (h.len == 8 && h.raddr % 8 == 0) {  // a signal word: one store, as a NIC's aligned 8-byte write
    uint64_t v;
    std::memcpy(&v, payload, 8);
    __atomic_store_n(reinterpret_cast<uint64_t*>(h.raddr), v, __ATOMIC_RELEASE);
  } else {
    std::memcpy(reinterpret_cast<void*>(h.raddr), payload, h.len);
    std::atomic_thread_fence(std::memory_order_release);
  }
  return IBV_WC_SUCCESS;
}

void append_msg(Conn* c, const Hdr& h, const char* payload, size_t n) {
  c->out.append(reinterpret_cast<const char*>(&h), sizeof h);
  if (n) c->out.append(payload, n);
}

void push_cqe(Qp& q, const SendWr& w, ibv_wc_status st) {
  Cq* cq = reinterpret_cast<Cq*>(q.qp().send_cq);
  if (cq->entries.size() >= static_cast<size_t>(cq->cq.cqe)) {
    cq->overrun = true;
    return;
  }
  ibv_wc wc{};
  wc.wr_id = w.wr_id;
  wc.status = st;
  switch (w.opcode) {
    case IBV_WR_ATOMIC_FETCH_AND_ADD: wc.opcode = IBV_WC_FETCH_ADD; break;
    case IBV_WR_SEND: wc.opcode = IBV_WC_SEND; break;
    default: wc.opcode = IBV_WC_RDMA_WRITE;
  }
  wc.byte_len = w.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ? 8 : w.len;
  wc.qp_num = q.qp().qp_num;
  wc.vendor_err = st == IBV_WC_SUCCESS ? 0 : 0x5f;
  cq->push({wc, q.qp().qp_num, w.index});
}

// The QP fails: `w` with `st`, everything behind it flushed.
void fail_qp(Qp& q, const SendWr& w, ibv_wc_status st) {
  push_cqe(q, w, st);
  q.state = IBV_QPS_ERR;
  q.qp().state = IBV_QPS_ERR;
  for (auto* d : {&q.unacked, &q.unsent})
    for (const SendWr& x : *d)
      if (x.index != w.index) push_cqe(q, x, IBV_WC_WR_FLUSH_ERR);  // every flushed WR, signalled or not
  q.unacked.clear();
  q.unsent.clear();
}

void start_nic() {
  static std::once_flag once;
  std::call_once(once, [] {
    g = new Nic;
    std::random_device rd;
    g->key = (static_cast<uint64_t>(getpid()) << 32) | rd();
    g->next_qpn = (rd() & 0xfff) << 8 | 1;
    g->next_key = rd() & 0xffff0000u;
    std::snprintf(g->dev.name, sizeof g->dev.name, efa_mode() ? "softefa0" : "softverbs0");
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

}  // namespace softverbs
