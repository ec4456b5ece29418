// mkernel: the Hopper attention engine (forward), FlashAttention-3 in
// outline: TMA loads, WGMMA, warp-specialised producer and consumers,
// online softmax in fp32. Header-only; params in attn_params.hpp.
//
// Contract (DESIGN.md §3): a kernel gives the engine CTAs [0, num_compute)
// (or any CTA that is done with another role) and calls
// attn::run_compute<D>(p, smem, cta, ncta) with kThreads threads and
// Geom<D>::kSmemBytes of dynamic shared memory. Inside a CTA:
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
// K and V of a stage have barriers of their own (S starts before V lands).
// Every wait is bounded (p.timeout_ns) and reports who waited for what.
// The two consumer warpgroups take turns issuing their GEMMs (ping-pong,
// wait_turn / pass_turn). Not done (FlashAttention-3 has it): overlapping a
// warpgroup's own softmax of block j with its S GEMM of block j + 1. That
// needs S_{j+1}, P_j and O live at once, and ptxas holds a code region that
// contains a trap (the bounded waits' give-up) to the launch's 168
// registers whatever setmaxnreg grants (tools/ptxas_trap_probe.sh), so it
// spilled here. tools/wip/attn-overlap.patch makes the consumers' waits
// trap-free and adds the overlap: correct on the GPU, but 0.75-0.85x of
// this engine at every D=128 shape (bench/results/attention-20261201T020526Z-
// experiment-fa3-overlap.md, run next to attention-20261201T020505Z-main.md):
// in its SASS every exp2 of the softmax lands after the wait for P_i V_i, so
// nothing overlaps (tools/wip/README.md). Measured and not kept either: P V outside
// the turns, skipping the O rescale when the max stays
// (bench/results/attention-20261130T222140Z-experiment-pv-outside-turns.md).
#pragma once

#include "device/attention/attn_mma.cuh"
#include "device/attention/attn_params.hpp"
#include "device/attention/attn_walk.hpp"
#include "device/bounded_wait.cuh"
#include "device/fragment.cuh"
#include "device/trace.cuh"

namespace mk::attn {

namespace detail {

namespace sm90 = dev::sm90;

template <int D>
struct Smem {
  uint8_t* q;       // Geom<D>::kQBytes
  uint8_t* k;       // kStages x kKvBytes
  uint8_t* v;       // kStages x kKvBytes
  uint64_t* q_full;   // 1: the Q tile landed (producer's expect_tx)
  uint64_t* q_empty;  // 1: both consumer warpgroups issued their last S = Q K^T of the unit (2 arrivals)
  uint64_t* k_full;   // kStages
  uint64_t* v_full;   // kStages
  uint64_t* empty;    // kStages: both warpgroups are done with the stage (2 arrivals)
  int32_t* ring;      // [2]: the unit of Q tile i at [i % 2] (-1: no more), written before q_full's arrive
};

template <int D>
__device__ __forceinline__ Smem<D> carve(uint8_t* raw) {
  using G = Geom<D>;
  const uint32_t base = sm90::smem_addr(raw);
  uint8_t* p = raw + ((1024u - (base & 1023u)) & 1023u);
  Smem<D> s;
  s.q = p;
  s.k = p + G::kQBytes;
  s.v = s.k + G::kStages * G::kKvBytes;
  s.q_full = reinterpret_cast<uint64_t*>(s.v + G::kStages * G::kKvBytes);
  s.q_empty = s.q_full + 1;
  s.k_full = s.q_empty + 1;
  s.v_full = s.k_full + G::kStages;
  s.empty = s.v_full + G::kStages;
  s.ring = reinterpret_cast<int32_t*>(s.empty + G::kStages);
  return s;
}
static_assert(8 * (2 + 3 * 4) + 8 <= 256, "barrier area");

// ---- bounded waits (device/bounded_wait.cuh) ----------------------------------

__device__ __forceinline__ void mbar_wait(const AttnParams& p, uint64_t* bar, uint32_t parity, int what) {
  dev::engine_mbar_wait(p, bar, parity, what);
}
__device__ __forceinline__ void wait_signal(const AttnParams& p, const uint64_t* sig, uint64_t expected, int peer) {
  dev::engine_wait_signal(p, sig, expected, peer);
}

// Work units and key blocks: device/attention/attn_walk.hpp (host-testable).

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

template <int D>
__device__ __forceinline__ void producer(const AttnParams& p, const Smem<D>& s, int cta, int ncta) {
  using G = Geom<D>;
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
    mbar_wait(p, s.q_empty, q_phase ^ 1u, -4);
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
        const int32_t tok = seg.s0 + j * kBlockN;
        const int32_t c1 = seq2 ? u.hkv : tok, c2 = seq2 ? tok : u.hkv;
        mbar_wait(p, &s.empty[st.stage], st.phase ^ 1u, st.stage);
        sm90::mbar_arrive_expect_tx(&s.k_full[st.stage], G::kKvBytes);
#pragma unroll
        for (int c = 0; c < G::kBoxes; ++c)
          sm90::tma_load_4d(s.k + st.stage * G::kKvBytes + c * G::kBoxBytes, mk, &s.k_full[st.stage], c * 64, c1, c2,
                            bb);
        sm90::mbar_arrive_expect_tx(&s.v_full[st.stage], G::kKvBytes);
#pragma unroll
        for (int c = 0; c < G::kBoxes; ++c)
          sm90::tma_load_4d(s.v + st.stage * G::kKvBytes + c * G::kBoxBytes, mv, &s.v_full[st.stage], c * 64, c1, c2,
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
template <int D>
__device__ __forceinline__ void pv_gemm(float (&o)[D / 2], const uint32_t (&pa)[kBlockN / 16][4], const uint8_t* v) {
  using G = Geom<D>;
  const uint64_t dv0 = sm90::wgmma_desc_sw128_mn(v, G::kBoxBytes);
#pragma unroll
  for (int c = 0; c < kBlockN / 16; ++c) {
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
constexpr uint32_t kTurnBarrier = 4;  // and 5 (GEMM engine: 1..3; the K/V push role: 8)
constexpr uint32_t kWgBarrier = 6;    // and 7: one consumer warpgroup alone
__device__ __forceinline__ void wait_turn(int wg) { sm90::named_sync(kTurnBarrier + wg, 256); }
__device__ __forceinline__ void pass_turn(int wg) {
  asm volatile("bar.arrive %0, %1;" ::"r"(kTurnBarrier + (wg ^ 1)), "r"(256) : "memory");
}

template <int D>
__device__ __forceinline__ void consumer(const AttnParams& p, const Smem<D>& s, int wg) {
  using G = Geom<D>;
  const int tid = threadIdx.x % 128, lane = tid % 32, quad = lane & 3;
  const bool leader = tid == 0;
  const int row_in_tile = wg * 64 + (tid / 32) * 16 + lane / 4;  // + 8 h
  const float sl2 = p.scale_log2;
  PipeState st;
  uint32_t q_phase = 0;
  if (wg == 1) pass_turn(wg);
  for (uint32_t seq = 0;; ++seq) {
    mbar_wait(p, s.q_full, q_phase, -5);
    q_phase ^= 1u;
    const int32_t w = *reinterpret_cast<volatile const int32_t*>(s.ring + (seq & 1u));
    if (w < 0) break;
    const Unit u = unit_of(p, w);
    const int nblocks = unit_blocks(p, u);
    if (nblocks == 0) {  // no key to read: release Q once every warp of the warpgroup passed the q_full wait
      // (otherwise a lagging warp could see the next tile's phase; with key
      // blocks, the warpgroup-wide wgmma orders this).
      sm90::named_sync(kWgBarrier + wg, 128);
      if (leader) sm90::mbar_arrive(s.q_empty);
    }
    float o[D / 2];
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    int done = 0;
    for (int g = 0; g < p.n_kvsegs; ++g) {
      const KvSeg& seg = p.kvseg[g];
      const int nb = seg_blocks(p, seg, u);
      for (int j = 0; j < nb; ++j, ++done) {
        float sc[64];
        sm90::fence_operand(sc[0]);
        mbar_wait(p, &s.k_full[st.stage], st.phase, st.stage);
        wait_turn(wg);
        sm90::wgmma_fence();
        // Descriptors as one base each plus constants (the start address is
        // the low field, in 16-byte units): ptxas kept 8 precomputed ones live
        // across the loop and spilled.
        const uint64_t dq0 = sm90::wgmma_desc_sw128(s.q + wg * 64 * 128);
        const uint64_t dk0 = sm90::wgmma_desc_sw128(s.k + st.stage * G::kKvBytes);
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          const uint64_t off = (kk / 4) * (G::kBoxBytes >> 4) + 2 * (kk % 4);
          sm90::wgmma_m64n128k16_ss(sc, dq0 + off, dk0 + off, kk != 0);
        }
        sm90::wgmma_commit();
        pass_turn(wg);
        sm90::wgmma_wait<0>();
#pragma unroll
        for (int i = 0; i < 64; ++i) sm90::fence_operand(sc[i]);
        if (done == nblocks - 1 && leader) sm90::mbar_arrive(s.q_empty);  // the tile's last read of Q
        // Mask: keys past the segment's end, and (causal) keys after the query.
        // lim[h]: the last key (column) row h may see.
        const int32_t kvalid = seg.len - j * kBlockN;
        const int32_t kpos0 = seg.pos0 + j * kBlockN;
        const bool need_mask = kvalid < kBlockN || (p.causal && kpos0 + kBlockN - 1 > u.pos0);
        if (need_mask) {
          const int32_t lim[2] = {last_visible_key(p, u, seg, j, row_in_tile),
                                  last_visible_key(p, u, seg, j, row_in_tile + 8)};
#pragma unroll
          for (int jj = 0; jj < 16; ++jj)
#pragma unroll
            for (int e = 0; e < 2; ++e)
#pragma unroll
              for (int h = 0; h < 2; ++h) {
                const int col = 8 * jj + 2 * quad + e;
                sc[4 * jj + 2 * h + e] = col <= lim[h] ? sc[4 * jj + 2 * h + e] : -INFINITY;
              }
        }
        // Online softmax, rows h = 0, 1 (each row's 128 keys live on the 4 lanes of a quad).
        float corr[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float mx = -INFINITY;
#pragma unroll
          for (int jj = 0; jj < 16; ++jj) mx = fmaxf(mx, fmaxf(sc[4 * jj + 2 * h], sc[4 * jj + 2 * h + 1]));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
          const float mnew = fmaxf(m[h], mx * sl2);
          const float base = mnew == -INFINITY ? 0.f : mnew;  // a row with no key yet stays at 0
          corr[h] = sm90::ex2(m[h] - base);
          float sum = 0.f;
#pragma unroll
          for (int jj = 0; jj < 16; ++jj)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const float x = sm90::ex2(fmaf(sc[4 * jj + 2 * h + e], sl2, -base));
              sc[4 * jj + 2 * h + e] = x;
              sum += x;
            }
          l[h] = l[h] * corr[h] + sum;
          m[h] = mnew;
        }
#pragma unroll
        for (int jj = 0; jj < D / 8; ++jj)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            o[4 * jj + 2 * h] *= corr[h];
            o[4 * jj + 2 * h + 1] *= corr[h];
          }
        // P in bf16 as A fragments: chunk c is accumulator groups 2c, 2c + 1
        // (rows r / r + 8, keys 2q / 2q + 8 of the chunk).
        uint32_t pa[kBlockN / 16][4];
#pragma unroll
        for (int c = 0; c < kBlockN / 16; ++c)
#pragma unroll
          for (int i = 0; i < 4; ++i) pa[c][i] = sm90::pack_bf16x2(sc[8 * c + 2 * i], sc[8 * c + 2 * i + 1]);
        mbar_wait(p, &s.v_full[st.stage], st.phase, st.stage);
        wait_turn(wg);
        sm90::wgmma_fence();
        pv_gemm<D>(o, pa, s.v + st.stage * G::kKvBytes);
        sm90::wgmma_commit();
        pass_turn(wg);
        sm90::wgmma_wait<0>();
#pragma unroll
        for (int i = 0; i < D / 2; ++i) sm90::fence_operand(o[i]);
        if (leader) sm90::mbar_arrive(&s.empty[st.stage]);
        st.template advance<G::kStages>();
      }
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

}  // namespace detail

// Compute role body: CTA `cta` of `ncta` walking units cta, cta + ncta, ...
// (or claiming them, p.unit_counter); kThreads threads and
// Geom<D>::kSmemBytes of dynamic shared memory at smem. `side(t)` runs on
// warps 1..3 of the producer warpgroup (t = threadIdx.x - 32, 96 threads,
// within the producer's register budget), which the engine leaves idle:
// a communication role that takes no SM from the compute.
struct NoSide {
  __device__ __forceinline__ void operator()(int) const {}
};

// Register budgets after setmaxnreg: the launch gives every thread 168
// (65536 / 384, rounded down to 8); the consumers' increase must come out of
// what the producer warpgroup released, or setmaxnreg.inc waits forever.
constexpr int kProducerRegs = 88, kConsumerRegs = 208;
static_assert((168 - kProducerRegs) * 128 >= (kConsumerRegs - 168) * 256, "register budgets exceed the launch's");

template <int D, class Side = NoSide>
__device__ __forceinline__ void run_compute(const AttnParams& p, uint8_t* smem, int cta, int ncta,
                                            const Side& side = Side{}) {
  static_assert(D == 64 || D == 128, "head dimension 64 or 128");
  using G = Geom<D>;
  const detail::Smem<D> s = detail::carve<D>(smem);
  const int wg = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    dev::sm90::mbar_init(s.q_full, 1);
    dev::sm90::mbar_init(s.q_empty, 2);
    for (int i = 0; i < G::kStages; ++i) {
      dev::sm90::mbar_init(&s.k_full[i], 1);
      dev::sm90::mbar_init(&s.v_full[i], 1);
      dev::sm90::mbar_init(&s.empty[i], 2);
    }
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
    dev::sm90::regs_dealloc<kProducerRegs>();
    if (threadIdx.x == 0) detail::producer<D>(p, s, cta, ncta);
    else if (threadIdx.x >= 32) side(static_cast<int>(threadIdx.x) - 32);
  } else {
    dev::sm90::regs_alloc<kConsumerRegs>();
    detail::consumer<D>(p, s, wg - 1);
  }
}

}  // namespace mk::attn
