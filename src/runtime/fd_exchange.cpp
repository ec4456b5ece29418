#include "src/runtime/fd_exchange.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "mkernel/error.hpp"
#include "src/runtime/socket.hpp"

namespace mk {

namespace {

struct Msg {
  uint64_t job;
  uint64_t tag;
  int32_t rank;
  int32_t failed;  // kFailed, and no fd: the sender failed its part of exchange `tag` (its own error says why)
};
constexpr int32_t kFailed = 1;

socklen_t make_addr(sockaddr_un& a, uint64_t job, int rank) {
  std::memset(&a, 0, sizeof(a));
  a.sun_family = AF_UNIX;
  std::string name = cat("mkernel.", std::hex, job, ".", std::dec, rank);
  // Abstract namespace: leading NUL, no file on disk, gone with the process.
  std::memcpy(a.sun_path + 1, name.data(), name.size());
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
}

}  // namespace

FdExchange::FdExchange(uint64_t job, int rank, int64_t timeout_ms)
    : job_(job), rank_(rank), timeout_ms_(timeout_ms) {
  fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) fail("socket(AF_UNIX): ", std::strerror(errno));
  sockaddr_un a;
  socklen_t len = make_addr(a, job_, rank_);
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), len) != 0) {
    int e = errno;
    sock::close_fd(fd_);
    fail("rank ", rank_, ": cannot bind the fd-exchange socket: ", std::strerror(e));
  }
}

FdExchange::~FdExchange() {
  for (auto& [k, fd] : stash_) ::close(fd);
  sock::close_fd(fd_);
}

// Tells every peer that this rank failed its part of exchange `tag` (no fd): they fail at once naming it instead of
// waiting for its handle until the bound. Best effort, a few ms at most (a peer not bound or with a full queue
// then finds out at its bound).
void FdExchange::tell_failed(const std::vector<int>& peers, uint64_t tag) noexcept {
  const auto deadline = sock::deadline_in_ms(20);
  for (int p : peers) {
    if (p == rank_) continue;
    Msg m{job_, tag, rank_, kFailed};
    sockaddr_un a;
    const socklen_t len = make_addr(a, job_, p);
    while (::sendto(fd_, &m, sizeof(m), MSG_NOSIGNAL | MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&a), len) < 0 &&
           (errno == EAGAIN || errno == EINTR) && sock::ms_left(deadline) > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

std::vector<int> FdExchange::exchange(int my_fd, const std::vector<int>& peers, uint64_t tag) {
  // quiet: this rank failed waiting for others (a peer's notice; the bound, which its peers reach too): it tells
  // no one, or they would name it and not the rank that failed or never came.
  bool quiet = false;
  try {
    return exchange_or_throw(my_fd, peers, tag, quiet);
  } catch (...) {
    if (!quiet) tell_failed(peers, tag);
    throw;
  }
}

std::vector<int> FdExchange::exchange_or_throw(int my_fd, const std::vector<int>& peers, uint64_t tag,
                                               bool& quiet) {
  auto deadline = sock::deadline_in_ms(timeout_ms_);
  // Received fds by position in `peers`; closed on every way out but the
  // return (a peer's exported handle left open keeps its GPU memory
  // allocated after cuMemRelease).
  struct Received {
    std::vector<int> fds;
    bool kept = false;
    ~Received() {
      if (!kept)
        for (int& fd : fds) sock::close_fd(fd);
    }
  } got{std::vector<int>(peers.size(), -1)};
  std::vector<int>& out = got.fds;
  auto missing = [&] {
    std::vector<int> m;
    for (size_t i = 0; i < peers.size(); ++i)
      if (peers[i] != rank_ && out[i] < 0) m.push_back(peers[i]);
    return m;
  };
  // An fd for this exchange, one for a later tag (a peer ahead: stashed), or
  // one for an earlier tag (an exchange that failed here: closed).
  auto take = [&](uint64_t t, int r, int fd) {
    if (t == tag)
      for (size_t i = 0; i < peers.size(); ++i)
        if (peers[i] == r && out[i] < 0) {
          out[i] = fd;
          return;
        }
    if (t <= tag) {
      ::close(fd);  // late for an exchange that is over, or a duplicate
      return;
    }
    auto [it, fresh] = stash_.emplace(std::make_pair(t, r), fd);
    if (!fresh) {  // a duplicate: keep the newest
      ::close(it->second);
      it->second = fd;
    }
  };
  for (auto it = stash_.begin(); it != stash_.end();) {  // earlier arrivals: this tag's taken, older ones closed
    if (it->first.first > tag) {
      ++it;
      continue;
    }
    take(it->first.first, it->first.second, it->second);
    it = stash_.erase(it);
  }
  // One datagram in, if one comes within `wait_ms`: false when none did.
  auto receive_one = [&](int64_t wait_ms) {
    pollfd pf{fd_, POLLIN, 0};
    if (::poll(&pf, 1, static_cast<int>(wait_ms)) <= 0) return false;
    Msg m{};
    iovec iov{&m, sizeof(m)};
    alignas(cmsghdr) char ctrl[CMSG_SPACE(sizeof(int))] = {};
    msghdr h{};
    h.msg_iov = &iov;
    h.msg_iovlen = 1;
    h.msg_control = ctrl;
    h.msg_controllen = sizeof(ctrl);
    ssize_t n = ::recvmsg(fd_, &h, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0) return false;
    cmsghdr* c = CMSG_FIRSTHDR(&h);
    int fd = -1;
    if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
    if (h.msg_flags & MSG_CTRUNC) {
      if (fd >= 0) ::close(fd);
      fail("rank ", rank_, ": a memory handle from a peer was dropped in transit (MSG_CTRUNC: this process is "
           "at its open-file limit? RLIMIT_NOFILE)");
    }
    if (n == static_cast<ssize_t>(sizeof(m)) && fd < 0 && m.job == job_ && m.failed == kFailed) {
      // (another exchange's notice is dropped: an earlier one's is over; a later one's cannot come today, as a
      // bootstrap step lies between two exchanges, and would leave that exchange to its bound)
      if (m.tag == tag) {
        quiet = true;
        fail("rank ", rank_, ": rank ", m.rank, " failed its part of this memory-handle exchange (its own error "
             "says why)");
      }
      return true;
    }
    if (n != static_cast<ssize_t>(sizeof(m)) || fd < 0 || m.job != job_) {
      if (fd >= 0) ::close(fd);  // not one of ours
      return true;
    }
    take(m.tag, m.rank, fd);
    return true;
  };
  // Send to every peer; a peer that has not bound yet, or whose queue is
  // full, is retried. NOTES: this rank's own queue is drained meanwhile: with
  // every rank of a host sending before receiving, more ranks than a
  // datagram queue holds (net.unix.max_dgram_qlen, 10 by default) left each
  // sender waiting on a receiver that waited to send (13 ranks a host).
  for (int p : peers) {
    if (p == rank_) continue;
    Msg m{job_, tag, rank_, 0};  // (failed 0: a handle)
    iovec iov{&m, sizeof(m)};
    alignas(cmsghdr) char ctrl[CMSG_SPACE(sizeof(int))] = {};
    msghdr h{};
    sockaddr_un a;
    h.msg_namelen = make_addr(a, job_, p);
    h.msg_name = &a;
    h.msg_iov = &iov;
    h.msg_iovlen = 1;
    h.msg_control = ctrl;
    h.msg_controllen = sizeof(ctrl);
    cmsghdr* c = CMSG_FIRSTHDR(&h);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &my_fd, sizeof(int));
    while (::sendmsg(fd_, &h, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
      if (errno != ECONNREFUSED && errno != ENOENT && errno != EAGAIN && errno != EINTR)
        fail("rank ", rank_, ": sending a memory handle to rank ", p, " failed: ", std::strerror(errno));
      if (sock::ms_left(deadline) <= 0) {
        quiet = true;
        fail("rank ", rank_, ": rank ", p, " never opened its fd-exchange socket, or never took what it was sent "
             "(MK_BOOTSTRAP_TIMEOUT_MS)");
      }
      receive_one(2);  // (or a 2 ms pause)
    }
  }
  // Receive one fd from each peer.
  while (!missing().empty()) {
    int64_t left = sock::ms_left(deadline);
    if (left <= 0) {
      quiet = true;
      std::string s;
      for (int r : missing()) s += cat(s.empty() ? "" : ", ", r);
      fail("rank ", rank_, ": timed out waiting for memory handles from ranks [", s, "] (MK_BOOTSTRAP_TIMEOUT_MS)");
    }
    receive_one(std::min<int64_t>(left, 200));
  }
  got.kept = true;
  return out;
}

}  // namespace mk
