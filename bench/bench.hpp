// mkbench: the benchmark driver's registry. Each benchmark measures one thing
// against its baselines in the same run and adds tables to the report.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "bench/report.hpp"
#include "mkernel/mkernel.hpp"
#include "bench/timing.hpp"

namespace mkb {

struct BenchContext {
  mk::Communicator* comm;
  Report* report;
  TimingOpts opts;
  cudaStream_t stream;
  bool quick;  // fewer shapes (smoke runs)
  // Ranks share a GPU (MK_SHARE_GPUS, ranks_share_a_gpu): a correctness run. The TP benchmarks' baselines use
  // mkernel's own collectives and a host barrier (NCCL refuses such ranks); the report's config says so.
  bool shared_gpu = false;
};

struct BenchDef {
  const char* name;
  const char* doc;
  void (*run)(BenchContext&);
};

void bench_signal_latency(BenchContext&);
void bench_peer_copy(BenchContext&);
void bench_gemm_cublas(BenchContext&);
void bench_gemm(BenchContext&);
void bench_gemm_owner(BenchContext&);
void bench_ag_gemm(BenchContext&);
void bench_gemm_rs(BenchContext&);
void bench_gemm_ar(BenchContext&);
void bench_nccl(BenchContext&);
void bench_net_queue(BenchContext&);
void bench_net_latency(BenchContext&);
void bench_net_bw(BenchContext&);
void bench_net_post(BenchContext&);
void bench_nvlink_count(BenchContext&);
void bench_api_block(BenchContext&);

// Benchmarks of 2 GPUs of one node: false (and `t` added with a note saying
// why) when this run is another layout.
inline bool node_pair_or_skip(BenchContext& bc, Table& t) {
  const mk::Topology& topo = bc.comm->topology();
  if (bc.comm->world() == 2 && topo.local_size == 2) return true;
  t.note = "skipped: needs exactly 2 ranks on one node (NVLink); this run is " + config_name(topo);
  bc.report->add(t);
  return false;
}

inline const std::vector<BenchDef>& benches() {
  static const std::vector<BenchDef> all = {
      {"signal_latency", "signal ping-pong round trip between 2 GPUs of a node (NVLink)", bench_signal_latency},
      {"peer_copy", "SM-driven peer copy bandwidth vs number of SMs, against the copy engine", bench_peer_copy},
      {"gemm_cublas", "cuBLAS bf16 GEMM baseline on the MEASURING.md shapes", bench_gemm_cublas},
#ifdef MKB_HAVE_AG_GEMM
      {"ag_gemm", "AllGather+GEMM fused vs serial NCCL+cuBLAS, 2-stream overlaps, parts alone (any layout)",
       bench_ag_gemm},
#endif
#ifdef MKB_HAVE_GEMM_RS
      {"gemm_rs",
       "GEMM+ReduceScatter fused vs serial cuBLAS+NCCL, chunked 2-stream overlap, parts alone (any layout); one rank: "
       "the TP plans against their GEMM alone, and their kernels' stages from the event log",
       bench_gemm_rs},
#endif
#ifdef MKB_HAVE_GEMM_AR
      {"gemm_ar", "GEMM+AllReduce fused vs serial cuBLAS+NCCL, chunked 2-stream overlap, parts alone (any layout)",
       bench_gemm_ar},
#endif
#ifdef MKB_HAVE_GEMM
      {"gemm",
       "mkernel GEMM engine vs cuBLAS (same run), scaling with compute CTAs, tile order, fixed cost per tile "
       "(time vs K)",
       bench_gemm},
      {"gemm_owner", "the GEMM engine's owner-reduce epilogue (GEMM+RS / GEMM+AR owner tiles) on one GPU, per tile",
       bench_gemm_owner},
#endif
      {"nccl", "NCCL all-reduce / all-gather / reduce-scatter baseline bandwidth", bench_nccl},
      {"net_queue", "command queue + host proxy alone: commands/s, GPU enqueue cycles", bench_net_queue},
      {"net_latency", "network one-way latency per transport (2 nodes, e.g. MK_RANKS_PER_NODE=1)", bench_net_latency},
      {"net_bw", "network bandwidth vs message size per transport (2 nodes)", bench_net_bw},
      {"net_post", "cost of posting one network command while the other SMs wait, spin or copy (one GPU)",
       bench_net_post},
      {"nvlink_count", "NVML's NVLink byte counters against a known 256 MiB transfer (2 GPUs of a node)",
       bench_nvlink_count},
      {"api_block", "which CUDA calls a second thread can make while the first copies a running kernel's result "
       "into pageable memory (one GPU; the emu proxy's hazard)", bench_api_block},
  };
  return all;
}

}  // namespace mkb
