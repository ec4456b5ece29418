// mkernel: the plain-old-data contract between host and device. Host code
// fills a DeviceCtx once per communicator; every kernel takes it by value.
// No CUDA-only syntax here: this header is included by host .cpp files.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define MK_HD __host__ __device__ __forceinline__
#else
#define MK_HD inline
#endif

namespace mk {

// NVLink peers per node (one HGX board). Peer pointer arrays are this long.
constexpr int kMaxLocalRanks = 8;

// Layout of the communicator's symmetric control region: abort word and
// diagnostic claim word, padded, then the signal pool (word i at
// kControlHeaderBytes + 8 * i). The network addresses signals this way.
constexpr size_t kControlHeaderBytes = 128;

// SM roles of the persistent kernels (DESIGN.md §3). Counts are run-time.
enum class Role : int32_t {
  Compute = 0,
  IntraComm,
  InterSend,
  InterRecv,
  Reduce,
  Controller,
  Test,
  Deliver,  // the network's delivery agent (device/net/agent.cuh)
  kCount
};

MK_HD const char* role_name(int32_t r) {
  switch (r) {
    case 0: return "Compute";
    case 1: return "IntraComm";
    case 2: return "InterSend";
    case 3: return "InterRecv";
    case 4: return "Reduce";
    case 5: return "Controller";
    case 6: return "Test";
    case 7: return "Deliver";
    default: return "?";
  }
}

// WaitDiag.signal for a wait on a CTA's own pipeline (mbarrier) rather than
// a signal; WaitDiag.expected then holds the pipeline stage s >= 0 (the
// attention engine: kKEmptyWhat + s for stage s's K release), or one of the
// kStage* codes below (stored as a 64-bit two's complement), and seen the
// barrier's phase (the watchdog's: the consumer warps done).
constexpr int32_t kDiagPipelineStage = -2;
constexpr int32_t kStageEpiEmpty = -2;       // GEMM epilogue: the staging area's previous half read out
constexpr int32_t kStageEpiFull = -3;        // GEMM epilogue: the consumers' tile in the staging area
constexpr int32_t kStageQEmpty = -4;         // attention: the Q tile released by the consumers
constexpr int32_t kStageQFull = -5;          // attention: the next Q tile loaded by the producer
constexpr int32_t kStageConsumersDone = -6;  // attention's producer watchdog: 8 consumer warps to finish
// WaitDiag.signal for a wait on a network command queue's completion count
// (net::flush / net::quiet); WaitDiag.peer then holds the queue.
constexpr int32_t kDiagNetDone = -3;
// WaitDiag.signal for the delivery agent's wait on an earlier chunk of a
// write that another agent claimed (device/net/agent.cuh); WaitDiag.peer
// then holds the ring (queue), expected that chunk's sequence + 1.
constexpr int32_t kDiagDeliveryOrder = -4;
// WaitDiag.signal for a push's wait for room in a full network command
// queue (net::push, the GEMM epilogue's puts); WaitDiag.peer then holds the
// queue, expected the proxy's tail (commands taken) the push needs, seen the
// tail, waited the whole wait.
constexpr int32_t kDiagNetRoom = -5;

// Why a device wait gave up.
enum WaitFailReason : int32_t { kWaitTimeout = 1, kWaitAborted = 2 };

// First device-side failure of this rank, written once (state 0 -> 1 -> 2)
// into mapped pinned host memory so that the host can read it even after the
// kernel trapped and the context is lost.
struct WaitDiag {
  uint32_t state;   // 0 none, 1 being written, 2 complete
  int32_t rank;
  int32_t role;
  int32_t peer;     // rank expected to signal, -1 unknown
  int32_t signal;   // index in the signal pool, -1 outside it
  int32_t block;
  int32_t thread;
  int32_t reason;   // WaitFailReason
  int32_t aborter;  // rank that raised the abort word (kWaitAborted)
  int32_t pad;
  uint64_t expected;
  uint64_t seen;
  uint64_t waited_ns;
};

// How often a wait reads the host-mapped abort word (DeviceCtx::
// host_abort_poll_ns): once per 100 ms of waiting (device/signals.cuh,
// abort_word, says why so rarely).
constexpr uint64_t kHostAbortPollNs = 100000000;

// Everything a kernel needs to signal, wait and fail loudly.
struct DeviceCtx {
  int32_t rank;
  int32_t world;
  int32_t node;
  int32_t local_rank;
  int32_t local_size;
  int32_t num_signals;                        // per rank
  uint64_t timeout_ns;                        // MK_TIMEOUT_MS
  uint64_t host_abort_poll_ns = kHostAbortPollNs;  // tests change it
  uint32_t* abort_host;                       // mapped pinned: host <-> device
  uint32_t* abort_dev;                        // this rank's word, symmetric memory
  uint32_t* abort_peer[kMaxLocalRanks];       // node peers' words, by local rank
  WaitDiag* diag;                             // mapped pinned host record
  uint32_t* diag_claim;                       // device word: first failing thread owns diag
  uint64_t* signals;                          // this rank's signal pool (symmetric)
  uint64_t* peer_signals[kMaxLocalRanks];     // node peers' pools, by local rank
};

}  // namespace mk
