// mkernel: an optional device event log (kinds and buffer: host and device;
// the recording function: device/trace.cuh) for diagnosing a persistent kernel's
// timeline (which CTA waited for what, and when data was sent). Off unless a
// plan enables it (a null buffer costs one predictable branch per event).
//
// Layout of a buffer: per CTA, one count word then cap events of two words
// (globaltimer ns, kind << 32 | arg). Events past cap are counted, not kept.
// The host zeroes the buffer before each traced launch and reads it after.
#pragma once

#include <cstdint>

namespace mk::dev {

enum class TraceKind : uint32_t {
  CtaStart = 1,    // the engine's role began (GEMM: barriers set up, before the first load); arg: 0
  CtaEnd = 2,      // the first consumer warpgroup finished its units (attn::run_compute) or found no
                   // more (gemm: its last tile's stores issued; an event after its loop made ptxas spill); arg: 0
  WaitBegin = 3,   // the engine's producer waits for a chunk's arrival signal; arg: signal index
  WaitEnd = 4,     // arg: signal index
  PushDone = 5,    // a push item's piece is written and signalled; arg: chunk << 8 | destination local rank
  OwnReady = 6,    // InterSend saw an own chunk complete in its slot; arg: chunk
  PutPosted = 7,   // InterSend posted a chunk's network put; arg: chunk
  QuietDone = 8,   // InterSend's queue flushed; arg: 0
  PutClaimed = 9,  // InterSend claimed a chunk put's command slot (net::CmdStep::Claimed); arg: chunk
  PutRoom = 10,    // ... found the slot free (CmdStep::Room); arg: chunk
  PutBody = 11,    // ... issued the stores of the command's body to host memory (CmdStep::Body; their
                   // PCIe time shows in the next stage), before its system-scope release; arg: chunk
  KernelEntry = 12,  // a GEMM kernel's CTA began (before its epoch read and roles); arg: 0
  KernelExit = 13,   // ... ended (after its epoch end); arg: 0
  UnitBegin = 14,    // the GEMM engine's first consumer warpgroup begins a work unit (before its
                     // first stage wait; dynamic queue: once the unit's index came); arg: the unit
  UnitMmaDone = 15,  // ... finished the unit's K loop (its wgmma complete), before the unit's epilogue
                     // (split-part store, owner adds, stores, signals); arg: the unit
};

struct TraceBuf {  // POD (kernel parameters); zero-initialised: off
  uint64_t* base;    // nullptr: tracing off
  int32_t cap;       // events per CTA
  int32_t first;     // the grid index logged as CTA 0 (the CTAs before it, the delivery agent's, log nothing)
};

}  // namespace mk::dev
