// The bootstrap's TCP helpers (src/runtime/socket.hpp) apart from the bootstrap: a connection that meets itself.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

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

}  // namespace
