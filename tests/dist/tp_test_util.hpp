// Shared by the tensor-parallel op tests (dist tier): fp32 references of
// sums over ranks (every rank's inputs regenerated from their seeds), the
// cross-rank bit-identity check, capture one call in a CUDA graph and
// replay it.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "mkernel/error.hpp"
#include "tests/gpu/gemm_test_util.cuh"
#include "tests/test_comm.hpp"

namespace mkt {

// The TP op tests run on 2 or more ranks: one node of 2 GPUs (1x2), two
// nodes of one (2x1, MK_RANKS_PER_NODE=1: the network path, emu on one
// host), or 2 nodes of 2 (2x2, 4 ranks; on 2 GPUs with MK_SHARE_GPUS=1).
inline bool tp_ranks() { return mk::test::comm().world() >= 2; }
constexpr const char* kNeedsRanks = "needs 2 or more ranks (1x2 over NVLink, 2x1 over the network, 2x2)";

// Network payload bytes this rank put during f() (its host proxy's count,
// Communicator::network_bytes_put), with every rank synchronised and past a
// barrier before and after f: a peer that finished has received all this
// rank put, so the proxy has taken it all. Collective.
template <typename F>
uint64_t network_bytes_of(F&& f) {
  mk::Communicator& c = mk::test::comm();
  c.check(static_cast<int>(cudaDeviceSynchronize()), "cudaDeviceSynchronize()");
  c.barrier();
  const uint64_t before = c.network_bytes_put();
  f();
  c.check(static_cast<int>(cudaDeviceSynchronize()), "cudaDeviceSynchronize()");
  c.barrier();
  return c.network_bytes_put() - before;
}
inline bool across_nodes() { return mk::test::comm().topology().num_nodes > 1; }
constexpr const char* kNeedsNodes = "one node: nothing crosses a network (runs on 2x1 and 2x2)";
// A plan's run() (after one call outside the count: its setup) and its
// standalone collective each put `want` bytes (the op's documented figure).
template <typename R, typename C>
void expect_network_bytes(double want, R&& run, const char* collective_name, C&& collective) {
  run();
  EXPECT_EQ(network_bytes_of(run), uint64_t(want)) << "run()";
  EXPECT_EQ(network_bytes_of(collective), uint64_t(want)) << collective_name;
}

// Rows of a test shape given for 2 ranks, scaled to the world size (every
// rank keeps the same share).
inline int64_t rows_for_world(int64_t m_for_two) { return m_for_two * mk::test::comm().world() / 2; }

// ref [rows x n] (fp32) = rows [row0, row0 + rows) of the sum over ranks s
// of a_s b_s^T, each rank's a_s [m x k] and b_s [n x k] drawn here again
// with random_bf16 from seed_a(s) and seed_b(s) (as the ranks drew them).
template <class SeedA, class SeedB>
void sum_of_products(float* ref, int64_t m, int64_t n, int64_t k, int64_t row0, int64_t rows, SeedA&& seed_a,
                     SeedB&& seed_b) {
  Buf a(m * k * 2), b(n * k * 2);
  for (int s = 0; s < mk::test::comm().world(); ++s) {
    random_bf16(a.p, m * k, seed_a(s));
    random_bf16(b.p, n * k, seed_b(s));
    simt_reference(a.as<uint16_t>() + row0 * k, b.p, ref, rows, n, k, s ? 1.f : 0.f);
  }
  mk::test::comm().check(static_cast<int>(cudaDeviceSynchronize()), "sum_of_products");
}

// ref [rows x n] (fp32) = rows [row0, row0 + rows) of the sum over ranks s
// of x_s [m x n] bf16, drawn again with random_bf16 from seed(s).
template <class Seed>
void sum_of_inputs(float* ref, int64_t m, int64_t n, int64_t row0, int64_t rows, Seed&& seed) {
  Buf x(m * n * 2);
  cudaMemset(ref, 0, rows * n * 4);
  for (int s = 0; s < mk::test::comm().world(); ++s) {
    random_bf16(x.p, m * n, seed(s));
    add_bf16_rows<<<264, 256>>>(x.as<uint16_t>() + row0 * n, ref, rows * n);
  }
  mk::test::comm().check(static_cast<int>(cudaDeviceSynchronize()), "sum_of_inputs");
}

// Collective: "" when `bytes` of device memory hold on every rank the bits
// rank 0's hold, else which ranks differ, where first (as bf16 elements of
// rows of `ld`) and in how many bf16 elements. Every rank gets the same text.
inline std::string differences_from_rank0(const void* dev, size_t bytes, int64_t ld) {
  auto& c = mk::test::comm();
  std::string mine(bytes, '\0');
  c.check(static_cast<int>(cudaMemcpy(mine.data(), dev, bytes, cudaMemcpyDeviceToHost)), "copy out for comparison");
  const std::string ref = c.bootstrap().broadcast(mine, 0);
  std::string report;
  if (ref.size() != bytes) {
    report = "rank " + std::to_string(c.rank()) + ": rank 0 sent " + std::to_string(ref.size()) + " bytes; ";
  } else if (ref != mine) {
    const auto* p = reinterpret_cast<const uint16_t*>(mine.data());
    const auto* q = reinterpret_cast<const uint16_t*>(ref.data());
    int64_t first = -1, count = 0;
    for (size_t i = 0; i < bytes / 2; ++i)
      if (p[i] != q[i] && count++ == 0) first = static_cast<int64_t>(i);
    char buf[160];
    std::snprintf(buf, sizeof(buf), "rank %d: %lld elements differ from rank 0's, first row %lld col %lld (0x%04x vs 0x%04x); ",
                  c.rank(), static_cast<long long>(count), static_cast<long long>(first / ld),
                  static_cast<long long>(first % ld), first >= 0 ? p[first] : 0, first >= 0 ? q[first] : 0);
    report = buf;
  }
  std::string all;
  for (const std::string& r : c.bootstrap().allgather(report)) all += r;
  return all;
}

// One thread waits until the host sets *open (host-mapped; a plain volatile
// read) or limit_ns passed; *timed_out says which.
static __global__ void host_gate(const int* open, int* timed_out, uint64_t limit_ns) {
  auto now = [] {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
  };
  const uint64_t t0 = now();
  while (!*static_cast<const volatile int*>(open)) {
    if (now() - t0 > limit_ns) {
      *timed_out = 1;
      return;
    }
    __nanosleep(1000);
  }
}

// Two calls of one plan on two streams, with no event between them
// (mkernel/launch_order.hpp orders them): first(s1) is issued behind a gate
// kernel on s1 that the host keeps closed, then second(s2) at once. While the
// gate is closed s2 must not finish: its call waits for the first. Then the
// gate opens and both run. Returns "" or what went wrong; the device is
// synchronised after. Collective: every rank calls it with the same calls.
template <typename First, typename Second>
std::string second_stream_waits_for_first(First&& first, Second&& second) {
  auto& c = mk::test::comm();
  auto ck = [&](cudaError_t e, const char* what) { c.check(static_cast<int>(e), what); };
  struct Owned {
    int* open = nullptr;
    int* timed_out = nullptr;
    cudaStream_t s1 = nullptr, s2 = nullptr;
    ~Owned() {  // (also when a check throws: the gate opens, the streams drain)
      if (open) *static_cast<volatile int*>(open) = 1;
      if (s1) cudaStreamSynchronize(s1);
      if (s2) cudaStreamSynchronize(s2);
      if (s1) cudaStreamDestroy(s1);
      if (s2) cudaStreamDestroy(s2);
      cudaFree(timed_out);
      cudaFreeHost(open);
    }
  } own;
  ck(cudaHostAlloc(&own.open, sizeof(int), cudaHostAllocMapped), "cudaHostAlloc");
  *static_cast<volatile int*>(own.open) = 0;
  ck(cudaMalloc(&own.timed_out, sizeof(int)), "cudaMalloc");
  ck(cudaMemset(own.timed_out, 0, sizeof(int)), "cudaMemset");
  ck(cudaStreamCreateWithFlags(&own.s1, cudaStreamNonBlocking), "stream");
  ck(cudaStreamCreateWithFlags(&own.s2, cudaStreamNonBlocking), "stream");
  ck(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  c.barrier();
  host_gate<<<1, 1, 0, own.s1>>>(own.open, own.timed_out, 4'000'000'000ull);
  ck(cudaGetLastError(), "host_gate launch");
  first(own.s1);
  second(own.s2);
  // Long enough for the second call to end everywhere had it not waited
  // (these calls take milliseconds), far below the ops' wait bounds.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const cudaError_t q = cudaStreamQuery(own.s2);
  *static_cast<volatile int*>(own.open) = 1;
  ck(cudaStreamSynchronize(own.s1), "first call");
  ck(cudaStreamSynchronize(own.s2), "second call");
  int gate_timed_out = 0;
  ck(cudaMemcpy(&gate_timed_out, own.timed_out, sizeof(int), cudaMemcpyDeviceToHost), "cudaMemcpy");
  std::string why;
  if (gate_timed_out) why = "the gate kernel timed out before the host opened it; ";
  if (q == cudaSuccess)
    why += "the call on the second stream finished while the first call was held behind the gate";
  else if (q != cudaErrorNotReady)
    why += std::string("cudaStreamQuery of the second stream: ") + cudaGetErrorString(q);
  c.barrier();
  return why;
}

// Whether `plan` reads as held by no CUDA graph (Plan::graphs_alive()) within `seconds` of its graphs' destroy
// (CUDA runs the user objects' destructors that say so on a thread of its own, a moment later).
template <typename Plan>
bool graphs_released_within(const Plan& plan, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (plan.graphs_alive()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// Captures what `record` enqueues on `stream` into an executable graph.
class CapturedGraph {
 public:
  CapturedGraph(cudaStream_t stream, const std::function<void()>& record) {
    auto& c = mk::test::comm();
    c.check(static_cast<int>(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal)), "begin capture");
    record();
    c.check(static_cast<int>(cudaStreamEndCapture(stream, &graph_)), "end capture");
    c.check(static_cast<int>(cudaGraphInstantiate(&exec_, graph_, 0)), "instantiate graph");
  }
  ~CapturedGraph() {
    cudaGraphExecDestroy(exec_);
    cudaGraphDestroy(graph_);
  }
  void launch(cudaStream_t stream) {
    mk::test::comm().check(static_cast<int>(cudaGraphLaunch(exec_, stream)), "graph launch");
  }

 private:
  cudaGraph_t graph_{};
  cudaGraphExec_t exec_{};
};

// Captures call(stream) once on a stream of its own, then replays it reps
// times back to back (no host sync between replays): before replay r,
// `in_bytes` of input r (fresh + r in_bytes) are copied into `in`; after
// it, `out_bytes` of `out` go to all + r out_bytes. Returns once all ran.
inline void replay_on_fresh_inputs(const std::function<void(cudaStream_t)>& call, void* in, const void* fresh,
                                   size_t in_bytes, const void* out, void* all, size_t out_bytes, int reps) {
  auto& c = mk::test::comm();
  cudaStream_t s;
  c.check(static_cast<int>(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)), "stream");
  c.check(static_cast<int>(cudaDeviceSynchronize()), "cudaDeviceSynchronize()");
  {
    CapturedGraph graph(s, [&] { call(s); });
    for (int r = 0; r < reps; ++r) {
      c.check(static_cast<int>(cudaMemcpyAsync(in, static_cast<const char*>(fresh) + r * in_bytes, in_bytes,
                                               cudaMemcpyDeviceToDevice, s)),
              "copy in");
      graph.launch(s);
      c.check(static_cast<int>(cudaMemcpyAsync(static_cast<char*>(all) + r * out_bytes, out, out_bytes,
                                               cudaMemcpyDeviceToDevice, s)),
              "copy out");
    }
    c.check(static_cast<int>(cudaStreamSynchronize(s)), "replays");
  }
  cudaStreamDestroy(s);
}

}  // namespace mkt
