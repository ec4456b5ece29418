// The ring-attention plan's C ABI and the plans' event log (mk::TraceLog) without a GPU:
// their entry points reject missing arguments or bad sizes with a message before touching anything.
#include <gtest/gtest.h>

#include <string>

#include "mkernel/mkernel.h"
#include "mkernel/trace_log.hpp"

TEST(RingCApi, TraceEntryPointsRejectMissingArguments) {
  EXPECT_NE(mk_ring_attn_trace(nullptr, 16), 0);
  EXPECT_NE(std::string(mk_last_error()).find("plan"), std::string::npos);
  int64_t n = -1;
  EXPECT_NE(mk_ring_attn_read_trace(nullptr, nullptr, 0, &n), 0);
  EXPECT_EQ(n, -1);
  EXPECT_NE(mk_ring_attn_run(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr), 0);
  EXPECT_EQ(mk_ring_attn_destroy(nullptr), 0);  // like free(NULL)
}

// A plan's device event log (mk::TraceLog, behind every plan's enable_trace)
// rejects bad sizes before allocating; off, it reads back nothing.
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
