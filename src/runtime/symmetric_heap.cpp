#include "src/runtime/symmetric_heap.hpp"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "mkernel/error.hpp"
#include "mkernel/knobs.hpp"
#include "src/runtime/cuda_driver.hpp"
#include "src/runtime/device_health.hpp"
#include "src/runtime/step_status.hpp"

namespace mk {

struct SymmetricHeap::Alloc {
  SymmetricBuffer buf;
  size_t mapped = 0;
  CUmemGenericAllocationHandle handle = 0;
  std::vector<CUdeviceptr> va;  // VMM: every mapping we made, by global rank
  size_t gran = 0;               // VMM: the mappings' alignment
  int export_fd = -1;            // VMM: this rank's handle as an fd, until sent to the host's ranks
  bool ipc = false;
  // (release() closes it; this is a second guard)
  ~Alloc() {
    if (export_fd >= 0) ::close(export_fd);
  }
};

namespace {

CUmemAllocationProp vmm_prop(int device) {
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = device;
  p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  int rdma = 0;
  CUdevice dev;
  if (drv::api().cuDeviceGet(&dev, device) == CUDA_SUCCESS)
    drv::api().cuDeviceGetAttribute(&rdma, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, dev);
  p.allocFlags.gpuDirectRDMACapable = rdma ? 1 : 0;
  return p;
}

bool vmm_supported(int device) {
  try {
    CUdevice dev;
    if (drv::api().cuDeviceGet(&dev, device) != CUDA_SUCCESS) return false;
    int vmm = 0, fd = 0;
    drv::api().cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev);
    drv::api().cuDeviceGetAttribute(&fd, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, dev);
    return vmm && fd;
  } catch (const Error&) {
    return false;
  }
}

void map_rw(CUdeviceptr va, size_t size, CUmemGenericAllocationHandle h, int device) {
  MK_CU_CHECK(drv::api().cuMemMap(va, size, 0, h, 0));
  CUmemAccessDesc acc{};
  acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  acc.location.id = device;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  MK_CU_CHECK(drv::api().cuMemSetAccess(va, size, &acc, 1));
}

}  // namespace

SymmetricHeap::SymmetricHeap(Bootstrap& bs, const Topology& topo, int device, uint64_t job,
                             const std::string& mode_knob)
    : bs_(bs), topo_(topo), device_(device) {
  bool vmm_ok = vmm_supported(device);
  if (mode_knob == "vmm" && !vmm_ok)
    fail("MK_SYMM_MODE=vmm but device ", device, " does not export VMM memory as file descriptors");
  // Every rank must use the same mode; agree on the weakest.
  std::string mine = (mode_knob == "ipc" || !vmm_ok) ? "ipc" : "vmm";
  auto all = bs_.allgather(mine, "the symmetric heap's mode");
  mode_ = Mode::Vmm;
  for (auto& m : all)
    if (m == "ipc") mode_ = Mode::Ipc;
  if (mode_ == Mode::Vmm && topo_.host_ranks.size() > 1)  // (the bootstrap's bound: an id's root may lengthen it)
    fdx_ = std::make_unique<FdExchange>(job, topo_.rank, bs_.timeout_ms());
  bs_.barrier("the symmetric heap's set-up");  // every fd-exchange socket is bound before anyone sends
}

SymmetricHeap::~SymmetricHeap() {
  // IPC: every rank closes its handles to the others' buffers before any
  // rank frees its own (ipc_peers_closed_everywhere).
  if (mode_ == Mode::Ipc && !allocs_.empty()) {
    for (auto& a : allocs_) close_ipc_peers(*a);
    if (!ipc_peers_closed_everywhere("the communicator's teardown"))
      for (auto& a : allocs_) a->buf.local = nullptr;  // left to the process's end
  }
  for (auto& a : allocs_) {
    try {
      release(*a);
    } catch (const Error&) {
    }
  }
}

// MK_SYMM_MAX_BYTES: this rank's symmetric memory, with `mapped` more, within it.
void SymmetricHeap::check_budget(size_t mapped) const {
  const int64_t cap = knob_int(Knob::MK_SYMM_MAX_BYTES);
  // (compared without the sum, which a size near 2^64 wraps below any cap)
  if (cap > 0 && (bytes() > static_cast<size_t>(cap) || mapped > static_cast<size_t>(cap) - bytes()))
    fail("MK_SYMM_MAX_BYTES = ", cap, " would be exceeded (", bytes(), " bytes held, ", mapped, " more asked)");
}

// Creates and maps this rank's buffer (nothing shared yet).
void SymmetricHeap::vmm_create(Alloc& a, size_t bytes) {
  const auto& d = drv::api();
  CUmemAllocationProp prop = vmm_prop(device_);
  MK_CU_CHECK(d.cuMemGetAllocationGranularity(&a.gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  if (bytes > SIZE_MAX - a.gran) fail("alloc_symmetric of ", bytes, " bytes: larger than any device memory");
  a.mapped = (bytes + a.gran - 1) / a.gran * a.gran;
  check_budget(a.mapped);
  MK_CU_CHECK(d.cuMemCreate(&a.handle, a.mapped, &prop, 0));
  a.va.assign(topo_.world, 0);
  MK_CU_CHECK(d.cuMemAddressReserve(&a.va[topo_.rank], a.mapped, a.gran, 0, 0));
  map_rw(a.va[topo_.rank], a.mapped, a.handle, device_);
  // The export for the host's other ranks, here in the step whose failure every rank learns of (alloc's first
  // exchange): one rank failing it later, alone, left the others waiting for its fd until the bootstrap bound.
  if (topo_.host_ranks.size() > 1) {
    int fd = -1;
    MK_CU_CHECK(d.cuMemExportToShareableHandle(&fd, a.handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    a.export_fd = fd;
  }
}

// Maps the buffers of every rank on this host: node peers (NVLink peers)
// must map, other ranks of this host (emulated nodes, used only by the emu
// NIC) are mapped when the devices allow it.
void SymmetricHeap::vmm_share(Alloc& a) {
  const auto& d = drv::api();
  const size_t gran = a.gran;
  const int me = topo_.rank;
  const auto& host = topo_.host_ranks;
  if (host.size() == 1) return;

  std::vector<int> fds = fdx_->exchange(a.export_fd, host, a.buf.region.id);  // (exported in vmm_create)
  ::close(a.export_fd);
  a.export_fd = -1;
  // Every received fd is closed exactly once, also when a mapping throws.
  struct CloseAll {
    std::vector<int>& v;
    ~CloseAll() {
      for (int& f : v)
        if (f >= 0) ::close(f), f = -1;
    }
  } close_all{fds};
  for (size_t i = 0; i < host.size(); ++i) {
    const int r = host[i];
    if (r == me) continue;
    const bool must = topo_.same_node(me, r);
    CUmemGenericAllocationHandle ph;
    CUresult res = d.cuMemImportFromShareableHandle(&ph, reinterpret_cast<void*>(static_cast<uintptr_t>(fds[i])),
                                                    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    ::close(fds[i]);
    fds[i] = -1;
    if (res != CUDA_SUCCESS && !must) continue;
    MK_CU_CHECK(res);
    if (const CUresult rr = d.cuMemAddressReserve(&a.va[r], a.mapped, gran, 0, 0); rr != CUDA_SUCCESS) {
      a.va[r] = 0;
      d.cuMemRelease(ph);  // (the imported handle held the peer's memory allocated)
      MK_CU_CHECK(rr);
    }
    try {
      map_rw(a.va[r], a.mapped, ph, device_);
    } catch (const Error&) {
      d.cuMemUnmap(a.va[r], a.mapped);  // (mapped when only the access failed: else an error, ignored)
      d.cuMemAddressFree(a.va[r], a.mapped);
      a.va[r] = 0;
      d.cuMemRelease(ph);
      if (must) throw;
      log(LogLevel::Info, cat("rank ", me, ": no mapping of rank ", r, "'s buffer (no peer access); emu cannot reach it"));
      continue;
    }
    MK_CU_CHECK(d.cuMemRelease(ph));  // the mapping keeps the memory alive
  }
}

// Allocates this rank's buffer; returns its IPC handle's bytes.
std::string SymmetricHeap::ipc_create(Alloc& a, size_t bytes) {
  a.ipc = true;
  if (bytes > SIZE_MAX - 4096) fail("alloc_symmetric of ", bytes, " bytes: larger than any device memory");
  a.mapped = (bytes + 4095) / 4096 * 4096;
  check_budget(a.mapped);
  void* p = nullptr;
  MK_CUDA_CHECK(cudaMalloc(&p, a.mapped));
  a.buf.local = p;
  a.buf.host_peer.assign(topo_.world, nullptr);
  a.buf.host_peer[topo_.rank] = p;
  cudaIpcMemHandle_t h{};
  MK_CUDA_CHECK(cudaIpcGetMemHandle(&h, p));
  return std::string(reinterpret_cast<const char*>(&h), sizeof(h));
}

// Opens the handles of the ranks on this host (`handles`: every rank's, by rank).
void SymmetricHeap::ipc_share(Alloc& a, const std::vector<std::string>& handles) {
  for (int r : topo_.host_ranks) {
    if (r == topo_.rank) continue;
    cudaIpcMemHandle_t ph;
    if (handles[r].size() != sizeof(ph)) fail("alloc_symmetric: rank ", r, " sent a malformed IPC handle");
    std::memcpy(&ph, handles[r].data(), sizeof(ph));
    void* pp = nullptr;
    cudaError_t e = cudaIpcOpenMemHandle(&pp, ph, cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess && !topo_.same_node(topo_.rank, r)) {
      cudaGetLastError();
      continue;
    }
    MK_CUDA_CHECK(e);
    a.buf.host_peer[r] = pp;
  }
}

SymmetricBuffer* SymmetricHeap::alloc(size_t bytes) {
  // Tagged: a rank whose collective call at this point is another one
  // (the ranks' calls out of step) is named as such, not as a size.
  static constexpr char kTag[] = "alloc_symmetric:";
  auto sizes = bs_.allgather(kTag + std::to_string(bytes), "alloc_symmetric: sizes");
  for (int r = 0; r < topo_.world; ++r)
    if (sizes[r].rfind(kTag, 0) != 0)
      fail("alloc_symmetric: rank ", r, " made another collective call at this point (rank ", topo_.rank,
           " is in alloc_symmetric of ", bytes, " bytes): the ranks' collective calls are out of step");
  for (int r = 0; r < topo_.world; ++r)
    if (sizes[r] != sizes[0])
      fail("alloc_symmetric: ranks asked for different sizes (rank 0: ", sizes[0].substr(sizeof(kTag) - 1),
           " bytes, rank ", r, ": ", sizes[r].substr(sizeof(kTag) - 1),
           " bytes); symmetric allocations must be equal on every rank");
  // (after the exchange: a rank asking for 0 alone fails with the others, named, not alone while they wait)
  if (bytes == 0) fail("alloc_symmetric: size must be > 0");
  // Numbered before anything here can throw on one rank alone: the number tags the fd exchange and identifies
  // the buffer in free()'s exchange, so it must advance on every rank alike.
  const auto id = next_id_++;
  // The caller's current device restored at the end; a failed switch to this one is thrown inside the
  // allocation's try below, so that every rank fails at this call with it (not this rank alone, the others
  // left waiting in the exchange until the bootstrap's bound).
  const DeviceScope on(device_, std::nothrow);
  auto a = std::make_unique<Alloc>();
  a->buf.bytes = bytes;
  a->buf.local_rank = topo_.local_rank;
  a->buf.local_size = topo_.local_size;
  a->buf.region.id = id;
  a->buf.region.device = device_;
  // This rank's memory first; then every rank learns whether every rank got
  // its own, before anything is shared: an allocation that fails on one rank
  // (out of memory) fails on every rank at this call, with the same message,
  // so the ranks stay in step (a plan that then throws frees the same buffers
  // on every rank: tp::undo_on_throw).
  using step_status::failed, step_status::kOk, step_status::step_error;
  const std::string call = cat("alloc_symmetric of ", bytes, " bytes");
  // An exchange that throws (a peer gone, or past the bootstrap bound) lets this rank's part go: VMM memory in
  // full (a peer's mapping of it keeps the memory alive), IPC memory but its own buffer, which a peer may have
  // opened from the handle it sent (freed under it, undefined): that stays allocated until the process ends.
  auto exchange = [&](const std::string& answer, const char* step) {
    try {
      return bs_.allgather(answer, step);
    } catch (...) {
      if (a->ipc) {
        close_ipc_peers(*a);
        a->buf.local = nullptr;
      }
      release(*a);
      throw;
    }
  };
  std::string mine = kOk;
  try {
    MK_CUDA_CHECK(cudaSetDevice(device_));
    if (mode_ == Mode::Vmm)
      vmm_create(*a, bytes);
    else
      mine += ipc_create(*a, bytes);
  } catch (const std::exception& e) {
    release(*a);  // (a failed cudaMalloc's error was cleared where it threw: MK_CUDA_CHECK)
    mine = failed(e);
  }
  std::vector<std::string> got = exchange(mine, "alloc_symmetric: allocation");
  std::string err = step_error(got, topo_.rank, call, "could not allocate its part");
  if (!err.empty()) {
    release(*a);
    fail(err);
  }
  got = step_status::payloads(std::move(got));  // (IPC) the handles
  // Then the peers' mappings, the same way: every rank learns whether every
  // rank mapped what it must (the barrier that ended the call before).
  mine = kOk;
  try {
    if (mode_ == Mode::Vmm) {
      vmm_share(*a);
      a->buf.host_peer.assign(topo_.world, nullptr);
      for (int r = 0; r < topo_.world; ++r) a->buf.host_peer[r] = reinterpret_cast<void*>(a->va[r]);
      a->buf.local = a->buf.host_peer[topo_.rank];
      a->buf.region.vmm = true;
    } else {
      ipc_share(*a, got);
    }
    for (int i = 0; i < topo_.local_size; ++i) a->buf.peer[i] = a->buf.host_peer[topo_.node_ranks[topo_.node][i]];
    a->buf.region.base = a->buf.local;
    a->buf.region.bytes = a->mapped;
    // Symmetric memory starts zeroed: signal pools rely on it.
    MK_CUDA_CHECK(cudaMemset(a->buf.local, 0, a->mapped));
    MK_DEVICE_SYNC(cat("rank ", bs_.rank(), ": alloc_symmetric (zeroing the new buffer)"));
  } catch (const std::exception& e) {
    mine = failed(e);
  }
  got = exchange(mine, "alloc_symmetric: mapping");
  err = step_error(got, topo_.rank, call, "could not map its host's buffers");
  if (!err.empty()) {
    if (a->ipc) {  // (every rank is here, with the same error) peers may have opened this rank's handle: as free
      close_ipc_peers(*a);
      if (!ipc_peers_closed_everywhere("alloc_symmetric, failing")) a->buf.local = nullptr;
    }
    release(*a);
    fail(err);
  }
  allocs_.push_back(std::move(a));
  return &allocs_.back()->buf;
}

size_t SymmetricHeap::bytes() const {
  size_t n = 0;
  for (const auto& a : allocs_) n += a->mapped;
  return n;
}

void SymmetricHeap::close_ipc_peers(Alloc& a) {
  if (!a.ipc) return;
  for (size_t r = 0; r < a.buf.host_peer.size(); ++r)
    if (static_cast<int>(r) != topo_.rank && a.buf.host_peer[r]) {
      teardown_call(cudaIpcCloseMemHandle(a.buf.host_peer[r]), "a peer's mapping of a symmetric buffer");
      a.buf.host_peer[r] = nullptr;
    }
}

// CUDA leaves freeing memory that another process still has open through an
// IPC handle undefined: after closing its own handles, a rank waits for every
// rank to have closed theirs before it frees its buffer. False (said in a
// warning) when the exchange failed (a peer gone or stuck): the caller then
// leaves its buffer to the process's end instead of freeing it under a peer.
bool SymmetricHeap::ipc_peers_closed_everywhere(const char* when) noexcept {
  try {
    bs_.barrier("closing IPC peer mappings");
    return true;
  } catch (const std::exception& e) {
    warn_noexcept([&] {
      return cat("rank ", topo_.rank, ": ", when, ": not every rank confirmed it closed its IPC handles to this "
                 "rank's symmetric memory (", error_reason(e), "): it stays allocated until the process ends");
    });
    return false;
  }
}

void SymmetricHeap::release(Alloc& a) {
  if (a.ipc) {
    close_ipc_peers(a);
    if (a.buf.local) teardown_call(cudaFree(a.buf.local), "a symmetric buffer");
  } else {
    const auto& d = drv::api();
    for (CUdeviceptr v : a.va)
      if (v) {
        d.cuMemUnmap(v, a.mapped);
        d.cuMemAddressFree(v, a.mapped);
      }
    if (a.handle) d.cuMemRelease(a.handle);
    if (a.export_fd >= 0) ::close(a.export_fd);
  }
  a = Alloc{};
}

void SymmetricHeap::free(SymmetricBuffer* buf) {
  // (matched by its memory, not by the object's address: SymmetricBuffer is a plain struct, and a copy of the one
  // alloc_symmetric returned, `auto b = comm.alloc_symmetric(n)`, was refused on every rank, the memory then kept
  // until the communicator closed)
  const auto it = std::find_if(allocs_.begin(), allocs_.end(), [&](const auto& a) {
    return &a->buf == buf || (buf->local && a->buf.local == buf->local && a->buf.bytes == buf->bytes);
  });
  // Tagged: a peer in another collective's status step (alloc's, a network registration's plain "ok:") is out
  // of step, not a success. An ok answer carries the buffer's allocation number (the same on every rank: every
  // rank numbers its allocations in the same collective order), so ranks freeing different buffers (another
  // order) fail alike instead of each releasing another.
  constexpr step_status::Tags kFreeTags{"free-ok:", "free-failed:"};
  std::string answer;
  if (it == allocs_.end()) {
    // Still through the exchange: the other ranks, freeing theirs, would wait in it until the bootstrap bound.
    answer = cat(kFreeTags.failed, "its buffer was not allocated by this communicator");
  } else {
    // This rank's GPU (not the caller's current device) is done with it. A
    // failed device (a fatal error) passes no barrier: the buffer stays
    // mapped until the process ends (Communicator::fatal_device_error).
    const cudaError_t e = synchronize_device(device_, cat("rank ", bs_.rank(), ": free_symmetric"));
    if (cuda_error_is_fatal(e)) {
      // The communicator is of no further use: its peers hear it now (their collective steps fail naming this
      // rank) instead of waiting in this exchange until it is destroyed, or the bootstrap bound.
      leave_after_device_failure(bs_, cuda_error_string(e));
      fail("free_symmetric: this rank's device failed (", cuda_error_string(e), "): the buffer is not freed, and the ",
           "other ranks are not waited for");
    }
    if (e == cudaErrorCudartUnloading) MK_CUDA_CHECK(e);  // the process is exiting: its peers may be gone
    // Then every rank learns whether every rank's GPU is done (no peer may
    // still read or write the buffer) before any rank releases it. A sync
    // that failed without taking the device down (a stream capture in
    // progress, say) fails this call on every rank alike, and the buffer
    // stays mapped everywhere (free it again later): a rank that threw alone
    // left its peers in an exchange its next collective call then answered.
    answer = sync_answer(e, kFreeTags);
    if (e == cudaSuccess) answer += std::to_string((*it)->buf.region.id);
  }
  const std::vector<std::string> got = bs_.allgather(answer, "free_symmetric");
  const std::string err = step_status::step_error(
      got, topo_.rank,
      it == allocs_.end() ? std::string("free_symmetric") : cat("free_symmetric of a ", (*it)->mapped, "-byte buffer"),
      "could not finish with it (the buffer stays mapped on every rank)", kFreeTags);
  if (!err.empty()) fail(err);
  const std::vector<std::string> ids = step_status::payloads(got, kFreeTags);
  for (int r = 1; r < topo_.world; ++r)
    if (ids[r] != ids[0])
      fail("free_symmetric: the ranks freed different buffers (rank 0 its allocation #", ids[0], ", rank ", r,
           " its #", ids[r], "); free symmetric buffers in the same order on every rank. None was freed");
  if ((*it)->ipc) {  // every rank's handles to it closed before any rank frees its own
    close_ipc_peers(**it);
    if (!ipc_peers_closed_everywhere("free_symmetric")) (*it)->buf.local = nullptr;
  }
  release(**it);
  allocs_.erase(it);
}

}  // namespace mk
