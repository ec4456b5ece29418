// mkernel fabric backend: libfabric RDM endpoints with RMA (DESIGN.md §5).
//
// One endpoint per transport (FI_EP_RDM: connectionless, the provider keeps
// any per-peer connections), one completion queue for sends, writes and the
// small control messages, one address vector filled from the bootstrap.
//
// Data path (all non-blocking, see src/net/transport.hpp):
//   write        fi_writemsg from the local region into the peer's region
//   signal Set   an 8-byte fi_writemsg into the peer's region 0
//   signal Add   fi_atomic FI_SUM/FI_UINT64 when the provider has FI_ATOMIC
//                for it (fi_query_atomic); otherwise a 32-byte control
//                message that the peer's poll() applies with a host atomic
//                (the documented alternative; see apply_message()).
//   ordering     "ordered" mode: the provider grants the tx msg_order we ask
//                for (WAW, plus SAW when Add is a message) and places the
//                data of a write in order (ep_attr->max_order_waw_size >=
//                the write's size): the signal is posted right behind its
//                data. Otherwise "deferred" mode: the data is posted with
//                FI_DELIVERY_COMPLETE and its signal only once that
//                completion arrives (one extra round trip, always correct).
//   completion   a request (data + signal) yields one Completion with its
//                cookie when every op of it completed.
//   failure      fi_cq_readerr or an op older than MK_NET_TIMEOUT_MS throws
//                mk::Error naming the peer (a dead peer never hangs poll()).
//
// GPU regions: registered directly when the provider has FI_HMEM; otherwise
// STAGED (fabric_stage.hpp): libfabric registers a pinned host shadow of the
// region and peers write into that shadow.
//   sender       a write from a staged region first copies its bytes GPU ->
//                shadow (StageOps::copy_out); staged requests wait in one
//                FIFO (staging_) in post order and are posted from its head
//                once their copy finished (poll() drives it).
//   receiver     a request whose destination region or signal region is
//                staged at the peer carries, instead of its signal, a note
//                (kMsgNote: region, dst_off, bytes, signal) posted exactly
//                like a message Add: ordered behind the data (SAW) or after
//                the data's FI_DELIVERY_COMPLETE. The peer's poll() then
//                has the shadow -> GPU copy and then the signal made
//                (StageOps::deliver: by a delivery agent, one write with its
//                signal, or on one in-order CUDA queue).
//   ordering     note after data (network order or delivery completion),
//                signal after its copy: a staged signal is visible only
//                after its data is in GPU memory.
//   completion   when the data write and the note completed locally (the
//                shadow bytes are no longer needed).
#pragma once

#if defined(MK_NET_HAVE_FABRIC) && !MK_NET_HAVE_FABRIC
#error "a build without the fabric backend (MK_NET_BACKENDS) compiles a file that includes its RDMA header"
#endif

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>

#include "src/net/fabric/fabric_stage.hpp"
#include "src/net/fabric/fi_api.hpp"
#include "src/net/transport.hpp"

namespace mk::net::fabric {

// Test and tuning hooks that are not environment knobs (knobs live only in
// knob_list.inc). make_fabric() uses the defaults.
struct FabricOptions {
  std::optional<std::string> provider;  // overrides MK_FI_PROVIDER
  bool force_deferred_signals = false;  // exercise the deferred path on any provider
  bool disable_atomics = false;         // exercise message-based Add on any provider
  // Info preference when both cannot be had: atomics over ordered signals.
  // Default: atomics first only with a GPU (cuda_device >= 0), because a GPU
  // signal region cannot take a message Add; host-only prefers ordering.
  std::optional<bool> prefer_atomics;
  int max_requests = 0;                 // in-flight request limit; 0 = from the provider
  // GPU side of staging GPU regions (no FI_HMEM). Null: CUDA streams on
  // cfg.cuda_device when that is >= 0 (make_cuda_stage_ops), else none (GPU
  // regions are rejected). Tests pass a host-memory fake.
  std::shared_ptr<StageOps> stage_ops;
};

std::unique_ptr<Transport> make_fabric_with(const TransportConfig& cfg, const FabricOptions& opt);

// Wire format of the control messages: hello at connect, Add without
// atomics, and the staging note (bytes landed in the receiver's host shadow
// of `region` at [dst_off, dst_off + bytes); then apply the signal).
// NOTES: 64 bytes, host byte order (all ranks of a job share an ABI); one
// receive buffer holds exactly one message.
struct CtlMsg {
  uint32_t magic;
  uint8_t type;    // kMsgHello | kMsgAdd | kMsgNote
  uint8_t sig_op;  // kMsgNote: a SigOp (None: data only)
  uint16_t pad0;
  int32_t src_rank;
  int32_t region;   // kMsgNote: destination region of the data (bytes > 0)
  uint64_t sig_off;  // Add, kMsgNote: offset of the signal word in region 0
  uint64_t value;    // Add: the addend; kMsgNote: the signal's value
  uint64_t dst_off;  // kMsgNote
  uint64_t bytes;    // kMsgNote: 0 = signal only (or data went to an unstaged region)
  uint64_t pad1[2];
};
static_assert(sizeof(CtlMsg) == 64, "CtlMsg is a fixed 64-byte wire format");

// The note of a staged request; with_data = the peer's region is staged.
CtlMsg make_note(int src_rank, const WriteReq& w, bool with_data);

class FabricTransport final : public Transport {
 public:
  FabricTransport(const TransportConfig& cfg, const FabricOptions& opt);
  ~FabricTransport() override;

  std::string name() const override { return "fabric:" + prov_name_; }
  // GPU memory staged by the proxy's CUDA copies (MK_FABRIC_STAGE=cuda); by
  // the kernels' delivery agents through this ring (agent) it calls none.
  // Also a GPU signal region registered directly (FI_HMEM): its Adds are
  // provider atomics, which efa and ofi_rxm make with CUDA copies from the
  // progressing thread (this proxy's) of the target.
  bool proxy_calls_cuda() const override { return (stage_ != nullptr && stage_->calls_cuda()) || gpu_atomics_; }
  DeliveryRing delivery_ring() const override { return stage_ ? stage_->delivery_ring() : DeliveryRing{}; }
  // The staging's oldest unfinished copy or delivery (agent staging: who
  // should take it), for the proxy's report.
  std::string in_flight() const override;
  void connect(Bootstrap& bs, const std::vector<int>& peers) override;
  void register_region(Bootstrap& bs, const Region& r) override;
  void deregister_region(int id) override;
  bool post(const WriteReq& w) override;
  int poll(Completion* out, int max) override;
  void close() override;

  // Introspection for tests and logs.
  std::string local_name() const;  // this endpoint's fi_getname bytes
  bool ordered_signals() const { return ordered_; }
  bool native_atomics() const { return atomics_; }
  bool hmem() const { return hmem_; }
  // A control message as if it had just arrived (tests: a note whose timing
  // the network does not let a test choose, e.g. one that comes after its
  // region was deregistered).
  void receive_for_test(const CtlMsg& m) {
    std::lock_guard<std::mutex> lk(mu_);
    apply_message(m);
  }

 private:
  enum class OpKind : uint8_t { Data, Signal, Hello, Recv };
  // NOTES: ctx must stay the first member: libfabric hands back &ctx as
  // op_context and we cast it to Op*. fi_context2 covers FI_CONTEXT and
  // FI_CONTEXT2 modes.
  struct Op {
    struct fi_context2 ctx;
    OpKind kind;
    int index;  // request slot (Data/Signal), hello peer, or receive slot
  };
  struct Req {
    bool in_use = false;
    WriteReq w;
    StagePlan plan;        // staging needs of this request (all false when nothing is staged)
    bool queued = false;   // waits in staging_ (not posted yet)
    bool copying = false;  // its GPU -> shadow copy is in flight
    int ops_pending = 0;          // posted and not yet completed
    bool signal_unposted = false;  // signal still to post (deferred or EAGAIN)
    bool signal_waits_data = false;  // deferred mode: post only after data completes
    std::chrono::steady_clock::time_point t0;
    Op data_op, sig_op;
  };
  struct LocalRegion {
    Region r;
    struct fid_mr* mr = nullptr;
    void* desc = nullptr;
    void* shadow = nullptr;  // staged: the registered pinned host copy (else null)
    uint64_t late_notes = 0;  // deregistered: notes for it dropped since (said at the first)
    // What libfabric reads and peers write: shadow when staged, else r.base.
    char* xfer() const { return static_cast<char*>(shadow ? shadow : r.base); }
  };
  struct RemoteRegion {
    uint64_t addr = 0;  // base address (FI_MR_VIRT_ADDR) or 0 (offset addressing)
    uint64_t key = 0;
    uint64_t bytes = 0;
    bool staged = false;  // the peer stages this region: data needs a note
  };

  // setup (fabric_setup.cpp)
  void open_fabric();
  void take_nearest_nic();  // info_ narrowed to the NIC nearest the GPU (fabric_setup.cpp)
  struct fi_info* pick_info(const std::string& prov, bool want_hmem, bool quiet_enodata);
  struct fid_mr* reg(void* base, size_t bytes, uint64_t access, const Region* dev, void** desc);
  // register_region's own part (checks, shadow, registration; the entry in
  // local_): the blob its peers need (address, key, bytes, staged). Throws
  // with nothing left behind.
  std::string register_local(const Region& r);
  // A region whose registration failed on another rank: its registration and
  // shadow go, its entry stays empty (the id is used up). Under mu_.
  void drop_local(int id);
  void check(int rc, const char* what) const;
  std::string peer_addr_str(const std::string& name) const;
  // data path (fabric_datapath.cpp)
  bool post_locked(const WriteReq& w);
  int start(int idx);
  void advance_staged();
  void apply_note(const CtlMsg& m);
  int post_data(Req& q);
  int post_signal(Req& q);
  void retry_signals();
  void progress();  // one fi_cq_read batch; throws on provider errors
  void on_completion(Op* op);
  void apply_message(const CtlMsg& m);
  void post_recv(int i);
  void check_ages();
  void check_refusal(const WriteReq& w);
  [[noreturn]] void throw_cq_error();
  void check_eq();  // throws an asynchronous error the provider reported on eq_
  uint64_t remote_addr(int peer, int region, uint64_t off) const;
  void finish(int idx);
  bool signal_ordered(const Req& q) const;

  TransportConfig cfg_;
  FabricOptions opt_;
  std::string prov_name_;
  int64_t timeout_ms_ = 10000;
  mutable std::mutex mu_;

  struct fi_info* info_ = nullptr;
  struct fid_fabric* fabric_ = nullptr;
  struct fid_domain* domain_ = nullptr;
  struct fid_ep* ep_ = nullptr;
  struct fid_av* av_ = nullptr;
  struct fid_cq* cq_ = nullptr;
  struct fid_eq* eq_ = nullptr;  // the endpoint's asynchronous errors (null: the provider takes no EQ)
  uint64_t mr_mode_ = 0;
  uint64_t next_key_ = 1;
  bool ordered_ = false;
  bool atomics_ = false;
  bool hmem_ = false;
  bool gpu_atomics_ = false;  // region 0 is GPU memory registered directly: Adds by provider atomics
  size_t max_order_bytes_ = 0;
  bool sig_msg_ordered_ = true;  // message Add may ride the ordered path (FI_ORDER_SAW)
  bool saw_ = false;             // the provider orders sends after writes (notes may ride ordered)
  size_t max_msg_ = 0;
  bool closed_ = false;

  std::vector<fi_addr_t> addr_;  // per global rank; FI_ADDR_NOTAVAIL when not a peer
  std::vector<int> peers_;
  std::vector<LocalRegion> local_;                 // by region id
  std::vector<std::vector<RemoteRegion>> remote_;  // [region][rank]

  // Internal registered scratch: per request slot one 32-byte word for the
  // signal value / Add message, then hello send buffers, then receive buffers.
  std::vector<CtlMsg> scratch_;
  struct fid_mr* scratch_mr_ = nullptr;
  void* scratch_desc_ = nullptr;
  std::vector<Req> reqs_;
  std::vector<int> free_reqs_;
  std::deque<int> unposted_;  // requests whose signal awaits (re)posting
  std::shared_ptr<StageOps> stage_;  // null: nothing can be staged
  // Shadows of regions deregistered with staged copies not confirmed done, that the
  // stage ops did not take over (the CUDA ops, or a failure): freed at close.
  std::vector<void*> kept_shadows_;
  // NOTES: staged requests (copy_out, or a note while older ones wait) in
  // post order; only the head is ever posted, so they leave in post order.
  std::deque<int> staging_;
  std::vector<Op> recv_ops_;
  std::vector<int> unposted_recvs_;
  std::vector<Op> hello_ops_;
  int hellos_sent_done_ = 0;
  std::vector<char> hello_sent_;  // per rank: our hello's send completed (named in the connect timeout if not)
  std::vector<char> hello_from_;  // per rank
  std::deque<Completion> ready_;
  std::chrono::steady_clock::time_point last_age_check_;
  // Per peer: when a write to it last completed an operation (data or signal). check_ages bounds a request from
  // its post or that time, whichever is later: a busy link that completes steadily is not a dead peer (a
  // request queued behind a thousand 16 MiB puts on 10 GbE waits ~14 s), one that completes nothing is.
  std::vector<std::chrono::steady_clock::time_point> peer_progress_;
  std::chrono::steady_clock::time_point refused_since_;  // first refused post since the last one taken ({}: none)
  int scratch_recv_base_ = 0, scratch_hello_base_ = 0;
};

constexpr uint32_t kMsgMagic = 0x6d6b6669;  // "mkfi"
constexpr uint8_t kMsgHello = 1;
constexpr uint8_t kMsgAdd = 2;
constexpr uint8_t kMsgNote = 3;
constexpr int kNumRecv = 64;

}  // namespace mk::net::fabric
