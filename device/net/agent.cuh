// mkernel: the delivery agent (Role::Deliver), NetCtx::agent CTAs of every
// kernel that pushes network commands, or waits for network data, when the
// transport delivers through rings (emu, MK_EMU_AGENTS; fabric's staging and
// EFA's GPU signals, MK_FABRIC_STAGE=agent, where a rank's own agents deliver
// what its peers sent: a kernel that waits without one waits until its
// timeout). It claims
// the writes (or a write's early chunks) the proxy published in each queue's
// ring (device/net/delivery.hpp), copies their
// bytes (the whole CTA on each large one, a warp on each small one; local
// memory -> the peer's, over the host-wide mapping), then, after one
// system-scope fence, writes their signals, and after another marks them done
// for the proxy.
//
// Why a CTA of the op's own kernel, and not the proxy's copies and kernels:
// any CUDA work the proxy issues can land in a hardware work queue behind
// work queued after the very kernel that waits for it (one queue with
// CUDA_DEVICE_MAX_CONNECTIONS=1, shared queues under MPS): a deadlock until
// the timeouts (bench/results/emu-work-queue-20261203.md). A resident CTA
// has nothing in front of it.
//
// Lifetime: until `*finished` reaches `workers` (the kernel's other CTAs each
// add 1 when they end: dev::epoch_finish for the ops) and then every command
// pushed to this rank's queues by then is done (CmdQueue::done reaches the
// head seen at that moment; later pushes, by other kernels, are theirs): a
// kernel never ends with a write of its own undelivered. Every wait is
// bounded: the abort word while the workers run (they have bounds of their
// own), then MK_TIMEOUT_MS without progress.
// Several agents (a kernel's MK_EMU_AGENTS CTAs, and those of kernels
// running at once) serve one ring in claim order,
// but batches of different agents may land in either order: the transport
// contract orders a write only before its own signal (src/net/transport.hpp).
// A write the proxy published in chunks (MK_EMU_CHUNK_KB) may be split over
// agents: its last chunk's agent waits for the others' done words before
// the signal (agent_await_chunks).
//
// Cost: warp 0 polls the rings in host memory (8 stamps in one read over PCIe,
// ~1.8 us a round; a short sleep when idle); such reads slow the GPU's
// system-scope fences a little (device/net/net.cuh, flush), so a kernel's
// agents after the first rest until the first finds a backlog
// (kAgentWakeBytes). A batch of up to 8 writes costs a claim (~3.3 us: two PCIe
// round trips), its copy (one CTA: ~48 GB/s on one H200), and two system-scope
// fences (one when no slot of the batch signals; 1.5 us when nothing else is in
// flight, 13-23 us beside a stream of puts) (measured under MPS:
// bench/results/emu-agent-speed-20261203.md). So one agent streamed at most
// ~88% of the emulated 50 GB/s; a kernel runs MK_EMU_AGENTS (default 2), whose
// batches' copies and fences overlap: 98-99% from 256 KB
// (bench/results/emu-agents-20261203.md). Bulk (TMA) copies were slower than
// copy_v16 from one SM (emu-agent-bulk-20261203.md). Each agent's SM is one of
// those the grid leaves to the transport (MK_NET_FREE_SMS).
#pragma once

#include <cuda_runtime_api.h>

#include "../epoch.cuh"
#include "net_ctx.hpp"
#include "../peer_copy.cuh"
#include "../signals.cuh"

namespace mk::net {

// Slots an agent claims at once (one round trip over PCIe reads their
// stamps, one more their bodies: 4 lanes of warp 0 per slot).
constexpr int kAgentBatch = 8;
static_assert(kAgentBatch * 4 <= 32, "one warp reads a batch's bodies, 16 bytes a lane");
// 16-byte loads in flight per thread of the agent's copies: one CTA is the
// whole emulated NIC. With 8 (the NVLink roles' depth) the agent copied at
// 8-15 GB/s under MPS / time slicing on one H200, against the 50 GB/s it
// emulates (bench/results/emu-agent-20261203.md).
constexpr int kAgentCopyUnroll = 16;

// An idle agent's pause between polls of the rings: the first agent of a
// kernel (block 0) 200 ns, so that a lone write is claimed soon; the others
// (MK_EMU_AGENTS), while awake (below), 2 us: their host reads may slow
// everyone's system-scope fences. One way, 8 bytes, under MPS, when they
// polled all the time: 7.8 us with one agent; with two 9.0-9.2 polling
// alike, 8.9 at 2 us, 8.3-8.5 at 8 us; with three 11.3-11.4, 10.7-10.9,
// 9.6-10.1; and 8 us made 1-4 MB puts 2-3 us slower
// (bench/results/emu-agents-20261203.md).
#ifndef MK_AGENT_SECONDARY_IDLE_NS  // a compile-time knob for experiments only
#define MK_AGENT_SECONDARY_IDLE_NS 2000
#endif
constexpr unsigned kAgentSecondaryIdleNs = MK_AGENT_SECONDARY_IDLE_NS;
// So the agents after a kernel's first rest while the first keeps up: they read
// no host memory (but the abort word's fallback, once per 100 ms), only the
// rings' busy counters (device memory, every kAgentRestNs). The first agent
// counts itself in its ring's while it works on a batch that suggests more is
// coming (2 slots or more, or kAgentWakeBytes: a copy long enough for more
// slots, e.g. an early chunk of the same write, to be published meanwhile). The
// others poll the rings while a counter is not 0 and for kAgentAwakeNs after
// (or after their own last claim). A wake per batch alone, with that window,
// let them fall asleep during one long copy of the first (3 agents under MPS: 5
// of 10 streaming runs below 95% of the rate, against 10 of 10 polling all the
// time).
constexpr uint64_t kAgentWakeBytes = 128u << 10;
constexpr uint64_t kAgentAwakeNs = 20000;
constexpr unsigned kAgentRestNs = 200;

// The agent's shared memory (16-byte aligned; from the kernel's dynamic
// shared memory, which it does not otherwise use).
struct AgentScratch {
  uint64_t w[kAgentBatch][8];  // the claimed slots: w[i][0] the sequence, w[i][1..7] the body
  uint64_t head[kMaxNetQueues];  // each queue's head when the workers were seen done
  // This agent's latest unbroken run of claims in each ring, [from, end):
  // a chunked write's earlier chunks inside it are done already.
  uint64_t run_from[kMaxNetQueues], run_end[kMaxNetQueues];
  int32_t ring;
  int32_t n;     // slots claimed (0: none); -1: exit
  int32_t poll;  // this round, warp 0 polls the rings (else the agent rests)
};

namespace detail {
// Warp 0: claims the longest run (at most kAgentBatch) of published slots at
// the head of some ring into `sh` (sh->n > 0), else sh->n = 0. rr: the ring
// to try first (round robin), the same in every lane.
__device__ __forceinline__ void agent_claim(const NetCtx& nc, AgentScratch* sh, int& rr) {
  const unsigned lane = threadIdx.x & 31u;
  for (int k = 0; k < nc.num_queues; ++k) {
    const int qi = (rr + k) % nc.num_queues;
    const DeliveryRing& r = nc.delivery[qi];
    if (r.size == 0) continue;
    uint64_t c = 0;
    if (lane == 0) c = *reinterpret_cast<volatile const uint64_t*>(r.claim);
    c = __shfl_sync(0xffffffffu, c, 0);
    const uint64_t mine = c + lane;
    const DeliverySlot* s = r.slots + (mine & (r.size - 1));
    const bool published = lane < kAgentBatch && lane < r.size && dev::ld_acquire<dev::Scope::Sys>(&s->w[0]) == mine + 1;
    const unsigned run = __ffs(~__ballot_sync(0xffffffffu, published)) - 1;  // published slots from c on
    if (run == 0) continue;
    unsigned ok = 0;
    if (lane == 0) ok = atomicCAS(reinterpret_cast<unsigned long long*>(r.claim), c, c + run) == c;
    if (!__shfl_sync(0xffffffffu, ok, 0)) break;  // another agent took them: try again next round
    // The bodies in one PCIe round trip: lane L reads 16 bytes, words
    // 2(L%4) and 2(L%4)+1 of slot L/4 (each lane reading its own slot's 7
    // words took ~6 us: the loads of a lane went one at a time). The warp
    // barrier orders the stamps' acquires (lanes 0..run-1) before every
    // lane's loads.
    __syncwarp();
    const unsigned slot = lane >> 2, part = lane & 3u;
    if (slot < run) {
      const DeliverySlot* b = r.slots + ((c + slot) & (r.size - 1));
      const ulonglong2 v = dev::ld_volatile_v2(&b->w[2 * part]);
      sh->w[slot][2 * part] = part == 0 ? c + slot : v.x;  // word 0: the sequence (the stamp is it + 1)
      sh->w[slot][2 * part + 1] = v.y;
    }
    if (lane == 0) {
      *reinterpret_cast<volatile uint64_t*>(r.claimed) = c + run;
      sh->ring = qi;
      sh->n = static_cast<int32_t>(run);
      if (sh->run_end[qi] != c) sh->run_from[qi] = c;
      sh->run_end[qi] = c + run;
    }
    rr = qi + 1;
    return;
  }
  if (lane == 0) sh->n = 0;
}

// Whether the resting agents should poll: a ring's busy counter is not 0,
// or a ring has none (then every agent polls all the time).
__device__ __forceinline__ bool agent_help_wanted(const NetCtx& nc) {
  bool want = false;
  for (int qi = 0; qi < nc.num_queues; ++qi) {
    const DeliveryRing& r = nc.delivery[qi];
    if (r.size == 0) continue;
    want |= !r.busy || *reinterpret_cast<volatile const uint64_t*>(r.busy) != 0;
  }
  return want;
}

// Thread 0 of a kernel's first agent, after a claim: counts itself busy in
// the ring's counter while on a batch that suggests a backlog; returns the
// counter it added to (nullptr: none), to take itself off after the batch.
__device__ __forceinline__ uint64_t* agent_ask_help(const NetCtx& nc, const AgentScratch* sh) {
  uint64_t* busy = nc.delivery[sh->ring].busy;
  if (nc.agent < 2 || !busy) return nullptr;
  // One slot: its size, which this thread (lane 0) wrote itself (the other
  // slots' words come from other lanes, unsynchronised with this read).
  if (sh->n < 2 && delivery_bytes(sh->w[0][1]) < kAgentWakeBytes) return nullptr;
  atomicAdd(reinterpret_cast<unsigned long long*>(busy), 1ull);
  return busy;
}

// Whether a batch copies in fewer memory round trips with a warp per slot
// than with the whole CTA on each slot in turn (a round trip moves
// kAgentCopyUnroll 16-byte loads per thread; an estimate: copy_v16's tail
// keeps 8 in flight, so a warp takes 2 round trips for a slot of more than 4
// and less than 8 KB, where this counts 1). Every thread computes the same.
__device__ __forceinline__ bool copy_by_warp(const AgentScratch* sh, int n, unsigned threads) {
  const uint64_t per_cta = uint64_t(threads) * 16u * kAgentCopyUnroll, per_warp = 32u * 16u * kAgentCopyUnroll;
  const int warps = static_cast<int>(threads >> 5);
  if (n < 2 || warps < 2) return false;
  uint64_t cta_trips = 0, longest = 0;  // longest: the busiest warp's (slot i goes to warp i % warps)
  for (int w = 0; w < warps && w < n; ++w) {
    uint64_t trips = 0;
    for (int i = w; i < n; i += warps) {
      const uint64_t b = delivery_bytes(sh->w[i][1]);
      cta_trips += (b + per_cta - 1) / per_cta;
      trips += (b + per_warp - 1) / per_warp;
    }
    longest = trips > longest ? trips : longest;
  }
  return longest < cta_trips;
}

// Warp 0, after the batch's copies and before its signals: a chunked
// write's last slot (`after`) may signal only once the write's earlier
// chunks are done. Those this agent claimed are (in this batch, or in its
// unbroken run of claims before it); the others, claimed by other agents
// (of this kernel or of others), are waited for through their done words (a
// lane a word, one PCIe round trip a poll). Their agents wrote each done word
// after a system-scope fence behind the chunk's data, so the data is visible
// before this agent's own fence and signal.
template <dev::Report R>
__device__ __forceinline__ void agent_await_chunks(const NetCtx& nc, const DeviceCtx& ctx, const AgentScratch* sh,
                                                   int n) {
  const unsigned lane = threadIdx.x & 31u;
  const int qi = sh->ring;
  const DeliveryRing& r = nc.delivery[qi];
  const uint64_t own_from = sh->run_from[qi];
  for (int i = 0; i < n; ++i) {
    if (!delivery_after(sh->w[i][1])) continue;
    const uint64_t first = sh->w[i][0] - sh->w[i][6];
    if (first >= own_from) continue;
    const uint64_t count = own_from - first;  // < kMaxDeliveryChunks <= 32
    const uint64_t seq = first + lane;
    uint64_t t0 = 0, next_host = ctx.host_abort_poll_ns;
    // Polls back off to 2 us: host reads slow the GPU's system-scope fences
    // (device/signals.cuh, abort_word), the other agent's too, and the chunk
    // waited for is at least a copy of MK_EMU_CHUNK_KB away.
    unsigned pause = 100;
    while (true) {
      const uint64_t v = lane < count ? dev::ld_acquire<dev::Scope::Sys>(r.done + (seq & (r.size - 1))) : ~0ull;
      const bool ok = v >= seq + 1;  // a later value there: a later slot, published only after this one was done
      if (__all_sync(0xffffffffu, ok)) break;
      const uint64_t now = dev::globaltimer();
      if (t0 == 0) t0 = now;
      const unsigned late = __ffs(__ballot_sync(0xffffffffu, !ok)) - 1;
      if (lane == late) {
        const dev::WaitSite site{static_cast<int32_t>(Role::Deliver), qi, kDiagDeliveryOrder};
        const uint32_t ab = dev::abort_word(ctx, now - t0, next_host);
        if (ab) dev::give_up<R>(ctx, site, seq + 1, v, now - t0, kWaitAborted, static_cast<int32_t>(ab) - 1);
        if (now - t0 > ctx.timeout_ns) dev::give_up<R>(ctx, site, seq + 1, v, now - t0, kWaitTimeout, -1);
      }
      __nanosleep(pause);
      pause = pause < 2000 ? 2 * pause : pause;
    }
  }
  __syncwarp();  // every lane's acquires before lane 0's fence and signals
}

// Thread 0: true once every queue's commands up to `heads` (the snapshot
// taken when the workers were done) are done; else the first queue that is
// not, with its head and `done`, for a report. Commands pushed later, by
// other kernels, are theirs to wait for.
__device__ __forceinline__ bool agent_queues_done(const NetCtx& nc, const uint64_t* heads, int& queue, uint64_t& head,
                                                  uint64_t& done) {
  for (int qi = 0; qi < nc.num_queues; ++qi) {
    head = heads[qi];
    done = dev::ld_acquire<dev::Scope::Sys>(nc.queues[qi].done);
    if (done < head) {
      queue = qi;
      return false;
    }
  }
  return true;
}
}  // namespace detail

// Called by every thread of the agent's CTA (at least one warp). R = Quiet in
// kernels that share a launch with the GEMM engine (no function calls;
// device/signals.cuh).
template <dev::Report R = dev::Report::Print>
__device__ __forceinline__ void run_agent(const NetCtx& nc, const DeviceCtx& ctx, const uint32_t* finished,
                                          uint32_t workers, void* smem) {
  AgentScratch* sh = static_cast<AgentScratch*>(smem);
  int rr = 0;
  bool ending = false;    // the workers were seen done (heads snapshot taken)
  uint64_t t_still = 0;   // since when nothing moved while ending (0: something did)
  uint64_t last_done = 0;  // the sum of the queues' done at the last check
  uint64_t t0 = 0, next_host = 0;
  uint32_t idle = 0;
  const bool first = blockIdx.x == 0;  // the kernel's first agent never rests
  uint64_t awake_until = 0;   // the others' thread 0: poll the rings until then
  uint64_t* busy = nullptr;   // the first's thread 0: the ring's busy counter it counts itself in
  for (int q = threadIdx.x; q < kMaxNetQueues; q += blockDim.x) sh->run_from[q] = 0, sh->run_end[q] = ~0ull;
  if (threadIdx.x == 0) sh->poll = first || detail::agent_help_wanted(nc);
  __syncthreads();
  while (true) {
    if (threadIdx.x < 32) {  // lane 0 alone reads it, for the whole warp: thread 0 rewrites sh->poll below
      if (__shfl_sync(0xffffffffu, threadIdx.x == 0 ? sh->poll : 0, 0)) detail::agent_claim(nc, sh, rr);
      else if (threadIdx.x == 0) sh->n = 0;
    }
    if (threadIdx.x == 0 && sh->n > 0) {
      t_still = 0;  // progress: the bound starts over
      if (first) busy = detail::agent_ask_help(nc, sh);
      else awake_until = dev::globaltimer() + kAgentAwakeNs;
    }
    if (threadIdx.x == 0 && sh->n == 0) {
      uint64_t head = 0, done = 0;
      int queue = -1;
      if (!ending && *reinterpret_cast<volatile const uint32_t*>(finished) >= workers) {
        __threadfence();  // the workers' pushes (fenced before their count) before the heads read next
        for (int qi = 0; qi < nc.num_queues; ++qi)
          sh->head[qi] = *reinterpret_cast<volatile const uint64_t*>(nc.queues[qi].head);
        ending = true;
      }
      if (ending && detail::agent_queues_done(nc, sh->head, queue, head, done)) {
        sh->n = -1;
      } else if ((++idle & 63u) == 0u) {
        const uint64_t now = dev::globaltimer();
        if (t0 == 0) t0 = now, next_host = ctx.host_abort_poll_ns;
        // Once ending, the bound is MK_TIMEOUT_MS without progress (a paced
        // backlog may take longer than that in all). Before, the workers'
        // own waits bound the kernel; the abort word still ends it.
        uint64_t moved = 0;
        for (int qi = 0; ending && qi < nc.num_queues; ++qi) moved += dev::ld_acquire<dev::Scope::Sys>(nc.queues[qi].done);
        if (!ending || moved != last_done || t_still == 0) t_still = now, last_done = moved;
        const dev::WaitSite site{static_cast<int32_t>(Role::Deliver), queue, kDiagNetDone};
        const uint32_t ab = dev::abort_word(ctx, now - t0, next_host);
        if (ab) dev::give_up<R>(ctx, site, head, done, now - t0, kWaitAborted, static_cast<int32_t>(ab) - 1);
        if (ending && now - t_still > ctx.timeout_ns)
          dev::give_up<R>(ctx, site, head, done, now - t_still, kWaitTimeout, -1);
      } else {  // ending: the kernel waits for it
        __nanosleep(first || ending ? 200u : sh->poll ? kAgentSecondaryIdleNs : kAgentRestNs);
      }
    }
    if (threadIdx.x == 0 && !first) {  // next round: poll or rest
      const uint64_t now = dev::globaltimer();
      if (detail::agent_help_wanted(nc)) awake_until = now + kAgentAwakeNs;
      sh->poll = ending || now < awake_until;
    }
    __syncthreads();
    const int32_t n = sh->n;
    if (n < 0) break;
    if (n > 0) {
      // Every slot's bytes, then (after the barrier) the signals. Small
      // slots go a warp each, at once (the whole CTA on one slot after
      // another waited a memory latency per slot: 12 GB/s for 4 KB
      // writes); others with the whole CTA, one after another.
      const bool by_warp = detail::copy_by_warp(sh, n, blockDim.x);
      const int warp = static_cast<int>(threadIdx.x >> 5), warps = static_cast<int>(blockDim.x >> 5);
      for (int i = by_warp ? warp : 0; i < n; i += by_warp ? warps : 1) {
        const uint64_t meta = sh->w[i][1];
        const void* src = delivery_inline(meta) ? static_cast<const void*>(&sh->w[i][6])
                                                : reinterpret_cast<const void*>(sh->w[i][2]);
        dev::copy_v16<false, kAgentCopyUnroll, true>(reinterpret_cast<void*>(sh->w[i][3]), src, delivery_bytes(meta),
                                               by_warp ? threadIdx.x & 31u : threadIdx.x, by_warp ? 32u : blockDim.x);
      }
      __syncthreads();
      if (threadIdx.x < 32) detail::agent_await_chunks<R>(nc, ctx, sh, n);
      if (threadIdx.x == 0) {
        const DeliveryRing& r = nc.delivery[sh->ring];
        // One system-scope fence for the whole batch: the block's stores
        // (ordered before this thread's by the barrier) reach the peers
        // before any of the signals below (a fence then relaxed writes is a
        // release pattern). A release per signal and per done word cost
        // ~8 us each beside a stream of puts (120-133 us a batch of 8). A
        // batch without signals (a chunked write's first chunks) needs only
        // the fence before its done words.
        bool signals = false;
        for (int i = 0; i < n; ++i) signals |= delivery_sig_op(sh->w[i][1]) != SigOp::None;
        if (signals) __threadfence_system();
        for (int i = 0; i < n; ++i) {
          const SigOp op = delivery_sig_op(sh->w[i][1]);
          uint64_t* sig = reinterpret_cast<uint64_t*>(sh->w[i][4]);
          if (op == SigOp::Set) dev::st_relaxed_sys(sig, sh->w[i][5]);
          else if (op == SigOp::Add) dev::red_add_relaxed_sys(sig, sh->w[i][5]);
        }
        // And one more: the data and signals before the done words (the
        // proxy then completes the writes, which means delivered; another
        // agent may wait for them: agent_await_chunks).
        __threadfence_system();
        for (int i = 0; i < n; ++i) {
          const uint64_t seq = sh->w[i][0];
          dev::st_relaxed_sys(r.done + (seq & (r.size - 1)), seq + 1);
        }
        if (busy) atomicAdd(reinterpret_cast<unsigned long long*>(busy), ~0ull);  // - 1: this batch is done
        busy = nullptr;
      }
      idle = 0;
    }
    __syncthreads();  // sh is rewritten next round
  }
}

// An op kernel's first lines: for blockIdx.x < a.ctas runs the agent, counts
// the CTA in the launch's epoch (dev::epoch_finish: the agents end last) and
// returns true (the kernel returns); else false, and the kernel's CTA index
// is blockIdx.x - a.ctas. Every thread calls it. With several agents, the
// first to end saw every worker's count and no agent's (none had ended), so
// each agent's "workers done" is true when it reads it.
template <dev::Report R = dev::Report::Quiet>
__device__ __forceinline__ bool op_agent_block(const AgentLaunch& a, const DeviceCtx& ctx, const dev::DeviceEpoch& ep,
                                               void* smem) {
  if (static_cast<int>(blockIdx.x) >= a.ctas) return false;
  run_agent<R>(*a.nc, ctx, ep.done, gridDim.x - a.ctas, smem);
  dev::epoch_finish(ep);
  return true;
}

// Kernels without a DeviceEpoch (tests, benchmarks, a user's own kernel that
// pushes commands or waits for network data): launch agent_ctas(nc) more
// blocks, with at least sizeof(AgentScratch) bytes of dynamic shared memory,
// and a zeroed device word `finished` of the kernel's own; then
//   net::with_agent(nc, ctx, finished, smem, [&](int block, int blocks) { ... });
// runs the agent in blocks [0, agent_ctas(nc)) and body(block, blocks) in
// the others, with their indices shifted past them. The last agent to end
// sets `finished` back to 0, for the next launch. All threads of every block
// call it.
// The two halves, for a kernel that dispatches itself (one call site of a
// large role): the agent's block, and the end of every other block.
template <dev::Report R = dev::Report::Print>
__device__ __forceinline__ void run_counted_agent(const NetCtx& nc, const DeviceCtx& ctx, uint32_t* finished,
                                                  void* smem, int agents) {
  run_agent<R>(nc, ctx, finished, gridDim.x - agents, smem);
  if (threadIdx.x == 0 && atomicAdd(finished, 1u) == gridDim.x - 1) *reinterpret_cast<volatile uint32_t*>(finished) = 0;
}
__device__ __forceinline__ void count_block_done(uint32_t* finished) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();  // this block's pushes before its count (run_agent reads the heads after it)
    atomicAdd(finished, 1u);
  }
}

template <dev::Report R = dev::Report::Print, typename Body>
__device__ __forceinline__ void with_agent(const NetCtx& nc, const DeviceCtx& ctx, uint32_t* finished, void* smem,
                                           Body&& body) {
  const int agents = agent_ctas(nc);
  if (static_cast<int>(blockIdx.x) < agents) {
    run_counted_agent<R>(nc, ctx, finished, smem, agents);
    return;
  }
  body(static_cast<int>(blockIdx.x) - agents, static_cast<int>(gridDim.x) - agents);
  if (agents) count_block_done(finished);
}

// Host side of such a launch: its blocks, its dynamic shared memory, and a
// zeroed counter of its own (nullptr if CUDA fails; cudaFree it when done).
inline int with_agent_blocks(const NetCtx& nc, int blocks) { return blocks + agent_ctas(nc); }
inline size_t agent_smem_bytes(const NetCtx& nc) { return agent_ctas(nc) ? sizeof(AgentScratch) : 0; }
inline uint32_t* alloc_agent_counter() {
  uint32_t* w = nullptr;
  if (cudaMalloc(&w, sizeof(uint32_t)) != cudaSuccess) return nullptr;
  if (cudaMemset(w, 0, sizeof(uint32_t)) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {
    cudaFree(w);
    return nullptr;
  }
  return w;
}

}  // namespace mk::net
