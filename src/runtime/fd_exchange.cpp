#include "src/runtime/fd_exchange.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
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
  int32_t pad;
};

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

std::vector<int> FdExchange::exchange(int my_fd, const std::vector<int>& peers, uint64_t tag) {
  auto deadline = sock::deadline_in_ms(timeout_ms_);
  // Send to every peer; a peer that has not bound yet is retried.
  for (int p : peers) {
    if (p == rank_) continue;
    Msg m{job_, tag, rank_, 0};
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
      if (sock::ms_left(deadline) <= 0)
        fail("rank ", rank_, ": rank ", p, " never opened its fd-exchange socket (MK_BOOTSTRAP_TIMEOUT_MS)");
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  // Receive one fd from each peer, stashing early arrivals of later tags.
  std::vector<int> out(peers.size(), -1);
  auto missing = [&] {
    std::vector<int> m;
    for (size_t i = 0; i < peers.size(); ++i)
      if (peers[i] != rank_ && out[i] < 0) m.push_back(peers[i]);
    return m;
  };
  auto take = [&](uint64_t t, int r, int fd) {
    for (size_t i = 0; i < peers.size(); ++i)
      if (t == tag && peers[i] == r && out[i] < 0) {
        out[i] = fd;
        return;
      }
    auto& slot = stash_[{t, r}];
    if (slot > 0) ::close(slot);  // a duplicate: keep the newest
    slot = fd;
  };
  for (size_t i = 0; i < peers.size(); ++i) {
    auto it = stash_.find({tag, peers[i]});
    if (it != stash_.end()) {
      out[i] = it->second;
      stash_.erase(it);
    }
  }
  while (!missing().empty()) {
    int64_t left = sock::ms_left(deadline);
    if (left <= 0) {
      std::string s;
      for (int r : missing()) s += cat(s.empty() ? "" : ", ", r);
      fail("rank ", rank_, ": timed out waiting for memory handles from ranks [", s, "] (MK_BOOTSTRAP_TIMEOUT_MS)");
    }
    pollfd pf{fd_, POLLIN, 0};
    if (::poll(&pf, 1, static_cast<int>(std::min<int64_t>(left, 200))) <= 0) continue;
    Msg m{};
    iovec iov{&m, sizeof(m)};
    alignas(cmsghdr) char ctrl[CMSG_SPACE(sizeof(int))] = {};
    msghdr h{};
    h.msg_iov = &iov;
    h.msg_iovlen = 1;
    h.msg_control = ctrl;
    h.msg_controllen = sizeof(ctrl);
    ssize_t n = ::recvmsg(fd_, &h, MSG_CMSG_CLOEXEC);
    cmsghdr* c = n >= 0 ? CMSG_FIRSTHDR(&h) : nullptr;
    int fd = -1;
    if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
    if (n != static_cast<ssize_t>(sizeof(m)) || fd < 0) {
      if (fd >= 0) ::close(fd);  // not one of ours
      continue;
    }
    if (m.job != job_) {
      ::close(fd);
      continue;
    }
    take(m.tag, m.rank, fd);
  }
  return out;
}

}  // namespace mk
