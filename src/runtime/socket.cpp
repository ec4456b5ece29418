#include "src/runtime/socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>

#include "mkernel/error.hpp"

namespace mk::sock {

void set_nonblocking(int fd, bool on) {
  int fl = fcntl(fd, F_GETFL, 0);
  fcntl(fd, F_SETFL, on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK));
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

int tcp_listen(int port, int* bound_port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail("socket(): ", std::strerror(errno));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    int e = errno;
    ::close(fd);
    fail("bootstrap root cannot listen on TCP port ", port, ": ", std::strerror(e),
         e == EADDRINUSE ? " (another job uses it: set MK_BOOTSTRAP_PORT; or another process of this job claims "
                           "rank 0 too: check each process's RANK)" : "");
  }
  if (::listen(fd, 1024) != 0) {
    int e = errno;
    ::close(fd);
    fail("listen(): ", std::strerror(e));
  }
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  if (bound_port) *bound_port = ntohs(a.sin_port);
  return fd;
}

namespace {
// The system resolver's answer for a host name: 0 and *out set, or getaddrinfo's code.
int system_lookup(const std::string& host, uint32_t* out) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || !res) return rc != 0 ? rc : EAI_NONAME;
  *out = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr.s_addr;
  freeaddrinfo(res);
  return 0;
}

// A host name's lookup, after the literal forms (an IPv6 literal fails here).
Lookup resolve_rc(const std::string& host, uint32_t* out, Deadline deadline) {
  in_addr a{};
  if (inet_pton(AF_INET, host.c_str(), &a) == 1) {
    *out = a.s_addr;
    return {};
  }
  in6_addr a6{};
  const bool bracketed = host.size() > 2 && host.front() == '[' && host.back() == ']';
  const std::string bare = bracketed ? host.substr(1, host.size() - 2) : host;
  if (inet_pton(AF_INET6, bare.c_str(), &a6) == 1)
    fail("bootstrap host '", host, "' is an IPv6 address; the bootstrap is IPv4 only: set MK_BOOTSTRAP_ADDR (or "
         "MASTER_ADDR) to an IPv4 address or a host name with one");
  return lookup_within(host, out, deadline, system_lookup);
}

std::string lookup_error(const std::string& host, const Lookup& l) {
  return l.timed_out ? cat("the lookup of '", host, "' did not answer before the deadline")
                     : std::string(gai_strerror(l.rc));
}
}  // namespace

Lookup lookup_within(const std::string& host, uint32_t* out, Deadline deadline,
                     int (*lookup)(const std::string&, uint32_t*)) {
  // getaddrinfo has no timeout of its own: the resolver's (resolv.conf's timeout x attempts x servers, 30 s and
  // more) would bound the wait instead of the caller's deadline. The lookup runs on a thread of its own; one
  // that outlives the deadline is left to end by itself, holding only its shared state (a library unloaded
  // meanwhile would lose its code: ctypes and the C++ users keep it loaded). glibc's getaddrinfo_a would do
  // the same with its own thread, but needs glibc 2.34 wherever the library loads and cannot cancel a running
  // lookup either.
  struct Shared {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    int rc = 0;
    uint32_t addr = 0;
  };
  auto sh = std::make_shared<Shared>();
  try {
    std::thread([sh, host, lookup] {
      uint32_t addr = 0;
      int rc = EAI_FAIL;
      try {
        rc = lookup(host, &addr);
      } catch (...) {
      }
      std::lock_guard<std::mutex> g(sh->m);
      sh->rc = rc;
      sh->addr = addr;
      sh->done = true;
      sh->cv.notify_all();
    }).detach();
  } catch (const std::system_error&) {  // no thread to be had: the lookup runs here, unbounded
    Lookup l;
    l.rc = lookup(host, out);
    return l;
  }
  std::unique_lock<std::mutex> lk(sh->m);
  Lookup l;
  if (!sh->cv.wait_until(lk, deadline, [&] { return sh->done; })) {
    l.rc = EAI_AGAIN;
    l.timed_out = true;
    return l;
  }
  l.rc = sh->rc;
  if (l.rc == 0) *out = sh->addr;
  return l;
}

uint32_t resolve_ipv4(const std::string& host, Deadline deadline) {
  uint32_t out = 0;
  const Lookup l = resolve_rc(host, &out, deadline);
  if (l.rc != 0) fail("cannot resolve bootstrap host '", host, "': ", lookup_error(host, l));
  return out;
}

bool is_local_ipv4(const std::string& host, Deadline deadline) noexcept {
  try {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    const Lookup l = resolve_rc(host, &sa.sin_addr.s_addr, deadline);
    if (l.timed_out) return true;  // cannot tell: say nothing (the caller's own error stands)
    if (l.rc != 0) return false;
    sa.sin_port = 0;
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return true;  // cannot tell: say nothing
    const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0 || errno != EADDRNOTAVAIL;
    ::close(fd);
    return ok;
  } catch (...) {
    return false;
  }
}

std::string ipv4_to_string(uint32_t addr_net) {
  char buf[INET_ADDRSTRLEN] = {};
  in_addr a{};
  a.s_addr = addr_net;
  inet_ntop(AF_INET, &a, buf, sizeof(buf));
  return buf;
}

std::string first_ipv4() {
  // Skips what other hosts cannot reach: link-local addresses (169.254/16) and the bridges and virtual links
  // of containers and VMs (docker*, br-*, veth*, virbr*, as NCCL's default NCCL_SOCKET_IFNAME skips docker);
  // one of those only if nothing else is up.
  ifaddrs* ifs = nullptr;
  std::string out = "127.0.0.1", fallback;
  if (getifaddrs(&ifs) != 0) return out;
  for (ifaddrs* i = ifs; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    if (!(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK)) continue;
    const uint32_t a = ntohl(reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr);
    const std::string name = i->ifa_name ? i->ifa_name : "", addr = ipv4_to_string(htonl(a));
    const bool virt = (a >> 16) == 0xA9FE || name.rfind("docker", 0) == 0 || name.rfind("br-", 0) == 0 ||
                      name.rfind("veth", 0) == 0 || name.rfind("virbr", 0) == 0;
    if (!virt) {
      out = addr;
      fallback.clear();
      break;
    }
    if (fallback.empty()) fallback = addr;
  }
  freeifaddrs(ifs);
  return fallback.empty() ? out : fallback;
}

std::string route_source_ipv4(const std::string& peer, Deadline deadline) noexcept {
  try {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = resolve_ipv4(peer, deadline);
    sa.sin_port = htons(9);  // any port: a UDP connect only picks the route, nothing is sent
    int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return "";
    sockaddr_in me{};
    socklen_t len = sizeof(me);
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0 &&
                    ::getsockname(fd, reinterpret_cast<sockaddr*>(&me), &len) == 0;
    ::close(fd);
    return ok && me.sin_addr.s_addr != 0 ? ipv4_to_string(me.sin_addr.s_addr) : "";
  } catch (...) {
    return "";
  }
}

bool connected_to_itself(int fd) noexcept {
  sockaddr_in me{}, peer{};
  socklen_t lm = sizeof(me), lp = sizeof(peer);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&me), &lm) != 0) return false;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &lp) != 0) return false;
  return me.sin_family == AF_INET && peer.sin_family == AF_INET && me.sin_port == peer.sin_port &&
         me.sin_addr.s_addr == peer.sin_addr.s_addr;
}

int tcp_connect(const std::string& host, int port, Deadline deadline, const std::function<bool()>& give_up) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  std::string last = "no attempt";
  int backoff_ms = 5;
  bool resolved = false;
  while (true) {
    // The root's host name is resolved in the loop: a name whose record comes after the ranks start (a
    // Kubernetes headless service, a fresh Slurm node) is retried like a root not listening yet, until the
    // deadline, which bounds each lookup too.
    if (!resolved) {
      const Lookup l = resolve_rc(host, &a.sin_addr.s_addr, deadline);
      const int rc = l.rc;
      if (rc != 0 && rc != EAI_AGAIN && rc != EAI_NONAME && rc != EAI_FAIL)  // (EAI_FAIL: a DNS server failure)
        fail("cannot resolve bootstrap host '", host, "': ", gai_strerror(rc));
      resolved = rc == 0;
      if (!resolved) {
        if (ms_left(deadline) <= 0)
          fail("could not resolve the bootstrap root's host '", host, "' before the deadline (last error: ",
               lookup_error(host, l), "): check MK_BOOTSTRAP_ADDR / MASTER_ADDR (MK_BOOTSTRAP_TIMEOUT_MS)");
        std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(200, ms_left(deadline) + 1)));
        continue;
      }
    }
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) fail("socket(): ", std::strerror(errno));
    set_nonblocking(fd, true);
    int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int64_t left = std::max<int64_t>(0, ms_left(deadline));
      int pr = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
      if (pr == 1) {
        socklen_t l = sizeof(err);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l);
      } else {
        err = ETIMEDOUT;
      }
    }
    const bool met_itself = err == 0 && connected_to_itself(fd);  // retried: the root listens there soon
    if (met_itself) err = EADDRINUSE;
    if (err == 0) {
      set_nonblocking(fd, false);
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      return fd;
    }
    ::close(fd);
    last = met_itself ? "the connection met itself: the root's port is in this host's ephemeral range and "
                        "the root did not listen yet"
                      : std::strerror(err);
    if (give_up && give_up()) fail("stopped connecting to bootstrap root ", host, ":", port, " (", last, ")");
    if (ms_left(deadline) <= 0)
      fail("could not connect to bootstrap root ", host, ":", port, " before the deadline (last error: ",
           last, "); is rank 0 / the get_unique_id() process running? (MK_BOOTSTRAP_TIMEOUT_MS)");
    std::this_thread::sleep_for(std::chrono::milliseconds(backoff_ms));
    backoff_ms = std::min(backoff_ms * 2, 200);
  }
}

namespace {
void wait_fd(int fd, short events, Deadline deadline, const char* what) {
  while (true) {
    int64_t left = ms_left(deadline);
    if (left <= 0) fail("socket ", what, " timed out");
    pollfd p{fd, events, 0};
    int pr = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (pr > 0) return;
    if (pr < 0 && errno != EINTR) fail("poll(): ", std::strerror(errno));
  }
}
}  // namespace

void send_all(int fd, const void* data, size_t len, Deadline deadline) {
  auto p = static_cast<const char*>(data);
  while (len > 0) {
    wait_fd(fd, POLLOUT, deadline, "send");
    ssize_t n = ::send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      fail("send(): ", std::strerror(errno), " (peer gone?)");
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
}

bool recv_all(int fd, void* data, size_t len, Deadline deadline) {
  auto p = static_cast<char*>(data);
  size_t got = 0;
  while (got < len) {
    wait_fd(fd, POLLIN, deadline, "receive");
    ssize_t n = ::recv(fd, p + got, len - got, MSG_DONTWAIT);
    if (n == 0) {
      if (got == 0) return false;
      fail("connection closed in the middle of a message");
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      fail("recv(): ", std::strerror(errno));
    }
    got += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace mk::sock
