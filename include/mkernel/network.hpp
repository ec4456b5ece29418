// mkernel: the network layer of a communicator (DESIGN.md §5): a transport
// per proxy thread, the host proxy, and the device context kernels use to
// push commands (device/net/net.cuh). Created collectively, on first use, by
// Communicator::network().
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "device/net/net_ctx.hpp"
#include "mkernel/symmetric.hpp"

struct CUstream_st;  // cudaStream_t

namespace mk {

class Communicator;
namespace net {
class Proxy;
}

class Network {
 public:
  explicit Network(Communicator& comm);  // collective
  ~Network();
  Network(const Network&) = delete;
  Network& operator=(const Network&) = delete;

  // Collective: makes `buf` reachable by network puts; returns its region id
  // (the same on every rank). Region 0 is the signal region. This rank's
  // proxy threads pause while it runs, its exchange with the other ranks
  // included: call it while no kernel waits on this network (the plans
  // synchronise the device first), or such a kernel waits until its peers
  // arrive, up to MK_TIMEOUT_MS.
  int register_buffer(const SymmetricBuffer& buf);
  // Collective, before the buffer is freed, once nothing uses the region: a
  // device synchronisation, an exchange of its outcome, then every rank
  // releases its registration of region `id` (Transport::deregister_region).
  // Ids are not reused. Plans call it when they are destroyed. A sync that
  // fails on some rank without taking its device down (a stream capture in
  // progress in global mode) throws on every rank alike, and the region
  // stays registered everywhere (deregister it again later, or it goes when
  // the communicator closes). When this rank's device has failed (a fatal
  // CUDA error: a kernel trapped; see Communicator::fatal_device_error) the
  // exchange is left out, with a warning: the registration goes at once,
  // and the call returns. It
  // pauses this rank's proxy while it runs, and fabric's staging may free a
  // pinned host shadow then (cudaFreeHost), which can wait for a running
  // kernel that waits for that proxy (until MK_TIMEOUT_MS).
  void deregister_buffer(int id);
  // Buffers registered now (region 0, the signal region, not counted).
  int registered_buffers() const;
  const net::NetCtx& device_ctx() const { return ctx_; }
  // The same context in device memory (kept up to date by register_buffer),
  // for kernels that take it by pointer (it is 1.3 KB).
  const net::NetCtx* device_ctx_ptr() const { return ctx_dev_; }
  std::string transport_name() const { return name_; }
  bool emulated() const { return ctx_.emulated != 0; }
  // Some proxy thread's transport makes CUDA calls (net::Transport::proxy_calls_cuda).
  bool proxy_calls_cuda() const { return proxy_calls_cuda_; }
  // Ops that wait on this network call it at each launch (a flag test): when
  // the proxy calls CUDA and `stream` is the legacy default stream (0, as
  // PyTorch's default stream is), it warns once per network that a
  // pageable host copy on that stream or a first kernel load while the op
  // runs blocks the proxy until the op times out, and what to do instead.
  void warn_legacy_stream(const char* op, const CUstream_st* stream) {
    if (proxy_calls_cuda_ && is_legacy_stream(stream) && !warned_legacy_.exchange(true)) warn_legacy(op);
  }
  static bool is_legacy_stream(const CUstream_st* s) {
    return s == nullptr || s == reinterpret_cast<const CUstream_st*>(uintptr_t{1});  // 0, cudaStreamLegacy
  }
  // Ranks reached over the network (other nodes), and the rail subset
  // (same local rank on every other node).
  const std::vector<int>& peers() const { return peers_; }
  const std::vector<int>& rail_peers() const { return rail_peers_; }
  // Throws mk::Error with the proxy's first error, if any.
  void check() const;
  // The proxy's first error (names the peer, queue and operation), or "".
  std::string error() const;
  // What the proxy's queues still have in flight (net::Proxy::state), "" when nothing: for the report of a
  // device wait that timed out before the proxy's own bound (MK_TIMEOUT_MS < MK_NET_TIMEOUT_MS by default).
  std::string in_flight();
  // Payload bytes of the puts this rank's proxy has taken from its command
  // queues since the network was created (counted as the proxy takes each
  // command, so it can lag the kernels: GEMM+RS and GEMM+AR end without a
  // quiet). Exact for a call once every rank has synchronised it and passed
  // a barrier: a peer that finished has received all this rank put.
  uint64_t bytes_put() const;
  net::Proxy& proxy() { return *proxy_; }

 private:
  Communicator& comm_;
  std::string name_;
  std::vector<int> peers_, rail_peers_;
  std::unique_ptr<net::Proxy> proxy_;
  net::NetCtx ctx_{};
  net::NetCtx* ctx_dev_ = nullptr;
  void sync_device_ctx();
  void warn_legacy(const char* op) const;
  void drain_proxy(int id);  // deregister_buffer: the proxy completes what the kernels pushed (bounded)
  int next_region_ = 0;
  std::vector<uint8_t> live_;  // by region id: 1 while registered (register_buffer to deregister_buffer)
  bool proxy_calls_cuda_ = false;
  std::atomic<bool> warned_legacy_{false};
};

}  // namespace mk
