// mkernel fabric backend: provider selection, endpoint setup, address and
// region exchange, teardown. The data path is in fabric_datapath.cpp.
#include <cstdio>
#include <cstring>
#include <exception>
#include <set>
#include <thread>

#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>

#include "mkernel/error.hpp"
#include "mkernel/knobs.hpp"
#include "src/net/fabric/fabric_transport.hpp"
#include "src/net/nic_affinity.hpp"
#include "src/runtime/device_support.hpp"
#include "src/runtime/step_status.hpp"

namespace mk::net::fabric {

namespace {

// Providers that speak IP through the kernel's sockets. When every rank is on
// this host (or no topology is given: tests) they are bound to 127.0.0.1 so
// that test traffic never leaves loopback; otherwise the provider picks its
// interface (libfabric's own FI_TCP_IFACE etc. apply).
bool is_socket_provider(const std::string& prov) {
  std::string core = prov.substr(0, prov.find(';'));
  return core == "tcp" || core == "sockets" || core == "udp" || core == "net";
}

// Unique provider names offering RDM endpoints with RMA here (for errors).
std::string available_providers(const FiApi& fi) {
  struct fi_info* hints = fi.allocinfo();
  if (!hints) return "?";
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_RMA;
  struct fi_info* list = nullptr;
  std::set<std::string> names;
  if (fi.getinfo(kFiVersion, nullptr, nullptr, 0, hints, &list) == 0) {
    for (auto* i = list; i; i = i->next)
      if (i->fabric_attr && i->fabric_attr->prov_name) names.insert(i->fabric_attr->prov_name);
    fi.freeinfo(list);
  }
  fi.freeinfo(hints);
  std::string out;
  for (auto& n : names) out += (out.empty() ? "'" : ", '") + n + "'";
  return out.empty() ? "none" : out;
}

}  // namespace

void FabricTransport::check(int rc, const char* what) const {
  if (rc < 0)
    fail("fabric: rank ", cfg_.rank, ": ", what, " failed: ", fi_api().err(rc), " (provider ", prov_name_,
         ")");
}

// Returns the first fi_info of `prov` that fits, trying the richest variant
// first: with FI_HMEM (only when GPU memory may be registered), with
// FI_ATOMIC, with the tx ordering that lets a signal follow its data without a
// round trip. Returns nullptr when the provider offers nothing at all.
struct fi_info* FabricTransport::pick_info(const std::string& prov, bool want_hmem, bool quiet_enodata) {
  const FiApi& fi = fi_api();
  bool local_only = !cfg_.topo || static_cast<int>(cfg_.topo->host_ranks.size()) == cfg_.world;
  const char* node = (local_only && is_socket_provider(prov)) ? "127.0.0.1" : nullptr;
  // Candidate (atomic, ordered) pairs, best first. tcp;ofi_rxm 1.17 grants
  // FI_ATOMIC (emulated by rxm) or FI_ORDER_WAW, but not both together.
  // Atomics matter only for a GPU signal region registered directly
  // (FI_HMEM); without FI_HMEM GPU regions are staged and their signals are
  // notes (messages), which want ordering (no round trip) instead.
  for (int hmem = want_hmem ? 1 : 0; hmem >= 0; --hmem) {
    bool atomics_first = opt_.prefer_atomics.value_or(cfg_.cuda_device >= 0 && hmem);
    std::vector<std::pair<int, int>> variants =
        atomics_first ? std::vector<std::pair<int, int>>{{1, 1}, {1, 0}, {0, 1}, {0, 0}}
                      : std::vector<std::pair<int, int>>{{1, 1}, {0, 1}, {1, 0}, {0, 0}};
    for (auto [atomic, ordered] : variants) {
      if (atomic && opt_.disable_atomics) continue;
      // A GPU signal region registered directly needs the provider's atomics (register_local refuses it
      // otherwise): without them, the staged variants below serve a GPU job instead.
      if (hmem && !atomic && cfg_.cuda_device >= 0) continue;
      struct fi_info* hints = fi.allocinfo();
      if (!hints) fail("fabric: fi_dupinfo(NULL) failed (out of memory)");
      hints->ep_attr->type = FI_EP_RDM;
      hints->caps = FI_RMA | FI_WRITE | FI_REMOTE_WRITE | FI_MSG | FI_SEND | FI_RECV;
      if (atomic) hints->caps |= FI_ATOMIC;
      if (hmem) hints->caps |= FI_HMEM;
      hints->mode = FI_CONTEXT | FI_CONTEXT2;
      // Every MR mode we handle; the provider clears what it does not need.
      hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY |
                                    FI_MR_ENDPOINT | (hmem ? FI_MR_HMEM : 0);
      // NOTES: post() and poll() run under mu_, so the domain sees one
      // thread at a time.
      hints->domain_attr->threading = FI_THREAD_DOMAIN;
      // WAW orders a signal write/atomic behind the data write; SAW orders
      // an Add control message (no atomics) behind the data write.
      if (ordered) hints->tx_attr->msg_order = FI_ORDER_WAW | (atomic ? 0 : FI_ORDER_SAW);
      hints->fabric_attr->prov_name = strdup(prov.c_str());
      struct fi_info* info = nullptr;
      int rc = fi.getinfo(kFiVersion, node, nullptr, node ? FI_SOURCE : 0, hints, &info);
      fi.freeinfo(hints);
      if (rc == 0 && info) return info;
      if (rc != -FI_ENODATA)
        fail("fabric: fi_getinfo for provider '", prov, "' failed: ", fi.err(rc));
    }
  }
  if (quiet_enodata) return nullptr;
  fail("fabric: provider '", prov, "' offers no RDM endpoint with RMA writes on this host",
       node ? " (bound to 127.0.0.1)" : "", "; available: ", available_providers(fi),
       " (set MK_FI_PROVIDER)");
}

// info_ lists one entry per NIC (domain) the provider offers, its preferred first. Where entries name two or more
// PCI NICs (efa on a host of several), the rank takes the one nearest its GPU (nic_affinity.hpp): every rank on
// the provider's first NIC would share one NIC's bandwidth. Entries without a PCI place keep the provider's order.
void FabricTransport::take_nearest_nic() {
  const FiApi& fi = fi_api();
  std::vector<NicCandidate> cands;
  std::vector<const fi_info*> entry;
  for (const fi_info* i = info_; i; i = i->next) {
    const fi_bus_attr* bus = i->nic ? i->nic->bus_attr : nullptr;
    if (!bus || bus->bus_type != FI_BUS_PCI || !i->domain_attr || !i->domain_attr->name) continue;
    const std::string name = i->domain_attr->name;
    bool dup = false;
    for (const auto& c : cands) dup = dup || c.name == name;
    if (dup) continue;
    const fi_pci_attr& pci = bus->attr.pci;
    char id[32];
    std::snprintf(id, sizeof(id), "%04x:%02x:%02x.%x", pci.domain_id, pci.bus_id, pci.device_id, pci.function_id);
    cands.push_back({name, pci_device_path(id)});
    entry.push_back(i);
  }
  if (cands.size() < 2) return;
  const std::string gpu_path = gpu_pci_path(cfg_.cuda_device);
  const int local = host_index(cfg_);
  const size_t pick = choose_nic(cands, gpu_path, local);
  log(LogLevel::Info, cat("fabric: rank ", cfg_.rank, ": ", nic_choice_line(cands, pick, gpu_path, local)));
  if (entry[pick] == info_) return;
  fi_info* one = fi.dupinfo(entry[pick]);
  if (!one) fail("fabric: fi_dupinfo failed (out of memory)");
  fi.freeinfo(info_);
  info_ = one;
}

FabricTransport::FabricTransport(const TransportConfig& cfg, const FabricOptions& opt)
    : cfg_(cfg), opt_(opt) {
  timeout_ms_ = knob_int(Knob::MK_NET_TIMEOUT_MS);
  try {
    open_fabric();
  } catch (...) {
    close();
    throw;
  }
}

FabricTransport::~FabricTransport() { close(); }

void FabricTransport::open_fabric() {
  const FiApi& fi = fi_api();
  std::string prov = opt_.provider ? *opt_.provider : knob_str(Knob::MK_FI_PROVIDER);
  // With FI_HMEM the NIC writes data and then its signal straight into GPU memory, and a kernel polls the signal:
  // only a GPU that orders GPUDirect RDMA writes for its own kernels (>= owner) sees the data first. No receiving
  // proxy sees these one-sided writes, so none can flush them (as verbs on EFA does: efa_srd.cpp rdma_flush_for):
  // on any other GPU the regions are staged through host memory, whose copies order data before the signal, and
  // the provider is picked for staging (FI_HMEM not asked for: its variant favours atomics over write ordering).
  const bool gpu_ordered = cfg_.cuda_device >= 0 && gpu_orders_rdma_writes(cfg_.cuda_device);
  if (cfg_.cuda_device >= 0 && !gpu_ordered)
    log(LogLevel::Info, cat("fabric: rank ", cfg_.rank, ": GPU ", cfg_.cuda_device, " does not order GPUDirect ",
                            "RDMA writes for its own kernels (cudaDevAttrGPUDirectRDMAWritesOrdering below owner): ",
                            "its regions are staged through host memory, FI_HMEM or not"));
  bool want_hmem = gpu_ordered;
  if (prov.empty()) {
    info_ = pick_info("efa", want_hmem, /*quiet_enodata=*/true);
    if (!info_) info_ = pick_info("tcp;ofi_rxm", want_hmem, false);
  } else {
    info_ = pick_info(prov, want_hmem, false);
  }
  take_nearest_nic();
  prov_name_ = info_->fabric_attr->prov_name ? info_->fabric_attr->prov_name : prov;
  mr_mode_ = info_->domain_attr->mr_mode;
  // (a provider that grants FI_HMEM unasked is not used for GPU memory on a GPU that does not order its writes)
  hmem_ = (info_->caps & FI_HMEM) != 0 && (cfg_.cuda_device < 0 || gpu_ordered);
  max_msg_ = info_->ep_attr->max_msg_size;
  uint64_t order = info_->tx_attr->msg_order;
  ordered_ = !opt_.force_deferred_signals && (order & FI_ORDER_WAW);
  // Data placement order: msg_order orders the ops' processing at the
  // target; max_order_waw_size says up to which size a write's DATA is also
  // placed before a later write's. Larger writes take the deferred path.
  max_order_bytes_ = ordered_ ? info_->ep_attr->max_order_waw_size : 0;

  check(fi.fabric(info_->fabric_attr, &fabric_, nullptr), "fi_fabric");
  check(fi_domain(fabric_, info_, &domain_, nullptr), "fi_domain");
  struct fi_cq_attr cq_attr = {};
  cq_attr.format = FI_CQ_FORMAT_MSG;
  cq_attr.wait_obj = FI_WAIT_NONE;
  cq_attr.size = 0;  // provider default
  check(fi_cq_open(domain_, &cq_attr, &cq_, nullptr), "fi_cq_open");
  struct fi_av_attr av_attr = {};
  av_attr.type = info_->domain_attr->av_type;
  av_attr.count = static_cast<size_t>(cfg_.world);
  check(fi_av_open(domain_, &av_attr, &av_, nullptr), "fi_av_open");
  check(fi_endpoint(domain_, info_, &ep_, nullptr), "fi_endpoint");
  check(fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
  check(fi_ep_bind(ep_, &av_->fid, 0), "fi_ep_bind(av)");
  // An event queue for the endpoint's asynchronous errors (not tied to one
  // of our operations: efa's target-side failures, its receive pool running
  // out). NOTES: efa without a bound EQ prints such an error and calls
  // abort(), so the rank died without the proxy's report; read in
  // check_eq(). A provider that takes no EQ on an RDM endpoint goes on
  // without (its errors come through the CQ).
  {
    struct fi_eq_attr eq_attr = {};
    eq_attr.wait_obj = FI_WAIT_NONE;
    if (fi_eq_open(fabric_, &eq_attr, &eq_, nullptr) != 0) {
      eq_ = nullptr;
    } else if (fi_ep_bind(ep_, &eq_->fid, 0) != 0) {
      fi_close(&eq_->fid);
      eq_ = nullptr;
    }
    if (!eq_) log(LogLevel::Info, cat("fabric: rank ", cfg_.rank, ": ", prov_name_, " takes no event queue on its "
                                      "endpoint: asynchronous errors come only through completions"));
  }
  check(fi_enable(ep_), "fi_enable");

  atomics_ = false;
  if ((info_->caps & FI_ATOMIC) && !opt_.disable_atomics) {
    struct fi_atomic_attr aa = {};
    atomics_ = fi_query_atomic(domain_, FI_UINT64, FI_SUM, &aa, 0) == 0 && aa.count >= 1;
  }
  // A message Add needs SAW for the ordered path; without it Add is deferred.
  if (!atomics_ && !(order & FI_ORDER_SAW)) sig_msg_ordered_ = false;
  saw_ = (order & FI_ORDER_SAW) != 0;
  // Staging of GPU regions (no FI_HMEM): its GPU side is set up now, so the
  // Add kernel is loaded before any user kernel can wait on a signal.
  if (opt_.stage_ops)
    stage_ = opt_.stage_ops;
  else if (cfg_.cuda_device >= 0 && !hmem_)
    stage_ = make_stage_ops(cfg_.cuda_device);  // MK_FABRIC_STAGE

  // Request slots: a request uses up to two tx entries (data + signal); keep
  // headroom for hellos. NOTES: slot count is fixed after this point; ops
  // point into reqs_ and scratch_, which must never reallocate.
  size_t tx = info_->tx_attr->size ? info_->tx_attr->size : 256;
  int n = opt_.max_requests > 0 ? opt_.max_requests : static_cast<int>(std::min<size_t>(1024, tx / 2));
  if (n < 1) n = 1;
  reqs_.resize(n);
  for (int i = n - 1; i >= 0; --i) free_reqs_.push_back(i);
  scratch_hello_base_ = n;
  scratch_recv_base_ = n + cfg_.world;
  scratch_.assign(static_cast<size_t>(n + cfg_.world + kNumRecv), CtlMsg{});
  recv_ops_.resize(kNumRecv);
  hello_ops_.resize(cfg_.world);
  hello_from_.assign(cfg_.world, 0);
  hello_sent_.assign(cfg_.world, 0);
  peer_progress_.assign(cfg_.world, std::chrono::steady_clock::time_point{});
  addr_.assign(cfg_.world, FI_ADDR_NOTAVAIL);
  scratch_mr_ = reg(scratch_.data(), scratch_.size() * sizeof(CtlMsg),
                    FI_SEND | FI_RECV | FI_WRITE | FI_READ, nullptr, &scratch_desc_);
  for (int i = 0; i < kNumRecv; ++i) post_recv(i);
  log(LogLevel::Info, cat("rank ", cfg_.rank, ": fabric provider ", prov_name_, " (", info_->domain_attr->name,
                          "): signals ", ordered_ ? "ordered" : "deferred", ", Add by ",
                          atomics_ ? "fi_atomic" : "message",
                          hmem_ ? ", FI_HMEM" : stage_ ? ", GPU regions staged through host memory" : ", no FI_HMEM"));
}

struct fid_mr* FabricTransport::reg(void* base, size_t bytes, uint64_t access, const Region* dev, void** desc) {
  struct iovec iov = {base, bytes};
  struct fi_mr_attr attr = {};
  attr.mr_iov = &iov;
  attr.iov_count = 1;
  attr.access = access;
  attr.requested_key = (mr_mode_ & FI_MR_PROV_KEY) ? 0 : next_key_++;
  attr.iface = FI_HMEM_SYSTEM;
  if (dev && dev->device) {
    attr.iface = FI_HMEM_CUDA;
    attr.device.cuda = dev->cuda_device;
  }
  struct fid_mr* mr = nullptr;
  int rc = fi_mr_regattr(domain_, &attr, 0, &mr);
  if (rc < 0)
    fail("fabric: rank ", cfg_.rank, ": fi_mr_regattr of ", bytes, " bytes at ", base,
         dev && dev->device ? " (GPU memory)" : "", " failed: ", fi_api().err(rc));
  if (mr_mode_ & FI_MR_ENDPOINT) {
    try {
      check(fi_mr_bind(mr, &ep_->fid, 0), "fi_mr_bind");
      check(fi_mr_enable(mr), "fi_mr_enable");
    } catch (...) {  // (the registration is nobody's yet: closed here, not left over memory the caller frees)
      fi_close(&mr->fid);
      throw;
    }
  }
  *desc = fi_mr_desc(mr);
  return mr;
}

std::string FabricTransport::local_name() const {
  if (!ep_) fail("fabric: rank ", cfg_.rank, ": no endpoint (closed)");
  char name[256];
  size_t len = sizeof(name);
  check(fi_getname(&ep_->fid, name, &len), "fi_getname");
  return std::string(name, len);
}

std::string FabricTransport::peer_addr_str(const std::string& name) const {
  char buf[128] = {};
  size_t len = sizeof(buf);
  const char* s = fi_av_straddr(av_, name.data(), buf, &len);
  return s ? std::string(s) : std::string("?");
}

void FabricTransport::connect(Bootstrap& bs, const std::vector<int>& peers) {
  if (closed_) fail("fabric: connect after close");
  // This rank's endpoint name, or why it has none, through the exchange: every rank fails at once naming it, not
  // its peers after the bootstrap bound.
  const step_status::Tags name_tags{"fabric-name-ok:", "fabric-name-failed:"};
  std::string mine = name_tags.ok;
  try {
    mine += local_name();
  } catch (const std::exception& e) {
    mine = step_status::failed(e, name_tags);
  }
  auto names = bs.allgather(mine, "fabric connect: addresses");
  if (const std::string err = step_status::step_error(names, cfg_.rank, "fabric: connect", "has no endpoint address",
                                                      name_tags);
      !err.empty())
    fail(err);
  names = step_status::payloads(std::move(names), name_tags);
  // The peers' addresses, then an exchange of every rank's outcome (step_status): a rank failing here never
  // sends its hellos, and its peers would wait out MK_NET_TIMEOUT_MS and call it unreachable.
  // (its own tags: a rank at another collective step here, e.g. a registration's "ok:<keys>", reads as out of
  // step, not as connected)
  const step_status::Tags tags{"fabric-connect-ok:", "fabric-connect-failed:"};
  std::string outcome = tags.ok;
  {
    std::lock_guard<std::mutex> lk(mu_);
    try {
      for (int p : peers) {
        if (p < 0 || p >= cfg_.world || p == cfg_.rank)
          fail("fabric: rank ", cfg_.rank, ": connect: bad peer rank ", p, " (world ", cfg_.world, ")");
        if (addr_[p] != FI_ADDR_NOTAVAIL) continue;
        fi_addr_t a = FI_ADDR_NOTAVAIL;
        int rc = fi_av_insert(av_, names[p].data(), 1, &a, 0, nullptr);
        if (rc != 1)
          fail("fabric: rank ", cfg_.rank, ": fi_av_insert of rank ", p, "'s address failed: ",
               rc < 0 ? fi_api().err(rc) : "not inserted");
        addr_[p] = a;
        peers_.push_back(p);
      }
    } catch (const std::exception& e) {
      outcome = step_status::failed(e, tags);
    }
  }
  const std::string err =
      step_status::step_error(bs.allgather(outcome, "fabric connect"), cfg_.rank, "fabric connect",
                              "could not add its peers' addresses", tags);
  if (!err.empty()) fail(err);
  std::lock_guard<std::mutex> lk(mu_);
  // Hello round: RDM providers connect lazily, so a bad or dead peer would
  // otherwise surface only at the first write. Every rank sends one message
  // to each peer and waits (bounded) for its send completions and for a
  // hello from each peer. NOTES: peer lists are symmetric (A lists B iff B
  // lists A); the wait also keeps this rank progressing until every peer's
  // connection to it is up, which manual-progress providers need.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms_);
  for (int p : peers_) {
    CtlMsg& m = scratch_[scratch_hello_base_ + p];
    m = CtlMsg{};
    m.magic = kMsgMagic;
    m.type = kMsgHello;
    m.src_rank = cfg_.rank;
    hello_ops_[p].kind = OpKind::Hello;
    hello_ops_[p].index = p;
    for (;;) {
      ssize_t rc = fi_send(ep_, &m, sizeof(m), scratch_desc_, addr_[p], &hello_ops_[p].ctx);
      if (rc == 0) break;
      if (rc != -FI_EAGAIN) check(static_cast<int>(rc), cat("hello to rank ", p).c_str());
      progress();
      if (std::chrono::steady_clock::now() > deadline)
        fail("fabric: rank ", cfg_.rank, ": connect: rank ", p, " (", peer_addr_str(names[p]),
             ") unreachable: no connection within ", timeout_ms_, " ms (MK_NET_TIMEOUT_MS)");
    }
  }
  for (;;) {
    bool all = hellos_sent_done_ == static_cast<int>(peers_.size());
    for (int p : peers_) all = all && hello_from_[p];
    if (all) break;
    progress();
    if (std::chrono::steady_clock::now() > deadline) {
      std::string missing, unsent;
      for (int p : peers_) {
        const std::string who = cat("rank ", p, " (", peer_addr_str(names[p]), ")");
        if (!hello_from_[p]) missing += cat(missing.empty() ? "" : ", ", who);
        if (!hello_sent_[p]) unsent += cat(unsent.empty() ? "" : ", ", who);
      }
      // (an asymmetric path: a peer's hello came, ours to it never completed: that peer is named too)
      fail("fabric: rank ", cfg_.rank, ": connect: ",
           missing.empty() ? std::string() : cat("no answer from ", missing),
           !missing.empty() && !unsent.empty() ? "; " : "",
           unsent.empty() ? std::string() : cat("this rank's hello to ", unsent, " not delivered"), " within ",
           timeout_ms_, " ms (MK_NET_TIMEOUT_MS); peer unreachable or not running");
    }
    std::this_thread::yield();
  }
}

void FabricTransport::register_region(Bootstrap& bs, const Region& r) {
  if (closed_) fail("fabric: register_region after close");
  // NOTES: this rank's part may fail where the others' do not (a check, the
  // pinned shadow, the memory registration): its answer goes through the same
  // exchange as the others' keys (step_status), so every rank throws the same
  // error at once instead of its peers waiting in the exchange until the
  // bootstrap bound. The id is then used up on every rank alike
  // (Network::register_buffer moves on; ids may skip, never repeat).
  using step_status::kOk;
  std::string mine = kOk;
  bool pushed = false;
  try {
    mine += register_local(r);
    pushed = true;
  } catch (const std::exception& e) {
    mine = step_status::failed(e);
  }
  std::vector<std::string> all;
  std::exception_ptr lost;  // the exchange itself failed (a peer died, the bound ran out): undone as a refusal is
  try {
    all = bs.allgather(mine, "fabric: register_region");
  } catch (...) {
    lost = std::current_exception();
  }
  std::string err = lost ? std::string()
                         : step_status::step_error(all, cfg_.rank, cat("fabric: register_region ", r.id),
                                                   "could not register it");
  if (!lost && err.empty()) {
    all = step_status::payloads(std::move(all));
    for (int p = 0; p < cfg_.world && err.empty(); ++p)
      if (all[p].size() != sizeof(uint64_t) * 4)
        err = cat("fabric: register_region ", r.id, ": rank ", p, " sent a malformed registration");
  }
  std::lock_guard<std::mutex> lk(mu_);
  remote_.resize(local_.size(), std::vector<RemoteRegion>(cfg_.world));  // (empty for an id used up)
  if (lost || !err.empty()) {  // nothing of it stays registered on this rank
    if (pushed) drop_local(r.id);
    if (lost) std::rethrow_exception(lost);
    fail(err);
  }
  for (int p = 0; p < cfg_.world; ++p) {
    uint64_t b[4];
    std::memcpy(b, all[p].data(), sizeof(b));
    remote_[r.id][p] = RemoteRegion{b[0], b[1], b[2], b[3] != 0};
  }
}

void FabricTransport::drop_local(int id) {
  LocalRegion& lr = local_[id];
  if (lr.mr) fi_close(&lr.mr->fid);
  if (lr.shadow) stage_->free_host(lr.shadow);  // (new: no copy or peer has touched it)
  LocalRegion gone;
  gone.r.id = id;
  lr = gone;
}

std::string FabricTransport::register_local(const Region& r) {
  if (r.id < static_cast<int>(local_.size()))
    fail("fabric: rank ", cfg_.rank, ": region id ", r.id, " is taken (registered before, or used up by a failed ",
         "registration; ids are not reused): the next is ", local_.size());
  if (local_.empty() && r.id != kSignalRegion)
    fail("fabric: rank ", cfg_.rank, ": region ", r.id, " before region 0 (signals), which goes first");
  if (!r.base || r.bytes == 0) fail("fabric: rank ", cfg_.rank, ": region ", r.id, " is empty");
  bool staged = r.device && !hmem_;
  if (staged && !stage_)
    fail("fabric: rank ", cfg_.rank, ": region ", r.id, " is GPU memory but provider ", prov_name_,
         " has no FI_HMEM, and this transport has no CUDA device (cuda_device ", cfg_.cuda_device,
         ") to stage it through host memory");
  if (staged && stage_ && !opt_.stage_ops && r.cuda_device != cfg_.cuda_device)
    fail("fabric: rank ", cfg_.rank, ": region ", r.id, " is memory of GPU ", r.cuda_device,
         " but this transport stages through GPU ", cfg_.cuda_device);
  // A staged region's signals are delivered with its data copies
  // (StageOps::deliver: bytes, then signal), which needs the signal words in
  // GPU memory too.
  if (staged && r.id != kSignalRegion && !local_[kSignalRegion].shadow)
    fail("fabric: rank ", cfg_.rank, ": region ", r.id, " is GPU memory staged through host memory, which "
         "needs the signal region (0) in GPU memory as well; it is host memory");
  if (r.id == kSignalRegion && r.device && !staged && !atomics_)
    fail("fabric: rank ", cfg_.rank, ": a GPU signal region needs provider atomics for SigOp::Add, which ",
         prov_name_, " lacks");
  if (r.id == kSignalRegion && r.device && !staged && !gpu_atomics_) {
    // NOTES: not checked on an FI_HMEM provider here (the machines have
    // none): efa's and ofi_rxm's atomics on device memory copy the word to
    // the host and back with CUDA (a synchronous copy unless gdrcopy), on
    // the target's progress thread, so a kernel of the target waiting for
    // that Add on a stream the copy must wait for (the legacy stream, a
    // shared hardware queue) waits until its bound; and they are atomic
    // only per memory registration. Counted as a proxy that calls CUDA,
    // which Network's warnings tell users about.
    gpu_atomics_ = true;
    log(LogLevel::Info, cat("fabric: rank ", cfg_.rank, ": signal Adds into GPU memory go through ", prov_name_,
                            "'s atomics on FI_HMEM memory (made with CUDA copies by efa and ofi_rxm)"));
  }
  LocalRegion lr;
  lr.r = r;
  if (staged) {
    // NOTES: the shadow is registered as host memory and freed only at the
    // region's deregistration or at close() (StageOps::retire says when);
    // peers write into it, the GPU region is reached only through StageOps
    // copies.
    lr.shadow = stage_->alloc_host(r.bytes);
    try {
      lr.mr = reg(lr.shadow, r.bytes, FI_WRITE | FI_READ | FI_REMOTE_WRITE | FI_REMOTE_READ, nullptr, &lr.desc);
    } catch (...) {
      stage_->free_host(lr.shadow);
      throw;
    }
  } else {
    lr.mr = reg(r.base, r.bytes, FI_WRITE | FI_READ | FI_REMOTE_WRITE | FI_REMOTE_READ, &r, &lr.desc);
  }
  const uint64_t key = fi_mr_key(lr.mr);
  if (key == FI_KEY_NOTAVAIL) {
    fi_close(&lr.mr->fid);
    if (lr.shadow) stage_->free_host(lr.shadow);
    fail("fabric: rank ", cfg_.rank, ": provider ", prov_name_, " returned no key for region ", r.id,
         " (raw keys are not supported)");
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    local_.resize(r.id);  // (empty entries for ids used up by failed registrations)
    local_.push_back(lr);
  }
  const uint64_t blob[4] = {(mr_mode_ & FI_MR_VIRT_ADDR) ? reinterpret_cast<uint64_t>(lr.xfer()) : 0, key,
                            static_cast<uint64_t>(r.bytes), staged ? 1u : 0u};
  return std::string(reinterpret_cast<const char*>(blob), sizeof(blob));
}

void FabricTransport::deregister_region(int id) {
  std::lock_guard<std::mutex> lk(mu_);
  if (closed_) return;
  if (id == kSignalRegion) fail("fabric: rank ", cfg_.rank, ": region 0 (signals) cannot be deregistered");
  if (id < 0 || id >= static_cast<int>(local_.size()))
    fail("fabric: rank ", cfg_.rank, ": deregister_region: region ", id, " was never registered");
  LocalRegion& lr = local_[id];
  if (!lr.mr) return;  // already
  // No GPU copy may touch the shadow any more. Deliveries from it that no
  // kernel's agent made (data no kernel of this rank waited for) are dropped,
  // or a later kernel's agent would copy them into the region's former GPU
  // memory. The shadow goes now, or (agents) at a later deregistration or at
  // close once a copy an agent had begun is done, or (CUDA copies not done in
  // time) at close.
  StageOps::Retired ret;
  if (lr.shadow && stage_) ret = stage_->retire(lr.shadow, lr.r.bytes);
  if (ret.dropped)
    log(LogLevel::Warn, cat("fabric: rank ", cfg_.rank, ": region ", id, " deregistered with ", ret.dropped,
                            " staged deliveries into it that no kernel of this rank took (data that arrived and that "
                            "no kernel waited for: a peer ran an op that this rank did not, or a peer's op timed out "
                            "or was aborted): dropped, with their signals"));
  if (lr.shadow && !ret.freeable && !ret.deferred)
    log(LogLevel::Warn, cat("fabric: rank ", cfg_.rank, ": region ", id, " deregistered with staged copies not confirmed done",
                            stage_->describe(), "; its pinned shadow (", lr.r.bytes, " bytes) is kept until close",
                            stage_->calls_cuda() ? " (MK_FABRIC_STAGE=cuda: copies already queued on the proxy's "
                                                   "streams still land in the region's GPU memory when they run)"
                                                 : ""));
  fi_close(&lr.mr->fid);
  lr.mr = nullptr;
  lr.desc = nullptr;
  if (lr.shadow && ret.freeable) stage_->free_host(lr.shadow);
  if (lr.shadow && !ret.freeable && !ret.deferred) kept_shadows_.push_back(lr.shadow);
  lr.shadow = nullptr;
  lr.r.base = nullptr;
  lr.r.bytes = 0;  // post() and incoming notes see an empty region
  for (RemoteRegion& rr : remote_[id]) rr = RemoteRegion{};
}

void FabricTransport::close() {
  std::lock_guard<std::mutex> lk(mu_);
  if (closed_) return;
  closed_ = true;
  // GPU copies that read or fill shadows finish first. MRs bound to the
  // endpoint go next, then the endpoint and what it is bound to; shadows are
  // freed only once no peer can write into them. Errors on teardown are
  // ignored: close never throws.
  if (stage_ && !stage_->drain())
    log(LogLevel::Warn, cat("fabric: rank ", cfg_.rank, ": closed with staged copies not made", stage_->describe(),
                            stage_->calls_cuda() ? " (queued on the proxy's CUDA streams, they did not run within 1 s)"
                                                 : " (no kernel running a delivery agent took them)"));
  for (auto& lr : local_)
    if (lr.mr) fi_close(&lr.mr->fid), lr.mr = nullptr;
  if (scratch_mr_) fi_close(&scratch_mr_->fid), scratch_mr_ = nullptr;
  if (ep_) fi_close(&ep_->fid), ep_ = nullptr;
  if (eq_) fi_close(&eq_->fid), eq_ = nullptr;
  if (av_) fi_close(&av_->fid), av_ = nullptr;
  if (cq_) fi_close(&cq_->fid), cq_ = nullptr;
  if (domain_) fi_close(&domain_->fid), domain_ = nullptr;
  if (fabric_) fi_close(&fabric_->fid), fabric_ = nullptr;
  if (info_) fi_api().freeinfo(info_), info_ = nullptr;
  for (auto& lr : local_)
    if (lr.shadow) stage_->free_host(lr.shadow), lr.shadow = nullptr;
  for (void* p : kept_shadows_) stage_->free_host(p);  // no kernel may run an agent after close
  kept_shadows_.clear();
  if (stage_) stage_->free_retired();  // shadows retired earlier whose last copies are done
  staging_.clear();
  stage_.reset();
}

std::unique_ptr<Transport> make_fabric_with(const TransportConfig& cfg, const FabricOptions& opt) {
  if (cfg.world < 1 || cfg.rank < 0 || cfg.rank >= cfg.world)
    fail("fabric: bad rank ", cfg.rank, " / world ", cfg.world);
  fi_api();  // throws "... libfabric ..." when the library cannot be loaded
  return std::make_unique<FabricTransport>(cfg, opt);
}

}  // namespace mk::net::fabric

namespace mk::net {

std::unique_ptr<Transport> make_fabric(const TransportConfig& cfg) {
  return fabric::make_fabric_with(cfg, fabric::FabricOptions{});
}

}  // namespace mk::net
