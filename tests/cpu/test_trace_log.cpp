// mk::TraceLog (include/mkernel/trace_log.hpp, behind every plan's
// enable_trace) without a GPU: bad sizes are refused with a message naming
// the plan before anything is allocated; a log that is off reads back
// nothing and never calls into CUDA.
#include <gtest/gtest.h>

#include <exception>
#include <string>

#include "mkernel/trace_log.hpp"

TEST(TraceLog, RejectsBadSizesAndIsEmptyWhenOff) {
  mk::TraceLog log("Plan");
  EXPECT_EQ(log.base(), nullptr);
  EXPECT_TRUE(log.read().empty());
  try {
    log.enable(4, -1);
    ADD_FAILURE() << "a negative event count was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("Plan::enable_trace"), std::string::npos) << e.what();
  }
  EXPECT_THROW(log.enable(4, (1 << 20) + 1), std::exception);
  EXPECT_THROW(log.enable(-1, 8), std::exception);
  log.enable(0, 8);  // no CTAs: off, nothing allocated
  EXPECT_EQ(log.base(), nullptr);
  log.clear(nullptr);  // off: no call into CUDA
}
