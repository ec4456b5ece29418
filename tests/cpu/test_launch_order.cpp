// LaunchOrder without a GPU: a stream whose capture state cannot be queried counts as capturing, so begin()
// makes no CUDA call here, and what is left to test is the plan's one-host-thread rule.
#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <string>
#include <thread>

#include "mkernel/error.hpp"
#include "mkernel/launch_order.hpp"

namespace {

std::string begin_error(mk::LaunchOrder& order) {
  try {
    auto call = order.begin(nullptr);
  } catch (const mk::Error& e) {
    return e.what();
  }
  return {};
}

}  // namespace

TEST(LaunchOrder, ACallWhileAnotherIsInItsSpanIsRefusedSayingWhy) {
  mk::LaunchOrder order("TestPlan's launch-order event");
  {
    auto first = order.begin(nullptr);
    const std::string e = begin_error(order);  // (as another thread's call would be)
    EXPECT_NE(e.find("a plan's call began while another of its calls, on another host thread, was still enqueuing"),
              std::string::npos) << e;
    EXPECT_NE(e.find("TestPlan's launch-order event"), std::string::npos) << e;
    EXPECT_NE(e.find("a plan per thread, or a lock"), std::string::npos) << e;
  }
  EXPECT_EQ(begin_error(order), "");
  {
    // A plan's launch() returns its span: the moved-from one ends first and must leave the span open.
    std::optional<mk::LaunchOrder::Call> first{order.begin(nullptr)};
    auto moved = std::move(*first);
    first.reset();
    EXPECT_FALSE(begin_error(order).empty());
  }
  EXPECT_EQ(begin_error(order), "");  // the span ended: calls go on
  EXPECT_EQ(begin_error(order), "");
}

TEST(LaunchOrder, TwoThreadsCallingAPlanAtOnceGetAnErrorNotARace) {
  mk::LaunchOrder order("TestPlan's launch-order event");
  std::atomic<bool> inside{false}, release{false};
  std::thread holder([&] {
    auto call = order.begin(nullptr);
    inside = true;
    while (!release) std::this_thread::yield();
  });
  while (!inside) std::this_thread::yield();
  EXPECT_NE(begin_error(order).find("another host thread"), std::string::npos);
  release = true;
  holder.join();
  EXPECT_EQ(begin_error(order), "");
}
