// softverbs: the state shared by its parts: softverbs.cpp (the NIC, the
// wire, the data path), softverbs_api.cpp (the exported control path) and
// softverbs_srd.cpp (EFA: efadv, extended QPs, receives). See softverbs.cpp for
// what it emulates and checks. Everything below sits under Nic::mu.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace softverbs {

using Clock = std::chrono::steady_clock;
constexpr int kGidV2Index = 1;
constexpr uint32_t kMaxQpWr = 16384;
constexpr uint32_t kMaxInline = 64;
constexpr uint32_t kRnr = 0xffff;  // an acknowledgement's status: no receive posted, retry later

enum MsgType : uint32_t { kWrite = 1, kFetchAdd = 2, kAck = 3, kWriteImm = 4, kSend = 5 };
struct Hdr {
  uint32_t type, dst_qpn, src_qpn, status;
  uint64_t index, raddr, value;
  uint32_t rkey, len, psn, mtu;
  uint32_t qkey, imm;  // SRD: the target QP's Q-key; the immediate (network order, as posted)
};

struct Mr {
  ibv_mr mr{};
  int access = 0;
  void* device_ctx = nullptr;  // GPU memory: its CUDA context (softverbs_gpu.cpp); null: host memory
};

struct Cq {
  ibv_cq cq{};
  struct Entry {
    ibv_wc wc;
    uint32_t qpn;
    uint64_t index;  // the send WR's index (retires send-queue slots); kNoIndex for receives
  };
  std::deque<Entry> entries;
  // entries.size(), read without the lock: a poll of an empty CQ takes no
  // lock, so that a caller spinning on ibv_poll_cq (the proxy) cannot starve
  // the NIC thread of it (seen: 30 s stalls with 4 processes on 2 cores).
  std::atomic<size_t> count{0};
  bool overrun = false;
  void push(const Entry& e) {
    entries.push_back(e);
    count.store(entries.size(), std::memory_order_release);
  }
};
constexpr uint64_t kNoIndex = ~0ull;

struct SendWr {
  uint64_t wr_id = 0, index = 0;
  ibv_wr_opcode opcode = IBV_WR_RDMA_WRITE;
  bool signaled = false, inline_data = false;
  uint64_t laddr = 0, raddr = 0, add = 0;
  uint32_t len = 0, lkey = 0, rkey = 0;
  uint32_t imm = 0;
  uint64_t peer_key = 0;  // the target process
  uint32_t dest_qpn = 0, qkey = 0;
  std::string inl;  // inline payload, copied at post
  Clock::time_point not_before{};  // its post + SOFTVERBS_WIRE_DELAY_MS; SRD: resent after a receiver-not-ready answer
};

struct RecvWr {
  uint64_t wr_id = 0, addr = 0;
  uint32_t len = 0, lkey = 0;
};

struct Qp {
  ibv_qp_ex x{};  // x.qp_base is what callers hold
  bool srd = false;
  ibv_qp_state state = IBV_QPS_RESET;
  int access = 0;
  uint32_t max_send_wr = 0, max_recv_wr = 0, max_inline = 0, qkey = 0;
  uint64_t posted = 0, retired = 0;  // WR indices: posted so far; retired by polled completions
  uint64_t peer_key = 0;             // RC: the target process (from the RTR dgid)
  uint32_t dest_qpn = 0, rq_psn = 0, sq_psn = 0;
  int mtu = 0, timeout = 0, retry_cnt = 0;
  std::deque<SendWr> unsent, unacked;
  std::deque<RecvWr> recvs;
  uint64_t send_ops = 0;           // SRD: the builder calls it was created for (IBV_QP_EX_WITH_*)
  std::vector<SendWr> batch;       // SRD: between wr_start and wr_complete
  bool batch_bad = false;
  Clock::time_point dead_since{};  // its target process is gone: fail after the retry time
  ibv_qp& qp() { return x.qp_base; }
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

extern Nic* g;  // leaked on purpose: its thread runs until the process exits

void start_nic();
void wake_nic();
uint64_t key_of(const ibv_gid& gid);
uint32_t max_msg_sz();
int max_cqe();  // SOFTVERBS_MAX_CQE
// SOFTVERBS_WIRE_DELAY_MS: every WR leaves the NIC this long after its post (a slow or busy link), so that its
// completion comes late: tests of who waits for outstanding work (a registration let go with a WR in flight
// fails it with a protection error, as a NIC's would).
Clock::duration wire_delay();
bool efa_mode();  // SOFTVERBS_EFA=1: the device answers efadv (EFA SRD), else it is a RoCE device
// SOFTVERBS_LACKS=<cap>[,<cap>] (atomics, rnr_retry), in the process whose RANK is SOFTVERBS_LACKS_RANK when set:
// the device reports it does not have them.
bool lacks(const char* cap);
// Fault injection: SOFTVERBS_FAIL=<call>:<n> with SOFTVERBS_FAIL_RANK=<r> makes
// the n-th call of `call` (reg_mr, create_qp, post_recv) fail (ENOMEM) in the process
// whose RANK is r, as a NIC out of resources would.
bool injected_failure(const char* call);
Mr* find_mr(uint32_t key);
bool covers(const Mr* m, uint64_t addr, uint64_t len);
Qp* find_qp(uint32_t qpn);
void push_cqe(Qp& q, const SendWr& w, ibv_wc_status st);
void fail_qp(Qp& q, const SendWr& w, ibv_wc_status st);
void append_msg(Conn* c, const Hdr& h, const char* payload, size_t n);
// An RDMA write's placement at this end (keys, bounds, access); its status.
uint32_t place_write(const Qp& q, const Hdr& h, const char* payload);

ibv_gid gid_of(uint64_t key);  // this port's address: a link-local GID carrying the process key
bool mask_has(int mask, int need);
// The data path, in the ops table of every context (softverbs.cpp).
int sv_post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
int sv_post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);
int sv_poll_cq(ibv_cq* cq, int n, ibv_wc* wc);

// GPU memory (softverbs_gpu.cpp): the CUDA context of device memory at
// `addr`, or null (host memory, or no driver); copies that return when done.
void* device_context(const void* addr);
// The CUDA allocation that holds `addr`: its base and size (false: none, or no driver).
bool device_allocation(const void* addr, uint64_t* base, size_t* size);
void device_read(void* ctx, void* dst, uint64_t src, size_t n);
void device_write(void* ctx, uint64_t dst, const void* src, size_t n);

// SRD (softverbs_srd.cpp): a WRITE_WITH_IMM or SEND that arrived for SRD QP
// `q`; returns the acknowledgement's status (kRnr: nothing done).
uint32_t srd_receive(Qp& q, const Hdr& h, const char* payload);
void init_srd_ops(Qp& q);

}  // namespace softverbs
