// run_reported (src/runtime/reported_wait.hpp): a wait mkernel cannot bound
// (a device-wide synchronisation) is reported while it lasts, naming the step
// and what it waits for; a short wait says nothing; the wait's exception
// passes through.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>

#include "src/runtime/reported_wait.hpp"
#include "tests/test_env.hpp"

namespace {

// stderr (where mk::log writes, with write(2)) during f, as text: gtest's capture redirects the descriptor.
std::string stderr_of(const std::function<void()>& f) {
  testing::internal::CaptureStderr();
  try {
    f();
  } catch (...) {
    (void)testing::internal::GetCapturedStderr();
    throw;
  }
  return testing::internal::GetCapturedStderr();
}

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

size_t count(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t at = s.find(needle); at != std::string::npos; at = s.find(needle, at + 1)) ++n;
  return n;
}

}  // namespace

TEST(ReportedWait, ALongWaitIsReportedWhileItLasts) {
  bool ran = false;
  const std::string log = stderr_of([&] {
    mk::run_reported("rank 3: GemmAr plan setup", "GPU 0's queued work", 100, 100, [&] {
      sleep_ms(450);
      ran = true;
    });
  });
  EXPECT_TRUE(ran);
  EXPECT_NE(log.find("rank 3: GemmAr plan setup: still waiting after 0.1 s for GPU 0's queued work"),
            std::string::npos) << log;
  EXPECT_NE(log.find("still waiting after 0.2 s"), std::string::npos) << log;
  const size_t reports = count(log, "still waiting after");
  EXPECT_GE(reports, 3u) << log;
  EXPECT_LE(reports, 5u) << log;  // (none once the wait returned; slack for a loaded machine)
}

TEST(ReportedWait, AShortWaitSaysNothing) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string log = stderr_of([] { mk::run_reported("setup", "work", 1000, 1000, [] { sleep_ms(20); }); });
  EXPECT_EQ(count(log, "still waiting"), 0u) << log;
  // The watcher is released at once, not at its first report.
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 0.5);
}

TEST(ReportedWait, TheWaitsExceptionPassesThroughAndEndsTheReports) {
  const std::string log = stderr_of([] {
    EXPECT_THROW(mk::run_reported("setup", "work", 50, 50, [] {
      sleep_ms(120);
      throw std::runtime_error("sync failed");
    }),
                 std::runtime_error);
    sleep_ms(200);  // a watcher left running would report here
  });
  EXPECT_LE(count(log, "still waiting"), 2u) << log;
}

TEST(ReportedWait, NoReportsWithoutABound) {
  const std::string log = stderr_of([] { mk::run_reported("setup", "work", 0, 0, [] { sleep_ms(60); }); });
  EXPECT_EQ(count(log, "still waiting"), 0u) << log;
}

TEST(ReportedWait, TheDeviceWaitsBoundIsFourTimesMkTimeout) {
  const mk::test::EnvGuard t("MK_TIMEOUT_MS", "1500");
  EXPECT_EQ(mk::device_wait_report_ms(), 6000);
  EXPECT_NE(mk::device_work_awaited(2).find("GPU 2's queued work"), std::string::npos);
}
