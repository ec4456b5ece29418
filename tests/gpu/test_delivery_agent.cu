// The delivery agent (device/net/agent.cuh) on one GPU, driven through a
// delivery ring written by the test in the proxy's place: a write split in
// two chunks, the first (48 MB) claimed by one agent, the last (4 KB, with the
// signal) by another agent while the first is still copying: an agent of
// another kernel, or the second agent of the same kernel, which rests until
// the first, busy on 48 MB, asks for help (the ring's busy counter). A watcher reads the end of
// the first chunk the moment the signal lands: the last chunk's agent must
// wait for the first chunk's done word before its signal
// (agent_await_chunks). tools/wip/no_chunk_order.sh builds this test without
// that wait, where it fails.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "device/net/agent.cuh"
#include "device/signals.cuh"
#include "mkernel/mkernel.hpp"
#include "src/net/fabric/fabric_stage.hpp"
#include "tests/test_comm.hpp"

using namespace mk;
using mk::test::comm;

namespace {

#define CK(x) comm().check(static_cast<int>(x), #x)

// Runs an agent until *stop (host-mapped) is set.
__global__ void agent_kernel(DeviceCtx ctx, net::NetCtx nc, const uint64_t* stop, uint32_t* finished) {
  extern __shared__ uint8_t smem[];
  net::with_agent(nc, ctx, finished, smem, [&](int, int) {
    if (threadIdx.x == 0)
      dev::wait_ge(ctx, stop, 1, dev::WaitSite{static_cast<int32_t>(Role::Test), -1, -1});
  });
}

// Waits for the signal, then at once counts the bytes of [check, check + n)
// that are not `want`.
__global__ void watch_kernel(DeviceCtx ctx, const uint64_t* sig, const unsigned char* check, size_t n,
                             unsigned char want, unsigned long long* wrong) {
  if (threadIdx.x == 0) dev::wait_ge(ctx, sig, 1, dev::WaitSite{static_cast<int32_t>(Role::Test), -1, -1});
  __syncthreads();
  unsigned long long w = 0;
  for (size_t k = threadIdx.x; k < n; k += blockDim.x)
    w += reinterpret_cast<const volatile unsigned char*>(check)[k] != want;
  if (w) atomicAdd(wrong, w);
}

struct PinnedWords {
  explicit PinnedWords(size_t n) {
    CK(cudaHostAlloc(&p, n * 8, cudaHostAllocMapped | cudaHostAllocPortable));
    std::memset(p, 0, n * 8);
  }
  ~PinnedWords() { cudaFreeHost(p); }
  uint64_t* p = nullptr;
};

void publish(net::DeliverySlot& s, uint64_t seq, uint64_t meta, const void* src, void* dst, uint64_t* sig,
             uint64_t after) {
  s.w[1] = meta;
  s.w[2] = reinterpret_cast<uint64_t>(src);
  s.w[3] = reinterpret_cast<uint64_t>(dst);
  s.w[4] = reinterpret_cast<uint64_t>(sig);
  s.w[5] = 1;
  s.w[6] = after;
  s.w[7] = 0;
  __atomic_store_n(&s.w[0], seq + 1, __ATOMIC_RELEASE);
}

bool wait_host(const uint64_t* w, uint64_t want, int ms) {
  const auto t0 = std::chrono::steady_clock::now();
  while (__atomic_load_n(w, __ATOMIC_ACQUIRE) < want)
    if (std::chrono::steady_clock::now() - t0 > std::chrono::milliseconds(ms)) return false;
  return true;
}

// kernels x agents: 2 x 1 (no busy counter: every agent polls) or 1 x 2 (with
// one; a lone small write first). What this checks of the resting: the second
// agent wakes and takes the last chunk while the first copies, and the busy
// counter is back at 0 at the end. That it rests while idle shows in the
// latency it no longer adds (bench/results/emu-agents-rest-20261203.md), not
// here: a read of the counter after a batch cannot tell whether the batch
// raised it (it drops again right after the batch's done words).
// A network context of one queue that never gets a command (its head stays
// 0, `qdone` a zeroed pinned word): the agents end as soon as their kernels'
// work does. The caller sets delivery[0].
net::NetCtx idle_queue_ctx(int agents, uint64_t* qhead, uint64_t* qdone) {
  net::NetCtx nc{};
  nc.num_queues = 1;
  nc.agent = agents;
  nc.queues[0].head = qhead;
  nc.queues[0].done = qdone;
  nc.queues[0].size = 1;
  return nc;
}

void chunk_order_case(int kernels, int agents) {
  const bool rest = agents > 1;
  constexpr uint32_t kSlots = 16;
  constexpr size_t kFirst = 48u << 20, kLast = 4096, kTotal = kFirst + kLast, kCheck = 64u << 10;
  PinnedWords slots(kSlots * 8), done(kSlots), claimed(1), qdone(1), stop(1);
  uint64_t *claim = nullptr, *qhead = nullptr, *sig = nullptr;  // claim: the claim and busy counters
  unsigned char *src = nullptr, *dst = nullptr;
  unsigned long long* wrong = nullptr;
  uint32_t *fin_a = net::alloc_agent_counter(), *fin_b = net::alloc_agent_counter();
  ASSERT_TRUE(fin_a && fin_b);
  CK(cudaMalloc(&claim, 16));
  CK(cudaMalloc(&qhead, 8));
  CK(cudaMalloc(&sig, 8));
  CK(cudaMalloc(&wrong, 8));
  CK(cudaMalloc(&src, kTotal));
  CK(cudaMalloc(&dst, kTotal));
  CK(cudaMemset(claim, 0, 16));
  CK(cudaMemset(qhead, 0, 8));
  CK(cudaMemset(sig, 0, 8));
  CK(cudaMemset(wrong, 0, 8));
  CK(cudaMemset(src, 0x5A, kTotal));
  CK(cudaMemset(dst, 0, kTotal));
  CK(cudaDeviceSynchronize());

  net::NetCtx nc = idle_queue_ctx(agents, qhead, qdone.p);
  net::DeliveryRing& r = nc.delivery[0];
  r.slots = reinterpret_cast<net::DeliverySlot*>(slots.p);
  r.claim = claim;
  r.busy = rest ? claim + 1 : nullptr;
  r.done = done.p;
  r.claimed = claimed.p;
  r.size = kSlots;

  cudaStream_t sa, sb, sw;
  CK(cudaStreamCreateWithFlags(&sa, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&sb, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&sw, cudaStreamNonBlocking));
  DeviceCtx ctx = comm().device_ctx();
  const size_t smem = net::agent_smem_bytes(nc);
  agent_kernel<<<net::with_agent_blocks(nc, 1), 256, smem, sa>>>(ctx, nc, stop.p, fin_a);
  if (kernels > 1) agent_kernel<<<net::with_agent_blocks(nc, 1), 256, smem, sb>>>(ctx, nc, stop.p, fin_b);
  watch_kernel<<<1, 1024, 0, sw>>>(ctx, sig, dst + kFirst - kCheck, kCheck, 0x5A, wrong);
  CK(cudaGetLastError());
  usleep(100000);  // every kernel resident

  auto* s = reinterpret_cast<net::DeliverySlot*>(slots.p);
  // Host waits of 2 s, below the kernels' own bounds (MK_TIMEOUT_MS), so that
  // `stop` is set before any of them gives up.
  uint64_t seq = 0;
  bool small_done = true;
  if (rest) {  // a lone 4 KB write (slot 0, no signal): the first agent alone
    publish(s[0], 0, net::delivery_meta(kLast, net::SigOp::None, false), src, dst, nullptr, 0);
    small_done = wait_host(done.p, 1, 2000);
    seq = 1;
  }
  // Chunk 0: no signal. Once an agent claimed it (and copies 48 MB), chunk 1
  // with the signal and `after` = 1: the other agent takes it.
  publish(s[seq], seq, net::delivery_meta(kFirst, net::SigOp::None, false), src, dst, nullptr, 0);
  const bool first_claimed = small_done && wait_host(claimed.p, seq + 1, 2000);
  publish(s[seq + 1], seq + 1, net::delivery_meta(kLast, net::SigOp::Set, false, true), src + kFirst, dst + kFirst,
          sig, 1);
  // The split this test is about: chunk 1 claimed while chunk 0 is not done
  // (else one agent took both, one after the other, and nothing was tested;
  // with one kernel, the second agent woke: the first was copying chunk 0).
  const bool last_claimed = first_claimed && wait_host(claimed.p, seq + 2, 2000);
  const bool split = last_claimed && __atomic_load_n(done.p + seq, __ATOMIC_ACQUIRE) == 0;
  const bool delivered =
      last_claimed && wait_host(done.p + seq + 1, seq + 2, 2000) && wait_host(done.p + seq, seq + 1, 2000);
  __atomic_store_n(stop.p, 1, __ATOMIC_RELEASE);
  CK(cudaStreamSynchronize(sa));
  CK(cudaStreamSynchronize(sb));
  CK(cudaStreamSynchronize(sw));
  uint64_t busy_at_end = 0;
  CK(cudaMemcpy(&busy_at_end, claim + 1, 8, cudaMemcpyDeviceToHost));
  ASSERT_TRUE(small_done) << "the lone small write was not done in 2 s";
  ASSERT_TRUE(first_claimed) << "no agent claimed the first chunk in 2 s";
  ASSERT_TRUE(delivered) << "the chunks were not both claimed and done in 2 s";
  EXPECT_TRUE(split) << "the last chunk was claimed after the first was done: the second agent did not take it "
                        "while the first copied (not resident? not woken?); the ordering was not exercised";
  if (rest) EXPECT_EQ(busy_at_end, 0u) << "the busy counter did not return to 0";
  unsigned long long h_wrong = 0;
  CK(cudaMemcpy(&h_wrong, wrong, 8, cudaMemcpyDeviceToHost));
  EXPECT_EQ(h_wrong, 0u) << "the signal landed while " << h_wrong << " bytes of the end of the first chunk (another "
                         << "agent's) were not yet copied";
  std::vector<unsigned char> got(kTotal);
  CK(cudaMemcpy(got.data(), dst, kTotal, cudaMemcpyDeviceToHost));
  size_t bad = 0;
  for (unsigned char b : got) bad += b != 0x5A;
  EXPECT_EQ(bad, 0u) << "bytes not delivered";
  EXPECT_EQ(comm().device_failure(), "");
  cudaStreamDestroy(sa);
  cudaStreamDestroy(sb);
  cudaStreamDestroy(sw);
  cudaFree(src);
  cudaFree(dst);
  cudaFree(claim);
  cudaFree(qhead);
  cudaFree(sig);
  cudaFree(wrong);
  cudaFree(fin_a);
  cudaFree(fin_b);
}

TEST(DeliveryAgent, LastChunkSignalsOnlyAfterAnotherAgentsEarlierChunk) { chunk_order_case(2, 1); }

// The same within one kernel of two agents: the second rests until the
// first, copying 48 MB, asks for help.
TEST(DeliveryAgent, RestingAgentWokenTakesTheLastChunkInOrder) { chunk_order_case(1, 2); }

// fabric's staging by the delivery agent (MK_FABRIC_STAGE=agent): a running
// kernel's agent copies 1 MB GPU -> pinned shadow (copy_out, a sender's
// staging), then 1 MB shadow -> GPU with its Add signal (deliver, a
// receiver's): a watcher checks the bytes the moment the signal lands. The
// proxy side (this thread) calls no CUDA for either.
TEST(DeliveryAgent, FabricStagingCopiesOutAndDeliversWithItsSignal) {
  constexpr size_t kBytes = 1u << 20;
  auto ops = net::fabric::make_agent_stage_ops(comm().device());
  ASSERT_FALSE(ops->calls_cuda());
  const net::DeliveryRing ring = ops->delivery_ring();
  ASSERT_GT(ring.size, 0u);
  auto* out_shadow = static_cast<unsigned char*>(ops->alloc_host(kBytes));
  auto* in_shadow = static_cast<unsigned char*>(ops->alloc_host(kBytes));
  std::memset(out_shadow, 0, kBytes);
  std::memset(in_shadow, 0x77, kBytes);
  PinnedWords qdone(1), stop(1);
  uint64_t *qhead = nullptr, *sig = nullptr;
  unsigned char *src = nullptr, *dst = nullptr;
  unsigned long long* wrong = nullptr;
  uint32_t* fin = net::alloc_agent_counter();
  ASSERT_TRUE(fin);
  CK(cudaMalloc(&qhead, 8));
  CK(cudaMalloc(&sig, 8));
  CK(cudaMalloc(&wrong, 8));
  CK(cudaMalloc(&src, kBytes));
  CK(cudaMalloc(&dst, kBytes));
  CK(cudaMemset(qhead, 0, 8));
  CK(cudaMemset(sig, 0, 8));
  CK(cudaMemset(wrong, 0, 8));
  CK(cudaMemset(src, 0x3C, kBytes));
  CK(cudaMemset(dst, 0, kBytes));
  CK(cudaDeviceSynchronize());

  net::NetCtx nc = idle_queue_ctx(1, qhead, qdone.p);
  nc.delivery[0] = ring;
  cudaStream_t sa, sw;
  CK(cudaStreamCreateWithFlags(&sa, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&sw, cudaStreamNonBlocking));
  DeviceCtx ctx = comm().device_ctx();
  agent_kernel<<<net::with_agent_blocks(nc, 1), 256, net::agent_smem_bytes(nc), sa>>>(ctx, nc, stop.p, fin);
  watch_kernel<<<1, 1024, 0, sw>>>(ctx, sig, dst, kBytes, 0x77, wrong);
  CK(cudaGetLastError());

  ops->copy_out(3, out_shadow, src, kBytes);
  const auto t0 = std::chrono::steady_clock::now();
  bool copied = false;
  while (!(copied = ops->copied(3)) && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2)) {
  }
  size_t out_bad = 0;
  for (size_t i = 0; i < kBytes; ++i) out_bad += out_shadow[i] != 0x3C;
  ops->deliver(dst, in_shadow, kBytes, sig, net::SigOp::Add, 5);
  bool landed = false;
  while (!(landed = cudaStreamQuery(sw) == cudaSuccess) && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(4))
    ops->progress();
  __atomic_store_n(stop.p, 1, __ATOMIC_RELEASE);
  CK(cudaStreamSynchronize(sa));
  CK(cudaStreamSynchronize(sw));
  ops->drain();
  EXPECT_TRUE(copied) << "no agent made the copy out in 2 s";
  EXPECT_EQ(out_bad, 0u) << "bytes of the copy out not in the shadow once it was reported done";
  EXPECT_TRUE(landed) << "the delivered write's signal did not land in 2 s";
  unsigned long long h_wrong = 0;
  uint64_t h_sig = 0;
  CK(cudaMemcpy(&h_wrong, wrong, 8, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(&h_sig, sig, 8, cudaMemcpyDeviceToHost));
  EXPECT_EQ(h_wrong, 0u) << "the signal landed before " << h_wrong << " of its write's bytes";
  EXPECT_EQ(h_sig, 5u);
  EXPECT_EQ(comm().device_failure(), "");
  cudaStreamDestroy(sa);
  cudaStreamDestroy(sw);
  ops->free_host(out_shadow);
  ops->free_host(in_shadow);
  cudaFree(qhead);
  cudaFree(sig);
  cudaFree(wrong);
  cudaFree(src);
  cudaFree(dst);
  cudaFree(fin);
}

}  // namespace
