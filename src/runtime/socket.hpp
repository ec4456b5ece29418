// mkernel: small TCP / Unix-socket helpers with deadlines. Every blocking
// call here is bounded by a deadline and throws mk::Error when it passes.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace mk::sock {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

inline Deadline deadline_in_ms(int64_t ms) { return Clock::now() + std::chrono::milliseconds(ms); }
inline int64_t ms_left(Deadline d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d - Clock::now()).count();
}

// Listening TCP socket on all IPv4 interfaces; port 0 picks a free port.
int tcp_listen(int port, int* bound_port);
// Connects to host:port, retrying refused connections (and ones that met themselves) until the deadline, or
// until give_up() says to stop (then it fails at once).
int tcp_connect(const std::string& host, int port, Deadline deadline, const std::function<bool()>& give_up = {});
// Whether a connected TCP socket's two ends are one address and port: a connect to a port of this host in the
// ephemeral range, while nothing listens there, can be given that port as its own and meet itself (TCP
// simultaneous open), and then reads what it writes.
bool connected_to_itself(int fd) noexcept;
// Resolves a host name or dotted quad to an IPv4 address (network order); a lookup still running at the deadline
// fails.
uint32_t resolve_ipv4(const std::string& host, Deadline deadline);
// A name lookup's outcome: rc 0 (and the address set), else getaddrinfo's code; timed_out when the lookup had
// not answered by the deadline (rc EAI_AGAIN then).
struct Lookup {
  int rc = 0;
  bool timed_out = false;
};
// Runs lookup(host, out) on a thread of its own and waits for it until the deadline (getaddrinfo has no
// deadline of its own). The bootstrap passes the system resolver; tests pass slow ones.
Lookup lookup_within(const std::string& host, uint32_t* out, Deadline deadline,
                     int (*lookup)(const std::string&, uint32_t*));
std::string ipv4_to_string(uint32_t addr_net);
// Whether `host` resolves to an address of this host (a socket can be bound to it); false when it does not
// resolve, true when its lookup did not answer by the deadline (cannot tell).
bool is_local_ipv4(const std::string& host, Deadline deadline) noexcept;
// First non-loopback IPv4 address of an up interface, not link-local nor a container / VM bridge unless
// nothing else is up; else 127.0.0.1.
std::string first_ipv4();
// This host's address on the route to `peer` ("" when it does not resolve by the deadline or has no route).
std::string route_source_ipv4(const std::string& peer, Deadline deadline) noexcept;

// Bounded full send/recv. recv_all returns false on orderly EOF before any byte.
void send_all(int fd, const void* data, size_t len, Deadline deadline);
bool recv_all(int fd, void* data, size_t len, Deadline deadline);

void set_nonblocking(int fd, bool on);
void close_fd(int& fd);

}  // namespace mk::sock
