// Signal round-trip latency between the two GPUs of an NVLink pair: one
// thread per GPU ping-pongs a signal word (release store to the peer, acquire
// spin locally), with a payload word checked every round.
#include "bench/bench.hpp"
#include "device/pingpong.cuh"

namespace mkb {

void bench_signal_latency(BenchContext& bc) {
  auto& c = *bc.comm;
  Table t{"signal round-trip latency (NVLink, 1 thread per GPU)",
          {"rounds/call", "median call ms", "round trip us", "one way us", "spread"},
          {},
          "Target: one way < 3 us over NVLink. One way = round trip / 2; each call's slowest rank, median over calls; "
          "every call uses a fresh epoch (no reset, no stale value can satisfy a wait)."};
  if (!node_pair_or_skip(bc, t)) return;
  const mk::DeviceCtx& ctx = c.device_ctx();
  const int me = c.topology().local_rank, peer = 1 - me;
  const int idx = c.reserve_signals(2);
  mk::dev::PingPongSide side{ctx.signals + idx,     ctx.peer_signals[peer] + idx, ctx.signals + idx + 1,
                             ctx.peer_signals[peer] + idx + 1, peer, idx, me == 0};
  uint32_t* errors = nullptr;
  MKB_CUDA(cudaMalloc(&errors, 4));
  MKB_CUDA(cudaMemset(errors, 0, 4));
  for (int rounds : {1000, 10000}) {
    uint64_t base = 0;
    auto st = time_calls(
        &c.bootstrap(), bc.stream, bc.opts,
        [&](int) {
          mk::dev::pingpong_kernel<mk::dev::Scope::Sys><<<1, 32, 0, bc.stream>>>(ctx, side, rounds, base, errors);
        },
        [&](int) {
          base = c.next_epoch() * 100000;
          c.barrier();
        });
    double rtt_us = 1000.0 * st.median_ms / rounds;
    t.rows.push_back({std::to_string(rounds), fmt(st.median_ms), fmt(rtt_us), fmt(rtt_us / 2), fmt(st.spread, 2)});
  }
  MKB_CUDA(cudaStreamSynchronize(bc.stream));
  uint32_t h = 0;
  MKB_CUDA(cudaMemcpy(&h, errors, 4, cudaMemcpyDeviceToHost));
  cudaFree(errors);
  if (h) mk::fail("signal_latency: ", h, " rounds saw a wrong value or payload");
  bc.report->add(t);
}

}  // namespace mkb
