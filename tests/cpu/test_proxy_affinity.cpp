// Where the proxy threads run and what they need before they start (src/net/proxy.hpp): the CPUs they are pinned
// to are those near the GPU that the process may run on, or none when those are too few; a pin the system refuses
// leaves the thread as it was; and a queue whose loop state cannot be allocated fails the proxy's construction,
// naming the queue, rather than its thread (std::terminate).
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "mkernel/error.hpp"
#include "src/net/proxy.hpp"

using namespace mk::net;

namespace {

std::vector<int> range(int lo, int hi) {  // [lo, hi)
  std::vector<int> v(static_cast<size_t>(hi - lo));
  std::iota(v.begin(), v.end(), lo);
  return v;
}

std::vector<int> joined(std::vector<int> a, const std::vector<int>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Runs f on a thread of its own, so that what it does to its affinity leaves the test's thread alone.
template <class F>
void on_own_thread(F f) {
  std::thread t(f);
  t.join();
}

class NullTransport : public Transport {
 public:
  std::string name() const override { return "null"; }
  void connect(mk::Bootstrap&, const std::vector<int>&) override {}
  void register_region(mk::Bootstrap&, const Region&) override {}
  void deregister_region(int) override {}
  bool post(const WriteReq&) override { return true; }
  int poll(Completion*, int) override { return 0; }
  void close() override {}
};

ProxyConfig host_config(uint32_t depth) {
  ProxyConfig c;
  c.depth = depth;
  c.timeout_ms = 5000;
  c.peers = {1};
  return c;
}

std::vector<std::unique_ptr<Transport>> transports(int n) {
  std::vector<std::unique_ptr<Transport>> t;
  for (int i = 0; i < n; ++i) t.push_back(std::make_unique<NullTransport>());
  return t;
}

}  // namespace

// A Slurm task bound to 4 of the GPU node's 16 CPUs (and 2 of another node's): the proxies go to those 4.
TEST(ProxyAffinity, ARestrictedProcessPinsToTheCpusItSharesWithTheGpusNode) {
  const std::vector<int> near = range(0, 16);
  const std::vector<int> allowed = {41, 4, 40, 6, 5, 7};
  EXPECT_EQ(usable_cpus(near, allowed), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(proxy_pin_cpus(near, allowed, 2), (std::vector<int>{4, 5, 6, 7}));
}

// The rule is two CPUs a proxy thread on the host, counted in the overlap: a cgroup that left one CPU of a 16-CPU
// node pins nothing (before, all proxies were pinned there and shared that core).
TEST(ProxyAffinity, AnOverlapOfFewerThanTwoCpusAThreadPinsNothing) {
  const std::vector<int> near = range(0, 16);
  EXPECT_TRUE(proxy_pin_cpus(near, joined({3}, range(16, 64)), 1).empty());
  EXPECT_TRUE(proxy_pin_cpus(near, range(0, 3), 2).empty());
  EXPECT_EQ(proxy_pin_cpus(near, range(0, 4), 2), range(0, 4));
  EXPECT_TRUE(proxy_pin_cpus(near, range(16, 64), 1).empty());  // no overlap at all
}

TEST(ProxyAffinity, AnUnrestrictedProcessPinsToTheGpusWholeNode) {
  const std::vector<int> near = joined(range(0, 8), range(64, 72));  // a node's cores and their hyperthreads
  EXPECT_EQ(proxy_pin_cpus(near, range(0, 128), 4), near);
  EXPECT_TRUE(proxy_pin_cpus(near, range(0, 128), 9).empty());  // the node's own size is still the limit
}

TEST(ProxyAffinity, AnUnknownNodeOrAllowedSetPinsNothing) {
  EXPECT_TRUE(proxy_pin_cpus({}, range(0, 64), 1).empty());
  EXPECT_TRUE(proxy_pin_cpus(range(0, 16), {}, 1).empty());
}

TEST(ProxyAffinity, AllowedCpusAreTheThreadsOwnAndAThreadPinnedToThemStaysSo) {
  on_own_thread([] {
    const std::vector<int> allowed = allowed_cpus();
    ASSERT_FALSE(allowed.empty());
    EXPECT_TRUE(std::is_sorted(allowed.begin(), allowed.end()));
    EXPECT_EQ(pin_this_thread(allowed), 0);
    EXPECT_EQ(allowed_cpus(), allowed);
  });
}

// A pin to fewer CPUs than the thread has takes effect (the test above pins to what the thread already has, which a
// pin that did nothing would pass too).
TEST(ProxyAffinity, APinToOneOfTheThreadsCpusNarrowsItToThatOne) {
  on_own_thread([] {
    const std::vector<int> allowed = allowed_cpus();
    if (allowed.size() < 2) GTEST_SKIP() << "this process may run on one CPU only: nothing to narrow";
    EXPECT_EQ(pin_this_thread({allowed.back()}), 0);
    EXPECT_EQ(allowed_cpus(), std::vector<int>{allowed.back()});
  });
}

// A CPU the system does not have: the pin is refused and said so, and the thread keeps the CPUs it had.
TEST(ProxyAffinity, APinTheSystemRefusesReportsItAndLeavesTheThreadAsItWas) {
  on_own_thread([] {
    const std::vector<int> before = allowed_cpus();
    EXPECT_NE(pin_this_thread({1 << 19}), 0);
    EXPECT_NE(pin_this_thread({}), 0);
    EXPECT_EQ(allowed_cpus(), before);
  });
}

// The per-slot state of a queue's loop (75 bytes a command: MK_NET_QUEUE_DEPTH=1048576 on 16 threads is 1.2 GiB)
// was allocated on the proxy thread outside its try, so a std::bad_alloc there ended the process by std::terminate.
// Now the constructor allocates it, and its failure is the construction's error, naming the queue.
TEST(ProxySetup, AQueueWhoseLoopStateCannotBeAllocatedFailsTheConstructionNamingIt) {
  ProxyConfig c = host_config(256);
  c.rank = 3;
  c.fail_loop_alloc = 1;
  try {
    Proxy p(std::move(c), transports(2));
    FAIL() << "the proxy started without queue 1's loop state";
  } catch (const std::exception& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("rank 3 proxy queue 1: out of host memory"), std::string::npos) << msg;
    EXPECT_NE(msg.find("256 commands, MK_NET_QUEUE_DEPTH"), std::string::npos) << msg;
  }
}
