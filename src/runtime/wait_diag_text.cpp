#include "src/runtime/wait_diag_text.hpp"

#include "mkernel/error.hpp"

namespace mk {

namespace {

// What a pipeline wait (kDiagPipelineStage) waited on: a stage, or a named barrier (device/ctx.hpp, kStage*).
std::string pipeline_wait(const WaitDiag& d) {
  const auto what = static_cast<int64_t>(d.expected);  // (stored as the 64-bit two's complement of a code)
  switch (what) {
    case kStageEpiEmpty: return "the GEMM epilogue's staging area (its previous half to be read out)";
    case kStageEpiFull: return "the GEMM epilogue's staging area (the consumers' tile)";
    case kStageQEmpty: return "the attention engine's Q tile (released by its consumers)";
    case kStageQFull: return "the attention engine's next Q tile (loaded by its producer)";
    case kStageConsumersDone:
      return cat("the attention engine's consumer warps to finish (", d.seen, " of 8 done)");
    default:
      return what >= 0 ? cat("its own pipeline stage ", what, " (phase ", d.seen, ")")
                       : cat("its own pipeline barrier ", what);
  }
}

}  // namespace

std::string format_diag(const WaitDiag& d) {
  if (d.state != 2) return "";
  const std::string who = cat("rank ", d.rank, " role ", role_name(d.role), " (block ", d.block, " thread ", d.thread,
                              ")");
  const std::string agent = cat("rank ", d.rank, "'s network delivery agent (block ", d.block, ") ");
  const bool timed_out = d.reason == kWaitTimeout;
  const std::string why = timed_out ? std::string(" (MK_TIMEOUT_MS)") : cat(": abort raised by rank ", d.aborter);
  const uint64_t ms = d.waited_ns / 1000000;
  if (d.signal == kDiagPipelineStage) return cat(who, " gave up after ", ms, " ms waiting on ", pipeline_wait(d), why);
  if (d.signal == kDiagDeliveryOrder)
    return cat(agent, timed_out ? cat("waited ", ms, " ms") : std::string("stopped waiting"), " for delivery #",
               d.expected - 1, " of queue ", d.peer, ", an earlier chunk of a write it signals, claimed by another "
               "agent (done word ", d.seen, ")", why);
  if (d.signal == kDiagNetDone && d.role == static_cast<int32_t>(Role::Deliver))
    return cat(agent, timed_out ? cat("made no progress for ", ms, " ms") : std::string("stopped"),
               d.peer >= 0 ? cat(" with its kernel's network writes undelivered: queue ", d.peer, " done ", d.seen,
                                 " of ", d.expected, " (the host proxy did not publish or complete the rest)")
                           : std::string(" while its kernel ran"),
               why);
  if (d.signal == kDiagNetDone)  // (net::flush: bounded on the queue's progress, as a full queue's wait)
    return cat(who, " ", timed_out ? cat("waited ", ms, " ms") : std::string("stopped waiting"),
               " for network queue ", d.peer, " to complete its commands: ", d.seen, " of ", d.expected,
               " done (the host proxy or the transport did not finish the rest)",
               timed_out ? " (MK_TIMEOUT_MS without the queue completing a command, or 3 x MK_TIMEOUT_MS in all)"
                         : why);
  if (d.signal == kDiagNetRoom)
    return cat(who, " ", timed_out ? cat("waited ", ms, " ms") : std::string("stopped waiting"),
               " for room in network queue ", d.peer, ", full: its host proxy had taken ", d.seen,
               " commands and this push needs it to take ", d.expected,
               timed_out ? " (MK_TIMEOUT_MS without the proxy taking a command, or 3 x MK_TIMEOUT_MS in all: the "
                           "proxy or its transport is stuck or too slow)"
                         : why);
  // A flag outside the pool with no peer: another CTA of this rank (a split-K partner's partial tile, the GEMM
  // engine's arrival queue), not a rank's signal.
  if (d.signal < 0 && d.peer < 0)
    return cat(who, timed_out ? cat(" timed out after ", ms, " ms") : std::string(" stopped"),
               " waiting on a flag of another CTA of this rank (a split-K partner's partial tile or the GEMM "
               "engine's arrival queue, outside the signal pool): expected >= ", d.expected, ", seen ", d.seen, why);
  const std::string sig = d.signal >= 0 ? cat("signal ", d.signal) : std::string("a signal outside the pool");
  if (timed_out)
    return cat(who, " timed out after ", ms, " ms waiting on ", sig, " from peer ", d.peer, ": expected >= ",
               d.expected, ", seen ", d.seen, " (MK_TIMEOUT_MS)");
  return cat(who, " stopped waiting on ", sig, " from peer ", d.peer, " (expected >= ", d.expected, ", seen ",
             d.seen, "): abort raised by rank ", d.aborter);
}

}  // namespace mk
