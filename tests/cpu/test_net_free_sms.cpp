// What a persistent op's grid leaves free for the network transport's own
// kernels (MK_NET_FREE_SMS): none for verbs; for emu and fabric the knob,
// else 1, or 8 when the GPU is shared through MPS.
#include <gtest/gtest.h>

#include "src/net/transport.hpp"

namespace {

using mk::net::transport_free_sms;

TEST(NetFreeSms, ByTransportKnobAndMps) {
  EXPECT_EQ(transport_free_sms("verbs", 0, false), 0);
  EXPECT_EQ(transport_free_sms("verbs", 5, true), 0);  // verbs runs no kernel on the GPU
  EXPECT_EQ(transport_free_sms("emu", 0, false), 1);
  EXPECT_EQ(transport_free_sms("fabric", 0, false), 1);
  EXPECT_EQ(transport_free_sms("emu", 0, true), 8);
  EXPECT_EQ(transport_free_sms("fabric", 0, true), 8);
  EXPECT_EQ(transport_free_sms("emu", 3, true), 3);  // the knob wins
  EXPECT_EQ(transport_free_sms("emu", 2, false), 2);
}

}  // namespace
