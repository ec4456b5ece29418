// The text of a device wait's diagnostic (src/runtime/wait_diag_text.hpp): each kind of wait names who waited
// for what. No GPU: the records are filled here as a kernel's give_up writes them.
#include <gtest/gtest.h>

#include <string>

#include "src/runtime/wait_diag_text.hpp"

namespace {

mk::WaitDiag record(int32_t role, int32_t peer, int32_t signal, int32_t reason) {
  mk::WaitDiag d{};
  d.state = 2;
  d.rank = 3;
  d.role = role;
  d.peer = peer;
  d.signal = signal;
  d.block = 7;
  d.thread = 0;
  d.reason = reason;
  d.aborter = reason == mk::kWaitAborted ? 1 : -1;
  d.expected = 1040;
  d.seen = 1012;
  d.waited_ns = 5'200'000'000ull;
  return d;
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(WaitDiagText, AnIncompleteRecordSaysNothing) {
  auto d = record(static_cast<int32_t>(mk::Role::InterSend), 0, mk::kDiagNetRoom, mk::kWaitTimeout);
  d.state = 1;
  EXPECT_EQ(mk::format_diag(d), "");
}

// A push that found its network queue full (net::push, the GEMM epilogue's puts) names the queue and the proxy's
// progress; it used to read "waiting on a signal outside the pool from peer -1".
TEST(WaitDiagText, AFullNetworkQueueNamesTheQueueAndTheProxysProgress) {
  const auto t = mk::format_diag(record(static_cast<int32_t>(mk::Role::InterSend), 2, mk::kDiagNetRoom,
                                        mk::kWaitTimeout));
  EXPECT_TRUE(has(t, "rank 3 role InterSend (block 7 thread 0) waited 5200 ms for room in network queue 2, full: "
                     "its host proxy had taken 1012 commands and this push needs it to take 1040"))
      << t;
  EXPECT_TRUE(has(t, "MK_TIMEOUT_MS without the proxy taking a command")) << t;
  EXPECT_FALSE(has(t, "outside the pool")) << t;
  const auto a = mk::format_diag(record(static_cast<int32_t>(mk::Role::Compute), 1, mk::kDiagNetRoom,
                                        mk::kWaitAborted));
  EXPECT_TRUE(has(a, "rank 3 role Compute (block 7 thread 0) stopped waiting for room in network queue 1")) << a;
  EXPECT_TRUE(has(a, "abort raised by rank 1")) << a;
}

TEST(WaitDiagText, OtherWaitsKeepTheirWords) {
  const auto done = mk::format_diag(record(static_cast<int32_t>(mk::Role::InterSend), 2, mk::kDiagNetDone,
                                           mk::kWaitTimeout));
  EXPECT_TRUE(has(done, "for network queue 2 to complete its commands: 1012 of 1040 done")) << done;
  EXPECT_TRUE(has(done, "(MK_TIMEOUT_MS without the queue completing a command, or 3 x MK_TIMEOUT_MS in all)")) << done;
  const auto sig = mk::format_diag(record(static_cast<int32_t>(mk::Role::Compute), 1, 12, mk::kWaitTimeout));
  EXPECT_TRUE(has(sig, "timed out after 5200 ms waiting on signal 12 from peer 1: expected >= 1040, seen 1012"))
      << sig;
  const auto stage = mk::format_diag(record(static_cast<int32_t>(mk::Role::Compute), -1, mk::kDiagPipelineStage,
                                            mk::kWaitTimeout));
  EXPECT_TRUE(has(stage, "waiting on its own pipeline stage 1040 (phase 1012)")) << stage;
}

// A pipeline wait on a named barrier (negative codes) printed as 18446744073709551611; the attention watchdog's
// count read as "stage 8" (a K release) without the warps done.
TEST(WaitDiagText, PipelineBarriersAreNamed) {
  auto d = record(static_cast<int32_t>(mk::Role::Compute), -1, mk::kDiagPipelineStage, mk::kWaitTimeout);
  d.expected = static_cast<uint64_t>(int64_t{mk::kStageQFull});
  auto t = mk::format_diag(d);
  EXPECT_TRUE(has(t, "waiting on the attention engine's next Q tile (loaded by its producer) (MK_TIMEOUT_MS)")) << t;
  EXPECT_FALSE(has(t, "18446744073709551")) << t;
  d.expected = static_cast<uint64_t>(int64_t{mk::kStageConsumersDone});
  d.seen = 6;
  t = mk::format_diag(d);
  EXPECT_TRUE(has(t, "the attention engine's consumer warps to finish (6 of 8 done)")) << t;
  d.expected = static_cast<uint64_t>(int64_t{mk::kStageEpiEmpty});
  EXPECT_TRUE(has(mk::format_diag(d), "the GEMM epilogue's staging area")) << mk::format_diag(d);
  d.expected = static_cast<uint64_t>(int64_t{-9});
  EXPECT_TRUE(has(mk::format_diag(d), "its own pipeline barrier -9")) << mk::format_diag(d);
}

// A wait on a flag of another CTA of the same rank (split-K partials, the arrival queue) read as "a signal outside
// the pool from peer -1".
TEST(WaitDiagText, AFlagOfAnotherCtaIsNotCalledAPeersSignal) {
  const auto t = mk::format_diag(record(static_cast<int32_t>(mk::Role::Compute), -1, -1, mk::kWaitTimeout));
  EXPECT_TRUE(has(t, "waiting on a flag of another CTA of this rank (a split-K partner's partial tile")) << t;
  EXPECT_TRUE(has(t, "expected >= 1040, seen 1012 (MK_TIMEOUT_MS)")) << t;
  EXPECT_FALSE(has(t, "peer -1")) << t;
  const auto peer = mk::format_diag(record(static_cast<int32_t>(mk::Role::Compute), 2, -1, mk::kWaitAborted));
  EXPECT_TRUE(has(peer, "stopped waiting on a signal outside the pool from peer 2")) << peer;
}

}  // namespace
