// net_post: the GPU's cost of posting one network command (claim, room,
// body to host memory, system-scope release of the header) while the rest of
// the GPU is busy in the ways a fused kernel keeps it busy. Why: ring
// attention across emulated nodes spends ~90-180 us per post in its slow runs
// (bench/results/emu-copy-path-20261201T0220Z.md), 3-4 us in its fast ones,
// and what separates them was not known. One GPU, a null transport (the proxy
// completes every command at once), so only the GPU side is on the clock.
#include <cuda_runtime.h>

#include <algorithm>

#include "bench/bench.hpp"
#include "device/net/net.cuh"
#include "bench/micro/null_transport.hpp"
#include "src/net/proxy.hpp"

namespace mkb {

namespace {

// What the other CTAs do while CTA 0 posts.
enum Load : int {
  kIdle = 0,         // nothing (they exit)
  kSpinSys = 1,      // one thread each: ld.acquire.sys on a device word, no pause (the waits' inner loop)
  kWaitGe = 2,       // one thread each: dev::wait_ge as the kernels call it (abort words: dev::abort_word)
  kWaitGe4 = 3,      // four threads each (one per warp), dev::wait_ge
  kSpinSysSleep = 4, // one thread each: ld.acquire.sys with a 256 ns __nanosleep between reads
  kSpinGpu = 5,      // one thread each: ld.acquire.gpu, no pause
  kStream = 6,       // every thread: 16-byte copies through device memory (bandwidth load)
  kCeCopy = 7,       // CTAs idle; a copy-engine device-to-device copy runs beside the kernel
  kOld4 = 8,         // four threads each: the waits before kHostAbortPollNs (host word every 128 spins)
  kHost10us = 9,     // four threads each: the host word once per 10 us of waiting
  kHost100us = 10,   // ... once per 100 us
  kHost1ms = 11,     // ... once per 1 ms
  kHostSpin = 12,    // one thread of CTA 1 only reads a host-mapped word at every spin (as net::flush's wait)
  kHostSpinSleep = 13,  // ... with a 1 us __nanosleep between reads
};

// A wait as dev::wait_ge, reading the host abort word every 128 spins (`period` 0: the waits before
// 2026-12-01) or once per `period` ns of waiting (dev::abort_word).
__device__ void wait_host_every(mk::DeviceCtx ctx, const uint64_t* word, uint64_t release, uint64_t period) {
  const uint64_t t0 = mk::dev::globaltimer();
  ctx.host_abort_poll_ns = period;
  uint64_t next_host = period;
  uint32_t spins = 0;
  while (mk::dev::ld_acquire<mk::dev::Scope::Sys>(word) < release) {
    if ((++spins & 127u) == 0u) {
      const uint64_t waited = mk::dev::globaltimer() - t0;
      uint32_t ab = 0;
      if (period == 0) {
        ab = mk::dev::ld_volatile(ctx.abort_dev);
        if (!ab) ab = mk::dev::ld_volatile(ctx.abort_host);
      } else {
        ab = mk::dev::abort_word(ctx, waited, next_host);
      }
      if (ab || waited > ctx.timeout_ns) __trap();
    }
  }
}

struct Step {
  uint64_t* t;
  __device__ void operator()(mk::net::CmdStep s) const { t[int(s)] = mk::dev::globaltimer(); }
};

constexpr int kPosts = 64;

// rec[i * 5 + 0..4]: start, claimed, room, body, end (globaltimer ns) of post i.
__global__ void __launch_bounds__(128) post_under_load(mk::DeviceCtx ctx, mk::net::NetCtx nc, int load, uint64_t* word,
                                                       uint64_t release, uint4* scratch, uint64_t scratch_n,
                                                       uint64_t* rec) {
  extern __shared__ uint4 pin[];  // sized by the host so that one CTA fits per SM
  if (blockIdx.x == 0) {
    if (threadIdx.x != 0) return;
    const uint64_t t_start = mk::dev::globaltimer();
    while (mk::dev::globaltimer() - t_start < 2500000) {}  // the load gets going (waits past 1 ms)
    uint64_t last = 0;
    for (int i = 0; i < kPosts; ++i) {
      uint64_t* r = rec + 5 * i;
      r[0] = mk::dev::globaltimer();
      last = mk::net::put(nc, ctx, 0, 1, 1, 0, 0, 1 << 20, mk::net::SigOp::Add, 5, 1, Step{r + 1});
      r[4] = mk::dev::globaltimer();
      const uint64_t t = r[4];
      while (mk::dev::globaltimer() - t < 5000) {}  // 5 us apart, as a chunk's pieces finish
    }
    mk::dev::signal_set<mk::dev::Scope::Gpu>(word, release);  // ends the load
    mk::net::flush(nc, ctx, 0, last);
    return;
  }
  const mk::dev::WaitSite site{0, -1, 0};
  switch (load) {
    case kSpinSys:
      if (threadIdx.x == 0)
        while (mk::dev::ld_acquire<mk::dev::Scope::Sys>(word) < release) {}
      break;
    case kWaitGe:
      if (threadIdx.x == 0) mk::dev::wait_ge(ctx, word, release, site);
      break;
    case kWaitGe4:
      if ((threadIdx.x & 31) == 0) mk::dev::wait_ge(ctx, word, release, site);
      break;
    case kOld4:
    case kHost10us:
    case kHost100us:
    case kHost1ms:
      if ((threadIdx.x & 31) == 0)
        wait_host_every(ctx, word, release,
                        load == kOld4 ? 0 : load == kHost10us ? 10000 : load == kHost100us ? 100000 : 1000000);
      break;
    case kHostSpin:
    case kHostSpinSleep:
      if (blockIdx.x == 1 && threadIdx.x == 0)
        while (mk::dev::ld_acquire<mk::dev::Scope::Sys>(word) < release) {
          (void)mk::dev::ld_volatile(ctx.abort_host);
          if (load == kHostSpinSleep) __nanosleep(1000);
        }
      break;
    case kSpinSysSleep:
      if (threadIdx.x == 0)
        while (mk::dev::ld_acquire<mk::dev::Scope::Sys>(word) < release) __nanosleep(256);
      break;
    case kSpinGpu:
      if (threadIdx.x == 0)
        while (mk::dev::ld_acquire<mk::dev::Scope::Gpu>(word) < release) {}
      break;
    case kStream: {
      const uint64_t half = scratch_n / 2, per = half / (gridDim.x - 1);
      uint4* src = scratch + (blockIdx.x - 1) * per;
      uint4* dst = scratch + half + (blockIdx.x - 1) * per;
      __shared__ int stop;
      while (true) {
        for (uint64_t j = threadIdx.x; j < per; j += blockDim.x) dst[j] = src[j];
        if (threadIdx.x == 0) stop = mk::dev::ld_acquire<mk::dev::Scope::Gpu>(word) >= release;
        __syncthreads();
        if (stop) break;
        __syncthreads();
      }
      break;
    }
    default:
      break;
  }
  if (threadIdx.x == 0 && load == -1) pin[0] = make_uint4(0, 0, 0, 0);  // keeps `pin` alive
}

const char* load_name(int l) {
  switch (l) {
    case kIdle: return "idle";
    case kSpinSys: return "1 thread/CTA spins ld.acquire.sys";
    case kWaitGe: return "1 thread/CTA in dev::wait_ge (host abort word once per 100 ms)";
    case kWaitGe4: return "4 threads/CTA in dev::wait_ge (host abort word once per 100 ms)";
    case kSpinSysSleep: return "1 thread/CTA ld.acquire.sys + 256 ns sleep";
    case kSpinGpu: return "1 thread/CTA spins ld.acquire.gpu";
    case kStream: return "all threads copy device memory";
    case kCeCopy: return "copy engine D2D copy beside";
    case kOld4: return "4 threads/CTA, host abort word every 128 spins (the waits before)";
    case kHost10us: return "4 threads/CTA, host abort word every 10 us";
    case kHost100us: return "4 threads/CTA, host abort word every 100 us";
    case kHost1ms: return "4 threads/CTA, host abort word every 1 ms";
    case kHostSpin: return "1 thread of 1 CTA reads a host word at every spin (net::flush's wait)";
    case kHostSpinSleep: return "1 thread of 1 CTA reads a host word every ~1 us";
  }
  return "?";
}

}  // namespace

void bench_net_post(BenchContext& bc) {
  auto& c = *bc.comm;
  Table t{"posting one network command while the other SMs are busy (null transport, one GPU)",
          {"other CTAs", "CTAs", "post us median", "p90", "max", "release us median", "release max",
           "body us median"},
          {},
          "2.5 ms after the start, CTA 0's lane 0 posts 64 commands 5 us apart (mk::net::put of 1 MB, proxy with a null transport), "
          "the other CTAs (one per SM) keep the GPU busy as listed; times from %globaltimer around each post, "
          "median / p90 / max over the posts of 5 calls. release = after the body's stores to host memory until "
          "the header's st.release.sys is done. Question: which load makes a post slow (ring attention's "
          "emu posts took ~90-180 us, bench/results/emu-copy-path-20261201T0220Z.md)."};
  if (c.rank() != 0) {
    bc.report->add(t);
    return;
  }
  int sms = 0;
  MKB_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, c.device()));
  const size_t smem = 120 * 1024;  // one CTA per SM
  MKB_CUDA(cudaFuncSetAttribute(post_under_load, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  NullProxy np(c.rank(), c.device(), 1);
  mk::net::Proxy& proxy = *np.proxy;
  const mk::net::NetCtx& nc = np.nc;
  const uint64_t scratch_n = (1ull << 30) / sizeof(uint4);  // 1 GiB
  uint4* scratch = nullptr;
  uint64_t* word = nullptr;
  uint64_t* rec = nullptr;
  MKB_CUDA(cudaMalloc(&scratch, scratch_n * sizeof(uint4)));
  MKB_CUDA(cudaMalloc(&word, 8));
  MKB_CUDA(cudaMemset(word, 0, 8));
  MKB_CUDA(cudaMalloc(&rec, kPosts * 5 * sizeof(uint64_t)));
  cudaStream_t side;
  MKB_CUDA(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  uint64_t release = 0;
  for (int load : {kIdle, kSpinSys, kOld4, kHost10us, kHost100us, kHost1ms, kHostSpin, kHostSpinSleep, kWaitGe, kWaitGe4, kSpinSysSleep, kSpinGpu, kStream,
                   kCeCopy}) {
    std::vector<double> post, rel, body;
    for (int call = 0; call < 6; ++call) {
      ++release;
      if (load == kCeCopy)  // 2 x 512 MiB, runs for a few ms beside the posts
        for (int k = 0; k < 2; ++k)
          MKB_CUDA(cudaMemcpyAsync(scratch + scratch_n / 2, scratch, scratch_n / 2 * sizeof(uint4),
                                   cudaMemcpyDeviceToDevice, side));
      post_under_load<<<sms, 128, smem, bc.stream>>>(c.device_ctx(), nc, load == kCeCopy ? kIdle : load, word,
                                                      release, scratch, scratch_n, rec);
      MKB_CUDA(cudaStreamSynchronize(bc.stream));
      MKB_CUDA(cudaStreamSynchronize(side));
      if (!proxy.error().empty()) mk::fail("net_post: ", proxy.error());
      if (call == 0) continue;  // warm-up
      std::vector<uint64_t> r(kPosts * 5);
      MKB_CUDA(cudaMemcpy(r.data(), rec, r.size() * 8, cudaMemcpyDeviceToHost));
      for (int i = 0; i < kPosts; ++i) {
        const uint64_t* p = r.data() + 5 * i;
        post.push_back((p[4] - p[0]) * 1e-3);
        rel.push_back((p[4] - p[3]) * 1e-3);
        body.push_back((p[3] - p[2]) * 1e-3);
      }
    }
    auto q = [](std::vector<double> v, double f) {
      std::sort(v.begin(), v.end());
      return v[std::min(v.size() - 1, size_t(f * double(v.size())))];
    };
    t.rows.push_back({load_name(load), std::to_string(sms - 1), fmt(q(post, 0.5), 2), fmt(q(post, 0.9), 2),
                      fmt(q(post, 1.0), 2), fmt(q(rel, 0.5), 2), fmt(q(rel, 1.0), 2), fmt(q(body, 0.5), 2)});
  }
  MKB_CUDA(cudaStreamDestroy(side));
  cudaFree(scratch);
  cudaFree(word);
  cudaFree(rec);
  bc.report->add(t);
}

}  // namespace mkb
