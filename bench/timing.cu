#include "bench/timing.hpp"

#include "bench/gpu_clocks.hpp"
#include "src/runtime/gpu_spin.hpp"

#include <cuda_bf16.h>

#include <algorithm>
#include <cstring>
#include <optional>

namespace mkb {

namespace {
__device__ __forceinline__ uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

__global__ void fill_bf16_kernel(__nv_bfloat16* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint64_t r = mix(seed * 0x9e3779b97f4a7c15ull + i);
    float u = static_cast<float>(r >> 40) / static_cast<float>(1 << 24);  // [0, 1)
    p[i] = __float2bfloat16(2.0f * u - 1.0f);
  }
}

__global__ void fill_bytes_kernel(uint64_t* p, size_t n_words, uint64_t seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n_words; i += size_t(gridDim.x) * blockDim.x)
    p[i] = mix(seed * 0x9e3779b97f4a7c15ull + i) | 1ull;  // never zero
}
}  // namespace

void fill_random_bf16(void* dst, size_t count, uint64_t seed, cudaStream_t s) {
  fill_bf16_kernel<<<1024, 256, 0, s>>>(static_cast<__nv_bfloat16*>(dst), count, seed);
  MKB_CUDA(cudaGetLastError());
}

void fill_random_bytes(void* dst, size_t bytes, uint64_t seed, cudaStream_t s) {
  fill_bytes_kernel<<<1024, 256, 0, s>>>(static_cast<uint64_t*>(dst), bytes / 8, seed);
  MKB_CUDA(cudaGetLastError());
}

double max_over_ranks(mk::Bootstrap* bs, double v) {
  if (!bs || bs->world() == 1) return v;
  auto all = bs->allgather(std::string(reinterpret_cast<const char*>(&v), sizeof(v)));
  double m = v;
  for (auto& s : all) {
    double x;
    std::memcpy(&x, s.data(), sizeof(x));
    m = std::max(m, x);
  }
  return m;
}

namespace {
// Each timed call's time as the slowest rank's (slowest_per_call), in one exchange.
std::vector<double> slowest_rank(mk::Bootstrap* bs, const std::vector<double>& ms) {
  if (!bs || bs->world() == 1) return ms;
  const auto all = bs->allgather(std::string(reinterpret_cast<const char*>(ms.data()), ms.size() * sizeof(double)),
                                 "mkbench: per-call times");
  std::vector<std::vector<double>> by_rank;
  for (const auto& s : all) {
    if (s.size() != ms.size() * sizeof(double)) mk::fail("mkbench: ranks timed different numbers of calls");
    by_rank.emplace_back(ms.size());
    if (!ms.empty()) std::memcpy(by_rank.back().data(), s.data(), s.size());
  }
  return slowest_per_call(by_rank);
}

Stats summarize(mk::Bootstrap* bs, const std::vector<double>& ms) { return stats_of(slowest_rank(bs, ms)); }
}  // namespace

std::vector<Stats> time_interleaved(mk::Bootstrap* bs, cudaStream_t stream, const TimingOpts& opts,
                                    const std::vector<std::function<void(int)>>& calls,
                                    const std::function<void(int)>& before) {
  const size_t n = calls.size();
  auto lead = [&] {  // TimingOpts::lead_cycles (in the warm-up too: its first launch loads the kernel)
    if (opts.lead_cycles > 0) mk::gpu_spin(opts.lead_cycles, stream);  // (timed: src/runtime/gpu_spin.hpp)
  };
  // Round r (the warm-up rounds counted first) runs its calls in call_order(n, r) (TimingOpts::rotate).
  for (int i = 0; i < opts.warmup; ++i)
    for (size_t c : call_order(n, i, opts.rotate)) {
      if (before) before(-1 - i);
      lead();
      calls[c](-1 - i);
    }
  MKB_CUDA(cudaStreamSynchronize(stream));
  std::vector<cudaEvent_t> ev(2 * opts.iters * n);
  for (auto& e : ev) MKB_CUDA(cudaEventCreate(&e));
  std::optional<ClockWindow> clocks(std::in_place);  // the timed rounds' clocks, for the table's note (Report::add)
  for (int i = 0; i < opts.iters; ++i)
    for (size_t c : call_order(n, opts.warmup + i, opts.rotate)) {
      if (before) before(i);
      lead();
      MKB_CUDA(cudaEventRecord(ev[2 * (i * n + c)], stream));
      calls[c](i);
      MKB_CUDA(cudaEventRecord(ev[2 * (i * n + c) + 1], stream));
    }
  MKB_CUDA(cudaStreamSynchronize(stream));
  clocks.reset();
  std::vector<Stats> out;
  for (size_t c = 0; c < n; ++c) {
    std::vector<double> ms(opts.iters);
    for (int i = 0; i < opts.iters; ++i) {
      float t = 0;
      MKB_CUDA(cudaEventElapsedTime(&t, ev[2 * (i * n + c)], ev[2 * (i * n + c) + 1]));
      ms[i] = t;
    }
    out.push_back(summarize(bs, ms));
  }
  for (auto& e : ev) cudaEventDestroy(e);
  return out;
}

Stats time_calls(mk::Bootstrap* bs, cudaStream_t stream, const TimingOpts& opts,
                 const std::function<void(int)>& call, const std::function<void(int)>& before) {
  return time_interleaved(bs, stream, opts, {call}, before)[0];
}

Rotating::Rotating(size_t bytes, size_t min_total, int max_copies) : bytes_(bytes) {
  int n = static_cast<int>(std::min<size_t>(max_copies, std::max<size_t>(2, (min_total + bytes - 1) / bytes)));
  for (int i = 0; i < n; ++i) {
    void* p = nullptr;
    MKB_CUDA(cudaMalloc(&p, bytes));
    bufs_.push_back(p);
  }
}

Rotating::~Rotating() {
  for (void* p : bufs_) cudaFree(p);
}

}  // namespace mkb
