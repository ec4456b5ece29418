// mkernel: passes file descriptors (CUDA VMM export handles) between the
// processes of one node over abstract-namespace Unix datagram sockets with
// SCM_RIGHTS. Bounded by a deadline like everything else.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace mk {

class FdExchange {
 public:
  FdExchange(uint64_t job, int rank, int64_t timeout_ms);
  ~FdExchange();
  FdExchange(const FdExchange&) = delete;
  FdExchange& operator=(const FdExchange&) = delete;

  // Sends `my_fd` to every rank in `peers` (except this one) and receives one
  // fd from each, for exchange number `tag`. Returns fds by position in
  // `peers` (-1 for this rank). The caller owns (closes) the returned fds.
  // A rank that fails its part (not by waiting for others) tells its
  // peers, which then fail at once naming it (not at the bound).
  std::vector<int> exchange(int my_fd, const std::vector<int>& peers, uint64_t tag);

 private:
  std::vector<int> exchange_or_throw(int my_fd, const std::vector<int>& peers, uint64_t tag, bool& quiet);
  void tell_failed(const std::vector<int>& peers, uint64_t tag) noexcept;
  uint64_t job_;
  int rank_;
  int64_t timeout_ms_;
  int fd_ = -1;
  std::map<std::pair<uint64_t, int>, int> stash_;  // (tag, rank) -> fd received early
};

}  // namespace mk
