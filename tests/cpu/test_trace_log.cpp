// mk::TraceLog (include/mkernel/trace_log.hpp, behind every plan's
// enable_trace) without a GPU: bad sizes are refused with a message naming
// the plan before anything is allocated, as is a new buffer for a plan a
// CUDA graph holds; a log that is off reads back
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
    log.enable(4, -1, false);
    ADD_FAILURE() << "a negative event count was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("Plan::enable_trace"), std::string::npos) << e.what();
  }
  EXPECT_THROW(log.enable(4, (1 << 20) + 1, false), std::exception);
  EXPECT_THROW(log.enable(-1, 8, false), std::exception);
  try {  // a plan whose launches a graph holds keeps its buffer
    log.enable(0, 8, true);
    ADD_FAILURE() << "enable_trace on a captured plan was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("captured in a CUDA graph"), std::string::npos) << e.what();
  }
  log.enable(0, 8, false);  // no CTAs: off, nothing allocated
  EXPECT_EQ(log.base(), nullptr);
  log.clear(nullptr);  // off: no call into CUDA
}
