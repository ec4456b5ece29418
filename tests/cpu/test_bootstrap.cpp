// Bootstrap with real processes (fork) on loopback: 2-8 ranks, the unique-id
// and launcher paths, and every failure the rendezvous must name instead of
// hanging: a rank that never comes, a root that never comes, a rank that
// dies, a rank that is late to a collective, a rank with the wrong world.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <set>
#include <thread>

#include "mkernel/bootstrap.hpp"
#include "mkernel/error.hpp"
#include "src/runtime/socket.hpp"
#include "tests/cpu/bootstrap_wire.hpp"

using namespace mk;

namespace {

struct Proc {
  int code = -1;  // exit code; -1 = killed (hang)
  std::string out;
};

using Publish = std::function<void(const std::string&)>;
using Body = std::function<int(int rank, const std::string& shared, const Publish& publish, std::string& out)>;

std::string read_fd_until(int fd, std::chrono::milliseconds limit) {
  std::string s;
  auto end = std::chrono::steady_clock::now() + limit;
  char buf[4096];
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()).count();
    if (left <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) break;
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    s.append(buf, n);
  }
  return s;
}

// The job's id: made and published by rank 0 (run_ranks with rank0_publishes), received by the others.
UniqueId rank0_id(int r, const std::string& shared, const Publish& publish) {
  if (r != 0) return UniqueId::from_hex(shared);
  const UniqueId id = get_unique_id();
  publish(id.to_hex());
  return id;
}

// Forks one process per present rank. Rank 0 starts first and may publish a
// string (the unique id) that the others receive. Each process reports an
// exit code and a message; a process still alive after `limit` is killed and
// reported with code -1 (a hang).
std::vector<Proc> run_ranks(int world, const std::set<int>& absent, bool rank0_publishes, const Body& body,
                            std::chrono::milliseconds limit = std::chrono::milliseconds(30000)) {
  std::vector<pid_t> pids(world, -1);
  std::vector<int> outs(world, -1);
  std::string shared;
  auto spawn = [&](int r) {
    int out[2], pub[2];
    EXPECT_EQ(pipe(out), 0);
    EXPECT_EQ(pipe(pub), 0);
    pid_t pid = fork();
    if (pid == 0) {
      close(out[0]);
      close(pub[0]);
      std::string msg;
      int code = 1;
      try {
        Publish publish = [&](const std::string& s) {
          (void)!write(pub[1], s.data(), s.size());
          close(pub[1]);
        };
        code = body(r, shared, publish, msg);
      } catch (const std::exception& e) {
        msg = std::string("uncaught: ") + e.what();
        code = 2;
      }
      (void)!write(out[1], msg.data(), msg.size());
      _exit(code);
    }
    close(out[1]);
    close(pub[1]);
    pids[r] = pid;
    outs[r] = out[0];
    return pub[0];
  };
  if (!absent.count(0)) {
    int pubfd = spawn(0);
    if (rank0_publishes) shared = read_fd_until(pubfd, std::chrono::milliseconds(10000));
    close(pubfd);
  }
  for (int r = 1; r < world; ++r)
    if (!absent.count(r)) close(spawn(r));

  std::vector<Proc> res(world);
  auto end = std::chrono::steady_clock::now() + limit;
  for (int r = 0; r < world; ++r) {
    if (pids[r] < 0) continue;
    int status = 0;
    while (true) {
      pid_t w = waitpid(pids[r], &status, WNOHANG);
      if (w == pids[r]) {
        res[r].code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      if (std::chrono::steady_clock::now() > end) {
        kill(pids[r], SIGKILL);
        waitpid(pids[r], &status, 0);
        res[r].code = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    res[r].out = read_fd_until(outs[r], std::chrono::milliseconds(100));
    close(outs[r]);
  }
  return res;
}

// Expects an mk::Error containing all needles; returns 0 if so.
int expect_error_in(const std::function<void()>& f, std::initializer_list<std::string> needles, std::string& out) {
  try {
    f();
    out = "no error";
    return 1;
  } catch (const Error& e) {
    out = e.what();
    for (auto& n : needles)
      if (out.find(n) == std::string::npos) {
        out = "missing '" + n + "' in: " + out;
        return 1;
      }
    return 0;
  }
}

// expect_error_in, and the error must come within `max_s` seconds.
int expect_error_within(double max_s, const std::function<void()>& f, std::initializer_list<std::string> needles,
                        std::string& out) {
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = expect_error_in(f, needles, out);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (rc == 0 && s > max_s) return out = "the error came after " + std::to_string(s) + " s: " + out, 1;
  return rc;
}

int check_collectives(Bootstrap& b, std::string& out) {
  const int W = b.world(), r = b.rank();
  auto all = b.allgather(std::string(static_cast<size_t>(r), 'x') + std::to_string(r));
  if (static_cast<int>(all.size()) != W) return out = "wrong allgather size", 1;
  for (int i = 0; i < W; ++i)
    if (all[i] != std::string(static_cast<size_t>(i), 'x') + std::to_string(i))
      return out = "allgather slot " + std::to_string(i) + " = " + all[i], 1;
  std::string bc = b.broadcast(r == W - 1 ? "from-last" : "ignored", W - 1);
  if (bc != "from-last") return out = "broadcast gave " + bc, 1;
  for (int i = 0; i < 20; ++i) b.barrier();
  auto again = b.allgather(std::to_string(r * 7));
  for (int i = 0; i < W; ++i)
    if (again[i] != std::to_string(i * 7)) return out = "second allgather wrong", 1;
  return 0;
}

int free_port() {
  int port = 0;
  int fd = sock::tcp_listen(0, &port);
  sock::close_fd(fd);
  return port;
}

void set_env_launch(int rank, int world, int port) {
  setenv("RANK", std::to_string(rank).c_str(), 1);
  setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MK_BOOTSTRAP_PORT", std::to_string(port).c_str(), 1);
  setenv("MASTER_PORT", "1", 1);
}

void expect_all(const std::vector<Proc>& res, const std::set<int>& absent = {}) {
  for (size_t r = 0; r < res.size(); ++r) {
    if (absent.count(static_cast<int>(r))) continue;
    EXPECT_EQ(res[r].code, 0) << "rank " << r << (res[r].code == -1 ? " HUNG" : "") << ": " << res[r].out;
  }
}

// W ranks joined through the launcher variables (a process each, MK_BOOTSTRAP_TIMEOUT_MS = timeout_ms), each then
// running body with its bootstrap; every rank's body must return 0.
using JoinedBody = std::function<int(int rank, Bootstrap& b, std::string& out)>;
void expect_joined(int world, const char* timeout_ms, const JoinedBody& body,
                   std::chrono::milliseconds limit = std::chrono::milliseconds(30000)) {
  const int port = free_port();
  auto res = run_ranks(world, {}, false, [&](int r, const std::string&, const Publish&, std::string& out) {
    setenv("MK_BOOTSTRAP_TIMEOUT_MS", timeout_ms, 1);
    set_env_launch(r, world, port);
    Bootstrap b(*detect_launch());
    return body(r, b, out);
  }, limit);
  expect_all(res);
}

}  // namespace

// The addresses a unique id may carry: the route's source towards a peer, the first usable interface.
TEST(Socket, LocalAddressChoice) {
  EXPECT_EQ(sock::route_source_ipv4("127.0.0.1", sock::deadline_in_ms(5000)), "127.0.0.1");
  const std::string first = sock::first_ipv4();
  EXPECT_NE(first.rfind("169.254.", 0), 0u) << "a link-local address: " << first;
  EXPECT_TRUE(sock::is_local_ipv4(first, sock::deadline_in_ms(5000))) << first;
  EXPECT_TRUE(sock::is_local_ipv4("127.0.0.1", sock::deadline_in_ms(5000)));
  EXPECT_FALSE(sock::is_local_ipv4("192.0.2.1", sock::deadline_in_ms(5000)));  // TEST-NET-1: never this host
  for (const char* v6 : {"::1", "[fe80::1]", "2001:db8::7"}) {  // said at once, not a failed name lookup
    try {
      sock::resolve_ipv4(v6, sock::deadline_in_ms(5000));
      ADD_FAILURE() << v6 << " resolved";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("IPv4 only"), std::string::npos) << e.what();
    }
  }
}

TEST(UniqueId, HexRoundTripAndBadInput) {
  UniqueId id;
  for (size_t i = 0; i < sizeof(id.bytes); ++i) id.bytes[i] = static_cast<uint8_t>(i * 37);
  auto back = UniqueId::from_hex(id.to_hex());
  EXPECT_EQ(0, memcmp(back.bytes, id.bytes, sizeof(id.bytes)));
  EXPECT_THROW(UniqueId::from_hex("abc"), Error);
  EXPECT_THROW(UniqueId::from_hex(std::string(256, 'z')), Error);
  UniqueId zero;
  EXPECT_THROW(Bootstrap(0, 2, zero), Error);
}

// An id whose root bound (bytes 16-19: get_unique_id's MK_BOOTSTRAP_TIMEOUT_MS) is past the knob's range is not
// one get_unique_id made: refused, not taken as a wait of ~50 days on every collective.
TEST(UniqueId, AnIdCarryingABoundPastTheKnobsRangeIsRefused) {
  const UniqueId good = get_unique_id();
  UniqueId bad = good;
  const uint32_t huge = 0xffffffffu;
  std::memcpy(bad.bytes + 16, &huge, sizeof huge);
  EXPECT_THROW(Bootstrap(0, 1, bad), Error);
  Bootstrap ok(0, 1, good);  // (the root get_unique_id started is used and closed)
  EXPECT_LE(ok.timeout_ms(), 86400000);
}

class BootstrapWorld : public ::testing::TestWithParam<int> {};

TEST_P(BootstrapWorld, UniqueIdPath) {
  const int W = GetParam();
  auto res = run_ranks(W, {}, true, [&](int r, const std::string& shared, const Publish& publish, std::string& out) {
    const UniqueId id = rank0_id(r, shared, publish);
    Bootstrap b(r, W, id);
    return check_collectives(b, out);
  });
  expect_all(res);
}

TEST_P(BootstrapWorld, LauncherEnvPath) {
  const int W = GetParam();
  const int port = free_port();
  auto res = run_ranks(W, {}, false, [&](int r, const std::string&, const Publish&, std::string& out) {
    set_env_launch(r, W, port);
    auto li = detect_launch();
    if (!li || li->root_port != port) return out = "launch not detected", 1;
    Bootstrap b(*li);
    return check_collectives(b, out);
  });
  expect_all(res);
}

INSTANTIATE_TEST_SUITE_P(Ranks, BootstrapWorld, ::testing::Values(2, 3, 5, 8));

TEST(BootstrapFailure, MissingRankIsNamedWithinTheBound) {
  const int W = 4;
  auto t0 = std::chrono::steady_clock::now();
  auto res = run_ranks(W, {2}, true, [&](int r, const std::string& shared, const Publish& publish, std::string& out) {
    setenv("MK_BOOTSTRAP_TIMEOUT_MS", "1500", 1);
    const UniqueId id = rank0_id(r, shared, publish);
    return expect_error_in([&] { Bootstrap b(r, W, id); }, {"timed out", "ranks [2] of 4"}, out);
  });
  auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  expect_all(res, {2});
  EXPECT_LT(secs, 6.0) << "the error must come soon after MK_BOOTSTRAP_TIMEOUT_MS (1.5 s)";
}

// A rank whose own MK_BOOTSTRAP_TIMEOUT_MS is shorter than the root's waits as long as the root does (the id
// carries the root's bound): a rank late to join, still within the root's bound, does not make it give up and
// blame the root (before: rank 1 failed after its own 0.2 s + 5 s of grace, and rank 0 then with it).
TEST(BootstrapWorldAgain, ARankWithAShorterBoundWaitsAsLongAsTheIdsRoot) {
  const int W = 3;
  auto res = run_ranks(W, {}, true, [&](int r, const std::string& shared, const Publish& publish, std::string& out) {
    setenv("MK_BOOTSTRAP_TIMEOUT_MS", r == 1 ? "200" : "9000", 1);
    const UniqueId id = rank0_id(r, shared, publish);
    if (r == 2) std::this_thread::sleep_for(std::chrono::milliseconds(6000));  // past rank 1's 0.2 s + 5 s
    Bootstrap b(r, W, id);
    return check_collectives(b, out);
  }, std::chrono::milliseconds(30000));
  expect_all(res);
}

TEST(BootstrapFailure, SeveralMissingRanksOnTheLauncherPath) {
  const int W = 6;
  const int port = free_port();
  auto res = run_ranks(W, {1, 4}, false, [&](int r, const std::string&, const Publish&, std::string& out) {
    setenv("MK_BOOTSTRAP_TIMEOUT_MS", "1200", 1);
    set_env_launch(r, W, port);
    return expect_error_in([&] { Bootstrap b(*detect_launch()); }, {"ranks [1, 4] of 6"}, out);
  });
  expect_all(res, {1, 4});
}

TEST(BootstrapFailure, MissingRootIsReported) {
  const int W = 3;
  const int port = free_port();
  auto t0 = std::chrono::steady_clock::now();
  auto res = run_ranks(W, {0}, false, [&](int r, const std::string&, const Publish&, std::string& out) {
    setenv("MK_BOOTSTRAP_TIMEOUT_MS", "1000", 1);
    set_env_launch(r, W, port);
    return expect_error_in([&] { Bootstrap b(*detect_launch()); },
                           {"rank " + std::to_string(r) + " of 3: could not connect to bootstrap root", "127.0.0.1"},
                           out);
  });
  expect_all(res, {0});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 6.0);
}

TEST(BootstrapFailure, DeadRankIsNamed) {
  const int W = 3;
  expect_joined(W, "5000", [&](int r, Bootstrap& b, std::string& out) {
    if (r == 1) _exit(0);  // dies without closing
    // (with the step it names: "rank R (in <step>): ...")
    return expect_error_in([&] { b.allgather("x", "the test's exchange"); },
                           {"rank " + std::to_string(r) + " (in the test's exchange): ", "rank 1 disconnected"}, out);
  });
}

TEST(BootstrapFailure, LateRankInACollectiveIsNamed) {
  const int W = 3;
  expect_joined(W, "800", [&](int r, Bootstrap& b, std::string& out) {
    b.barrier();
    if (r == 2) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2500));
      return expect_error_in([&] { b.barrier("the late step"); }, {"mkernel:"}, out);  // the job already failed
    }
    // (the root's message names the step, as the waiting ranks called it)
    return expect_error_in([&] { b.barrier("the late step"); },
                           {"collective #1 ('the late step'): timed out", "ranks [2]"}, out);
  });
}

// Ranks whose collective #N is not the same step (one freeing a buffer while another makes a plan) fail at once,
// every one of them, with both steps named: before, they exchanged each other's data.
TEST(BootstrapFailure, RanksInDifferentStepsFailAtOnceNamingBoth) {
  const int W = 3;
  expect_joined(W, "20000", [&](int r, Bootstrap& b, std::string& out) {
    b.allgather("same", "a first exchange");
    if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the others arrive first
    return expect_error_within(3.0, [&] { b.allgather("x", r == 1 ? "free_symmetric" : "AgGemm's plan check"); },
                               {"collective #1: ranks called different collectives: rank ", "'AgGemm's plan check'",
                                "'free_symmetric'"}, out);  // (whichever came first is named first)
  });
}

// An unnamed collective (Bootstrap::barrier() without a step) against a named one is a difference too.
TEST(BootstrapFailure, AnUnnamedCollectiveAgainstANamedOneFails) {
  const int W = 2;
  expect_joined(W, "20000", [&](int r, Bootstrap& b, std::string& out) {
    if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    return expect_error_within(3.0, [&] { r == 0 ? b.barrier() : b.barrier("the network's set-up"); },
                               {"ranks called different collectives", "an unnamed collective",
                                "'the network's set-up'"}, out);
  });
}

// Bootstrap::abort (a rank whose device failed): ranks waiting in a
// collective fail at once with the reason, naming the rank that left.
TEST(BootstrapFailure, AbortEndsTheOthersCollectivesWithTheReason) {
  const int W = 3;
  expect_joined(W, "20000", [&](int r, Bootstrap& b, std::string& out) {
    b.barrier();
    if (r == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the others wait in the barrier
      b.abort("its device failed (test)");
      return 0;
    }
    return expect_error_within(3.0, [&] { b.barrier(); }, {"rank 1 left the job", "its device failed (test)"}, out);
  });
}

// A broadcast root out of range on one rank: every rank fails at once naming it (before, that rank threw alone
// and the others waited for it until the bound).
TEST(BootstrapFailure, ABadBroadcastRootOnOneRankFailsEveryRankAtOnce) {
  expect_joined(2, "20000", [&](int r, Bootstrap& b, std::string& out) {
    if (r == 1) return expect_error_within(3.0, [&] { b.broadcast("x", 5); }, {"broadcast root 5"}, out);
    return expect_error_within(3.0, [&] { b.broadcast("x", 0); }, {"rank 1", "broadcast root 5"}, out);
  });
}

// A root-hosting rank that aborts while no other rank is in a collective
// returns at once: close() would wait for every rank to leave (here 2.5 s;
// up to MK_BOOTSTRAP_TIMEOUT_MS when a rank is stuck in its own wait). The
// others' next collective fails.
TEST(BootstrapFailure, AbortingRootHostDoesNotWaitForTheOthersToLeave) {
  const int W = 3;
  expect_joined(W, "20000", [&](int r, Bootstrap& b, std::string& out) {
    b.barrier();
    if (r == 0) {
      const auto t0 = std::chrono::steady_clock::now();
      b.abort("its device failed (test)");
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (s > 1.5) return out = "abort() took " + std::to_string(s) + " s", 1;
      return 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    return expect_error_within(2.0, [&] { b.barrier(); }, {"mkernel: rank "}, out);
  });
}

// A root that stops answering (rank 0's process frozen: SIGSTOP) cannot name
// anyone itself: the other ranks' own bound ends their collective with an
// error that says it was the root, and which collective.
TEST(BootstrapFailure, FrozenRootIsNamedByTheOthers) {
  const int W = 2;
  const int port = free_port();
  auto res = run_ranks(
      W, {}, false,
      [&](int r, const std::string&, const Publish&, std::string& out) {
        setenv("MK_BOOTSTRAP_TIMEOUT_MS", "500", 1);
        set_env_launch(r, W, port);
        Bootstrap b(*detect_launch());
        const auto pids = b.allgather(std::to_string(getpid()));
        if (r == 0) {
          // Frozen, its root thread too; first give that thread time to send collective #0's result to rank 1
          // (it serves the ranks one after another).
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          raise(SIGSTOP);
          return 0;
        }
        const int rc = expect_error_in([&] { b.barrier(); }, {"collective #1", "the root", "rank 0"}, out);
        kill(static_cast<pid_t>(std::stoi(pids[0])), SIGKILL);
        return rc;
      },
      std::chrono::milliseconds(20000));
  EXPECT_EQ(res[0].code, 128 + SIGKILL) << "rank 0 was frozen, then killed by rank 1";
  EXPECT_EQ(res[1].code, 0) << res[1].out;
}

// Rank 0 whose MASTER_ADDR is not its own host (here: an address nobody answers) cannot reach the root it
// started: it fails within the bound instead of waiting forever for that root, which no rank ever joins.
TEST(BootstrapFailure, RankZeroThatCannotReachItsOwnRootFailsWithinTheBound) {
  const int port = free_port();
  auto t0 = std::chrono::steady_clock::now();
  auto res = run_ranks(2, {1}, false, [&](int r, const std::string&, const Publish&, std::string& out) {
    setenv("MK_BOOTSTRAP_TIMEOUT_MS", "1000", 1);
    set_env_launch(r, 2, port);
    setenv("MASTER_ADDR", "192.0.2.1", 1);  // TEST-NET-1: never this host
    return expect_error_in([&] { Bootstrap b(*detect_launch()); }, {"192.0.2.1", "not an address of this host"},
                           out);
  }, std::chrono::milliseconds(15000));
  expect_all(res, {1});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
}

// Another program listening on the root's port (e.g. another job's store on a derived port): it accepts and
// never answers. The rank's error names itself, the address, the port and the phase, not just "socket
// receive timed out".
TEST(BootstrapFailure, AForeignListenerOnTheRootPortIsNamed) {
  int port = 0;
  int foreign = sock::tcp_listen(0, &port);  // accepts into its backlog, never answers
  auto t0 = std::chrono::steady_clock::now();
  auto res = run_ranks(2, {0}, false, [&](int r, const std::string&, const Publish&, std::string& out) {
    setenv("MK_BOOTSTRAP_TIMEOUT_MS", "300", 1);
    set_env_launch(r, 2, port);  // (MK_BOOTSTRAP_PORT)
    return expect_error_in([&] { Bootstrap b(*detect_launch()); },
                           {"rank 1 of 2", "rendezvous with the bootstrap root at 127.0.0.1:" + std::to_string(port),
                            "failed after connecting"},
                           out);
  }, std::chrono::milliseconds(15000));
  sock::close_fd(foreign);
  expect_all(res, {0});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
}

// A job whose ranks make a second bootstrap from the same launch variables, one rank leaving the first late:
// the others' second connections must reach rank 0's new root, not the first root (which still serves the
// late rank) answering "already joined".
TEST(BootstrapWorldAgain, ASecondBootstrapFromTheSameLaunchJoinsTheNewRoot) {
  const int W = 3;
  const int port = free_port();
  auto res = run_ranks(W, {}, false, [&](int r, const std::string&, const Publish&, std::string& out) {
    setenv("MK_BOOTSTRAP_TIMEOUT_MS", "8000", 1);
    set_env_launch(r, W, port);
    {
      Bootstrap first(*detect_launch());
      if (check_collectives(first, out)) return 1;
      if (r == 2) std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // leaves the first one late
    }
    Bootstrap second(*detect_launch());
    return check_collectives(second, out);
  });
  expect_all(res);
}

TEST(BootstrapFailure, WrongWorldSizeIsRejected) {
  // Another world size makes another job id: the root turns that process away saying what it claimed, and the
  // job's timeout names the turned-away process beside the rank it waited for.
  const int port = free_port();
  auto res = run_ranks(2, {}, false, [&](int r, const std::string&, const Publish&, std::string& out) {
    setenv("MK_BOOTSTRAP_TIMEOUT_MS", "1000", 1);
    set_env_launch(r, 2, port);
    LaunchInfo li = *detect_launch();
    if (r == 1) {
      li.world = 3;  // disagrees with rank 0
      return expect_error_in([&] { Bootstrap b(li); }, {"rejected", "it says rank 1 of 3"}, out);
    }
    return expect_error_in([&] { Bootstrap b(li); },
                           {"ranks [1] of 2", "turned away a process meanwhile", "it says rank 1 of 3"}, out);
  });
  expect_all(res);
}

// A process of an older build (bootstrap frames "MKBT", before the step names rode along) is turned away,
// not read as wrong data: the join timeout names it beside the rank the job waited for.
TEST(BootstrapFailure, AnOlderBuildsProcessIsNamedInTheJoinTimeout) {
  const int port = free_port();
  auto res = run_ranks(2, {}, false, [&](int r, const std::string&, const Publish&, std::string& out) {
    setenv("MK_BOOTSTRAP_TIMEOUT_MS", "1000", 1);
    set_env_launch(r, 2, port);
    if (r == 1) {  // an old build's hello: its magic, then rank 1 of 2
      const int fd = mk::sock::tcp_connect("127.0.0.1", port, mk::sock::deadline_in_ms(5000));
      const uint32_t head[4] = {0x4d4b4254u, 1u, 1u, 2u};
      char frame[40] = {};
      std::memcpy(frame, head, sizeof(head));
      mk::sock::send_all(fd, frame, sizeof(frame), mk::sock::deadline_in_ms(1000));
      char c;
      pollfd p{fd, POLLIN, 0};
      ::poll(&p, 1, 3000);  // the root closes it
      const bool closed = (p.revents & (POLLIN | POLLHUP)) && ::recv(fd, &c, 1, 0) <= 0;
      ::close(fd);
      return closed ? 0 : (out = "the root did not close an old build's connection", 1);
    }
    return expect_error_in([&] { Bootstrap b(*detect_launch()); },
                           {"ranks [1] of 2", "turned away a process meanwhile",
                            "a process of an older mkernel build (another bootstrap protocol) tried to join"}, out);
  });
  expect_all(res);
}

// Rank 0's process hosts the root, so its close waits (bounded) for the other ranks to close: it says so
// while it waits, and names the ranks it stops waiting for.
TEST(BootstrapClose, TheRootsHostSaysWhoItWaitsForAtClose) {
  const int W = 2;
  const int port = free_port();
  auto res = run_ranks(W, {}, false, [&](int r, const std::string&, const Publish&, std::string& out) {
    setenv("MK_BOOTSTRAP_TIMEOUT_MS", "2000", 1);
    set_env_launch(r, W, port);
    if (r == 1) {
      Bootstrap b(*detect_launch());
      if (check_collectives(b, out)) return 1;
      std::this_thread::sleep_for(std::chrono::milliseconds(3000));  // closes after the root's host stopped waiting
      return 0;
    }
    testing::internal::CaptureStderr();  // (mk::log writes to the descriptor: gtest redirects it)
    double close_s = 0;
    {
      Bootstrap b(*detect_launch());
      if (check_collectives(b, out)) {
        (void)testing::internal::GetCapturedStderr();
        return 1;
      }
      const auto t0 = std::chrono::steady_clock::now();
      b.close();
      close_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    const std::string log = testing::internal::GetCapturedStderr();
    if (close_s < 1.5 || close_s > 4.0) return out = "close took " + std::to_string(close_s) + " s; log: " + log, 1;
    for (const char* needle : {"process hosting the bootstrap root closed its communicator and waits for ranks [1] "
                               "to close theirs",
                               "ranks [1] had not closed their communicators"})
      if (log.find(needle) == std::string::npos) return out = std::string("missing '") + needle + "' in: " + log, 1;
    return 0;
  });
  expect_all(res);
}

// Two processes of one job claiming one rank: the job cannot start, and every rank hears it at once (not as a
// join timeout).
TEST(BootstrapFailure, ADuplicateRankFailsTheJobAtOnce) {
  const int W = 3;
  const int port = free_port();
  auto res = run_ranks(W, {}, false, [&](int r, const std::string&, const Publish&, std::string& out) {
    setenv("MK_BOOTSTRAP_TIMEOUT_MS", "8000", 1);
    set_env_launch(r == 2 ? 1 : r, W, port);  // ranks 1 and 2 both say rank 1
    return expect_error_within(4.0, [&] { Bootstrap b(*detect_launch()); },
                               {"rank 1 already joined (two processes claim the same rank)"}, out);
  });
  expect_all(res);
}

namespace {
// Two ranks on the unique-id path: rank 0 makes the id, runs `first` against its root (0: go on), then publishes
// the id; both join and check the collectives.
void expect_join_after(const char* timeout_ms, const std::function<int(const UniqueId&, std::string&)>& first) {
  auto res = run_ranks(2, {}, true, [&](int r, const std::string& shared, const Publish& publish, std::string& out) {
    setenv("MK_BOOTSTRAP_TIMEOUT_MS", timeout_ms, 1);
    if (r == 1) {
      Bootstrap b(r, 2, UniqueId::from_hex(shared));
      return check_collectives(b, out);
    }
    const UniqueId id = get_unique_id();
    if (const int rc = first(id, out)) return rc;
    publish(id.to_hex());
    Bootstrap b(r, 2, id);
    return check_collectives(b, out);
  });
  expect_all(res);
}
}  // namespace

// A connection that never says hello (a port scan, a health check) before the job's ranks come: the join bound
// must not start from it, and the root must not end (before 2026-12-06 it ended quietly one bound after that
// connection, and the ranks then could not connect). The root closes the connection after the bound.
TEST(BootstrapJoin, AConnectionThatNeverSaysHelloNeitherStartsNorEndsTheRoot) {
  expect_join_after("500", [](const UniqueId& id, std::string& out) {
    const int stray = test::connect_to_ids_root(id);
    pollfd p{stray, POLLIN, 0};
    const auto t0 = std::chrono::steady_clock::now();
    ::poll(&p, 1, 3000);  // the root closes it after its bound
    char c;
    const bool closed = (p.revents & (POLLIN | POLLHUP)) && ::recv(stray, &c, 1, 0) <= 0;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ::close(stray);
    if (!closed || s < 0.4) return out = "the root did not close a silent connection after its bound", 1;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // well past the bound from that connection
    return 0;
  });
}

// A connection whose first frame is not a hello (a gather of 64 MiB, here) is closed at its header: the root
// does not buffer a body for a connection that has not said who it is (up to 1 GiB each, before), and the job's
// own ranks then join.
TEST(BootstrapJoin, AFirstFrameOtherThanAHelloIsClosedAtItsHeader) {
  expect_join_after("5000", [](const UniqueId& id, std::string& out) {
    const int fd = test::connect_to_ids_root(id);
    const std::string frame = test::wire_header(id, test::kWireGather, 0, 2, 0, uint64_t{64} << 20);
    sock::send_all(fd, frame.data(), frame.size(), sock::deadline_in_ms(1000));
    const std::string chunk(1 << 20, 'x');
    size_t sent = 0;
    for (int i = 0; i < 64; ++i) {  // (the root closes the connection: a send fails well before 64 MiB)
      if (::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL) <= 0) break;
      sent += chunk.size();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ::close(fd);
    if (sent >= (size_t{64} << 20)) return out = "the root took a 64 MiB body before any hello", 1;
    return 0;
  });
}

// A hello whose world size is over the limit is turned away with the reason (before: the root allocated its
// tables for that world and its process ended in bad_alloc), and the job's own ranks then join.
TEST(BootstrapJoin, AHelloWithAnEnormousWorldIsTurnedAwayNamingTheLimit) {
  expect_join_after("5000", [](const UniqueId& id, std::string& out) {
    const int fd = test::connect_to_ids_root(id);
    const std::string frame = test::wire_header(id, test::kWireHello, 0, 1 << 30, 0, 0);  // rank 0 of 2^30
    sock::send_all(fd, frame.data(), frame.size(), sock::deadline_in_ms(1000));
    char reply[40];
    if (!sock::recv_all(fd, reply, sizeof(reply), sock::deadline_in_ms(3000))) return out = "no reply", 1;
    uint64_t len = 0;
    std::memcpy(&len, reply + 32, sizeof(len));
    std::string body(std::min<uint64_t>(len, 4096), '\0');
    if (!body.empty()) sock::recv_all(fd, body.data(), body.size(), sock::deadline_in_ms(3000));
    ::close(fd);
    if (body.find("world size 1073741824 is over the limit of 1048576 ranks") == std::string::npos)
      return out = "reply: " + body, 1;
    return 0;
  });
}

// A rank's data over the bootstrap's message limit: that rank says so and every other rank hears it at once
// (before: the root closed that rank's connection without a word; it blamed the root, the others timed out).
TEST(BootstrapFailure, ARanksDataOverTheLimitFailsEveryRankNamingIt) {
  const int W = 3;
  expect_joined(W, "60000", [&](int r, Bootstrap& b, std::string& out) {
    // (the 1 GiB string is made before a barrier: under ThreadSanitizer making it takes 12 s, which the other
    // ranks' clocks must not count; over 20 s with a build beside it on 2 cores, 2026-12-07, hence the bound)
    const std::string big(r == 1 ? (size_t{1} << 30) - 0xffff - 1 : 0, 'x');  // one byte over
    b.barrier("the big string is made");
    if (r == 1)
      return expect_error_within(5.0, [&] { b.allgather(big, "the big exchange"); },
                                 {"rank 1 (in the big exchange)", "over the bootstrap's limit"}, out);
    return expect_error_within(5.0, [&] { b.allgather("x", "the big exchange"); },
                               {"rank 1 left the job", "over the bootstrap's limit"}, out);
  }, std::chrono::milliseconds(90000));  // (the processes' own bound: past the barrier's)
}

// A LaunchInfo made by hand is checked before any socket: a rank outside the world, a world over the limit, a
// root port of 0 (every rank would retry port 0 for the whole bound) or above 65535 (truncated before).
TEST(BootstrapFailure, AHandMadeLaunchInfoIsCheckedFirst) {
  LaunchInfo li;
  li.launcher = "test";
  li.root_addr = "127.0.0.1";
  std::string out;
  const auto t0 = std::chrono::steady_clock::now();
  li.rank = 2, li.world = 2, li.root_port = 5000;
  EXPECT_EQ(expect_error_in([&] { Bootstrap b(li); }, {"test: rank 2 is outside [0, 2)"}, out), 0) << out;
  li.rank = 0, li.world = 1 << 21;
  EXPECT_EQ(expect_error_in([&] { Bootstrap b(li); }, {"world size 2097152 is over"}, out), 0) << out;
  li.world = 2, li.root_port = 0;
  EXPECT_EQ(expect_error_in([&] { Bootstrap b(li); }, {"port 0 is not in [1, 65535]"}, out), 0) << out;
  li.root_port = 70000;
  EXPECT_EQ(expect_error_in([&] { Bootstrap b(li); }, {"port 70000 is not in [1, 65535]"}, out), 0) << out;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
}

// The root's host name is resolved in the connect loop: one that does not resolve is retried until the deadline
// (a record that appears after the ranks start), then named.
TEST(Socket, AHostNameThatDoesNotResolveIsRetriedUntilTheDeadline) {
  const auto t0 = std::chrono::steady_clock::now();
  std::string out;
  EXPECT_EQ(expect_error_in([&] { sock::tcp_connect("mk-no-such-host.invalid", 1, sock::deadline_in_ms(400)); },
                            {"could not resolve the bootstrap root's host 'mk-no-such-host.invalid'"}, out),
            0) << out;
  EXPECT_GE(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 0.35);
}

// Two ranks in the process that hosts the root (a thread each) close at the same moment while a third rank, in
// another process, closes 1.5 s later: exactly one of the two (the last to leave) waits for it, so that the root
// serves every rank before the process may exit; the other returns at once. Before 2026-12-06 each read the
// root's use count and then acted on it, and two closing at once could each see the other: neither waited.
TEST(BootstrapClose, OfTwoRanksClosingAtOnceInTheRootsProcessTheLastWaitsForTheOthers) {
  auto res = run_ranks(3, {1}, true, [&](int r, const std::string& shared, const Publish& publish, std::string& out) {
    setenv("MK_BOOTSTRAP_TIMEOUT_MS", "10000", 1);
    if (r == 2) {
      Bootstrap b(2, 3, UniqueId::from_hex(shared));
      b.barrier("joined");
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      b.close();
      return 0;
    }
    const UniqueId id = get_unique_id();
    publish(id.to_hex());
    std::atomic<int> ready{0};
    double took[2] = {0, 0};
    std::string err[2];
    auto rank = [&](int me) {
      try {
        Bootstrap b(me, 3, id);
        b.barrier("joined");
        ready.fetch_add(1);
        while (ready.load() < 2) std::this_thread::yield();  // both close at once
        const auto t0 = std::chrono::steady_clock::now();
        b.close();
        took[me] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      } catch (const std::exception& e) {
        err[me] = e.what();
      }
    };
    std::thread t1(rank, 1);
    rank(0);
    t1.join();
    if (!err[0].empty() || !err[1].empty()) return out = "rank 0: " + err[0] + "; rank 1: " + err[1], 1;
    const double lo = std::min(took[0], took[1]), hi = std::max(took[0], took[1]);
    if (hi < 1.0 || lo > 0.5)
      return out = "closes took " + std::to_string(took[0]) + " and " + std::to_string(took[1]) +
                   " s: one (only) must wait for rank 2's close, 1.5 s on", 1;
    return 0;
  });
  expect_all(res, {1});
}
