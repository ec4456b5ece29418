// mkernel: the host proxy (DESIGN.md §5). One progress thread per command
// queue, NCCL-proxy style: drain commands in batches, post them to the
// thread's own transport, poll completions, publish the locally-complete
// prefix (`done`) for the GPU, yield when idle. The first error (failed
// completion, dead peer, malformed command, an operation older than
// MK_NET_TIMEOUT_MS) is recorded, on_error() raises the device abort word, and
// the host API reports it.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "device/net/cmd_queue.hpp"
#include "src/net/transport.hpp"

namespace mk::net {

struct ProxyConfig {
  int rank = 0;
  uint32_t depth = 4096;           // commands per queue (power of two)
  int64_t timeout_ms = 10000;      // per-operation bound
  int cuda_device = -1;            // -1: host memory only, host producers (tests)
  std::vector<int> peers;          // valid targets of PUT/SIGNAL
  std::vector<int> rail_peers;     // targets of BARRIER
  uint64_t signal_base = 0;        // byte offset of signal word 0 in region 0
  std::vector<int> cpus;           // affinity of the proxy threads (empty: none; proxy_pin_cpus chooses)
  std::function<void(const std::string&)> on_error;  // called once, with the first error
  // Test hook, not a knob: this queue's loop state (its per-slot arrays) fails to allocate as if the host had no
  // memory for it (-1: none), the failure a large MK_NET_QUEUE_DEPTH times MK_NET_THREADS meets.
  int fail_loop_alloc = -1;
};

class Proxy {
 public:
  // One queue and one thread per transport. Transports are connected already.
  Proxy(ProxyConfig cfg, std::vector<std::unique_ptr<Transport>> transports);
  ~Proxy();
  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;

  int num_queues() const { return static_cast<int>(queues_.size()); }
  const CmdQueue& queue(int i) const { return queues_[i].desc; }
  // Runs f(transport) for every transport with its thread paused (e.g. to
  // register a region collectively while the proxy runs).
  void with_transports(const std::function<void(Transport&)>& f);
  std::string error() const;
  // For an error report: each queue whose commands are not all complete, with what its transport still has in
  // flight (Transport::in_flight), "" when nothing is. A queue whose thread holds its transport for longer than
  // `lock_ms` is named as such, not read. Not on a proxy thread.
  std::string state(int64_t lock_ms = 100);
  void stop();
  // Counters for tests and benchmarks.
  uint64_t consumed(int q) const { return queues_[q].consumed.load(); }
  uint64_t completed(int q) const { return queues_[q].completed_prefix.load(); }
  // Commands producers have claimed in queue q (the ring's head: a device word read by a copy where the
  // producers are kernels; call it once they are done, e.g. after a device synchronisation).
  uint64_t pushed(int q) const;
  // Payload bytes of the PUT / PUT_INLINE commands queue q has taken (what
  // this rank sent over the network through it; signals and barriers carry
  // none): the measured side of the ops' bytes-per-link formulas.
  uint64_t put_bytes(int q) const { return queues_[q].put_bytes.load(std::memory_order_relaxed); }

 private:
  struct Loop;  // what run() keeps for each slot of its queue (proxy.cpp)
  struct Queue {
    CmdQueue desc;
    std::unique_ptr<Loop> loop;  // made with the queue, so that no allocation of its thread's is outside its try
    std::unique_ptr<Transport> transport;
    std::mutex mu;  // held by the thread while it touches the transport
    std::thread thread;
    std::atomic<uint64_t> consumed{0};
    std::atomic<uint64_t> completed_prefix{0};
    std::atomic<uint64_t> put_bytes{0};
  };
  void run(int qi);
  void record_error(const std::string& msg);
  void allocate(Queue& q, int id);
  void release(Queue& q);

  ProxyConfig cfg_;
  std::vector<Queue> queues_;
  std::atomic<bool> stop_{false};
  mutable std::mutex err_mu_;
  std::string error_;
};

// CPUs near a GPU (its NUMA node's local_cpulist), or empty if unknown.
std::vector<int> cpus_near_gpu(const std::string& pci_bus_id);
// The CPUs the calling thread may run on (sched_getaffinity: a launcher's or cgroup's restriction, e.g. Slurm's
// task binding), ascending; empty if unknown. Threads it starts inherit them.
std::vector<int> allowed_cpus();
// The CPUs of `near` that are in `allowed`, in near's order.
std::vector<int> usable_cpus(const std::vector<int>& near, const std::vector<int>& allowed);
// Where to pin a rank's proxy threads: the CPUs near its GPU that the process may run on, when they are at least
// two per proxy thread of every rank on the host (`threads_on_host`); else none (empty: do not pin). Not the
// node's whole list: a cgroup's cpuset narrows any mask to its own CPUs, so where it left one CPU of the node every
// spinning proxy shared that core, and a binding by affinity alone (taskset, Slurm's task/affinity) would be left
// for other tasks' CPUs. A tiny or bogus list (VMs report one CPU) would stack the proxies too.
std::vector<int> proxy_pin_cpus(const std::vector<int>& near, const std::vector<int>& allowed,
                                size_t threads_on_host);
// Pins the calling thread to `cpus`: 0, or the error (its affinity unchanged) where the system refuses.
int pin_this_thread(const std::vector<int>& cpus);

}  // namespace mk::net
