// fabric transport (src/net/fabric), single-process tests: provider selection
// errors, and two endpoints of one process (two bootstrap ranks in two
// threads) for the data path's checks. Multi-process behaviour (all-to-all,
// dead and unreachable peers) is in fabric_probe.cpp under mkrun.
// All traffic stays on 127.0.0.1.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <thread>
#include <vector>

#include "mkernel/mkernel.hpp"
#include "src/net/fabric/fabric_transport.hpp"
#include "tests/cpu/env_map.hpp"

namespace {

using namespace mk::net;
using Clock = std::chrono::steady_clock;

// Sets a process environment variable for one test, restores it after.
class EnvGuard {
 public:
  EnvGuard(const char* name, const char* value) : name_(name) {
    if (const char* v = std::getenv(name)) old_ = v;
    setenv(name, value, 1);
  }
  ~EnvGuard() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// Two ranks of one job inside this process, connected over tcp;ofi_rxm on
// loopback, each with region 0 (signals) and region 1 (data).
struct Pair {
  static constexpr size_t kSig = 64 << 10, kData = 1 << 20;
  EnvGuard addr{"MK_BOOTSTRAP_ADDR", "127.0.0.1"};
  std::unique_ptr<mk::Bootstrap> bs[2];
  std::unique_ptr<Transport> t[2];
  std::vector<uint64_t> sig[2];
  std::vector<uint8_t> data[2];

  Pair() {
    mk::UniqueId id = mk::get_unique_id();
    std::exception_ptr err[2];
    auto body = [&](int r) {
      try {
        bs[r] = std::make_unique<mk::Bootstrap>(r, 2, id);
        fabric::FabricOptions opt;
        opt.provider = "tcp;ofi_rxm";
        t[r] = fabric::make_fabric_with(TransportConfig{r, 2, -1, nullptr}, opt);
        t[r]->connect(*bs[r], {1 - r});
        sig[r].assign(kSig / 8, 0);
        data[r].assign(kData, 0);
        t[r]->register_region(*bs[r], Region{0, sig[r].data(), kSig, false, -1});
        t[r]->register_region(*bs[r], Region{1, data[r].data(), kData, false, -1});
      } catch (...) {
        err[r] = std::current_exception();
      }
    };
    std::thread th(body, 1);
    body(0);
    th.join();
    for (auto& e : err)
      if (e) std::rethrow_exception(e);
  }
  ~Pair() {
    for (auto& x : t)
      if (x) x->close();
    // Both ranks' bootstraps share this process's root, and closing one
    // waits for the root to see every rank's goodbye: close them together.
    std::thread th([&] { bs[1].reset(); });
    bs[0].reset();
    th.join();
  }
  // Polls both sides (the target must progress too) until `cookie` completes
  // on rank 0 and pred() holds; bounded.
  template <typename Pred>
  bool drive(uint64_t cookie, Pred pred) {
    bool done = false;
    Completion c[8];
    auto t0 = Clock::now();
    while (Clock::now() - t0 < std::chrono::seconds(20)) {
      int n = t[0]->poll(c, 8);
      for (int i = 0; i < n; ++i) done = done || c[i].cookie == cookie;
      t[1]->poll(c, 8);
      if (done && pred()) return true;
    }
    return false;
  }
};

TEST(Fabric, BogusProviderFailsQuicklyAndClearly) {
  EnvGuard g("MK_FI_PROVIDER", "bogus_provider_xyz");
  auto t0 = Clock::now();
  std::string err = mk::test::expect_error([] { make_fabric(TransportConfig{0, 1, -1, nullptr}); },
                                           {"bogus_provider_xyz", "MK_FI_PROVIDER", "fabric"});
  EXPECT_EQ(err, "");
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));
}

TEST(Fabric, BadRankIsRejected) {
  EXPECT_EQ(mk::test::expect_error([] { make_fabric(TransportConfig{3, 2, -1, nullptr}); }, {"fabric", "rank 3"}),
            "");
}

TEST(Fabric, WriteWithSetAndAddSignalsInOneProcess) {
  Pair p;
  EXPECT_EQ(p.t[0]->name(), "fabric:tcp;ofi_rxm");
  for (size_t i = 0; i < 100003; ++i) p.data[0][i] = uint8_t(i * 7 + 1);
  ASSERT_TRUE(p.t[0]->post(WriteReq{1, 1, 0, 4096, 100003, SigOp::Set, 8 * 3, 77, 11}));
  ASSERT_TRUE(p.drive(11, [&] { return __atomic_load_n(&p.sig[1][3], __ATOMIC_ACQUIRE) == 77; }));
  EXPECT_EQ(std::memcmp(p.data[1].data() + 4096, p.data[0].data(), 100003), 0);
  // Signal-only Adds accumulate.
  for (uint64_t k = 1; k <= 3; ++k) {
    ASSERT_TRUE(p.t[0]->post(WriteReq{1, 1, 0, 0, 0, SigOp::Add, 8 * 5, 10, 20 + k}));
    ASSERT_TRUE(p.drive(20 + k, [&] { return __atomic_load_n(&p.sig[1][5], __ATOMIC_ACQUIRE) == 10 * k; }));
  }
  // Nothing to move: completes at once.
  ASSERT_TRUE(p.t[0]->post(WriteReq{1, 1, 0, 0, 0, SigOp::None, 0, 0, 99}));
  ASSERT_TRUE(p.drive(99, [] { return true; }));
}

TEST(Fabric, PostRejectsRequestsThatCanNeverSucceed) {
  Pair p;
  Transport& t = *p.t[0];
  auto bad = [&](WriteReq w, std::initializer_list<const char*> needles) {
    return mk::test::expect_error([&] { t.post(w); }, needles);
  };
  EXPECT_EQ(bad(WriteReq{5, 1, 0, 0, 8}, {"rank 5", "not a connected peer"}), "");
  EXPECT_EQ(bad(WriteReq{0, 1, 0, 0, 8}, {"rank 0", "not a connected peer"}), "");
  EXPECT_EQ(bad(WriteReq{1, 7, 0, 0, 8}, {"region 7", "not registered"}), "");
  EXPECT_EQ(bad(WriteReq{1, 1, Pair::kData - 4, 0, 8}, {"outside region 1"}), "");
  EXPECT_EQ(bad(WriteReq{1, 1, ~0ull - 2, 0, 8}, {"outside region 1"}), "");
  EXPECT_EQ(bad(WriteReq{1, 1, 0, Pair::kData, 1}, {"outside the peer's region 1"}), "");
  EXPECT_EQ(bad(WriteReq{1, 1, 0, 0, 8, SigOp::Set, 4}, {"signal offset 4"}), "");
  EXPECT_EQ(bad(WriteReq{1, 1, 0, 0, 8, SigOp::Add, Pair::kSig}, {"outside the peer's signal region"}), "");
  EXPECT_EQ(bad(WriteReq{1, 1, 0, 0, 8, static_cast<SigOp>(9)}, {"bad signal op"}), "");
}

TEST(Fabric, RegistrationErrorsAreClear) {
  Pair p;
  std::vector<uint8_t> buf(4096);
  // Both fail before the collective part, so one rank alone can call them.
  EXPECT_EQ(mk::test::expect_error([&] { p.t[0]->register_region(*p.bs[0], Region{5, buf.data(), 4096}); },
                                   {"id order", "id 5"}),
            "");
  EXPECT_EQ(mk::test::expect_error(
                [&] { p.t[0]->register_region(*p.bs[0], Region{2, buf.data(), 4096, true, 0}); },
                {"region 2", "GPU memory", "FI_HMEM"}),
            "");
}

TEST(Fabric, CloseIsIdempotentAndFinal) {
  Pair p;
  p.t[0]->close();
  p.t[0]->close();
  Completion c[4];
  EXPECT_EQ(p.t[0]->poll(c, 4), 0);
  EXPECT_EQ(mk::test::expect_error([&] { p.t[0]->post(WriteReq{1, 1, 0, 0, 8}); }, {"after close"}), "");
}

}  // namespace
