// Network benchmarks (DESIGN.md §5):
//  net_queue    the command queue + host proxy alone (a null transport that
//               completes every write at once): commands/s per proxy thread and
//               in total for 16-byte PUTs pushed by many CTAs, and the GPU's
//               enqueue cost per command in cycles.
//  net_latency  one-way latency GPU put -> the remote GPU sees the signal,
//               by ping-pong over the configured transport (2 nodes), for
//               8-byte to 4 MB puts.
//  net_bw       bandwidth vs message size, 4 KB .. 64 MB (2 nodes).
#include <cuda_runtime.h>

#include "bench/bench.hpp"
#include "device/net/agent.cuh"
#include "device/net/net.cuh"
#include "bench/micro/null_transport.hpp"
#include "src/net/proxy.hpp"

namespace mkb {

namespace {

__global__ void enqueue_kernel(mk::DeviceCtx ctx, mk::net::NetCtx nc, int per_block, unsigned long long* cycles) {
  if (threadIdx.x != 0) return;
  const int q = blockIdx.x % nc.num_queues;
  uint64_t last = 0;
  long long spent = 0;
  for (int i = 0; i < per_block; ++i) {
    long long t0 = clock64();
    last = mk::net::put(nc, ctx, q, 1, 1, 16ull * i, 16ull * i, 16, mk::net::SigOp::Add, 5, 1);
    spent += clock64() - t0;
  }
  atomicAdd(cycles, static_cast<unsigned long long>(spent));
  mk::net::flush(nc, ctx, q, last);
}

// The kernels below push commands: they run the network's delivery agent in
// a block of their own when the transport asks for it (emu; net::with_agent),
// with `finished` as its counter (agent_word) and with_agent_blocks /
// agent_smem_bytes at the launch.
__global__ void pingpong_net(mk::DeviceCtx ctx, mk::net::NetCtx nc, int region, int peer, bool initiator, int sig,
                             int rounds, uint64_t base, uint64_t bytes, uint32_t* finished) {
  extern __shared__ uint8_t smem[];
  mk::net::with_agent(nc, ctx, finished, smem, [&](int, int) {
    if (threadIdx.x != 0) return;
    const mk::dev::WaitSite site{static_cast<int32_t>(mk::Role::InterRecv), peer, sig};
    for (int i = 1; i <= rounds; ++i) {
      const uint64_t v = base + i;
      if (initiator) {
        mk::net::put(nc, ctx, 0, peer, region, 0, 0, bytes, mk::net::SigOp::Set, sig, v);
        mk::dev::wait_ge(ctx, ctx.signals + sig, v, site);
      } else {
        mk::dev::wait_ge(ctx, ctx.signals + sig, v, site);
        mk::net::put(nc, ctx, 0, peer, region, 0, 0, bytes, mk::net::SigOp::Set, sig, v);
      }
    }
    mk::net::quiet(nc, ctx, 0);
  });
}

__global__ void stream_send(mk::DeviceCtx ctx, mk::net::NetCtx nc, int region, int peer, uint64_t size, int count,
                            int sig_data, int sig_ack, uint64_t ack_expected, uint32_t* finished) {
  extern __shared__ uint8_t smem[];
  mk::net::with_agent(nc, ctx, finished, smem, [&](int block, int blocks) {
    if (threadIdx.x != 0) return;
    const int q = block % nc.num_queues;
    for (int i = block; i < count; i += blocks)
      mk::net::put(nc, ctx, q, peer, region, uint64_t(i) * size, uint64_t(i) * size, size, mk::net::SigOp::Add,
                   sig_data, 1);
    if (block == 0)
      mk::dev::wait_ge(ctx, ctx.signals + sig_ack, ack_expected,
                       mk::dev::WaitSite{static_cast<int32_t>(mk::Role::InterSend), peer, sig_ack});
    mk::net::quiet(nc, ctx, q);
  });
}

__global__ void stream_recv(mk::DeviceCtx ctx, mk::net::NetCtx nc, int peer, int sig_data, uint64_t expected,
                            int sig_ack, uint64_t ack_value, uint32_t* finished) {
  extern __shared__ uint8_t smem[];
  mk::net::with_agent(nc, ctx, finished, smem, [&](int, int) {
    if (threadIdx.x != 0) return;
    mk::dev::wait_ge(ctx, ctx.signals + sig_data, expected,
                     mk::dev::WaitSite{static_cast<int32_t>(mk::Role::InterRecv), peer, sig_data});
    mk::net::signal(nc, ctx, 0, peer, mk::net::SigOp::Set, sig_ack, ack_value);
    mk::net::quiet(nc, ctx, 0);
  });
}

uint32_t* agent_word() {
  static uint32_t* word = mk::net::alloc_agent_counter();
  MKB_CUDA(word ? cudaSuccess : cudaErrorMemoryAllocation);
  return word;
}

bool two_nodes(BenchContext& bc, Table& t) {
  auto& c = *bc.comm;
  if (c.world() == 2 && c.topology().num_nodes == 2) return true;
  t.note = "skipped: needs 2 ranks on 2 nodes (e.g. MK_RANKS_PER_NODE=1); this run is " + config_name(c.topology());
  bc.report->add(t);
  return false;
}

}  // namespace

void bench_net_queue(BenchContext& bc) {
  auto& c = *bc.comm;
  Table t{"command queue + host proxy alone (null transport, 16-byte PUTs)",
          {"proxy threads", "CTAs", "commands", "ms", "M cmd/s total", "M cmd/s per thread", "GPU cycles/enqueue"},
          {},
          "Target: >= 5 M commands/s per proxy thread. Each CTA's lane 0 pushes PUTs to queue (CTA mod threads), "
          "then waits for its queue's done prefix; GPU cycles include any wait for ring room."};
  if (c.rank() != 0) {  // one rank measures; the others only take part in barriers
    bc.report->add(t);
    return;
  }
  for (auto [threads, ctas_per_thread] : {std::pair{1, 8}, {1, 32}, {1, 128}, {2, 64}, {4, 32}}) {
    NullProxy np(c.rank(), c.device(), threads);
    mk::net::Proxy& proxy = *np.proxy;
    const mk::net::NetCtx& nc = np.nc;
    const int ctas = ctas_per_thread * threads, per = 160000 / ctas_per_thread;
    unsigned long long* cycles = nullptr;
    MKB_CUDA(cudaMalloc(&cycles, 8));
    auto st = time_calls(nullptr, bc.stream, TimingOpts{2, 7}, [&](int) {
      MKB_CUDA(cudaMemsetAsync(cycles, 0, 8, bc.stream));
      enqueue_kernel<<<ctas, 32, 0, bc.stream>>>(c.device_ctx(), nc, per, cycles);
    });
    unsigned long long cyc = 0;
    MKB_CUDA(cudaMemcpy(&cyc, cycles, 8, cudaMemcpyDeviceToHost));
    cudaFree(cycles);
    const double n = double(ctas) * per;
    const double mps = n / (st.median_ms * 1e3);
    t.rows.push_back({std::to_string(threads), std::to_string(ctas), std::to_string(int64_t(n)), fmt(st.median_ms),
                      fmt(mps, 2), fmt(mps / threads, 2), fmt(double(cyc) / n, 0)});
    if (!proxy.error().empty()) mk::fail("net_queue: ", proxy.error());
  }
  bc.report->add(t);
}

void bench_net_latency(BenchContext& bc) {
  auto& c = *bc.comm;
  Table t{"network one-way latency (GPU put + signal -> remote GPU sees it)",
          {"transport", "bytes", "rounds", "one way us", "emulated us", "x emulated"},
          {},
          "Ping-pong of puts with a Set signal; one way = round trip / 2. emulated: MK_EMU_LATENCY_US + bytes / "
          "MK_EMU_GBPS (emu only). emu target: within 2 us of MK_EMU_LATENCY_US for 8 bytes; a large write's extra "
          "time is its last chunk's copy (MK_EMU_CHUNK_KB)."};
  if (!two_nodes(bc, t)) return;
  mk::Network& net = c.network();
  const uint64_t max_bytes = 4ull << 20;
  mk::SymmetricBuffer& buf = c.alloc_symmetric(max_bytes);
  const int region = net.register_buffer(buf);
  const int sig = c.reserve_signals(1);
  const int peer = net.peers()[0];
  const double emu_rate = double(mk::knob_int(mk::Knob::MK_EMU_GBPS));
  const double emu_lat = double(mk::knob_int(mk::Knob::MK_EMU_LATENCY_US));
  uint64_t base = 0;
  for (uint64_t bytes : {8ull, 64ull << 10, 1ull << 20, 4ull << 20}) {
    const int rounds = bytes <= (64u << 10) ? 200 : 50;
    auto st = time_calls(
        &c.bootstrap(), bc.stream, TimingOpts{2, 10},
        [&](int) {
          const mk::net::NetCtx& nc = net.device_ctx();
          // 256 threads: the agent's block copies with them (as in an op's grid).
          pingpong_net<<<mk::net::with_agent_blocks(nc, 1), 256, mk::net::agent_smem_bytes(nc), bc.stream>>>(
              c.device_ctx(), nc, region, peer, c.rank() == 0, sig, rounds, base, bytes, agent_word());
        },
        [&](int) {
          base = c.next_epoch() * 1000;
          c.barrier();
        });
    net.check();
    const double us = 1000.0 * st.median_ms / rounds / 2, emu_us = emu_lat + double(bytes) / emu_rate / 1000.0;
    t.rows.push_back({net.transport_name(), std::to_string(bytes), std::to_string(rounds), fmt(us, 2),
                      net.emulated() ? fmt(emu_us, 2) : "-", net.emulated() ? fmt(us / emu_us, 2) : "-"});
  }
  c.barrier();
  c.free_symmetric(buf);
  bc.report->add(t);
}

void bench_net_bw(BenchContext& bc) {
  auto& c = *bc.comm;
  Table t{"network bandwidth vs message size (rank 0 -> rank 1)",
          {"transport", "message", "messages", "ms", "GB/s", "% of emu rate"},
          {},
          "Many CTAs push puts (+1 signal each) back to back; the receiver acks after the last; time on the sender, "
          "ack latency included. emu target: >= 95% of MK_EMU_GBPS from 256 KB up."};
  if (!two_nodes(bc, t)) return;
  mk::Network& net = c.network();
  const uint64_t total = 256ull << 20;
  mk::SymmetricBuffer& buf = c.alloc_symmetric(total);
  const int region = net.register_buffer(buf);
  const int sig_data = c.reserve_signals(1), sig_ack = c.reserve_signals(1);
  const int peer = net.peers()[0];
  const double emu_rate = double(mk::knob_int(mk::Knob::MK_EMU_GBPS));
  uint64_t data_seen = 0, ack = 0;
  for (uint64_t size : {4ull << 10, 16ull << 10, 64ull << 10, 256ull << 10, 1ull << 20, 4ull << 20, 16ull << 20,
                        64ull << 20}) {
    const int count = static_cast<int>(std::min<uint64_t>(total / size, 2048));
    auto st = time_calls(
        &c.bootstrap(), bc.stream, TimingOpts{2, 10},
        [&](int) {
          const mk::net::NetCtx& nc = net.device_ctx();
          if (c.rank() == 0)
            stream_send<<<mk::net::with_agent_blocks(nc, 8), 256, mk::net::agent_smem_bytes(nc), bc.stream>>>(
                c.device_ctx(), nc, region, peer, size, count, sig_data, sig_ack, ack, agent_word());
          else
            stream_recv<<<mk::net::with_agent_blocks(nc, 1), 256, mk::net::agent_smem_bytes(nc), bc.stream>>>(
                c.device_ctx(), nc, peer, sig_data, data_seen, sig_ack, ack, agent_word());
        },
        [&](int) {
          data_seen += count;
          ack = c.next_epoch();
          c.barrier();
        });
    net.check();
    const double gbps = double(size) * count / (st.median_ms * 1e6);
    t.rows.push_back({net.transport_name(), std::to_string(size >> 10) + " KB", std::to_string(count),
                      fmt(st.median_ms), fmt(gbps, 2), net.emulated() ? fmt(100 * gbps / emu_rate, 1) : "-"});
  }
  c.barrier();
  c.free_symmetric(buf);
  bc.report->add(t);
}

}  // namespace mkb
