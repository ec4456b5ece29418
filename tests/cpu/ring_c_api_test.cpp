// The ring-attention plan's C ABI without a GPU: its diagnostics entry
// points reject missing arguments with a message before touching anything.
#include <gtest/gtest.h>

#include <string>

#include "mkernel/mkernel.h"

TEST(RingCApi, TraceEntryPointsRejectMissingArguments) {
  EXPECT_NE(mk_ring_attn_trace(nullptr, 16), 0);
  EXPECT_NE(std::string(mk_last_error()).find("plan"), std::string::npos);
  int64_t n = -1;
  EXPECT_NE(mk_ring_attn_read_trace(nullptr, nullptr, 0, &n), 0);
  EXPECT_EQ(n, -1);
  EXPECT_NE(mk_ring_attn_run(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr), 0);
  int captured = -1;
  EXPECT_NE(mk_ring_attn_captured(nullptr, &captured), 0);
  EXPECT_EQ(captured, -1);
  EXPECT_EQ(mk_ring_attn_destroy(nullptr), 0);  // like free(NULL)
}
