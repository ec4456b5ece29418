// mkernel: the Hopper attention engine (forward), FlashAttention-3 in
// outline: TMA loads, WGMMA, warp-specialised producer and consumers,
// online softmax in fp32. Header-only; params in attn_params.hpp.
//
// Contract (DESIGN.md §3): a kernel gives the engine CTAs [0, num_compute)
// (or any CTA that is done with another role) and calls
// attn::run_compute<D, BN>(p, smem, cta, ncta) with kThreads threads and
// Geom<D, BN>::kSmemBytes of dynamic shared memory; BN (keys per block) is
// p.block_n: 176 for the one-GPU op, block_n_side(D) (176 at D = 128, 128
// at D = 64) in kernels with a side role (Regs below). Inside a CTA:
//   warpgroup 0      producer: one thread walks the CTA's units (batch,
//                    head, query tile); per unit it loads the Q tile, then
//                    every K and V block of every key segment the mask does
//                    not skip (waiting first for a segment's arrival signal)
//                    into a ring of kStages stages; the warpgroup gives up
//                    registers.
//   warpgroups 1..2  consumers, 64 query rows each: per key block
//                    S = Q K^T (wgmma, both operands in shared memory), the
//                    mask, the online softmax (running max and sum per row,
//                    O rescaled), then O += P V with P straight from
//                    registers (the accumulator fragment of S is the A
//                    fragment of P V) and V's tile read transposed
//                    (MN-major descriptor). Then O / l to bf16 and the LSE.
// K and V of a stage have barriers of their own, full and empty: S starts
// before V lands, and K's half is refilled as soon as both warpgroups'
// S of it completed, one P V before V's half.
// Every wait is bounded (p.timeout_ns) and reports who waited for what; a
// consumer that gives up does not trap in its own code (ConsumerStop below:
// ptxas holds a code region that contains a trap to the launch's 168
// registers whatever setmaxnreg grants, tools/ptxas_trap_probe.sh).
// The two consumer warpgroups take turns issuing their GEMMs (ping-pong,
// wait_turn / pass_turn), and inside a warpgroup the softmax of block i+1
// overlaps its own P_i V_i (FlashAttention-3's intra-warpgroup overlap):
// one turn issues S_{i+1} and P_i V_i, wait_group 1 lets the softmax of
// S_{i+1} start while P_i V_i runs, wait_group 0 then lets O be rescaled
// and P_{i+1} packed. Two things make it pay (2026-12-01, bench/results/
// attention-overlap-20261201.md: at S >= 8k, D = 128, median 583-588
// TFLOP/s and 0.86-1.04x of cuDNN, against 539-545 and 0.78-0.95x for the
// engine without the overlap, in the same runs):
//   - schedule_boundary() before the second wait: ptxas schedules within a
//     basic block and issued that wait above every exp2 of the softmax
//     (the SASS: both waits back to back, nothing overlapped;
//     tools/wip/README.md has the attempts that did not fix it);
//   - a stage ahead of both GEMMs of a turn: S_{i+1} is issued one block
//     earlier than without the overlap. With two 128-key stages released
//     only after P V, the producer could not load block i+2 until both
//     warpgroups finished P_i V_i, so every turn waited for a TMA load (0.7x
//     of the engine without it); three 128-key stages fixed that, and so do
//     two 144- or 176-key stages with K released after S (Geom).
// 176-key blocks (FlashAttention-3's at D = 128): fewer softmax steps and
// turns per key; 1.02-1.08x over 128-key blocks at S >= 4k (bench/results/
// attention-bn176-20261201.md).
// Measured and not kept: P V outside the turns, skipping the O rescale when
// the max stays (bench/results/attention-20261130T222140Z-experiment-pv-outside-turns.md);
// at D = 64, part of the softmax's exp2 from a polynomial on the FMA pipe
// instead of MUFU (FlashAttention-4's trick): 5 of 22 key groups 0.98-1.01x,
// 11 of 22 0.92-0.95x, so MUFU is not what holds D = 64 back
// (bench/results/session70-gpu-20261208.md).
#pragma once

#include <type_traits>

#include "attn_mma.cuh"
#include "attn_params.hpp"
#include "attn_walk.hpp"
#include "../bounded_wait.cuh"
#include "../fragment.cuh"
#include "../trace.cuh"

namespace mk::attn {

namespace detail {

namespace sm90 = dev::sm90;

template <int D, int BN>
struct Smem {
  uint8_t* q;       // Geom<D, BN>::kQBytes
  uint8_t* k;       // kStages x kKvBytes
  uint8_t* v;       // kStages x kKvBytes
  uint64_t* q_full;   // 1: the Q tile landed (producer's expect_tx)
  uint64_t* q_empty;  // 1: every consumer warp read the unit (ring) and its last S = Q K^T completed (8 arrivals)
  uint64_t* k_full;   // kStages
  uint64_t* v_full;   // kStages
  uint64_t* empty;    // kStages: both warpgroups' P V of the stage's V completed (2 arrivals)
  uint64_t* k_empty;  // kStages: both warpgroups' S = Q K^T of the stage's K completed (2 arrivals)
  int32_t* ring;      // [2]: the unit of Q tile i at [i % 2] (-1: no more), written before q_full's arrive
  int32_t* failed;    // 1: a consumer warpgroup gave up a wait (ConsumerStop); the CTA traps at its end
  int32_t* done;      // consumer warps that finished their units (the producer's watchdog, run_compute)
  int32_t* side;      // a word for the side role (run_compute's `side`: the ring op's push part)
};

template <int D, int BN>
__device__ __forceinline__ Smem<D, BN> carve(uint8_t* raw) {
  using G = Geom<D, BN>;
  const uint32_t base = sm90::smem_addr(raw);
  uint8_t* p = raw + ((1024u - (base & 1023u)) & 1023u);
  Smem<D, BN> s;
  s.q = p;
  s.k = p + G::kQBytes;
  s.v = s.k + G::kStages * G::kKvBytes;
  s.q_full = reinterpret_cast<uint64_t*>(s.v + G::kStages * G::kKvBytes);
  s.q_empty = s.q_full + 1;
  s.k_full = s.q_empty + 1;
  s.v_full = s.k_full + G::kStages;
  s.empty = s.v_full + G::kStages;
  s.k_empty = s.empty + G::kStages;
  s.ring = reinterpret_cast<int32_t*>(s.k_empty + G::kStages);
  s.failed = s.ring + 2;
  s.done = s.failed + 1;
  s.side = s.done + 1;
  return s;
}

// ---- bounded waits (device/bounded_wait.cuh) ----------------------------------

// `what` in a failed wait's record (printed as the pipeline stage): s for
// stage s's k_full / v_full / empty (V released) barriers, kKEmptyWhat + s
// for its k_empty (K released), kStageQEmpty / kStageQFull (device/ctx.hpp).
constexpr int kKEmptyWhat = 8;
__device__ __forceinline__ void mbar_wait(const AttnParams& p, uint64_t* bar, uint32_t parity, int what) {
  dev::engine_mbar_wait(p, bar, parity, what);
}
// The producer's waits on the consumers: they also end (trap) as soon as a
// consumer warpgroup gave up (Smem::failed), so that consumer warps left
// behind by it (see ConsumerStop below) cannot hang the CTA.
struct FailedFlag {
  const int32_t* failed;
  __device__ __forceinline__ bool operator()() const { return *reinterpret_cast<const volatile int32_t*>(failed) != 0; }
};
__device__ __forceinline__ void pmbar_wait(const AttnParams& p, const int32_t* failed, uint64_t* bar, uint32_t parity,
                                           int what) {
  dev::engine_mbar_wait_or(p, bar, parity, what, dev::TrapStop{}, FailedFlag{failed});
}
// A consumer warpgroup that gives up a wait does not trap: ptxas holds every
// register of a code region that contains a trap to the launch's count (168),
// which made the consumers spill and serialise their wgmmas. It records the
// failure (engine_mbar_wait_or), marks the CTA failed, lets its partner past
// the turn barrier it may be waiting at, and exits; the partner sees the mark
// at its next turn and exits too; run_compute traps at the CTA's end (outside
// the consumers' region), so the launch still fails.
// The give-up is decided per warp (a consumer warp that sees `failed` while
// it waits stops too, FailedFlag): if the barrier completes between one
// warp's give-up and another's next poll, the others go on to wgmma and the
// 256-thread turn barriers without it and would hang there. So the producer
// thread is the CTA's watchdog: its waits on the consumers trap once
// `failed` is set (pmbar_wait), and when it has walked every unit it waits
// (bounded) for all 8 consumer warps to finish (Smem::done) before the CTA's
// final barrier, trapping if one gave up: the launch ends with the
// consumer's record either way. (Review of 2026-12-01; the failure path is
// not yet exercised by a GPU test: the producer's own bounded waits give up
// before the consumers' 4x longer ones in the failures the tests inject.)
constexpr uint32_t kTurnBarrier = 4;  // and 5 (GEMM engine: 1..3; the K/V push role: 8)
struct ConsumerStop {
  int32_t* failed;
  int wg;
  __device__ __forceinline__ void operator()() const {
    *reinterpret_cast<volatile int32_t*>(failed) = 1;
    __threadfence_block();
    asm volatile("barrier.cta.arrive %0, %1;" ::"r"(kTurnBarrier + (wg ^ 1)), "r"(256) : "memory");
    asm volatile("exit;");
  }
};
__device__ __forceinline__ void cmbar_wait(const AttnParams& p, int32_t* failed, int wg, uint64_t* bar,
                                           uint32_t parity, int what) {
  dev::engine_mbar_wait_or(p, bar, parity, what, ConsumerStop{failed, wg}, FailedFlag{failed});
}

__device__ __forceinline__ void wait_signal(const AttnParams& p, const uint64_t* sig, uint64_t expected, int peer) {
  dev::engine_wait_signal(p, sig, expected, peer);
}

// Work units and key blocks: device/attention/attn_walk.hpp (host-testable).

template <int BN>
__device__ __forceinline__ void fence_p(uint32_t (&pa)[BN / 16][4]) {
#pragma unroll
  for (int c = 0; c < BN / 16; ++c)
#pragma unroll
    for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(pa[c][i])::"memory");
}


struct PipeState {
  int stage = 0;
  uint32_t phase = 0;
  template <int kStages>
  __device__ __forceinline__ void advance() {
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1u;
    }
  }
};

__device__ __forceinline__ uint64_t expected_signal(const AttnParams& p) {
  return p.epoch_counter ? (*reinterpret_cast<volatile const uint64_t*>(p.epoch_counter) + 1) * p.sig_mult
                         : p.expected;
}

// ---- producer ------------------------------------------------------------------

// q_empty's arrivals a Q tile: one per consumer warp (consumer's release).
constexpr uint32_t kQEmptyArrivals = (kThreads - 128) / 32;

template <int D, int BN>
__device__ __forceinline__ void producer(const AttnParams& p, const Smem<D, BN>& s, int cta, int ncta) {
  using G = Geom<D, BN>;
  const int32_t total = p.batch * p.heads * p.q_tiles;  // < 2^31 (make_params)
  PipeState st;
  uint32_t q_phase = 0;
  const uint64_t expected = p.signals ? expected_signal(p) : 0;
  int32_t w = cta - ncta;
  for (uint32_t seq = 0;; ++seq) {
    if (p.unit_counter) {
      const unsigned long long c = atomicAdd(reinterpret_cast<unsigned long long*>(p.unit_counter), 1ull);
      w = c < static_cast<unsigned long long>(total) ? static_cast<int32_t>(c) : -1;
    } else {
      w = w + ncta < total ? w + ncta : -1;
    }
    pmbar_wait(p, s.failed, s.q_empty, q_phase ^ 1u, kStageQEmpty);
    s.ring[seq & 1u] = w;  // released to the consumers by the arrive below
    if (w < 0) {
      sm90::mbar_arrive(s.q_full);
      break;
    }
    const Unit u = unit_of(p, w);
    sm90::mbar_arrive_expect_tx(s.q_full, G::kQBytes);
#pragma unroll
    for (int c = 0; c < G::kBoxes; ++c)
      sm90::tma_load_4d(s.q + c * G::kBoxBytes, &p.q, s.q_full, c * 64, u.h, u.s0, u.b);
    q_phase ^= 1u;
    for (int g = 0; g < p.n_kvsegs; ++g) {
      const KvSeg& seg = p.kvseg[g];
      const int nb = seg_blocks(p, seg, u);
      if (nb == 0) continue;
      if (seg.sig >= 0) {  // K/V of this segment came from another rank: wait for its chunk
        const int32_t sig = seg.sig + u.b * p.kv_heads + u.hkv;
        dev::trace(p.trace, cta, dev::TraceKind::WaitBegin, static_cast<uint32_t>(sig));
        wait_signal(p, p.signals + sig, expected, seg.batch_off / p.batch);
        dev::trace(p.trace, cta, dev::TraceKind::WaitEnd, static_cast<uint32_t>(sig));
        sm90::fence_proxy_async_global();
      }
      const CUtensorMap* mk = &p.k[seg.map];
      const CUtensorMap* mv = &p.v[seg.map];
      const bool seq2 = p.kv_seq_dim[seg.map] == 2;
      const int32_t bb = u.b + seg.batch_off;
      for (int j = 0; j < nb; ++j) {
        const int32_t tok = seg.s0 + j * BN;
        const int32_t c1 = seq2 ? u.hkv : tok, c2 = seq2 ? tok : u.hkv;
        pmbar_wait(p, s.failed, &s.k_empty[st.stage], st.phase ^ 1u, kKEmptyWhat + st.stage);
        sm90::mbar_arrive_expect_tx(&s.k_full[st.stage], G::kKvBytes);
#pragma unroll
        for (int c = 0; c < G::kBoxes; ++c)
          sm90::tma_load_4d(s.k + st.stage * G::kKvBytes + c * G::kKvBoxBytes, mk, &s.k_full[st.stage], c * 64, c1, c2,
                            bb);
        pmbar_wait(p, s.failed, &s.empty[st.stage], st.phase ^ 1u, st.stage);
        sm90::mbar_arrive_expect_tx(&s.v_full[st.stage], G::kKvBytes);
#pragma unroll
        for (int c = 0; c < G::kBoxes; ++c)
          sm90::tma_load_4d(s.v + st.stage * G::kKvBytes + c * G::kKvBoxBytes, mv, &s.v_full[st.stage], c * 64, c1, c2,
                            bb);
        st.template advance<G::kStages>();
      }
    }
  }
}

// ---- consumer ------------------------------------------------------------------

// O += P V for one key block. pa[c]: P's k16 chunk c (keys 16c .. 16c + 15)
// as wgmma's A fragment, packed before the first wgmma (registers written
// between the wgmmas made ptxas fence each one, C7519).
template <int D, int BN>
__device__ __forceinline__ void pv_gemm(float (&o)[D / 2], const uint32_t (&pa)[BN / 16][4], const uint8_t* v) {
  using G = Geom<D, BN>;
  const uint64_t dv0 = sm90::wgmma_desc_sw128_mn(v, G::kKvBoxBytes);
#pragma unroll
  for (int c = 0; c < BN / 16; ++c) {
    const uint64_t dv = dv0 + c * (16 * 128 >> 4);  // 16 keys further
    if constexpr (D == 128)
      sm90::wgmma_m64n128k16_rs_mn(o, pa[c], dv);
    else
      sm90::wgmma_m64n64k16_rs_mn(o, pa[c], dv);
  }
}

// Ping-pong between the two consumer warpgroups (FlashAttention-3's warp
// scheduling): each issues its GEMMs (S = Q K^T, then O += P V) only in its
// turn and hands the turn over right after issuing, so the tensor cores run
// one warpgroup's GEMM while the other does its softmax. Named barriers
// kTurnBarrier + wg (256 threads: one warpgroup syncs, the other arrives);
// warpgroup 1 opens warpgroup 0's first turn. Both walk the same blocks, so
// turns pair up; the last hand-over is left open when the CTA ends.
__device__ __forceinline__ void wait_turn(int wg, const int32_t* failed) {
  if (*reinterpret_cast<const volatile int32_t*>(failed)) asm volatile("exit;");  // the partner gave up
  sm90::named_sync(kTurnBarrier + wg, 256);
}
__device__ __forceinline__ void pass_turn(int wg) {
  asm volatile("bar.arrive %0, %1;" ::"r"(kTurnBarrier + (wg ^ 1)), "r"(256) : "memory");
}

// The key blocks of a unit in order: segment g, block j of its nb
// (segments the unit reads nothing of are skipped). next() from the
// initial state gives the first block.
struct BlockIter {
  int g = -1, j = 0, nb = 0;
  __device__ __forceinline__ void next(const AttnParams& p, const Unit& u) {
    if (++j < nb) return;
    j = 0;
    while (++g < p.n_kvsegs && (nb = seg_blocks(p, p.kvseg[g], u)) == 0) {
    }
  }
};

// Issues S = Q K^T of the key block in `stage` into sc (no commit).
template <int D, int BN>
__device__ __forceinline__ void issue_s(float (&sc)[BN / 2], const Smem<D, BN>& s, int wg, int stage) {
  using G = Geom<D, BN>;
  // Descriptors as one base each plus constants (the start address is the
  // low field, in 16-byte units): ptxas kept 8 precomputed ones live across
  // the loop and spilled.
  const uint64_t dq0 = sm90::wgmma_desc_sw128(s.q + wg * 64 * 128);
  const uint64_t dk0 = sm90::wgmma_desc_sw128(s.k + stage * G::kKvBytes);
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const uint64_t offq = (kk / 4) * (G::kBoxBytes >> 4) + 2 * (kk % 4);
    const uint64_t offk = (kk / 4) * (G::kKvBoxBytes >> 4) + 2 * (kk % 4);
    if constexpr (BN == 176)
      sm90::wgmma_m64n176k16_ss(sc, dq0 + offq, dk0 + offk, kk != 0);
    else if constexpr (BN == 144)
      sm90::wgmma_m64n144k16_ss(sc, dq0 + offq, dk0 + offk, kk != 0);
    else
      sm90::wgmma_m64n128k16_ss(sc, dq0 + offq, dk0 + offk, kk != 0);
  }
}

// The mask and the online softmax of key block j of segment `seg` in sc:
// sc becomes P (fp32, unnormalised), m and l move to this block, corr is
// the factor O must be scaled by before P V is added. Rows h = 0, 1 of this
// thread (each row's BN keys live on the 4 lanes of a quad).
template <int BN>
__device__ __forceinline__ void softmax_block(float (&sc)[BN / 2], float (&m)[2], float (&l)[2], float (&corr)[2],
                                              const AttnParams& p, const Unit& u, const KvSeg& seg, int j,
                                              int row_in_tile, int quad) {
  const float sl2 = p.scale_log2;
  // Mask: keys past the segment's end, and (causal) keys after the query.
  // lim[h]: the last key (column) row h may see.
  const int32_t kvalid = seg.len - j * BN;
  const int32_t kpos0 = seg.pos0 + j * BN;
  const bool need_mask = kvalid < BN || (p.causal && kpos0 + BN - 1 > u.pos0);
  if (need_mask) {
    const int32_t lim[2] = {last_visible_key(p, u, seg, j, row_in_tile),
                            last_visible_key(p, u, seg, j, row_in_tile + 8)};
#pragma unroll
    for (int jj = 0; jj < BN / 8; ++jj)
#pragma unroll
      for (int e = 0; e < 2; ++e)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int col = 8 * jj + 2 * quad + e;
          sc[4 * jj + 2 * h + e] = col <= lim[h] ? sc[4 * jj + 2 * h + e] : -INFINITY;
        }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float mx = -INFINITY;
#pragma unroll
    for (int jj = 0; jj < BN / 8; ++jj) mx = fmaxf(mx, fmaxf(sc[4 * jj + 2 * h], sc[4 * jj + 2 * h + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float mnew = fmaxf(m[h], mx * sl2);
    const float base = mnew == -INFINITY ? 0.f : mnew;  // a row with no key yet stays at 0
    corr[h] = sm90::ex2(m[h] - base);
    float sum = 0.f;
#pragma unroll
    for (int jj = 0; jj < BN / 8; ++jj)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float x = sm90::ex2(fmaf(sc[4 * jj + 2 * h + e], sl2, -base));
        sc[4 * jj + 2 * h + e] = x;
        sum += x;
      }
    l[h] = l[h] * corr[h] + sum;
    m[h] = mnew;
  }
}

// Ends ptxas's scheduling region here: a branch on a kernel parameter
// (uniform, never taken: head_dim is 64 or 128). ptxas schedules within a
// basic block and issues a wgmma.wait_group as early as its block allows;
// without this the wait for P_i V_i that follows the softmax of S_{i+1} in
// the source moved above all its exp2s (the SASS: the two waits back to
// back, nothing overlapped; tools/wip/README.md). Costs a compare and a
// branch per key block.
__device__ __forceinline__ void schedule_boundary(const AttnParams& p) {
  if (p.head_dim == 0) asm volatile("nanosleep.u32 1;" ::: "memory");
}

// P in bf16 as A fragments: chunk c is accumulator groups 2c, 2c + 1 (rows
// r / r + 8, keys 2q / 2q + 8 of the chunk).
template <int BN>
__device__ __forceinline__ void pack_p(uint32_t (&pa)[BN / 16][4], const float (&sc)[BN / 2]) {
#pragma unroll
  for (int c = 0; c < BN / 16; ++c)
#pragma unroll
    for (int i = 0; i < 4; ++i) pa[c][i] = sm90::pack_bf16x2(sc[8 * c + 2 * i], sc[8 * c + 2 * i + 1]);
}

template <int D>
__device__ __forceinline__ void rescale_o(float (&o)[D / 2], const float (&corr)[2]) {
#pragma unroll
  for (int jj = 0; jj < D / 8; ++jj)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      o[4 * jj + 2 * h] *= corr[h];
      o[4 * jj + 2 * h + 1] *= corr[h];
    }
}

// Per unit and consumer warpgroup, with the key blocks i = 0 .. n-1 (stage
// st_i): S_0 in a turn of its own and its softmax; then for each i one turn
// issues S_{i+1} and O += P_i V_i together (FlashAttention-3's schedule:
// the softmax of block i+1 runs while the tensor cores do the other
// warpgroup's GEMMs and this one's P_i V_i), the softmax of S_{i+1} runs
// after S_{i+1} completes (wait_group 1), and O is rescaled and P_{i+1}
// packed once P_i V_i completed. S_{i+1} needs its own registers beside
// P_i and O (sc, pa and o are all live across the turn).
template <int D, int BN>
__device__ __forceinline__ void consumer(const AttnParams& p, const Smem<D, BN>& s, int wg) {
  using G = Geom<D, BN>;
  const int tid = threadIdx.x % 128, lane = tid % 32, quad = lane & 3;
  const bool leader = tid == 0;
  const int row_in_tile = wg * 64 + (tid / 32) * 16 + lane / 4;  // + 8 h
  PipeState st;
  uint32_t q_phase = 0;
  if (wg == 1) pass_turn(wg);
  for (uint32_t seq = 0;; ++seq) {
    cmbar_wait(p, s.failed, wg, s.q_full, q_phase, kStageQFull);
    q_phase ^= 1u;
    const int32_t w = *reinterpret_cast<volatile const int32_t*>(s.ring + (seq & 1u));
    __syncwarp();  // every lane's read of the ring word before its lane 0's q_empty arrival (below)
    if (w < 0) break;
    const Unit u = unit_of(p, w);
    const int nblocks = unit_blocks(p, u);
    // Every consumer warp releases Q and the ring word itself (kQEmptyArrivals),
    // so no warp that has not passed this q_full wait can see the next tile's
    // phase, and lane 0's arrival comes after its warp's read of s.ring
    // (the __syncwarp after the read orders the other lanes' reads before
    // it: one a unit, outside the key loop, whose code it leaves alone). A
    // warpgroup's leader arriving for all four relied on the wgmma's data
    // dependence for the other warps' reads, which the PTX memory model does
    // not count as ordering. (racecheck, which does not credit mbarrier
    // waits, reports the ring word either way:
    // bench/results/compute-sanitizer-20261204.md, session 34.)
    if (nblocks == 0 && lane == 0) sm90::mbar_arrive(s.q_empty);  // no key to read
    float o[D / 2];
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    if (nblocks > 0) {
      BlockIter it;
      it.next(p, u);
      float sc[BN / 2], corr[2];
      uint32_t pa[BN / 16][4];
      // Block 0: S in a turn of its own, then its softmax (O is still 0).
      sm90::fence_operands(sc);
      cmbar_wait(p, s.failed, wg, &s.k_full[st.stage], st.phase, st.stage);
      wait_turn(wg, s.failed);
      sm90::wgmma_fence();
      issue_s<D, BN>(sc, s, wg, st.stage);
      sm90::wgmma_commit();
      pass_turn(wg);
      sm90::wgmma_wait<0>();
      sm90::fence_operands(sc);
      if (leader) sm90::mbar_arrive(&s.k_empty[st.stage]);
      if (nblocks == 1 && lane == 0) sm90::mbar_arrive(s.q_empty);  // the tile's last read of Q
      softmax_block<BN>(sc, m, l, corr, p, u, p.kvseg[it.g], it.j, row_in_tile, quad);
      pack_p<BN>(pa, sc);
      fence_p<BN>(pa);
      // Blocks 0 .. n-2: S_{i+1} and P_i V_i in one turn (no branch around
      // the wgmmas: ptxas serialised them when the issue was conditional).
      for (int i = 0; i + 1 < nblocks; ++i) {
        PipeState nx = st;
        nx.template advance<G::kStages>();
        it.next(p, u);
        cmbar_wait(p, s.failed, wg, &s.k_full[nx.stage], nx.phase, nx.stage);
        cmbar_wait(p, s.failed, wg, &s.v_full[st.stage], st.phase, st.stage);
        wait_turn(wg, s.failed);
        sm90::wgmma_fence();
        issue_s<D, BN>(sc, s, wg, nx.stage);
        sm90::wgmma_commit();
        pv_gemm<D, BN>(o, pa, s.v + st.stage * G::kKvBytes);
        sm90::wgmma_commit();
        pass_turn(wg);
        sm90::wgmma_wait<1>();  // S_{i+1} (committed first) is complete; P_i V_i may still run
        sm90::fence_operands(sc);
        if (leader) sm90::mbar_arrive(&s.k_empty[nx.stage]);
        if (i + 2 == nblocks && lane == 0) sm90::mbar_arrive(s.q_empty);  // the tile's last read of Q
        softmax_block<BN>(sc, m, l, corr, p, u, p.kvseg[it.g], it.j, row_in_tile, quad);
        schedule_boundary(p);  // keeps the wait below the softmax's exp2s
        sm90::wgmma_wait<0>();
        sm90::fence_operands(o);
        fence_p<BN>(pa);
        if (leader) sm90::mbar_arrive(&s.empty[st.stage]);
        st = nx;
        rescale_o<D>(o, corr);
        pack_p<BN>(pa, sc);
        fence_p<BN>(pa);
      }
      // The last block's P V alone.
      cmbar_wait(p, s.failed, wg, &s.v_full[st.stage], st.phase, st.stage);
      wait_turn(wg, s.failed);
      sm90::wgmma_fence();
      pv_gemm<D, BN>(o, pa, s.v + st.stage * G::kKvBytes);
      sm90::wgmma_commit();
      pass_turn(wg);
      sm90::wgmma_wait<0>();
      sm90::fence_operands(o);
      if (leader) sm90::mbar_arrive(&s.empty[st.stage]);
      st.template advance<G::kStages>();
    }
    // Epilogue: O / l in bf16 (16-byte stores after a quad transpose), LSE.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    }
    const float inv[2] = {l[0] > 0.f ? 1.f / l[0] : 0.f, l[1] > 0.f ? 1.f / l[1] : 0.f};
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int rin = row_in_tile + 8 * h;
      const bool valid = rin < u.rows;
      const int64_t tok = int64_t(u.s0) + rin;
      char* orow = static_cast<char*>(p.o) + ((int64_t(u.b) * p.s_q + tok) * p.heads + u.h) * int64_t(D) * 2;
#pragma unroll
      for (int g4 = 0; g4 < D / 32; ++g4) {
        uint32_t v[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int jj = 4 * g4 + i;
          v[i] = sm90::pack_bf16x2(o[4 * jj + 2 * h] * inv[h], o[4 * jj + 2 * h + 1] * inv[h]);
        }
        dev::quad_transpose(v);  // lane q: columns [8 (4 g4 + q), + 8)
        if (valid) *reinterpret_cast<uint4*>(orow + (32 * g4 + 8 * quad) * 2) = make_uint4(v[0], v[1], v[2], v[3]);
      }
      if (valid && quad == 0)
        p.lse[(int64_t(u.b) * p.heads + u.h) * p.s_q + tok] =
            l[h] > 0.f ? (m[h] + __log2f(l[h])) * 0.69314718055994531f : -INFINITY;
    }
  }
}

// The producer thread, done walking units: waits (bounded) until the 8
// consumer warps finished theirs; traps as soon as one gave up (see
// ConsumerStop: warps it left behind may be stuck at a turn barrier).
template <int D, int BN>
__device__ __forceinline__ void watch_consumers(const AttnParams& p, const Smem<D, BN>& s) {
  const uint64_t t0 = dev::globaltimer();
  const volatile int32_t* done = s.done;
  int32_t n;
  while ((n = *done) < 2 * 4) {
    if (*reinterpret_cast<const volatile int32_t*>(s.failed)) __trap();
    const uint64_t waited = dev::globaltimer() - t0;
    if (waited > 4 * p.timeout_ns) {  // seen: the warps done (of 8)
      dev::engine_record_failure(p, -1, nullptr, uint64_t(kStageConsumersDone), uint64_t(n), waited);
      __trap();
    }
    __nanosleep(200);
  }
}

}  // namespace detail

// Compute role body: CTA `cta` of `ncta` walking units cta, cta + ncta, ...
// (or claiming them, p.unit_counter); kThreads threads and
// Geom<D, BN>::kSmemBytes of dynamic shared memory at smem. `side(t)` runs on
// warps 1..3 of the producer warpgroup (t = threadIdx.x - 32, 96 threads,
// within the producer's register budget), which the engine leaves idle:
// a communication role that takes no SM from the compute.
struct NoSide {
  __device__ __forceinline__ void operator()(int) const {}
};

// Register budgets after setmaxnreg: the launch gives every thread 168
// (65536 / 384, rounded down to 8); the consumers' increase must come out of
// what the producer warpgroup released, or setmaxnreg.inc waits forever.
// 176-key blocks (S 88 + P 44 + O 64 registers per consumer thread) need
// 224 to run without spilling or serialising wgmma (ptxas, 2026-12-01),
// which leaves the producer warpgroup 56, also for a side role (the ring
// op's K/V push, whose setup and failure paths spill: tools/check_ptxas.sh).
// A side role's code there can cost the consumers: some forms of the push
// made ptxas move their per-block bookkeeping off the uniform datapath
// (device/roles/kv_push.cuh; tools/check_uniform_loop.py guards it).
// At 208 registers consumers hold at most 144-key blocks (S 72 + P 36 + O
// 64; at 160 ptxas serialised the wgmmas).
template <int BN>
struct Regs {
  static constexpr int kProducer = BN == 176 ? 56 : 88, kConsumer = BN == 176 ? 224 : 208;
  static_assert((168 - kProducer) * 128 >= (kConsumer - 168) * 256, "register budgets exceed the launch's");
};

template <int D, int BN, class Side = NoSide>
__device__ __forceinline__ void run_compute(const AttnParams& p, uint8_t* smem, int cta, int ncta,
                                            const Side& side = Side{}) {
  static_assert(D == 64 || D == 128, "head dimension 64 or 128");
  static_assert(BN == 128 || BN == 144 || BN == 176,
                "128-, 144- or 176-key blocks (Regs)");
  using G = Geom<D, BN>;
  const detail::Smem<D, BN> s = detail::carve<D, BN>(smem);
  const int wg = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    dev::sm90::mbar_init(s.q_full, 1);
    dev::sm90::mbar_init(s.q_empty, detail::kQEmptyArrivals);
    for (int i = 0; i < G::kStages; ++i) {
      dev::sm90::mbar_init(&s.k_full[i], 1);
      dev::sm90::mbar_init(&s.v_full[i], 1);
      dev::sm90::mbar_init(&s.empty[i], 2);
      dev::sm90::mbar_init(&s.k_empty[i], 2);
    }
    *s.failed = 0;
    *s.done = 0;
    dev::sm90::mbar_fence_init();
    dev::sm90::tma_prefetch_desc(&p.q);
    for (int i = 0; i < kMaxKvMaps; ++i) {
      if (!p.kv_seq_dim[i]) continue;  // an unused map
      dev::sm90::tma_prefetch_desc(&p.k[i]);
      dev::sm90::tma_prefetch_desc(&p.v[i]);
    }
  }
  __syncthreads();
  if (wg == 0) {
    dev::sm90::regs_dealloc<Regs<BN>::kProducer>();
    if (threadIdx.x == 0) {
      detail::producer<D, BN>(p, s, cta, ncta);
      detail::watch_consumers<D, BN>(p, s);
    } else if (threadIdx.x >= 32) {
      side(static_cast<int>(threadIdx.x) - 32);
    }
  } else {
    dev::sm90::regs_alloc<Regs<BN>::kConsumer>();
    detail::consumer<D, BN>(p, s, wg - 1);
    if (threadIdx.x == 128) dev::trace(p.trace, cta, dev::TraceKind::CtaEnd, 0);  // done computing
    if (threadIdx.x % 32 == 0) atomicAdd(s.done, 1);  // after the warp's last read of shared memory
  }
  // A consumer that gave up exited (detail::ConsumerStop) and the producer
  // thread trapped (watch_consumers); otherwise the trap is here, where
  // every warp of the CTA (exited ones excepted) arrives, outside the
  // consumers' register region.
  __syncthreads();
  if (*reinterpret_cast<const volatile int32_t*>(s.failed)) __trap();
}

}  // namespace mk::attn
