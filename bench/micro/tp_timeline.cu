// mkbench gemm_rs, one rank: where inside the kernel GemmRs and GemmAr
// spend the time their GEMM alone does not (bench/results/rs-one-rank-20261201.md
// found 15-20 us at W = 1 that no single change removed). Each variant runs
// with the device event log on (device/trace.hpp: every CTA's kernel entry,
// engine start, the start of each work unit, engine end, kernel exit) and
// the table splits each call's span into those stages, median over calls.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "bench/bench.hpp"
#include "bench/micro/gemm_alone.hpp"
#include "bench/micro/tp_bench.hpp"
#include "bench/micro/tp_timeline.hpp"
#include "device/ptx.cuh"
#include "device/trace.hpp"
#include "mkernel/gemm.hpp"
#include "mkernel/tp.hpp"
#include "mkernel/trace_log.hpp"
#include "src/ops/gemm/gemm_host.hpp"
#include "src/ops/gemm_rs/rs_plan.hpp"

namespace mkb {

namespace {

__global__ void sleep_kernel(uint64_t ns) {
  const uint64_t t0 = mk::dev::globaltimer();
  while (mk::dev::globaltimer() - t0 < ns) {
  }
}
void gpu_sleep_us(cudaStream_t s, int us) {
  sleep_kernel<<<1, 1, 0, s>>>(uint64_t(us) * 1000);
  MKB_CUDA(cudaGetLastError());
}

// One thread writes the globaltimer: a stamp right before and right after a traced call, so the time from the
// kernel before to the traced kernel's first event, and from its last event to the kernel after, can be read
// (launch latency and drain, which the event-timed tables count and the events inside the kernel do not).
__global__ void stamp_kernel(uint64_t* at) { *at = mk::dev::globaltimer(); }
void gpu_stamp(cudaStream_t s, uint64_t* at) {
  stamp_kernel<<<1, 1, 0, s>>>(at);
  MKB_CUDA(cudaGetLastError());
}

// One call's stages in us from its first CTA's entry (or engine start where
// the kernel logs no entry), maxima over CTAs unless named a median.
struct Stages {
  double entry_spread = 0;  // last CTA entry
  double start_med = 0;     // engine start after the CTA's entry, median over CTAs
  double unit_med = 0;      // a work unit, median over all units (the last: until the engine's end)
  double kloop_med = 0;     // its K loop (begin to UnitMmaDone), median over all units
  double after_med = 0;     // UnitMmaDone to the next unit's begin (the last: the engine's end): epilogue and walk
  double units_max = 0;     // work units of the busiest CTA
  double engine_end = 0;    // last engine end (first consumer warpgroup)
  double exit_after = 0;    // kernel exit after the CTA's engine end, max over CTAs (no exit event: 0)
  double span = 0;          // last event
  double busy = 0;          // sum over CTAs of engine start .. end / (SMs x span): what idle SMs and tails leave
  double from_before = 0;   // first event after the stamp kernel before the call
  double to_after = 0;      // the stamp kernel after the call, after the last event
};

Stages stages_of(const std::vector<mk::TraceEvent>& ev, int grid, int sms, const uint64_t stamps[2]) {
  constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
  using K = mk::dev::TraceKind;
  std::vector<double> entry(grid, kNan), start(grid, kNan), end(grid, kNan), exit(grid, kNan);
  std::vector<std::vector<double>> units(grid), done(grid);
  double t0 = std::numeric_limits<double>::max(), last = 0;
  for (const auto& e : ev) {
    if (e.cta < 0 || e.cta >= grid) continue;
    const double t = double(e.t_ns);
    switch (static_cast<K>(e.kind)) {
      case K::KernelEntry: entry[e.cta] = t; break;
      case K::CtaStart: start[e.cta] = t; break;
      case K::CtaEnd: end[e.cta] = t; break;
      case K::KernelExit: exit[e.cta] = t; break;
      case K::UnitBegin: units[e.cta].push_back(t); break;
      case K::UnitMmaDone: done[e.cta].push_back(t); break;
      default: break;
    }
  }
  for (int c = 0; c < grid; ++c) {
    const double first = entry[c] == entry[c] ? entry[c] : start[c];
    if (first == first) t0 = std::min(t0, first);
  }
  Stages s;
  std::vector<double> starts, unit_t, kloop_t, after_t;
  for (int c = 0; c < grid; ++c) {
    const double first = entry[c] == entry[c] ? entry[c] : start[c];
    if (first != first) continue;  // a CTA of another role (no engine) or none
    s.entry_spread = std::max(s.entry_spread, (first - t0) / 1e3);
    if (start[c] == start[c]) starts.push_back((start[c] - first) / 1e3);
    std::sort(units[c].begin(), units[c].end());
    std::sort(done[c].begin(), done[c].end());
    const bool split = done[c].size() == units[c].size();  // a unit's K loop ends before the next unit begins
    for (size_t i = 0; i < units[c].size(); ++i) {
      const double next = i + 1 < units[c].size() ? units[c][i + 1] : end[c];
      if (next == next) unit_t.push_back((next - units[c][i]) / 1e3);
      if (!split) continue;
      kloop_t.push_back((done[c][i] - units[c][i]) / 1e3);
      if (next == next) after_t.push_back((next - done[c][i]) / 1e3);
    }
    s.units_max = std::max(s.units_max, double(units[c].size()));
    if (end[c] == end[c]) s.engine_end = std::max(s.engine_end, (end[c] - t0) / 1e3);
    if (end[c] == end[c] && start[c] == start[c]) s.busy += (end[c] - start[c]) / 1e3;
    if (exit[c] == exit[c] && end[c] == end[c]) s.exit_after = std::max(s.exit_after, (exit[c] - end[c]) / 1e3);
    for (double t : {entry[c], start[c], end[c], exit[c]})
      if (t == t) last = std::max(last, t);
  }
  s.start_med = starts.empty() ? 0 : median(starts);
  s.unit_med = unit_t.empty() ? 0 : median(unit_t);
  s.kloop_med = kloop_t.empty() ? 0 : median(kloop_t);
  s.after_med = after_t.empty() ? 0 : median(after_t);
  s.span = (last - t0) / 1e3;
  s.from_before = (t0 - double(stamps[0])) / 1e3;
  s.to_after = (double(stamps[1]) - last) / 1e3;
  s.busy = s.span > 0 ? s.busy / (double(sms) * s.span) : 0;
  return s;
}

Stages median_stages(const std::vector<Stages>& v) {
  auto med = [&](double Stages::*f) {
    std::vector<double> x;
    for (const auto& s : v) x.push_back(s.*f);
    return median(x);
  };
  Stages s;
  for (auto f : {&Stages::entry_spread, &Stages::start_med, &Stages::unit_med, &Stages::kloop_med,
                 &Stages::after_med, &Stages::units_max, &Stages::engine_end, &Stages::exit_after, &Stages::span,
                 &Stages::busy, &Stages::from_before, &Stages::to_after})
    s.*f = med(f);
  return s;
}

struct Variant {
  std::string name;
  std::function<void(int)> call;
  std::function<std::vector<mk::TraceEvent>()> read;
};

// One row per variant: host time per call, then the stages of traced calls.
void timeline_rows(BenchContext& bc, Table& d, const std::string& shape, const std::vector<Variant>& vs) {
  constexpr int kWarm = 3, kTraced = 5, kHost = 50;
  const int sms = mk::gemm::num_sms();
  for (const auto& v : vs) {
    // Host time per call: kHost calls queued behind a GPU sleep long
    // enough to hold them all (the host never waits for the GPU).
    MKB_CUDA(cudaStreamSynchronize(bc.stream));
    gpu_sleep_us(bc.stream, 20000);
    const auto h0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kHost; ++i) v.call(i);
    const double host_us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - h0).count() / kHost;
    // Each traced call runs right after kWarm others (a busy GPU at its
    // clocks); only its events are kept (every call clears the log).
    std::vector<Stages> st;
    DevBuf stamp_buf(2 * sizeof(uint64_t));
    auto* stamp = static_cast<uint64_t*>(stamp_buf.p);
    for (int i = 0; i < kTraced; ++i) {
      for (int j = 0; j < kWarm; ++j) v.call(i * (kWarm + 1) + j);
      gpu_stamp(bc.stream, stamp);
      v.call(i * (kWarm + 1) + kWarm);
      gpu_stamp(bc.stream, stamp + 1);
      const std::vector<mk::TraceEvent> ev = v.read();  // waits for the device
      uint64_t h[2];
      MKB_CUDA(cudaMemcpy(h, stamp, sizeof(h), cudaMemcpyDeviceToHost));
      st.push_back(stages_of(ev, sms, sms, h));
    }
    const Stages s = median_stages(st);
    d.rows.push_back({shape, v.name, fmt(host_us, 1), fmt(s.entry_spread, 1), fmt(s.start_med, 1),
                      fmt(s.unit_med, 1), fmt(s.kloop_med, 1), fmt(s.after_med, 2), fmt(s.units_max, 0),
                      fmt(s.engine_end, 1), fmt(s.exit_after, 1), fmt(s.span, 1), fmt(s.busy, 3),
                      fmt(s.from_before, 1), fmt(s.to_after, 1)});
  }
  MKB_CUDA(cudaStreamSynchronize(bc.stream));
}

}  // namespace

void tp_timeline_one_rank(BenchContext& bc) {
  auto& c = *bc.comm;
  const int sms = mk::gemm::num_sms();
  constexpr int kEvents = 96;  // two per work unit (begin, K loop done): ~30 units on the busiest CTA at M = 8192
  Table d{"The TP ops on one rank, inside the kernel (device event log), at the 1x2 per-rank shapes: us from the "
          "first CTA's entry, median over 5 traced calls",
          {"shape (M x n x k)", "variant", "host us per call", "last CTA entry",
           "engine start after entry (median CTA)", "work unit (median)", "its K loop (median)",
           "after the K loop (median)", "units (busiest CTA)", "last engine end", "exit after engine end (max CTA)",
           "span", "SMs busy", "first event after the kernel before", "kernel after, after the last event"},
          {},
          ""};
  std::vector<int64_t> ms = {1024, 8192};
  if (bc.quick) ms = {1024};
  mk::TraceLog log("mkbench");
  log.enable(sms, kEvents, false);
  const mk::dev::TraceBuf tb{log.base(), log.cap(), 0};
  auto read_log = [&] { return log.read(); };
  // GEMM+RS / GEMM+AR: n = hidden, k = FFN / 2.
  for (int64_t m : ms) {
    const int64_t n = 8192, k = 28672 / 2;
    Rotating a(size_t(m) * k * 2), b(size_t(n) * k * 2);
    fill_rotating(a, size_t(m) * k, 700, c.rank(), bc.stream);
    fill_rotating(b, size_t(n) * k, 800, c.rank(), bc.stream);
    DevBuf out(size_t(m) * n * 2);
    mk::GemmRs rs(c, m, n, k);
    mk::GemmAr ar(c, m, n, k);
    rs.enable_trace(kEvents);
    ar.enable_trace(kEvents);
    const int ctas = rs.num_compute_ctas(), sw = rs.swizzle();
    mk::tp::RsPlan pl = mk::tp::rs_make_plan(c, "timeline", m, n, k, 0, 0, 0, nullptr);
    // The engine alone with the plan's CTAs and swizzle, plain row stores
    // (what GemmRs's owner tiles use).
    auto engine = [&](int i) {
      mk::gemm::GemmParams p = engine_alone_params(a.get(i), b.get(i), out.p, m, n, k, ctas, sw, false);
      p.trace = tb;
      log.clear(bc.stream);
      launch_alone(p, bc.stream);
    };
    // GemmRs's GEMM parameters in the standalone kernel, static walk.
    auto rs_alone = [&](int i) {
      mk::gemm::GemmParams p = rs_gemm_alone_params(pl, c, a.get(i), b.get(i), out.p, ctas);
      p.trace = tb;
      log.clear(bc.stream);
      launch_alone(p, bc.stream);
    };
    const std::string cs = std::to_string(ctas) + " CTAs, swizzle " + std::to_string(sw);
    timeline_rows(bc, d, std::to_string(m) + " x 8192 x 14336",
                  {{"engine alone, " + cs + ", plain stores", engine, read_log},
                   {"GemmRs's GEMM in the standalone kernel, static walk", rs_alone, read_log},
                   {"GemmRs", [&](int i) { rs.run(a.get(i), b.get(i), out.p, bc.stream); },
                    [&] { return rs.read_trace(); }},
                   {"GemmAr", [&](int i) { ar.run(a.get(i), b.get(i), out.p, bc.stream); },
                    [&] { return ar.read_trace(); }}});
    mk::tp::rs_free_plan(c, pl);
  }
  // AllGather+GEMM: n = FFN / 2, k = hidden (one rank: the gathered rows are its own).
  for (int64_t m : ms) {
    const int64_t n = 28672 / 2, k = 8192;
    Rotating a(size_t(m) * k * 2), b(size_t(n) * k * 2);
    fill_rotating(a, size_t(m) * k, 700, c.rank(), bc.stream);
    fill_rotating(b, size_t(n) * k, 800, c.rank(), bc.stream);
    DevBuf out(size_t(m) * n * 2);
    mk::AgGemm ag(c, m, n, k);
    ag.enable_trace(kEvents);
    auto engine = [&](int i) {
      mk::gemm::GemmParams p = engine_alone_params(a.get(i), b.get(i), out.p, m, n, k, 0, 0, true);
      p.trace = tb;
      log.clear(bc.stream);
      launch_alone(p, bc.stream);
    };
    const std::string split = ag.split_tiles() ? std::to_string(ag.split_tiles()) + " tiles in " +
                                                     std::to_string(ag.split_parts()) + " parts"
                                               : "no split tiles";
    timeline_rows(bc, d, std::to_string(m) + " x 14336 x 8192",
                  {{"engine alone, every SM, TMA stores", engine, read_log},
                   {"AgGemm (" + std::to_string(ag.num_compute_ctas()) + " compute CTAs, " + split + ")",
                    [&](int i) { ag.run(a.get(i), b.get(i), out.p, bc.stream); }, [&] { return ag.read_trace(); }}});
  }
  d.note =
      "globaltimer events (device/trace.hpp) of every CTA; each traced call runs right after 3 others (a busy "
      "GPU), its events read back after it. Host us per call: the launch's CPU time (50 calls queued behind a "
      "GPU sleep). Entry: the fused kernels' first line, exit: after their epoch end; the standalone GEMM "
      "kernel logs neither (an entry event made ptxas spill there): its times count from the first engine start "
      "and its entry and exit columns read 0. Engine start: barriers set up; a work unit runs from its first "
      "stage wait to the next unit's (the last: to the engine's end, when the first consumer warpgroup finds no "
      "more units, its last tile's stores issued); split tiles count each part as a unit. Its K loop: to the "
      "first consumer warpgroup's last MMA of the unit (UnitMmaDone); after it: the unit's epilogue (owner adds, "
      "stores, signals) and the walk to the next unit. SMs busy: the CTAs' "
      "engine start-to-end times over (SMs x span). GemmRs's GEMM in the standalone kernel = the parameters "
      "GemmRs builds without its entry signals, storer and epoch end. The last two columns: a one-thread kernel "
      "stamps the globaltimer right before and right after the traced call (launch latency and drain; the "
      "standalone kernel's first event is its engine start, ~1.3 us after its entry in the fused kernels).";
  bc.report->add(d);
}

}  // namespace mkb
