// Launched by tools/mkrun in ctest: the fabric transport between processes on
// loopback (127.0.0.1), or with --transport verbs the verbs one over
// softverbs (tests/cpu/verbs.cmake). Exit 0 only when every check held.
//   (default)            all-to-all rounds: every rank writes a random pattern
//                        to every other rank in two halves, the first with a
//                        signal Set (value grows per round), the second with
//                        a signal Add; receivers check each half's bytes the
//                        moment its signal is seen (data-before-signal).
//   --rounds N           number of rounds (default 16; sizes 8 B .. 4 MiB)
//   --deferred           force the deferred-signal path (delivery complete)
//   --no-atomics         Add by control message even if the provider has atomics
//   --prefer-atomics     take provider atomics over ordered signals (tcp;ofi_rxm
//                        then runs fi_atomic Add with deferred signals)
//   --provider P         provider, '+' standing for ';' (e.g. tcp+ofi_rxm)
//   --transport T        fabric (default) or verbs (the rounds and --kill-rank)
//   --expect-error S     opening the transport, connect or a registration must
//                        fail, on every rank, with an mk::Error containing S
//                        (fault injection, a device lacking something: verbs.cmake)
//   --kill-rank R        rank R dies (std::_Exit) while the others stream
//                        4 MiB writes to it; they must get an mk::Error naming
//                        rank R within MK_NET_TIMEOUT_MS + slack
//   --stall-rank R       rank R stays alive but stops polling; the streamers'
//                        poll must throw (request age > MK_NET_TIMEOUT_MS)
//   --unreachable-rank R rank R publishes the address of a closed endpoint;
//                        the others' connect must fail naming rank R, bounded
//   --slow-rank R        rank R polls once every MK_NET_TIMEOUT_MS / 8 while the
//                        others stream to it: writes wait past the bound, yet
//                        no error may come (the link completes steadily)
//   --bad-peer-rank R    rank R lists itself as a peer, so its connect fails
//                        before its hellos (with --expect-error: every rank
//                        must fail at once naming it, not time out on it)
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "mkernel/mkernel.hpp"
#include "src/net/transport.hpp"
#if MK_NET_HAVE_FABRIC
#include "src/net/fabric/fabric_transport.hpp"
#endif

namespace {

#if MK_NET_HAVE_FABRIC
using FabricOptions = mk::net::fabric::FabricOptions;
std::unique_ptr<mk::net::Transport> open_fabric(const mk::net::TransportConfig& cfg, const FabricOptions& opt) {
  return mk::net::fabric::make_fabric_with(cfg, opt);
}
std::string local_name(mk::net::Transport* t) {
  return static_cast<mk::net::fabric::FabricTransport*>(t)->local_name();
}
#else
// A build with verbs alone (MK_NET_BACKENDS): the probe runs --transport verbs; fabric's options parse, and its
// transport refuses as the library's make_fabric does.
struct FabricOptions {
  bool force_deferred_signals = false, disable_atomics = false, prefer_atomics = false;
  std::string provider;
};
std::unique_ptr<mk::net::Transport> open_fabric(const mk::net::TransportConfig& cfg, const FabricOptions&) {
  return mk::net::make_fabric(cfg);
}
std::string local_name(mk::net::Transport*) { return {}; }
#endif

using Clock = std::chrono::steady_clock;
using mk::net::Completion;
using mk::net::SigOp;
using mk::net::WriteReq;

constexpr size_t kSignalBytes = 64 << 10;  // 8192 signal words
constexpr size_t kSlot = (4 << 20) + 64;   // one message per (source, round)
constexpr int kAddWordBase = 64;           // Set word of source s: s; Add word: 64 + s
constexpr double kSpinLimitS = 60;
const size_t kSizes[] = {8, 13, 1000, 4096, 65536 + 3, 1 << 20, (4 << 20) - 5, 4 << 20};
constexpr int kNumSizes = sizeof(kSizes) / sizeof(kSizes[0]);

struct Failure {
  std::string msg;
};
#define CHECK(cond, ...)                                            \
  do {                                                              \
    if (!(cond)) throw Failure{mk::cat("check failed: ", #cond, ": ", __VA_ARGS__)}; \
  } while (0)

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Byte i of the message source s sends to d in round r (seeded by the job).
void fill(uint8_t* p, size_t n, uint64_t seed, int r, int s, int d) {
  std::mt19937_64 g(seed ^ (uint64_t(r) << 40) ^ (uint64_t(s) << 20) ^ uint64_t(d));
  for (size_t i = 0; i < n; i += 8) {
    uint64_t v = g();
    std::memcpy(p + i, &v, std::min<size_t>(8, n - i));
  }
}

struct Job {
  mk::Bootstrap& bs;
  mk::net::Transport& t;
  int rank, world;
  std::vector<uint64_t> sig;  // region 0
  std::vector<uint8_t> data;  // region 1: [recv slot per source][send slot per destination]
  uint64_t posted = 0, completed = 0;

  uint8_t* recv_slot(int s) { return data.data() + size_t(s) * kSlot; }
  uint8_t* send_slot(int d) { return data.data() + size_t(world + d) * kSlot; }
  uint64_t load(int word) { return __atomic_load_n(&sig[word], __ATOMIC_ACQUIRE); }

  void drain(Completion* c, int max) {
    int n = t.poll(c, max);
    completed += n;
  }
  void post(const WriteReq& w) {
    Completion c[32];
    auto t0 = Clock::now();
    while (!t.post(w)) {
      drain(c, 32);
      CHECK(since(t0) < kSpinLimitS, "post to rank ", w.peer, " refused for ", kSpinLimitS, " s");
    }
    posted++;
  }
};

void run_rounds(Job& j, int rounds, uint64_t seed) {
  Completion c[32];
  for (int r = 1; r <= rounds; ++r) {
    auto size_of = [&](int s, int d) { return kSizes[(r + s + 2 * d) % kNumSizes]; };
    // Send: first half with Set(r * 1000003), second half with Add(r).
    for (int k = 1; k < j.world; ++k) {
      int d = (j.rank + k) % j.world;
      size_t n = size_of(j.rank, d), h1 = n / 2;
      fill(j.send_slot(d), n, seed, r, j.rank, d);
      uint64_t src = size_t(j.world + d) * kSlot, dst = size_t(j.rank) * kSlot;
      j.post(WriteReq{d, 1, src, dst, h1, SigOp::Set, 8ull * j.rank, uint64_t(r) * 1000003, (uint64_t(r) << 32) | (d << 1)});
      j.post(WriteReq{d, 1, src + h1, dst + h1, n - h1, SigOp::Add, 8ull * (kAddWordBase + j.rank), uint64_t(r),
                      (uint64_t(r) << 32) | (d << 1) | 1});
    }
    // Receive: check each half the moment its signal shows the new epoch.
    std::vector<char> got_set(j.world, 0), got_add(j.world, 0);
    std::vector<uint8_t> want;
    int missing = 2 * (j.world - 1);
    auto t0 = Clock::now();
    while (missing > 0 || j.completed < j.posted) {
      j.drain(c, 32);
      for (int s = 0; s < j.world; ++s) {
        if (s == j.rank) continue;
        size_t n = size_of(s, j.rank), h1 = n / 2;
        if (!got_set[s]) {
          uint64_t v = j.load(s), exp = uint64_t(r) * 1000003, prev = uint64_t(r - 1) * 1000003;
          CHECK(v == exp || v == prev, "round ", r, ": Set word of rank ", s, " = ", v, ", expected ", prev, " or ", exp);
          if (v == exp) {
            want.resize(n);
            fill(want.data(), n, seed, r, s, j.rank);
            CHECK(!std::memcmp(j.recv_slot(s), want.data(), h1), "round ", r, ": first half (", h1,
                  " of ", n, " bytes) from rank ", s, " wrong when its Set signal arrived");
            got_set[s] = 1, missing--;
          }
        }
        if (!got_add[s]) {
          uint64_t v = j.load(kAddWordBase + s), exp = uint64_t(r) * (r + 1) / 2, prev = uint64_t(r - 1) * r / 2;
          CHECK(v == exp || v == prev, "round ", r, ": Add word of rank ", s, " = ", v, ", expected ", prev, " or ", exp);
          if (v == exp) {
            want.resize(n);
            fill(want.data(), n, seed, r, s, j.rank);
            CHECK(!std::memcmp(j.recv_slot(s) + h1, want.data() + h1, n - h1), "round ", r, ": second half (",
                  n - h1, " of ", n, " bytes) from rank ", s, " wrong when its Add signal arrived");
            got_add[s] = 1, missing--;
          }
        }
      }
      CHECK(since(t0) < kSpinLimitS, "round ", r, ": ", missing, " signals and ", j.posted - j.completed,
            " completions still missing after ", kSpinLimitS, " s");
    }
    // Slots are rewritten next round: nobody may send before all checked.
    j.bs.barrier();
  }
}

// Streams 4 MiB writes to `victim` until the transport reports it dead.
int stream_until_error(Job& j, int victim, int64_t timeout_ms) {
  Completion c[32];
  WriteReq w{victim, 1, size_t(j.world + victim) * kSlot, size_t(j.rank) * kSlot, 4 << 20, SigOp::Add,
             8ull * (kAddWordBase + j.rank), 1, 0};
  auto t0 = Clock::now(), last_progress = Clock::now();
  try {
    for (;;) {
      if (j.posted - j.completed < 16 && j.t.post(w)) j.posted++, w.cookie++;
      uint64_t before = j.completed;
      j.drain(c, 32);
      if (j.completed != before) last_progress = Clock::now();
      CHECK(since(t0) < kSpinLimitS, "no error after ", kSpinLimitS, " s of writing to the dead rank ", victim);
    }
  } catch (const mk::Error& e) {
    std::string msg = e.what();
    double stall = since(last_progress);
    double bound = timeout_ms / 1000.0 + 3.0;
    if (msg.find("rank " + std::to_string(victim)) == std::string::npos) {
      std::cerr << "rank " << j.rank << ": error does not name rank " << victim << ": " << msg << "\n";
      return 1;
    }
    if (stall > bound) {
      std::cerr << "rank " << j.rank << ": error came " << stall << " s after the last progress (bound " << bound
                << " s): " << msg << "\n";
      return 1;
    }
    std::cout << "rank " << j.rank << ": got the expected error after " << j.completed << " writes, "
              << stall << " s after the last progress: " << msg << "\n";
    return 0;
  }
}

// --slow-rank: rank `slow` completes writes slowly but steadily (it polls its completion queue once every eighth of
// MK_NET_TIMEOUT_MS, and the provider progresses only when polled) for three bounds; the others keep 16 writes
// of 4 MiB in flight to it. A write then waits longer than the bound behind the ones ahead of it, yet no error may
// come: the bound counts from the later of its post and the peer's last completed operation (a busy link is not a
// dead peer). Then every rank drains, the streamers post a last Set, and the slow rank waits for it.
int stream_to_slow_rank(Job& j, int slow, int64_t timeout_ms) {
  Completion c[32];
  const double phase_s = 3.0 * timeout_ms / 1000.0;
  auto t0 = Clock::now();
  if (j.rank == slow) {
    while (since(t0) < phase_s) {
      std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms / 8));
      j.drain(c, 32);
    }
    for (int s = 0; s < j.world; ++s)
      while (s != slow && j.load(s) != 1) {
        j.drain(c, 32);
        CHECK(since(t0) < kSpinLimitS, "rank ", s, "'s last write never came");
      }
    j.bs.barrier();
    std::cout << "rank " << j.rank << ": polled slowly for " << phase_s << " s, then took every streamer's last "
              << "write\n";
    return 0;
  }
  WriteReq w{slow, 1, size_t(j.world + slow) * kSlot, size_t(j.rank) * kSlot, 4 << 20, SigOp::Add,
             8ull * (kAddWordBase + j.rank), 1, 0};
  std::vector<Clock::time_point> posted_at;
  double longest = 0, gap = 0;  // the longest write; the longest stretch without a completion
  Clock::time_point last = Clock::now();
  auto reap = [&] {
    const int n = j.t.poll(c, 32);
    if (n > 0) gap = std::max(gap, since(last)), last = Clock::now();
    for (int i = 0; i < n; ++i) {
      CHECK(c[i].status == 0, "write ", c[i].cookie, " failed with status ", c[i].status);
      if (c[i].cookie < posted_at.size()) longest = std::max(longest, since(posted_at[c[i].cookie]));
    }
    j.completed += n;
  };
  try {
    while (since(t0) < phase_s) {
      if (j.posted - j.completed < 16 && j.t.post(w)) {
        posted_at.push_back(Clock::now());
        j.posted++, w.cookie++;
      }
      reap();
    }
    while (j.completed < j.posted) {
      reap();
      CHECK(since(t0) < kSpinLimitS, j.posted - j.completed, " writes to rank ", slow, " never completed");
    }
    j.post(WriteReq{slow, 1, size_t(j.world + slow) * kSlot, size_t(j.rank) * kSlot, 8, SigOp::Set, 8ull * j.rank, 1,
                    uint64_t(1) << 62});
    while (j.completed < j.posted) {
      j.drain(c, 32);
      CHECK(since(t0) < kSpinLimitS, "the last write to rank ", slow, " never completed");
    }
  } catch (const mk::Error& e) {
    std::cerr << "rank " << j.rank << ": a write to the slow but live rank " << slow << " failed (the longest "
              << "completed one took " << longest << " s): " << e.what() << "\n";
    return 1;
  }
  j.bs.barrier();
  // The run shows the case only if some write waited past the bound (else it proves nothing either way).
  const bool shown = longest * 1000.0 > timeout_ms;
  (shown ? std::cout : std::cerr) << "rank " << j.rank << ": " << j.posted << " writes to the slow rank completed, "
                                  << "the longest in " << longest << " s against a bound of " << timeout_ms
                                  << " ms (the longest stretch without a completion: " << gap << " s)"
                                  << (shown ? "" : ": none waited past the bound, the case was not shown")
                                  << "\n";
  return shown ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 16, kill_rank = -1, unreachable_rank = -1, bad_peer_rank = -1, slow_rank = -1;
  bool stall = false, verbs = false;
  std::string expect_error;  // connect or a registration must fail on every rank with this in its message
  FabricOptions opt;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--rounds" && i + 1 < argc) rounds = std::atoi(argv[++i]);
    else if (a == "--deferred") opt.force_deferred_signals = true;
    else if (a == "--no-atomics") opt.disable_atomics = true;
    else if (a == "--prefer-atomics") opt.prefer_atomics = true;
    else if (a == "--stall-rank" && i + 1 < argc) kill_rank = std::atoi(argv[++i]), stall = true;
    else if (a == "--provider" && i + 1 < argc) {
      std::string p = argv[++i];
      for (char& ch : p)
        if (ch == '+') ch = ';';
      opt.provider = p;
    } else if (a == "--kill-rank" && i + 1 < argc) kill_rank = std::atoi(argv[++i]);
    else if (a == "--unreachable-rank" && i + 1 < argc) unreachable_rank = std::atoi(argv[++i]);
    else if (a == "--bad-peer-rank" && i + 1 < argc) bad_peer_rank = std::atoi(argv[++i]);
    else if (a == "--slow-rank" && i + 1 < argc) slow_rank = std::atoi(argv[++i]);
    else if (a == "--expect-error" && i + 1 < argc) expect_error = argv[++i];
    else if (a == "--transport" && i + 1 < argc && (argv[i + 1] == std::string("verbs") ||
                                                    argv[i + 1] == std::string("fabric")))
      verbs = argv[++i] == std::string("verbs");
    else {
      std::cerr << "usage: " << argv[0]
                << " [--rounds N] [--deferred] [--no-atomics] [--provider P] [--prefer-atomics] [--transport fabric|verbs] [--expect-error S] [--kill-rank R | --stall-rank R | --unreachable-rank R | --bad-peer-rank R | --slow-rank R]\n";
      return 2;
    }
  }
  // A stalled verbs peer is not an error (its NIC answers without it), and an
  // unreachable address is fabric's.
  if (verbs && (stall || unreachable_rank >= 0 || slow_rank >= 0)) {
    std::cerr << "fabric_probe: --stall-rank, --unreachable-rank and --slow-rank are fabric-only\n";
    return 2;
  }
  int rank = -1;
  try {
    auto li = mk::detect_launch();
    if (!li) {
      std::cerr << "fabric_probe: no launcher environment (run under tools/mkrun)\n";
      return 1;
    }
    mk::Bootstrap bs(*li);
    rank = bs.rank();
    int world = bs.world();
    auto topo = mk::compute_topology(bs.allgather(mk::local_host_id()), rank, 0);
    mk::net::TransportConfig cfg{rank, world, -1, &topo};
    int64_t timeout_ms = mk::knob_int(mk::Knob::MK_NET_TIMEOUT_MS);
    // An error of a failed step, with --expect-error: every rank must come out of it with the same error (the
    // barrier shows none is left waiting in it), saying "mkernel: " once, first (an embedded rank's error without
    // its own prefix).
    auto expected = [&](const mk::Error& e) {
      const std::string msg = e.what();
      const bool ok = msg.find(expect_error) != std::string::npos && msg.find("mkernel: ", 1) == std::string::npos;
      bs.barrier();
      (ok ? std::cout : std::cerr) << "rank " << rank << ": " << (ok ? "the expected error: " : "another error: ") << msg
                                   << "\n";
      return ok ? 0 : 1;
    };
    std::unique_ptr<mk::net::Transport> t;
    try {
      t = verbs ? mk::net::make_verbs(cfg) : open_fabric(cfg, opt);
    } catch (const mk::Error& e) {
      if (expect_error.empty()) throw;
      return expected(e);
    }
    std::vector<int> peers;
    for (int p = 0; p < world; ++p)
      if (p != rank) peers.push_back(p);
    if (rank == bad_peer_rank) peers.push_back(rank);

    if (unreachable_rank >= 0) {
      if (rank == unreachable_rank) {
        // Publish a real address whose endpoint is gone, then wait for the others.
        auto dead = open_fabric(cfg, opt);
        std::string name = local_name(dead.get());
        dead->close();
        t->close();
        // (connect's two exchanges under connect's own step names: the root checks that every rank's collective
        // #N is the same step)
        bs.allgather("fabric-name-ok:" + name, "fabric connect: addresses");  // (step_status: a name it has)
        bs.allgather("fabric-connect-ok:", "fabric connect");  // its outcome exchange (step_status): address added
        bs.barrier();
        return 0;
      }
      auto t0 = Clock::now();
      try {
        t->connect(bs, peers);
      } catch (const mk::Error& e) {
        std::string msg = e.what();
        double el = since(t0), bound = timeout_ms / 1000.0 + 3.0;
        bs.barrier();
        bool ok = msg.find("rank " + std::to_string(unreachable_rank)) != std::string::npos && el <= bound;
        (ok ? std::cout : std::cerr) << "rank " << rank << ": connect failed after " << el << " s (bound " << bound
                                     << " s): " << msg << "\n";
        return ok ? 0 : 1;
      }
      std::cerr << "rank " << rank << ": connect succeeded although rank " << unreachable_rank << " is unreachable\n";
      return 1;
    }

    Job j{bs, *t, rank, world, std::vector<uint64_t>(kSignalBytes / 8, 0),
          std::vector<uint8_t>(2 * size_t(world) * kSlot, 0)};
    try {
      t->connect(bs, peers);
      t->register_region(bs, mk::net::Region{0, j.sig.data(), kSignalBytes, false, -1});
      t->register_region(bs, mk::net::Region{1, j.data.data(), j.data.size(), false, -1});
    } catch (const mk::Error& e) {
      if (expect_error.empty()) throw;
      return expected(e);
    }
    if (!expect_error.empty()) {
      std::cerr << "rank " << rank << ": connect and registration passed; expected an error with \"" << expect_error
                << "\"\n";
      return 1;
    }
    if (rank == 0) std::cout << t->name() << "\n";

    if (kill_rank >= 0) {
      if (rank == kill_rank) {
        // Progress (manual-progress providers need it) until several large
        // writes from every streamer landed, then die without any cleanup.
        auto t0 = Clock::now();
        Completion c[8];
        for (;;) {
          t->poll(c, 8);
          bool all = true;
          for (int p : peers) all = all && j.load(kAddWordBase + p) >= 4;
          if (all && !stall) std::_Exit(0);
          if (all) {  // alive, silent: stop polling, outlive the streamers' timeout
            std::this_thread::sleep_for(std::chrono::milliseconds(2 * timeout_ms + 3000));
            std::_Exit(0);
          }
          if (since(t0) > kSpinLimitS) std::_Exit(1);
        }
      }
      return stream_until_error(j, kill_rank, timeout_ms);
    }
    if (slow_rank >= 0) {
      if (slow_rank >= world) {
        std::cerr << "fabric_probe: --slow-rank " << slow_rank << " is not a rank of " << world << "\n";
        return 2;
      }
      return stream_to_slow_rank(j, slow_rank, timeout_ms);
    }

    uint64_t seed = 0;
    if (rank == 0) seed = std::random_device{}() * 0x9e3779b97f4a7c15ull ^ std::random_device{}();
    std::string sb = bs.broadcast(std::string(reinterpret_cast<char*>(&seed), 8), 0);
    std::memcpy(&seed, sb.data(), 8);
    auto t0 = Clock::now();
    run_rounds(j, rounds, seed);
    t->close();
    bs.barrier();
    if (rank == 0)
      std::cout << t->name() << " probe ok: " << world << " ranks, " << rounds << " rounds, " << j.posted << " writes, "
                << since(t0) << " s\n";
    return 0;
  } catch (const Failure& f) {
    std::cerr << "rank " << rank << ": " << f.msg << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "rank " << rank << ": " << e.what() << "\n";
    return 1;
  }
}
