#include "src/net/proxy.hpp"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <new>
#include <sstream>

#include "mkernel/error.hpp"
#include "mkernel/knobs.hpp"
#include "src/net/nic_affinity.hpp"
#include "src/runtime/device_health.hpp"

namespace mk::net {

namespace {

constexpr int kBatch = 64;             // commands drained per iteration
constexpr int kPollBatch = 64;         // completions reaped per iteration
// Idle time the loop spins before it starts to sched_yield. Long enough to
// cover the gaps of a latency-bound exchange (a ping-pong round trip, a copy
// in flight), so that a command arriving then is seen at once rather than
// after a system call.
constexpr int64_t kSpinUs = 100;

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

const char* op_name(CmdOp op) {
  switch (op) {
    case CmdOp::Put: return "PUT";
    case CmdOp::PutInline: return "PUT_INLINE";
    case CmdOp::Signal: return "SIGNAL";
    case CmdOp::Flush: return "FLUSH";
    case CmdOp::Barrier: return "BARRIER";
  }
  return "?";
}

// One warning a process for threads the system would not pin (a CPU taken offline or out of the cgroup since the
// choice): each proxy thread would say the same.
std::atomic<bool> pin_warned{false};

}  // namespace

// run()'s own record of each slot of its queue, beside the ring: a command's state lives until it completes, which
// can be after its slot's refill was pushed (the lap rule in run()).
struct Proxy::Loop {
  std::vector<uint16_t> remaining;  // transport ops left per command
  std::vector<uint8_t> finished;
  std::vector<int64_t> started_us;
  std::vector<CmdFields> cmd_of;
  std::deque<WriteReq> pending;  // accepted commands the transport had no room for
};

std::vector<int> cpus_near_gpu(const std::string& pci_bus_id) {
  std::vector<int> cpus;
  const std::string dev = pci_device_path(pci_bus_id);  // (CUDA's 8-digit domain spelling too: nic_affinity)
  if (dev.empty()) return cpus;
  std::ifstream f(dev + "/local_cpulist");
  std::string list;
  if (!std::getline(f, list)) return cpus;
  std::stringstream ss(list);
  std::string part;
  while (std::getline(ss, part, ',')) {
    int lo = 0, hi = 0;
    if (std::sscanf(part.c_str(), "%d-%d", &lo, &hi) == 2)
      for (int c = lo; c <= hi; ++c) cpus.push_back(c);
    else if (std::sscanf(part.c_str(), "%d", &lo) == 1)
      cpus.push_back(lo);
  }
  return cpus;
}

std::vector<int> allowed_cpus() {
  // A set of CPU_SETSIZE bits is refused (EINVAL) where the kernel counts more CPUs: grow it until it fits.
  for (int n = CPU_SETSIZE; n <= (1 << 20); n *= 2) {
    cpu_set_t* set = CPU_ALLOC(n);
    if (!set) return {};
    const size_t bytes = CPU_ALLOC_SIZE(n);
    CPU_ZERO_S(bytes, set);
    std::vector<int> cpus;
    const int rc = sched_getaffinity(0, bytes, set);
    if (rc == 0)
      for (int c = 0; c < n; ++c)
        if (CPU_ISSET_S(c, bytes, set)) cpus.push_back(c);
    const int err = errno;
    CPU_FREE(set);
    if (rc == 0) return cpus;
    if (err != EINVAL) return {};
  }
  return {};
}

std::vector<int> usable_cpus(const std::vector<int>& near, const std::vector<int>& allowed) {
  std::vector<int> sorted(allowed);
  std::sort(sorted.begin(), sorted.end());
  std::vector<int> out;
  for (int c : near)
    if (std::binary_search(sorted.begin(), sorted.end(), c)) out.push_back(c);
  return out;
}

std::vector<int> proxy_pin_cpus(const std::vector<int>& near, const std::vector<int>& allowed,
                                size_t threads_on_host) {
  std::vector<int> cpus = usable_cpus(near, allowed);
  if (cpus.size() < 2 * threads_on_host) cpus.clear();
  return cpus;
}

int pin_this_thread(const std::vector<int>& cpus) {
  if (cpus.empty() || *std::min_element(cpus.begin(), cpus.end()) < 0) return EINVAL;
  const int n = *std::max_element(cpus.begin(), cpus.end()) + 1;
  cpu_set_t* set = CPU_ALLOC(n);
  if (!set) return ENOMEM;
  const size_t bytes = CPU_ALLOC_SIZE(n);
  CPU_ZERO_S(bytes, set);
  for (int c : cpus) CPU_SET_S(c, bytes, set);
  const int rc = pthread_setaffinity_np(pthread_self(), bytes, set);
  CPU_FREE(set);
  return rc;
}

Proxy::Proxy(ProxyConfig cfg, std::vector<std::unique_ptr<Transport>> transports)
    : cfg_(std::move(cfg)), queues_(transports.size()) {
  if (cfg_.depth == 0 || (cfg_.depth & (cfg_.depth - 1))) mk::fail("proxy: queue depth ", cfg_.depth, " is not a power of two");
  try {
    for (size_t i = 0; i < queues_.size(); ++i) {
      queues_[i].transport = std::move(transports[i]);
      allocate(queues_[i], static_cast<int>(i));
    }
  } catch (...) {
    for (auto& q : queues_) release(q);  // queues allocated before the failure
    throw;
  }
  try {
    for (size_t i = 0; i < queues_.size(); ++i)
      queues_[i].thread = std::thread([this, i] { run(static_cast<int>(i)); });
  } catch (...) {  // (a thread that could not start, EAGAIN: the started ones joined, not left to std::terminate)
    stop();
    for (auto& q : queues_) release(q);
    throw;
  }
}

Proxy::~Proxy() {
  stop();
  for (auto& q : queues_) {
    if (q.transport) q.transport->close();
    release(q);
  }
}

void Proxy::allocate(Queue& q, int id) {
  CmdQueue& d = q.desc;
  d.size = cfg_.depth;
  d.id = id;
  const size_t ring_bytes = sizeof(Cmd) * d.size;
  if (cfg_.cuda_device >= 0) {
    void* host = nullptr;
    MK_CUDA_CHECK(cudaHostAlloc(&host, ring_bytes + 256, cudaHostAllocMapped | cudaHostAllocPortable));
    std::memset(host, 0, ring_bytes + 256);
    d.ring = static_cast<Cmd*>(host);
    d.tail = reinterpret_cast<uint64_t*>(static_cast<char*>(host) + ring_bytes);
    d.done = reinterpret_cast<uint64_t*>(static_cast<char*>(host) + ring_bytes + 128);
    void* dev = nullptr;
    MK_CUDA_CHECK(cudaMalloc(&dev, 256));
    d.head = static_cast<uint64_t*>(dev);  // (before the memset: release() frees it if that fails)
    MK_CUDA_CHECK(cudaMemset(dev, 0, 256));
    d.tail_cache = reinterpret_cast<uint64_t*>(static_cast<char*>(dev) + 128);
  } else {
    void* host = nullptr;
    if (posix_memalign(&host, 4096, ring_bytes + 512) != 0) mk::fail("proxy: out of host memory");
    std::memset(host, 0, ring_bytes + 512);
    d.ring = static_cast<Cmd*>(host);
    d.tail = reinterpret_cast<uint64_t*>(static_cast<char*>(host) + ring_bytes);
    d.done = reinterpret_cast<uint64_t*>(static_cast<char*>(host) + ring_bytes + 128);
    d.head = reinterpret_cast<uint64_t*>(static_cast<char*>(host) + ring_bytes + 256);
    d.tail_cache = nullptr;
  }
  // The loop's state here rather than on its thread: there a std::bad_alloc (MK_NET_QUEUE_DEPTH=1048576 on 16
  // threads) escaped the thread and std::terminate ended the process without a word naming the proxy.
  try {
    if (id == cfg_.fail_loop_alloc) throw std::bad_alloc();
    auto loop = std::make_unique<Loop>();
    loop->remaining.assign(d.size, 0);
    loop->finished.assign(d.size, 0);
    loop->started_us.assign(d.size, 0);
    loop->cmd_of.resize(d.size);
    q.loop = std::move(loop);
  } catch (const std::bad_alloc&) {
    const size_t slot_bytes = sizeof(uint16_t) + sizeof(uint8_t) + sizeof(int64_t) + sizeof(CmdFields);
    mk::fail("rank ", cfg_.rank, " proxy queue ", id, ": out of host memory for its loop's state (",
             slot_bytes * d.size, " bytes: ", d.size, " commands, MK_NET_QUEUE_DEPTH)");
  }
}

void Proxy::release(Queue& q) {
  q.loop.reset();
  if (!q.desc.ring) return;
  if (cfg_.cuda_device >= 0) {
    teardown_call(cudaFreeHost(q.desc.ring), "a proxy command queue");
    teardown_call(cudaFree(q.desc.head), "a proxy command queue's head word");
  } else {
    std::free(q.desc.ring);
  }
  q.desc = CmdQueue{};
}

void Proxy::stop() {
  stop_.store(true);
  for (auto& q : queues_)
    if (q.thread.joinable()) q.thread.join();
}

void Proxy::with_transports(const std::function<void(Transport&)>& f) {
  for (auto& q : queues_) {
    std::lock_guard<std::mutex> g(q.mu);
    f(*q.transport);
  }
}

uint64_t Proxy::pushed(int q) const {
  const CmdQueue& d = queues_[q].desc;
  if (cfg_.cuda_device < 0) return __atomic_load_n(d.head, __ATOMIC_ACQUIRE);
  uint64_t head = 0;
  MK_CUDA_CHECK(cudaMemcpy(&head, d.head, sizeof(head), cudaMemcpyDeviceToHost));
  return head;
}

std::string Proxy::state(int64_t lock_ms) {
  std::string s;
  for (size_t i = 0; i < queues_.size(); ++i) {
    Queue& q = queues_[i];
    const uint64_t taken = q.consumed.load(), done = q.completed_prefix.load();
    std::unique_lock<std::mutex> lk(q.mu, std::defer_lock);
    const int64_t end = now_us() + lock_ms * 1000;
    while (!lk.try_lock() && now_us() < end) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const std::string inflight = !lk.owns_lock() ? std::string("; its thread holds the transport (not read)")
                                 : q.transport   ? q.transport->in_flight()
                                                 : std::string();
    if (taken == done && (inflight.empty() || !lk.owns_lock())) continue;  // (nothing taken is incomplete)
    s += cat(s.empty() ? "" : "; ", "queue ", i, ": ", done, " of the ", taken, " commands it took complete", inflight);
  }
  return s;
}

std::string Proxy::error() const {
  std::lock_guard<std::mutex> g(err_mu_);
  return error_;
}

void Proxy::record_error(const std::string& msg) {
  {
    std::lock_guard<std::mutex> g(err_mu_);
    if (!error_.empty()) return;
    error_ = msg;
  }
  if (cfg_.on_error) cfg_.on_error(msg);
}

void Proxy::run(int qi) {
  Queue& Q = queues_[qi];
  const CmdQueue& q = Q.desc;
  if (!cfg_.cpus.empty()) {
    const int err = pin_this_thread(cfg_.cpus);
    if (err != 0 && !pin_warned.exchange(true))  // (before the try: the warning must not throw)
      warn_noexcept([&] {
        return cat("rank ", cfg_.rank, ": proxy queue ", qi, " runs unpinned: the system refused its ",
                   cfg_.cpus.size(), " CPUs near the GPU (", std::strerror(err), ")");
      });
  }
  if (cfg_.cuda_device >= 0) {
    cudaSetDevice(cfg_.cuda_device);
    // The proxy's CUDA calls (staging copies, event queries, signal kernels)
    // touch no stream of the user's, so a stream capture the user runs in
    // global mode (CUDA's default, PyTorch's) on another thread must not
    // count them as unsafe: they would fail and invalidate that capture
    // (PyTorch's NCCL watchdog thread met the same: pytorch#104555).
    cudaStreamCaptureMode relaxed = cudaStreamCaptureModeRelaxed;
    cudaThreadExchangeStreamCaptureMode(&relaxed);
  }
  const uint32_t mask = q.size - 1;
  std::vector<uint16_t>& remaining = Q.loop->remaining;
  std::vector<uint8_t>& finished = Q.loop->finished;
  std::vector<int64_t>& started_us = Q.loop->started_us;
  std::vector<CmdFields>& cmd_of = Q.loop->cmd_of;
  std::deque<WriteReq>& pending = Q.loop->pending;
  uint64_t tail = 0, done = 0;
  int64_t idle_since_us = -1;  // start of the current idle stretch (-1: busy)
  int64_t done_moved_us = 0;   // when `done` last advanced: the bound counts from it or the command's start,
                               // whichever is later (a queue that drains at the link's rate is not stuck)
  Completion comps[kPollBatch];
  const int64_t timeout_us = cfg_.timeout_ms * 1000;
  auto is_peer = [&](uint32_t p) { return std::find(cfg_.peers.begin(), cfg_.peers.end(), static_cast<int>(p)) != cfg_.peers.end(); };

  try {
    while (!stop_.load(std::memory_order_relaxed)) {
      bool progress = false;
      {  // the transport is ours for one iteration; with_transports() waits at most that long
        std::lock_guard<std::mutex> g(Q.mu);
        Transport& t = *Q.transport;
        // 1. Retry posts the transport refused earlier (in order).
        while (!pending.empty() && t.post(pending.front())) {
          pending.pop_front();
          progress = true;
        }
        // 2. Drain new commands; stop while anything waits for room so that
        //    back-pressure reaches the GPU through the ring. Producers refill
        //    a slot once its command is consumed (`tail`), but the loop's own
        //    state for it (remaining, finished, cmd_of) lives until the
        //    command completes: a command is taken only while the one a lap
        //    before it (seq - depth) is done. Without that check a transport
        //    that completes out of post order (verbs: several QPs a peer)
        //    overwrote a command still in flight, its completion was then
        //    counted for the new one, and `done` could pass a command whose
        //    source was still being read (cpu.net_proxy_verbs_4, 2026-12-04).
        int drained = 0;
        CmdFields f;
        while (pending.empty() && drained < kBatch && tail - done < q.size && cmdq_peek(q, tail, &f)) {
          const uint64_t seq = tail;
          const uint32_t slot = static_cast<uint32_t>(seq & mask);
          cmd_of[slot] = f;
          started_us[slot] = now_us();
          finished[slot] = 0;
          auto bad = [&](const std::string& why) {
            mk::fail("rank ", cfg_.rank, " proxy queue ", qi, ": malformed command #", seq, " (", op_name(f.op),
                     " peer ", f.peer, " region ", f.region, " bytes ", f.bytes, "): ", why);
          };
          if (f.sig_op > static_cast<uint8_t>(SigOp::Add)) bad("unknown signal op");
          switch (f.op) {
            case CmdOp::Put:
            case CmdOp::PutInline:
            case CmdOp::Signal: {
              if (!is_peer(f.peer)) bad("peer is not reachable over the network from this rank");
              const bool is_put = f.op != CmdOp::Signal;
              WriteReq w;
              w.peer = static_cast<int>(f.peer);
              w.region = is_put ? f.region : kSignalRegion;
              w.src_off = f.src_off;
              w.dst_off = f.dst_off;
              w.bytes = is_put ? f.bytes : 0;
              if (f.op == CmdOp::PutInline) {
                if (f.bytes == 0 || f.bytes > kMaxInlineBytes) bad("PUT_INLINE carries 1 to 16 bytes");
                w.has_inline = true;
                w.inline_data[0] = f.aux;
                w.inline_data[1] = f.aux2;
              }
              w.sig_op = static_cast<SigOp>(f.sig_op);
              w.sig_off = cfg_.signal_base + 8ull * f.sig_idx;
              w.sig_value = f.sig_value;
              w.cookie = seq;
              if (f.op == CmdOp::Signal && w.sig_op == SigOp::None) bad("SIGNAL without a signal op");
              remaining[slot] = 1;
              if (is_put) Q.put_bytes.fetch_add(f.bytes, std::memory_order_relaxed);
              if (!pending.empty() || !t.post(w)) pending.push_back(w);
              break;
            }
            case CmdOp::Flush:
              remaining[slot] = 0;
              finished[slot] = 1;
              break;
            case CmdOp::Barrier: {
              remaining[slot] = static_cast<uint16_t>(cfg_.rail_peers.size());
              if (cfg_.rail_peers.empty()) finished[slot] = 1;
              for (int p : cfg_.rail_peers) {
                WriteReq w;
                w.peer = p;
                w.region = kSignalRegion;
                w.sig_op = SigOp::Add;
                w.sig_off = cfg_.signal_base + 8ull * f.sig_idx;
                w.sig_value = f.sig_value ? f.sig_value : 1;
                w.cookie = seq;
                if (!pending.empty() || !t.post(w)) pending.push_back(w);
              }
              break;
            }
            default:
              bad("unknown opcode " + std::to_string(static_cast<int>(f.op)));
          }
          ++tail;
          ++drained;
        }
        if (drained) {
          __atomic_store_n(q.tail, tail, __ATOMIC_RELEASE);
          Q.consumed.store(tail, std::memory_order_relaxed);
          progress = true;
        }
        // 3. Completions.
        const int n = t.poll(comps, kPollBatch);
        for (int i = 0; i < n; ++i) {
          const uint64_t seq = comps[i].cookie;
          const uint32_t slot = static_cast<uint32_t>(seq & mask);
          if (seq < done || seq >= tail || remaining[slot] == 0)
            mk::fail("rank ", cfg_.rank, " proxy queue ", qi, ": transport completed unknown operation #", seq);
          if (comps[i].status != 0)
            mk::fail("rank ", cfg_.rank, " proxy queue ", qi, ": ", op_name(cmd_of[slot].op), " #", seq, " to peer ",
                     cmd_of[slot].peer, " failed (status ", comps[i].status, ")");
          if (--remaining[slot] == 0) finished[slot] = 1;
        }
        if (n) progress = true;
        // 4. Publish the completed prefix.
        const uint64_t old_done = done;
        while (done < tail && finished[done & mask]) finished[done++ & mask] = 0;
        if (done != old_done) {
          done_moved_us = now_us();
          __atomic_store_n(q.done, done, __ATOMIC_RELEASE);
          Q.completed_prefix.store(done, std::memory_order_relaxed);
        }
        // 5. Bound every operation.
        if (done < tail) {
          const uint32_t slot = static_cast<uint32_t>(done & mask);
          const int64_t age = now_us() - std::max(started_us[slot], done_moved_us);
          if (age > timeout_us)
            mk::fail("rank ", cfg_.rank, " proxy queue ", qi, ": ", op_name(cmd_of[slot].op), " #", done, " to peer ",
                     cmd_of[slot].peer, " (", cmd_of[slot].bytes, " bytes) not complete after ", age / 1000,
                     " ms (MK_NET_TIMEOUT_MS; since it started or the queue last completed one); peer dead or "
                     "network stuck [queue: consumed ", tail, ", done ", done,
                     ", waiting for room in ", t.name(), ": ", pending.size(), "]", t.in_flight());
        }
      }
      if (progress) {
        idle_since_us = -1;
      } else {
        const int64_t t = now_us();
        if (idle_since_us < 0)
          idle_since_us = t;
        else if (t - idle_since_us > kSpinUs)
          sched_yield();  // outside the lock, so a registration can get in
      }
    }
  } catch (const std::exception& e) {
    // The proxy's own errors name the rank and queue; a transport's (post, poll) gets them here, with the queue's
    // state (its message alone, e.g. "emu: write to unregistered region 5", names neither).
    const std::string why = error_reason(e);
    record_error(why.find(" proxy queue ") != std::string::npos
                     ? std::string(e.what())
                     : cat("mkernel: rank ", cfg_.rank, " proxy queue ", qi, " (",
                           Q.transport ? Q.transport->name() : std::string("?"),
                           "; consumed ", tail, ", done ", done, ", ", pending.size(), " waiting for room): ", why));
  }
}

}  // namespace mk::net
