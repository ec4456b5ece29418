// The bootstrap's TCP helpers (src/runtime/socket.hpp) apart from the bootstrap: a connection that meets itself;
// a name lookup bounded by the caller's deadline.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "src/runtime/socket.hpp"

namespace {

namespace sock = mk::sock;

// A socket bound to 127.0.0.1:P that connects to 127.0.0.1:P, where nothing listens, meets itself (TCP
// simultaneous open): what a connect to a port of this host in its ephemeral range can be given by chance.
// connected_to_itself() tells it from a connection to a listener.
TEST(Socket, AConnectionThatMetItselfIsTold) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  socklen_t l = sizeof(a);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &l), 0);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0) << "no self-connect on this kernel";
  EXPECT_TRUE(sock::connected_to_itself(fd));
  const char out = 'x';
  char in = 0;
  ASSERT_EQ(::write(fd, &out, 1), 1);
  ASSERT_EQ(::read(fd, &in, 1), 1);
  EXPECT_EQ(in, 'x') << "a self-connected socket reads what it writes";
  ::close(fd);

  int port = 0;
  int lfd = sock::tcp_listen(0, &port);
  const int cfd = sock::tcp_connect("127.0.0.1", port, sock::deadline_in_ms(5000));
  EXPECT_FALSE(sock::connected_to_itself(cfd));
  EXPECT_FALSE(sock::connected_to_itself(lfd)) << "a listening socket has no peer";
  ::close(cfd);
  sock::close_fd(lfd);
}

// A lookup that answers late (a resolver whose servers do not reply: getaddrinfo waits out resolv.conf's
// timeouts) is given up at the caller's deadline, not at the lookup's end; one that answers in time is read. The
// lookup given up ends after the one read (2.5 s against 0.5 s), with an address of its own: written to the
// caller's variable, as a lookup outliving its wait must not, it would be the one left there.
std::atomic<int> g_slow_lookups_ended{0};
int slow_lookup(const std::string& host, uint32_t* out) {
  const bool late = host == "late";
  std::this_thread::sleep_for(std::chrono::milliseconds(late ? 2500 : 500));
  *out = late ? 0x0badbad0u : 0x01020304u;
  g_slow_lookups_ended.fetch_add(1);
  return 0;
}
int quick_lookup(const std::string& host, uint32_t* out) {
  if (host != "known") return EAI_NONAME;
  *out = 0x0a000001u;
  return 0;
}

TEST(Socket, ANameLookupIsBoundedByTheDeadline) {
  const int ended_before = g_slow_lookups_ended.load();
  uint32_t addr = 7;
  const auto t0 = std::chrono::steady_clock::now();
  const sock::Lookup late = sock::lookup_within("late", &addr, sock::deadline_in_ms(200), slow_lookup);
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  EXPECT_TRUE(late.timed_out);
  EXPECT_EQ(late.rc, EAI_AGAIN);
  EXPECT_EQ(addr, 7u) << "a lookup given up must not set the address";
  EXPECT_GE(waited.count(), 190);
  EXPECT_LT(waited.count(), 1500) << "waited for the lookup, not the deadline";

  const sock::Lookup in_time = sock::lookup_within("soon", &addr, sock::deadline_in_ms(5000), slow_lookup);
  EXPECT_FALSE(in_time.timed_out);
  EXPECT_EQ(in_time.rc, 0);
  EXPECT_EQ(addr, 0x01020304u);

  uint32_t other = 9;
  EXPECT_EQ(sock::lookup_within("known", &other, sock::deadline_in_ms(1000), quick_lookup).rc, 0);
  EXPECT_EQ(other, 0x0a000001u);
  const sock::Lookup missing = sock::lookup_within("other", &other, sock::deadline_in_ms(1000), quick_lookup);
  EXPECT_EQ(missing.rc, EAI_NONAME);
  EXPECT_FALSE(missing.timed_out);
  EXPECT_EQ(other, 0x0a000001u);

  // The lookup given up ends by itself later, on its own state: the caller's variable keeps what was read.
  for (int i = 0; i < 200 && g_slow_lookups_ended.load() - ended_before < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(g_slow_lookups_ended.load() - ended_before, 2);
  EXPECT_EQ(addr, 0x01020304u) << "the lookup given up wrote its answer after all";
}

// A dotted quad needs no lookup: it is read even when the deadline has passed.
TEST(Socket, ALiteralAddressNeedsNoLookup) {
  EXPECT_EQ(sock::ipv4_to_string(sock::resolve_ipv4("10.1.2.3", sock::deadline_in_ms(-1))), "10.1.2.3");
  try {
    sock::resolve_ipv4("mk-no-such-host.invalid", sock::deadline_in_ms(5000));
    ADD_FAILURE() << "an .invalid name resolved";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("cannot resolve bootstrap host 'mk-no-such-host.invalid'"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
