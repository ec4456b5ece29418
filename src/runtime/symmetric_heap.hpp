// mkernel: the symmetric heap behind Communicator::alloc_symmetric.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "mkernel/bootstrap.hpp"
#include "mkernel/symmetric.hpp"
#include "mkernel/topology.hpp"
#include "src/runtime/fd_exchange.hpp"

namespace mk {

class SymmetricHeap {
 public:
  enum class Mode { Vmm, Ipc };
  SymmetricHeap(Bootstrap& bs, const Topology& topo, int device, uint64_t job, const std::string& mode_knob);
  ~SymmetricHeap();

  // Collective over all ranks; sizes must match (checked).
  SymmetricBuffer* alloc(size_t bytes);
  // Collective; first every rank synchronises its GPU and learns whether
  // every rank did (no peer still uses the buffer): a failure on one rank
  // fails the call on every rank, and the buffer stays allocated.
  void free(SymmetricBuffer* buf);
  Mode mode() const { return mode_; }
  size_t bytes() const;  // held now, as mapped

 private:
  struct Alloc;
  void check_budget(size_t mapped) const;
  void vmm_create(Alloc& a, size_t bytes);
  void vmm_share(Alloc& a);
  std::string ipc_create(Alloc& a, size_t bytes);
  void ipc_share(Alloc& a, const std::vector<std::string>& handles);
  void release(Alloc& a);
  void close_ipc_peers(Alloc& a);                            // IPC: this rank's handles to the peers' buffers
  bool ipc_peers_closed_everywhere(const char* when) noexcept;  // a barrier; false (warned) when it failed

  Bootstrap& bs_;
  const Topology& topo_;
  int device_;
  Mode mode_;
  uint64_t next_id_ = 1;
  std::unique_ptr<FdExchange> fdx_;
  std::vector<std::unique_ptr<Alloc>> allocs_;
};

}  // namespace mk
