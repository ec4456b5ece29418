// Launched by tools/mkrun in ctest: the whole host path of the network -
// command ring, host proxy and the transport MK_NET picks (`fabric` over
// tcp;ofi_rxm on loopback, or `verbs` over softverbs: tests/cpu/verbs.cmake)
// - between 2..4 processes, host memory only. Every rank pushes
// PUT commands (with an Add signal per chunk) to every other rank from
// several producer threads, waits for the signals of every peer, and checks
// every byte, and the proxy's count of bytes put; rounds repeat with fresh
// data and growing signal values.
//   --rounds N   (default 4)
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "device/ctx.hpp"
#include "mkernel/mkernel.hpp"
#include "src/net/proxy.hpp"

using namespace mk;
using Clock = std::chrono::steady_clock;

namespace {

constexpr uint64_t kChunk = 65536 + 24;  // odd-ish sizes, every chunk its own put
constexpr int kChunks = 24;
constexpr uint64_t kShare = kChunk * kChunks;  // bytes one rank sends to each peer

unsigned char pattern(int src, int round, uint64_t i) {
  uint64_t x = (uint64_t(src) * 0x9E3779B97F4A7C15ull) ^ (uint64_t(round) << 40) ^ (i * 0xD6E8FEB86659FD93ull);
  x ^= x >> 29;
  return static_cast<unsigned char>(x * 0xBF58476D1CE4E5B9ull >> 56);
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 4;
  for (int i = 1; i + 1 < argc; ++i)
    if (!std::strcmp(argv[i], "--rounds")) rounds = std::atoi(argv[++i]);
  try {
    auto li = detect_launch();
    if (!li) {
      std::fprintf(stderr, "net_probe: run under tools/mkrun\n");
      return 2;
    }
    Bootstrap bs(*li);
    const int me = bs.rank(), world = bs.world();
    std::vector<int> peers;
    for (int r = 0; r < world; ++r)
      if (r != me) peers.push_back(r);

    net::TransportConfig tc;
    tc.rank = me;
    tc.world = world;
    tc.cuda_device = -1;
    auto transport = net::make_transport(tc);
    const std::string transport_name = transport->name();
    transport->connect(bs, peers);
    // Region 0: signals (host); region 1: [my outgoing share | one landing zone per source].
    std::vector<uint64_t> signals((kControlHeaderBytes + 8 * 64) / 8, 0);
    std::vector<unsigned char> data(kShare * (1 + world), 0);
    net::Region r0{0, signals.data(), signals.size() * 8, false, -1, nullptr};
    net::Region r1{1, data.data(), data.size(), false, -1, nullptr};
    transport->register_region(bs, r0);
    transport->register_region(bs, r1);

    net::ProxyConfig pc;
    pc.rank = me;
    pc.depth = 64;  // small: the ring wraps and producers meet back-pressure
    pc.timeout_ms = knob_int(Knob::MK_NET_TIMEOUT_MS);
    pc.peers = peers;
    pc.signal_base = kControlHeaderBytes;
    std::atomic<int> proxy_errors{0};
    pc.on_error = [&](const std::string&) { ++proxy_errors; };
    std::vector<std::unique_ptr<net::Transport>> ts;
    ts.push_back(std::move(transport));
    net::Proxy proxy(pc, std::move(ts));
    const net::CmdQueue& q = proxy.queue(0);
    volatile uint64_t* sig = reinterpret_cast<volatile uint64_t*>(
        reinterpret_cast<char*>(signals.data()) + kControlHeaderBytes);

    for (int round = 1; round <= rounds; ++round) {
      for (uint64_t i = 0; i < kShare; ++i) data[i] = pattern(me, round, i);
      for (int s = 0; s < world; ++s) std::memset(&data[kShare * (1 + s)], 0xEE, kShare);  // poison
      bs.barrier();  // every rank poisoned its landing zones and filled its share
      // Producers: one thread per peer, each chunk one PUT + Add 1 at signal word `me`.
      std::vector<std::thread> producers;
      std::atomic<uint64_t> last_seq{0};
      for (int p : peers)
        producers.emplace_back([&, p] {
          for (int c = 0; c < kChunks; ++c) {
            net::CmdFields f;
            f.op = net::CmdOp::Put;
            f.peer = static_cast<uint32_t>(p);
            f.region = 1;
            f.src_off = kChunk * c;
            f.dst_off = kShare * (1 + me) + kChunk * c;
            f.bytes = kChunk - (c % 3);  // a short tail on some chunks (the poison must remain there)
            f.sig_op = static_cast<uint8_t>(net::SigOp::Add);
            f.sig_idx = static_cast<uint32_t>(me);
            f.sig_value = 1;
            auto t0 = Clock::now();
            uint64_t s = net::cmdq_push(q, f, [&](uint64_t) {
              if (Clock::now() - t0 > std::chrono::seconds(30)) throw std::runtime_error("ring full for 30 s");
              std::this_thread::yield();
            });
            uint64_t prev = last_seq.load();
            while (s > prev && !last_seq.compare_exchange_weak(prev, s)) {
            }
          }
        });
      for (auto& t : producers) t.join();
      // Wait for every peer's chunks (bounded), then check every byte.
      auto t0 = Clock::now();
      for (int s : peers) {
        while (__atomic_load_n(const_cast<uint64_t*>(&sig[s]), __ATOMIC_ACQUIRE) < uint64_t(kChunks) * round) {
          if (!proxy.error().empty() || Clock::now() - t0 > std::chrono::seconds(20)) {
            std::fprintf(stderr, "rank %d round %d: signal from rank %d is %llu, expected %llu; proxy: %s\n", me,
                         round, s, (unsigned long long)sig[s], (unsigned long long)kChunks * round,
                         proxy.error().c_str());
            return 1;
          }
          std::this_thread::yield();
        }
        for (uint64_t i = 0; i < kShare; ++i) {
          const uint64_t c = i / kChunk, in = i % kChunk;
          const unsigned char want = in < kChunk - (c % 3) ? pattern(s, round, i) : 0xEE;
          if (data[kShare * (1 + s) + i] != want) {
            std::fprintf(stderr, "rank %d round %d: byte %llu from rank %d is %u, want %u\n", me, round,
                         (unsigned long long)i, s, data[kShare * (1 + s) + i], want);
            return 1;
          }
        }
      }
      // Local completion of everything this rank sent before its share changes.
      while (__atomic_load_n(q.done, __ATOMIC_ACQUIRE) < last_seq.load() + 1) {
        if (!proxy.error().empty() || Clock::now() - t0 > std::chrono::seconds(20)) {
          std::fprintf(stderr, "rank %d: puts not complete: %s\n", me, proxy.error().c_str());
          return 1;
        }
        std::this_thread::yield();
      }
    }
    bs.barrier();
    if (proxy_errors.load() || !proxy.error().empty()) {
      std::fprintf(stderr, "rank %d: proxy error: %s\n", me, proxy.error().c_str());
      return 1;
    }
    // The proxy's byte count (what benchmarks report as measured network bytes) is the payload sent.
    uint64_t share_bytes = 0;
    for (int c = 0; c < kChunks; ++c) share_bytes += kChunk - (c % 3);
    const uint64_t want_bytes = share_bytes * peers.size() * uint64_t(rounds);
    if (proxy.put_bytes(0) != want_bytes) {
      std::fprintf(stderr, "rank %d: the proxy counted %llu bytes put, the rank sent %llu\n", me,
                   (unsigned long long)proxy.put_bytes(0), (unsigned long long)want_bytes);
      return 1;
    }
    if (me == 0) std::printf("net_probe: %d ranks x %d rounds through ring + proxy + %s: every byte ok\n", world, rounds,
                  transport_name.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "net_probe: %s\n", e.what());
    return 1;
  }
}
