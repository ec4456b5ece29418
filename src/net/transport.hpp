// mkernel: the network transport interface (DESIGN.md §5).
//
// A transport moves bytes one-sidedly from a registered region of this rank
// into the same region of a peer rank, optionally followed by a signal (an
// 8-byte word in the peer's signal region, set or added). It is a table of
// virtual functions with a NON-BLOCKING contract for the data path:
// post() and poll() never wait on the network; post() says "no room" instead
// of blocking. Only setup (connect, register_region) is collective and may
// block, bounded by the bootstrap's timeout.
//
// Ordering guarantee every backend must give: a signal attached to a write
// becomes visible at the peer only after all of that write's bytes are.
// Writes (and signals) to one peer from one post() sequence are NOT ordered
// with each other unless they carry signals (callers order with signals).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "device/net/cmd.hpp"  // SigOp
#include "device/net/delivery.hpp"
#include "mkernel/bootstrap.hpp"
#include "mkernel/topology.hpp"

namespace mk::net {

// Region 0 is always the signal region (the communicator's control region,
// signal word i at byte offset kSignalBase + 8 * i). Regions are registered
// collectively in the same order on every rank, so ids agree.
constexpr int kSignalRegion = 0;

struct Region {
  int id = -1;
  void* base = nullptr;
  size_t bytes = 0;
  bool device = false;  // GPU memory (else host memory)
  int cuda_device = -1;
  // emu only: this region as mapped from each rank on this host (by global
  // rank; nullptr elsewhere). Filled by the symmetric heap on emulated nodes.
  const std::vector<void*>* host_peer_ptrs = nullptr;
};

struct WriteReq {
  int peer = -1;          // global rank, one of the connected peers
  int region = -1;        // local source and remote destination region
  uint64_t src_off = 0;   // byte offset in the local region
  uint64_t dst_off = 0;   // byte offset in the peer's region
  uint64_t bytes = 0;     // 0 = signal only
  SigOp sig_op = SigOp::None;
  uint64_t sig_off = 0;   // byte offset of the 8-byte signal word in the peer's region 0
  uint64_t sig_value = 0;
  uint64_t cookie = 0;    // returned in the completion
  // PUT_INLINE: the first `bytes` (<= kMaxInlineBytes) source bytes, read by
  // the GPU when it pushed the command. A transport may write these instead
  // of reading src_off (which stays valid and unchanged until completion).
  bool has_inline = false;
  uint64_t inline_data[2] = {0, 0};
};

struct Completion {
  uint64_t cookie = 0;
  int status = 0;  // 0 = the source bytes may be reused and the write is on its way
};

struct TransportConfig {
  int rank = 0;
  int world = 1;
  int cuda_device = -1;         // -1: host-memory only (CPU tests)
  const Topology* topo = nullptr;
};

class Transport {
 public:
  virtual ~Transport() = default;
  // "verbs:mlx5_0", "fabric:tcp;ofi_rxm", "emu" ...
  virtual std::string name() const = 0;
  // True for the emulated NIC: every report made with it says so.
  virtual bool emulated() const { return false; }
  // True when the proxy makes CUDA copies or kernel launches on the data
  // path (fabric staging and EFA's signals into GPU memory with
  // MK_FABRIC_STAGE=cuda; EFA's cuFlushGPUDirectRDMAWrites, a driver call
  // with no stream work, is not counted). Such calls wait
  // while another thread of the process holds the context's submission
  // lock, e.g. a pageable copy on the legacy default stream or a kernel load
  // waiting for a kernel that waits on this network, which then times out
  // (bench/results/emu-pageable-20261201.md), and can wait behind work queued
  // after such a kernel in a shared hardware work queue (emu-work-queue-
  // 20261203.md). Known once region 0 is registered. Network::warn_legacy_stream
  // and work_queue_warning say so to users.
  virtual bool proxy_calls_cuda() const { return false; }
  // What the transport's outstanding work waits on, for the proxy's report
  // when a request does not complete in time: appended as is, so it begins
  // with its own separator ("; ..."); empty: nothing to add. Called on the
  // proxy thread, under the same lock as poll().
  virtual std::string in_flight() const { return {}; }
  // The ring through which this transport has the kernels' delivery agent
  // do its writes (device/net/delivery.hpp, agent.cuh; emu, fabric's staging,
  // EFA's GPU signals); size 0: none, the transport delivers by itself. Valid
  // from construction (EFA: from region 0's registration) to close().
  virtual DeliveryRing delivery_ring() const { return {}; }
  // Puts of at most this many bytes should carry their bytes in the command
  // (PUT_INLINE, <= kMaxInlineBytes); 0: the transport always reads the
  // source itself.
  virtual uint32_t inline_bytes() const { return 0; }
  // Collective over ALL ranks (every rank calls it, with its own peer list):
  // creates endpoints to `peers` (global ranks) and exchanges addresses
  // through bs (bounded). Throws mk::Error naming the peer on failure.
  virtual void connect(Bootstrap& bs, const std::vector<int>& peers) = 0;
  // Collective over ALL ranks, same order everywhere: registers `r` and learns
  // every peer's address/key for region r.id. Region 0 first. A failure on
  // any rank (a check, the memory registration) throws on every rank alike,
  // in the same exchange, with nothing of it left registered; the id is then
  // used up (Network::register_buffer moves on to r.id + 1 on every rank).
  // Ids may skip (a transport that never saw a used-up id), never repeat.
  virtual void register_region(Bootstrap& bs, const Region& r) = 0;
  // Local, called on every rank after a barrier of all ranks
  // (Network::deregister_buffer), when no operation on region `id` is in
  // flight or will be posted by any rank; on a rank whose device failed,
  // without the barrier (the peers' puts into it may then fail on their
  // side, which ends their ops with an error): releases its registration (memory
  // registration, staging shadow). Data that reached this rank for it and
  // is not in its memory yet (fabric's staging by agents: no kernel's agent
  // took it, or its note comes later) is dropped, never written later
  // (MK_FABRIC_STAGE=cuda: copies already queued on the proxy's streams
  // still land). Later requests naming it throw as for a region never
  // registered; ids are not reused. Region 0 cannot go.
  virtual void deregister_region(int id) = 0;
  // Non-blocking. Returns false when the request cannot be accepted now (an
  // in-flight limit); the caller polls and retries. Throws mk::Error on a
  // request that can never succeed (unknown peer/region, out of bounds).
  virtual bool post(const WriteReq& w) = 0;
  // Non-blocking. Reaps up to `max` completions. Throws mk::Error on a fatal
  // transport error (failed completion, dead or unreachable peer), naming the
  // peer; the proxy records it and aborts the job's waits.
  virtual int poll(Completion* out, int max) = 0;
  // Releases endpoints and registrations; idempotent, never blocks long.
  virtual void close() = 0;
};

// Backend factories. Each throws mk::Error with a one-line reason when the
// backend cannot run here (e.g. "verbs: no RDMA device").
std::unique_ptr<Transport> make_verbs(const TransportConfig& cfg);
std::unique_ptr<Transport> make_fabric(const TransportConfig& cfg);
std::unique_ptr<Transport> make_emu(const TransportConfig& cfg);

// Picks by MK_NET (auto|verbs|fabric|emu); auto tries verbs, then fabric with
// the efa provider, then emu when all ranks share one host, else fabric tcp.
std::unique_ptr<Transport> make_transport(const TransportConfig& cfg);

// SMs a persistent op's grid leaves free for a transport family's delivery
// (MK_NET_FREE_SMS, knob_list.inc): for emu the knob, but at least `agents`
// (its delivery agent CTAs, MK_EMU_AGENTS); for any other transport with
// agents (fabric's staging, EFA's GPU signals: MK_FABRIC_STAGE=agent) the
// same; for other fabric, and a transport whose proxy launches kernels
// (`side_kernels`: EFA with MK_FABRIC_STAGE=cuda), the knob when set (knob >
// 0), else 1, or 8 when the GPU's contexts are shared through MPS
// (cudaDevAttrMpsEnabled); else 0 (RC verbs).
int transport_free_sms(const std::string& family, int knob, bool mps, int agents = 0, bool side_kernels = false);

// The warning a network whose proxy issues CUDA work (Transport::
// proxy_calls_cuda: fabric staging, EFA's signals, with MK_FABRIC_STAGE=cuda) owes its user
// when that work may share a hardware work queue with the process's other
// streams and so wait behind work queued after an op that waits on it:
// CUDA_DEVICE_MAX_CONNECTIONS=1 (every stream in one queue: a stall each
// time work is queued behind an op) or MPS (clients share one pool of
// queues). Empty when there is nothing to say. max_connections: the
// variable's value, if set (bench/results/emu-work-queue-20261203.md).
// net_family: "emu", "fabric", "verbs" (the name without its details).
// work_queue_cause(): the hazard in one sentence, for the transports' stall
// reports (fabric's staging timeout).
std::string work_queue_cause();
// What every rank's transport must agree on, from its name(): the family, with fabric's provider
// ("fabric:efa" and "fabric:tcp;ofi_rxm" cannot talk: their addresses differ) and verbs' SRD mark
// (RC and SRD queue pairs cannot either); not the device ("verbs:mlx5_0" on one rank, "verbs:mlx5_3" on
// another is fine).
std::string transport_kind(const std::string& name);
// Throws unless every rank's transport kind for proxy thread `thread` (kinds[r], from transport_kind) is the same,
// and, past thread 0, the same as this rank's thread 0's (`thread0_kind`): MK_NET=auto may open another transport
// on a later thread (one that opened once and then failed), and the rest of the network layer (its name, the SMs
// it leaves free) goes by thread 0's.
void check_transport_kinds(const std::vector<std::string>& kinds, int rank, int thread,
                           const std::string& thread0_kind);
// The family of a transport's name(): "emu", "fabric", "verbs" (the name without its details).
inline std::string transport_family(const std::string& name) { return name.substr(0, name.find_first_of(" :(")); }
std::string work_queue_warning(const std::string& net_family, bool proxy_calls_cuda, bool mps,
                               const std::optional<std::string>& max_connections);

}  // namespace mk::net
