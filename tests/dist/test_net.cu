// GPU-initiated networking between 2 nodes (MK_RANKS_PER_NODE: 2 GPUs as
// 2x1, or 2x2 / 2x4 with several ranks per node), over whatever MK_NET
// selects (emu by default here, fabric when asked): each rank and its rail
// peer (the same local index on the other node) exchange puts + signals
// pushed by kernels on many CTAs through the command queues, the peer waits
// on its signals, every byte is checked; repeated launches use fresh
// epochs; FLUSH and BARRIER behave; large puts split into chunks over two
// delivery agents land before their signals; data no kernel waited for is
// dropped, not written later, when its region is deregistered (fabric);
// deregistering waits until the proxy completed what the kernels pushed.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "device/net/agent.cuh"
#include "device/net/net.cuh"
#include "mkernel/mkernel.hpp"
#include "src/net/proxy.hpp"
#include "tests/test_comm.hpp"

using namespace mk;
using mk::test::comm;

namespace {

#define CK(x) comm().check(static_cast<int>(x), #x)

// Region layout of the data buffer: [0, half) is what this rank sends,
// [half, 2*half) is where the peer's bytes land.
struct Plan {
  int region;
  uint64_t half;
  int nmsgs;        // messages per launch
  int sig_data;     // signal index: +1 per message
  int sig_done;     // signal index: set to the epoch after a flush
  int sig_barrier;  // barrier signal
};

__device__ __forceinline__ void msg_range(const Plan& p, int i, uint64_t* off, uint64_t* bytes) {
  // Irregular sizes and offsets: 1 B .. ~1 MiB, unaligned.
  const uint64_t slot = p.half / p.nmsgs;
  uint64_t b = 1 + (uint64_t(i) * 2654435761ull) % (slot < 1048576 ? slot - 1 : 1048575);
  *off = uint64_t(i) * slot + (i % 7);
  *bytes = b > slot - (i % 7) ? slot - (i % 7) : b;
}

// Kernels that push commands run the network's delivery agent in a block of
// their own when the transport asks for it (emu): net::with_agent; `finished`
// is the kernel's zeroed counter for it (agent_finished()).
__global__ void send_kernel(DeviceCtx ctx, net::NetCtx nc, Plan p, int peer, uint64_t epoch, uint32_t* finished) {
  extern __shared__ uint8_t smem[];
  net::with_agent(nc, ctx, finished, smem, [&](int block, int blocks) {
    if (threadIdx.x != 0) return;
    const int q = block % nc.num_queues;
    uint64_t last = 0;
    for (int i = block; i < p.nmsgs; i += blocks) {
      uint64_t off, bytes;
      msg_range(p, i, &off, &bytes);
      last = net::put(nc, ctx, q, peer, p.region, p.half + off, off, bytes, net::SigOp::Add, p.sig_data, 1);
    }
    net::flush(nc, ctx, q, last);
    // Everyone's data is locally complete on this block's queue; block 0 also
    // raises the "done" signal (Set, epoch) after a full quiet of queue 0.
    if (block == 0) {
      net::quiet(nc, ctx, 0);
      net::signal(nc, ctx, 0, peer, net::SigOp::Set, p.sig_done, epoch);
    }
  });
}

// It pushes nothing, but it runs the agent too: with fabric's staging by
// agents, this rank's agents deliver the peer's data (src/net/fabric/
// fabric_stage.hpp), and send_kernel's may have ended before it came.
__global__ void recv_kernel(DeviceCtx ctx, net::NetCtx nc, Plan p, int peer, uint64_t rounds_done, uint64_t epoch,
                            uint32_t* finished) {
  extern __shared__ uint8_t smem[];
  net::with_agent(nc, ctx, finished, smem, [&](int, int) {
    if (threadIdx.x != 0) return;
    dev::wait_ge(ctx, ctx.signals + p.sig_data, rounds_done * p.nmsgs,
                 dev::WaitSite{static_cast<int32_t>(Role::InterRecv), peer, p.sig_data});
    dev::wait_ge(ctx, ctx.signals + p.sig_done, epoch,
                 dev::WaitSite{static_cast<int32_t>(Role::InterRecv), peer, p.sig_done});
  });
}

__global__ void barrier_kernel(DeviceCtx ctx, net::NetCtx nc, int sig, uint64_t expected, uint32_t* finished) {
  extern __shared__ uint8_t smem[];
  net::with_agent(nc, ctx, finished, smem, [&](int, int) {
    if (threadIdx.x != 0) return;
    uint64_t s = net::barrier_signal(nc, ctx, 0, sig);
    net::flush(nc, ctx, 0, s);
    dev::wait_ge(ctx, ctx.signals + sig, expected, dev::WaitSite{static_cast<int32_t>(Role::InterRecv), -1, sig});
  });
}

// The counter net::with_agent needs (one per process: these tests run one
// such kernel at a time).
uint32_t* agent_finished() {
  static uint32_t* word = net::alloc_agent_counter();
  CK(word ? cudaSuccess : cudaErrorMemoryAllocation);
  return word;
}

bool two_nodes() { return comm().topology().num_nodes == 2; }

// Small puts: sizes 1..64 bytes at assorted source and destination
// alignments, so that some travel inline (PUT_INLINE: <= 16 bytes in 4-byte
// granules from a 4-byte aligned source; emu's agent writes them from the
// command) and some as copies.
struct SmallMsg {
  uint32_t bytes, src_off, dst_off;
  bool add;  // signalled by Add (else Set)
};
__device__ __forceinline__ SmallMsg small_msg(int i) {
  constexpr uint32_t sizes[12] = {8, 4, 12, 16, 1, 3, 7, 13, 17, 24, 64, 8};
  constexpr uint32_t srcs[7] = {0, 4, 8, 12, 1, 0, 6};
  constexpr uint32_t dsts[8] = {0, 4, 8, 12, 0, 3, 5, 2};
  return SmallMsg{sizes[i % 12], srcs[(i / 3) % 7], dsts[(i / 5) % 8], i % 4 == 3};
}
__device__ __forceinline__ unsigned char small_byte(uint64_t tag, int i, uint32_t k) {
  return static_cast<unsigned char>(tag * 29 + uint64_t(i) * 131 + k * 7 + 1);
}

// One sender, one receiver; message i changes bytes [0, 64) of the sender's
// source area and lands in the receiver's area at 256. The receiver checks
// its bytes as soon as its signal arrives (a signal that overtook its data
// shows the previous message's bytes), then acks; the sender rewrites the
// source only after the ack.
__global__ void small_puts_kernel(DeviceCtx ctx, net::NetCtx nc, unsigned char* local, int region, int peer,
                                  bool sender, int sig_set, int sig_add, int sig_ack, int n, uint64_t base,
                                  uint64_t add_base, uint64_t tag, unsigned long long* bad, uint32_t* finished) {
  extern __shared__ uint8_t smem[];
  net::with_agent(nc, ctx, finished, smem, [&](int, int) {
  if (threadIdx.x != 0) return;
  uint64_t adds = 0;
  for (int i = 1; i <= n; ++i) {
    const SmallMsg m = small_msg(i);
    if (sender) {
      for (uint32_t k = 0; k < m.bytes; ++k) local[m.src_off + k] = small_byte(tag, i, k);
      net::put(nc, ctx, 0, peer, region, 256 + m.dst_off, m.src_off, m.bytes, m.add ? net::SigOp::Add : net::SigOp::Set,
               m.add ? sig_add : sig_set, m.add ? 1 : base + i);
      dev::wait_ge(ctx, ctx.signals + sig_ack, base + i,
                   dev::WaitSite{static_cast<int32_t>(Role::InterSend), peer, sig_ack});
    } else {
      if (m.add)
        dev::wait_ge(ctx, ctx.signals + sig_add, add_base + ++adds,
                     dev::WaitSite{static_cast<int32_t>(Role::InterRecv), peer, sig_add});
      else
        dev::wait_ge(ctx, ctx.signals + sig_set, base + i,
                     dev::WaitSite{static_cast<int32_t>(Role::InterRecv), peer, sig_set});
      const volatile unsigned char* got = local + 256 + m.dst_off;
      for (uint32_t k = 0; k < m.bytes; ++k)
        if (got[k] != small_byte(tag, i, k)) {
          if (atomicAdd(&bad[0], 1ull) == 0) bad[1] = static_cast<unsigned long long>(i);
        }
      net::signal(nc, ctx, 0, peer, net::SigOp::Set, sig_ack, base + i);
    }
  }
  net::quiet(nc, ctx, 0);
  });
}

// Large puts, chunked by emu (MK_EMU_CHUNK_KB), while a second kernel's
// delivery agent serves the sender's ring too, so that a write's chunks may
// be split over two agents. Message i rewrites the sender's source with
// pattern i; the receiver checks every byte as soon as the signal arrives,
// then acks. End to end only: it passed without the agents' chunk ordering
// too (bench/results/emu-chunks-20261203.md); the ordering itself is tested
// where a split is forced (tests/gpu/test_delivery_agent.cu).
__device__ __forceinline__ unsigned char large_byte(uint64_t tag, int i, uint64_t k) {
  return static_cast<unsigned char>(tag * 29 + uint64_t(i) * 131 + k * 7 + (k >> 12) * 13 + 1);
}
__device__ __forceinline__ uint64_t large_bytes(int i, uint64_t max) { return max - (uint64_t(i) * 40961) % (max / 2); }

__global__ void large_puts_kernel(DeviceCtx ctx, net::NetCtx nc, unsigned char* local, int region, int peer,
                                  bool sender, uint64_t max_bytes, int sig_data, int sig_ack, int sig_end, int n,
                                  uint64_t base, uint64_t tag, unsigned long long* bad, uint32_t* finished) {
  extern __shared__ uint8_t smem[];
  net::with_agent(nc, ctx, finished, smem, [&](int, int) {
    unsigned char* src = local;
    const volatile unsigned char* dst = local + max_bytes;
    for (int i = 1; i <= n; ++i) {
      const uint64_t bytes = large_bytes(i, max_bytes);
      if (sender) {
        for (uint64_t k = threadIdx.x; k < bytes; k += blockDim.x) src[k] = large_byte(tag, i, k);
        __syncthreads();
        if (threadIdx.x == 0) {
          net::put(nc, ctx, 0, peer, region, max_bytes, 0, bytes, net::SigOp::Set, sig_data, base + i);
          dev::wait_ge(ctx, ctx.signals + sig_ack, base + i,
                       dev::WaitSite{static_cast<int32_t>(Role::InterSend), peer, sig_ack});
        }
        __syncthreads();
      } else {
        if (threadIdx.x == 0)
          dev::wait_ge(ctx, ctx.signals + sig_data, base + i,
                       dev::WaitSite{static_cast<int32_t>(Role::InterRecv), peer, sig_data});
        __syncthreads();
        // From the end: the write's last chunks are the ones still being
        // copied if the signal overtook them.
        unsigned long long wrong = 0;
        for (uint64_t j = threadIdx.x; j < bytes; j += blockDim.x) {
          const uint64_t k = bytes - 1 - j;
          wrong += dst[k] != large_byte(tag, i, k);
        }
        if (wrong && atomicAdd(&bad[0], wrong) == 0) bad[1] = static_cast<unsigned long long>(i);
        __syncthreads();
        if (threadIdx.x == 0) net::signal(nc, ctx, 0, peer, net::SigOp::Set, sig_ack, base + i);
      }
    }
    if (threadIdx.x == 0) {
      net::quiet(nc, ctx, 0);
      dev::signal_set<dev::Scope::Sys>(ctx.signals + sig_end, base + n);  // the second agent's kernel may end
    }
  });
}

// A kernel whose only work is its delivery agent: it runs until `sig_end`
// reaches `end` (set by large_puts_kernel on this rank).
__global__ void second_agent_kernel(DeviceCtx ctx, net::NetCtx nc, int sig_end, uint64_t end, uint32_t* finished) {
  extern __shared__ uint8_t smem[];
  net::with_agent(nc, ctx, finished, smem, [&](int, int) {
    if (threadIdx.x == 0)
      dev::wait_ge(ctx, ctx.signals + sig_end, end, dev::WaitSite{static_cast<int32_t>(Role::Test), -1, sig_end});
  });
}

// One put with a signal, nothing waited for on the receiver (the
// deregistration test below); the sender's agent makes its staging copy.
__global__ void lone_put_kernel(DeviceCtx ctx, net::NetCtx nc, int region, int peer, uint64_t bytes, int sig,
                                uint64_t value, uint32_t* finished) {
  extern __shared__ uint8_t smem[];
  net::with_agent(nc, ctx, finished, smem, [&](int, int) {
    if (threadIdx.x != 0) return;
    const uint64_t s = net::put(nc, ctx, 0, peer, region, 0, 0, bytes, net::SigOp::Set, sig, value);
    net::flush(nc, ctx, 0, s);
    net::quiet(nc, ctx, 0);
  });
}

// `n` puts of `half / n` bytes each, no signal, from [0, half) of the region
// to the peer's [half, 2 * half), spread over the queues; nothing waits for
// them (the drain test below): the kernel ends once they are pushed.
__global__ void unwaited_puts_kernel(DeviceCtx ctx, net::NetCtx nc, int region, int peer, uint64_t half, int n,
                                     uint32_t* finished) {
  extern __shared__ uint8_t smem[];
  net::with_agent(nc, ctx, finished, smem, [&](int, int) {
    if (threadIdx.x != 0) return;
    const uint64_t bytes = half / n;
    for (int i = 0; i < n; ++i)
      net::put(nc, ctx, i % nc.num_queues, peer, region, half + i * bytes, i * bytes, bytes);
  });
}

// A kernel whose only work is its agent's (a later kernel of the receiver).
__global__ void agent_only_kernel(DeviceCtx ctx, net::NetCtx nc, uint32_t* finished) {
  extern __shared__ uint8_t smem[];
  net::with_agent(nc, ctx, finished, smem, [&](int, int) {});
}

void run_puts(cudaStream_t stream, int rounds) {
  Network& net = comm().network();
  if (comm().rank() == 0) std::printf("[rank 0] network: %s\n", net.transport_name().c_str());
  const Topology& topo = comm().topology();
  ASSERT_EQ(net.peers().size(), size_t(topo.num_nodes - 1) * size_t(topo.local_size))
      << "the network peers are every rank of the other nodes";
  ASSERT_EQ(net.rail_peers().size(), 1u);
  const int peer = net.rail_peers()[0];
  const uint64_t half = 48ull << 20;
  SymmetricBuffer& buf = comm().alloc_symmetric(2 * half);
  Plan p;
  p.region = net.register_buffer(buf);
  EXPECT_GE(p.region, 1);
  p.half = half;
  p.nmsgs = 600;
  static const int sigs = comm().reserve_signals(3);  // reused by every call: epochs keep them fresh
  p.sig_data = sigs;
  p.sig_done = sigs + 1;
  p.sig_barrier = sigs + 2;
  std::vector<unsigned char> mine(half), got(half);
  static uint64_t rounds_done = 0;  // the data signal accumulates across calls
  for (int r = 0; r < rounds; ++r) {
    const uint64_t round = ++rounds_done;
    const uint64_t epoch = comm().next_epoch();
    // Fresh random data to send; poison the landing zone.
    std::mt19937_64 rng(1000 * round + comm().rank());
    for (auto& b : mine) b = static_cast<unsigned char>(rng());
    CK(cudaMemcpy(buf.local, mine.data(), half, cudaMemcpyHostToDevice));
    CK(cudaMemset(static_cast<char*>(buf.local) + half, 0xEE, half));
    CK(cudaDeviceSynchronize());
    comm().barrier();
    const net::NetCtx& nc = net.device_ctx();
    send_kernel<<<net::with_agent_blocks(nc, 16), 256, net::agent_smem_bytes(nc), stream>>>(comm().device_ctx(), nc, p, peer, epoch,
                                                                          agent_finished());
    recv_kernel<<<net::with_agent_blocks(nc, 1), 32, net::agent_smem_bytes(nc), stream>>>(
        comm().device_ctx(), nc, p, peer, round, epoch, agent_finished());
    cudaError_t e = cudaStreamSynchronize(stream);
    net.check();
    CK(e);
    CK(cudaMemcpy(got.data(), static_cast<char*>(buf.local) + half, half, cudaMemcpyDeviceToHost));
    // The peer's bytes, regenerated.
    std::mt19937_64 prng(1000 * round + peer);
    std::vector<unsigned char> theirs(half);
    for (auto& b : theirs) b = static_cast<unsigned char>(prng());
    std::vector<uint8_t> covered(half, 0);
    const uint64_t slot = half / p.nmsgs;
    for (int i = 0; i < p.nmsgs; ++i) {
      uint64_t b = 1 + (uint64_t(i) * 2654435761ull) % (slot < 1048576 ? slot - 1 : 1048575);
      uint64_t off = uint64_t(i) * slot + (i % 7);
      if (b > slot - (i % 7)) b = slot - (i % 7);
      for (uint64_t k = 0; k < b; ++k) covered[off + k] = 1;
    }
    size_t bad = 0, first = half;
    for (uint64_t k = 0; k < half; ++k) {
      unsigned char want = covered[k] ? theirs[k] : 0xEE;
      if (got[k] != want) {
        ++bad;
        if (first == half) first = k;
      }
    }
    // EXPECT, not ASSERT: this rank stays in step with the peer's barriers and the collective free.
    EXPECT_EQ(bad, 0u) << "round " << round << ": " << bad << " wrong bytes, first at " << first;
  }
  // Cross-node barrier, twice, epochs growing.
  static uint64_t barriers = 0;
  for (int k = 0; k < 2; ++k) {
    ++barriers;
    const net::NetCtx& nc = net.device_ctx();
    barrier_kernel<<<net::with_agent_blocks(nc, 1), 32, net::agent_smem_bytes(nc), stream>>>(
        comm().device_ctx(), nc, p.sig_barrier, barriers * net.rail_peers().size(), agent_finished());
    cudaError_t e = cudaStreamSynchronize(stream);
    net.check();
    CK(e);
  }
  comm().barrier();
  comm().free_symmetric(buf);
}

}  // namespace

TEST(Net, PutsWithSignalsFromManyCtasArriveByteForByte) {
  if (!two_nodes()) GTEST_SKIP() << "needs 2 nodes (MK_RANKS_PER_NODE=1): one node has no network peers";
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  run_puts(s, 4);
  cudaStreamDestroy(s);
}

TEST(Net, SmallPutsInlineAndCopiedArriveBeforeTheirSignals) {
  if (!two_nodes()) GTEST_SKIP() << "needs 2 nodes (MK_RANKS_PER_NODE=1)";
  Network& net = comm().network();
  if (net.emulated()) EXPECT_EQ(net.device_ctx().inline_max, net::kMaxInlineBytes) << "emu asks for inline puts";
  ASSERT_EQ(net.rail_peers().size(), 1u);
  const int peer = net.rail_peers()[0];
  SymmetricBuffer& buf = comm().alloc_symmetric(4096);
  const int region = net.register_buffer(buf);
  static const int sigs = comm().reserve_signals(3);
  unsigned long long* bad = nullptr;
  CK(cudaMalloc(&bad, 16));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  static uint64_t adds_received = 0;  // the add signal accumulates across launches
  const int n = 2400;                 // 600 of them signalled by Add
  for (int sender = 0; sender < 2; ++sender) {  // the node whose ranks send
    const uint64_t epoch = comm().next_epoch();
    const uint64_t base = epoch * 100000;
    CK(cudaMemset(buf.local, 0, 4096));
    CK(cudaMemset(bad, 0, 16));
    CK(cudaDeviceSynchronize());
    comm().barrier();
    const bool me = comm().topology().node == sender;
    const net::NetCtx& nc = net.device_ctx();
    small_puts_kernel<<<net::with_agent_blocks(nc, 1), 32, net::agent_smem_bytes(nc), s>>>(
        comm().device_ctx(), nc, static_cast<unsigned char*>(buf.local), region, peer, me, sigs, sigs + 1, sigs + 2, n,
        base, adds_received, epoch, bad, agent_finished());
    cudaError_t e = cudaStreamSynchronize(s);
    net.check();
    CK(e);
    if (!me) adds_received += n / 4;
    unsigned long long h[2] = {0, 0};
    CK(cudaMemcpy(h, bad, 16, cudaMemcpyDeviceToHost));
    EXPECT_EQ(h[0], 0u) << "rank " << comm().rank() << " received " << h[0] << " wrong bytes from rank " << peer
                        << ", first in message " << h[1];
    comm().barrier();
  }
  cudaStreamDestroy(s);
  cudaFree(bad);
  comm().free_symmetric(buf);
}

TEST(Net, LargeChunkedPutsWithASecondAgentArriveBeforeTheirSignals) {
  if (!two_nodes()) GTEST_SKIP() << "needs 2 nodes (MK_RANKS_PER_NODE=1)";
  Network& net = comm().network();
  if (comm().rank() == 0) std::printf("[rank 0] network: %s\n", net.transport_name().c_str());
  ASSERT_EQ(net.rail_peers().size(), 1u);
  const int peer = net.rail_peers()[0];
  const uint64_t max_bytes = 3ull << 20;  // 1.5-3 MB a message: 6-12 chunks of 256 KB
  SymmetricBuffer& buf = comm().alloc_symmetric(2 * max_bytes);
  const int region = net.register_buffer(buf);
  static const int sigs = comm().reserve_signals(3);
  static uint32_t* second_finished = net::alloc_agent_counter();  // the second kernel's agent counter
  ASSERT_NE(second_finished, nullptr);
  unsigned long long* bad = nullptr;
  CK(cudaMalloc(&bad, 16));
  cudaStream_t s, s2;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  const int n = 200;
  for (int sender = 0; sender < 2; ++sender) {  // the node whose ranks send
    const uint64_t epoch = comm().next_epoch();
    const uint64_t base = epoch * 100000;
    CK(cudaMemset(buf.local, 0xEE, 2 * max_bytes));
    CK(cudaMemset(bad, 0, 16));
    CK(cudaDeviceSynchronize());
    comm().barrier();
    const bool me = comm().topology().node == sender;
    const net::NetCtx& nc = net.device_ctx();
    large_puts_kernel<<<net::with_agent_blocks(nc, 1), 256, net::agent_smem_bytes(nc), s>>>(
        comm().device_ctx(), nc, static_cast<unsigned char*>(buf.local), region, peer, me, max_bytes, sigs, sigs + 1,
        sigs + 2, n, base, epoch, bad, agent_finished());
    CK(cudaGetLastError());  // launched: the second kernel's wait for its end is then bounded by it
    if (me && nc.agent)
      second_agent_kernel<<<net::with_agent_blocks(nc, 1), 256, net::agent_smem_bytes(nc), s2>>>(
          comm().device_ctx(), nc, sigs + 2, base + n, second_finished);
    cudaError_t e = cudaStreamSynchronize(s);
    cudaError_t e2 = cudaStreamSynchronize(s2);
    net.check();
    CK(e);
    CK(e2);
    unsigned long long h[2] = {0, 0};
    CK(cudaMemcpy(h, bad, 16, cudaMemcpyDeviceToHost));
    EXPECT_EQ(h[0], 0u) << "rank " << comm().rank() << " saw " << h[0] << " wrong bytes from rank " << peer
                        << " when their signal arrived, first in message " << h[1];
    comm().barrier();
  }
  cudaStreamDestroy(s);
  cudaStreamDestroy(s2);
  cudaFree(bad);
  comm().free_symmetric(buf);
}

// Data that reached a rank for a region, but that no kernel of it waited
// for (so no delivery agent copied it in: fabric's staging by agents), is
// dropped when the region is deregistered: a later kernel's agent must not
// write it, nor its signal, into the region's memory (by then the memory of
// something else). Node 0's ranks put; node 1's run no kernel until their
// transport shows the delivery published, then deregister, then run an
// agent; their buffer and signal must stay untouched.
TEST(Net, DeregisteringDropsDataNoKernelWaitedFor) {
  if (!two_nodes()) GTEST_SKIP() << "needs 2 nodes (MK_RANKS_PER_NODE=1)";
  Network& net = comm().network();
  const std::string name = net.transport_name();
  if (name.rfind("fabric", 0) != 0 || net.device_ctx().agent == 0)
    GTEST_SKIP() << "only fabric's staging by delivery agents (MK_NET=fabric, MK_FABRIC_STAGE=agent) leaves received "
                    "data waiting for a kernel; this network is " << name;
  ASSERT_EQ(net.rail_peers().size(), 1u);
  const int peer = net.rail_peers()[0];
  const uint64_t bytes = 64 << 10;
  SymmetricBuffer& buf = comm().alloc_symmetric(bytes);
  static const int sig = comm().reserve_signals(1);
  CK(cudaMemset(buf.local, 0, bytes));
  CK(cudaMemset(comm().device_ctx().signals + sig, 0, sizeof(uint64_t)));
  CK(cudaDeviceSynchronize());
  const int region = net.register_buffer(buf);
  const bool sender = comm().topology().node == 0;
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const net::NetCtx& nc = net.device_ctx();
  if (sender) {
    CK(cudaMemset(buf.local, 0x5A, bytes));
    CK(cudaDeviceSynchronize());
    lone_put_kernel<<<net::with_agent_blocks(nc, 1), 256, net::agent_smem_bytes(nc), s>>>(
        comm().device_ctx(), nc, region, peer, bytes, sig, 7, agent_finished());
    cudaError_t e = cudaStreamSynchronize(s);
    net.check();
    CK(e);
  } else {
    std::string seen;
    const auto t0 = std::chrono::steady_clock::now();
    while (seen.find("published to the delivery ring") == std::string::npos &&
           std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      seen.clear();
      net.proxy().with_transports([&](net::Transport& t) { seen += t.in_flight(); });
    }
    EXPECT_NE(seen.find("published to the delivery ring"), std::string::npos)
        << "the peer's data never waited in this rank's delivery ring (a provider with FI_HMEM stages nothing): "
        << seen;
  }
  net.deregister_buffer(region);  // collective
  if (!sender) {
    // A later kernel's agent serves the ring: the cut delivery is done, and it
    // writes nothing. An agent may end before it claims anything: again, bounded.
    std::string left = "?";
    const auto t0 = std::chrono::steady_clock::now();
    while (!left.empty() && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20)) {
      agent_only_kernel<<<net::with_agent_blocks(nc, 1), 32, net::agent_smem_bytes(nc), s>>>(comm().device_ctx(), nc,
                                                                                              agent_finished());
      cudaError_t e = cudaStreamSynchronize(s);
      net.check();
      CK(e);
      left.clear();
      net.proxy().with_transports([&](net::Transport& t) { left += t.in_flight(); });
    }
    EXPECT_EQ(left, "") << "the ring still holds deliveries";
    std::vector<unsigned char> got(bytes, 1);
    uint64_t sig_value = 1;
    CK(cudaMemcpy(got.data(), buf.local, bytes, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(&sig_value, comm().device_ctx().signals + sig, sizeof(sig_value), cudaMemcpyDeviceToHost));
    EXPECT_EQ(std::count(got.begin(), got.end(), 0), static_cast<long>(bytes))
        << "bytes reached the deregistered region";
    EXPECT_EQ(sig_value, 0u) << "the dropped put's signal was applied";
  }
  cudaStreamDestroy(s);
  comm().barrier();
  comm().free_symmetric(buf);
}

// Deregistering a region waits until the proxy has completed every command
// the kernels pushed (Network::deregister_buffer: a transport lets a
// registration go only with nothing in flight). Each rank's kernel pushes
// puts nobody waits for and ends; both ranks deregister at once. Over verbs
// with a slow wire (softverbs' SOFTVERBS_WIRE_DELAY_MS, tools/gpu_test.sh)
// the WRs are still unsent then: before session 46's drain the memory
// registration went first, and the late WR failed with a protection error.
TEST(Net, DeregisteringWaitsForEveryPushedCommand) {
  if (!two_nodes()) GTEST_SKIP() << "needs 2 nodes (MK_RANKS_PER_NODE=1)";
  Network& net = comm().network();
  ASSERT_EQ(net.rail_peers().size(), 1u);
  const int peer = net.rail_peers()[0];
  const uint64_t half = 1 << 20;
  SymmetricBuffer& buf = comm().alloc_symmetric(2 * half);
  CK(cudaMemset(buf.local, 0x3C, 2 * half));
  CK(cudaDeviceSynchronize());
  const int region = net.register_buffer(buf);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const net::NetCtx& nc = net.device_ctx();
  unwaited_puts_kernel<<<net::with_agent_blocks(nc, 1), 32, net::agent_smem_bytes(nc), s>>>(
      comm().device_ctx(), nc, region, peer, half, 16, agent_finished());
  const cudaError_t e = cudaStreamSynchronize(s);
  net.check();
  CK(e);
  net.deregister_buffer(region);  // collective
  net::Proxy& proxy = net.proxy();
  for (int q = 0; q < proxy.num_queues(); ++q)
    EXPECT_GE(proxy.completed(q), proxy.pushed(q)) << "queue " << q << ": commands still in flight after the "
                                                      "region was deregistered";
  // A WR that left after its registration went fails (softverbs: a protection error), which the proxy records.
  const char* delay = std::getenv("SOFTVERBS_WIRE_DELAY_MS");
  std::this_thread::sleep_for(std::chrono::milliseconds(100 + (delay ? 2 * std::atoi(delay) : 0)));
  EXPECT_EQ(net.error(), "");
  cudaStreamDestroy(s);
  comm().barrier();
  comm().free_symmetric(buf);
}

// The same from the legacy default stream (where PyTorch launches by default).
TEST(Net, LegacyDefaultStreamWorksToo) {
  if (!two_nodes()) GTEST_SKIP() << "needs 2 nodes (MK_RANKS_PER_NODE=1)";
  run_puts(cudaStreamLegacy, 2);
}
