// mkbench: the TP checks' reference collective, independent of mkernel's own.
//
// The serial baseline's collective is mkernel's where NCCL cannot be timed fairly (across emulated nodes: NCCL
// would take NVLink) or cannot run (ranks sharing a GPU). A check against a reference built with mkernel's own
// collective would pass a layout bug that both share, so the reference is built here instead: with NCCL where the
// ranks have a communicator (inside a node, and between emulated nodes, where correctness, not speed, is asked),
// else through the host bootstrap (ranks sharing a GPU), summing in fp32. Never timed.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "bench/baselines/nccl_util.hpp"
#include "bench/timing.hpp"
#include "mkernel/mkernel.hpp"

namespace mkb {

class RefCollective {
 public:
  // nc: an NCCL communicator of every rank, or null for the host path.
  RefCollective(mk::Communicator& c, ncclComm_t nc) : c_(c), nc_(nc) {}
  const char* name() const { return nc_ ? "NCCL" : "the host"; }

  // dst [world x count] bf16 = every rank's src [count], in rank order.
  void all_gather(const void* src, void* dst, size_t count, cudaStream_t st) {
    if (nc_) {
      MKB_NCCL(ncclAllGather(src, dst, count, ncclBfloat16, nc_, st));
      return;
    }
    const auto all = host_gather(src, count, st);
    for (int r = 0; r < c_.world(); ++r)
      MKB_CUDA(cudaMemcpy(static_cast<char*>(dst) + size_t(r) * count * 2, all[r].data(), count * 2,
                          cudaMemcpyHostToDevice));
  }

  // dst [count] = the sum over ranks of rows [rank count, (rank + 1) count) of every rank's src [world x count].
  void reduce_scatter(const void* src, void* dst, size_t count, cudaStream_t st) {
    if (nc_) {
      MKB_NCCL(ncclReduceScatter(src, dst, count, ncclBfloat16, ncclSum, nc_, st));
      return;
    }
    host_sum(src, dst, size_t(c_.world()) * count, size_t(c_.rank()) * count, count, st);
  }

  // dst [count] = the sum over ranks of src [count].
  void all_reduce(const void* src, void* dst, size_t count, cudaStream_t st) {
    if (nc_) {
      MKB_NCCL(ncclAllReduce(src, dst, count, ncclBfloat16, ncclSum, nc_, st));
      return;
    }
    host_sum(src, dst, count, 0, count, st);
  }

 private:
  static float to_f(uint16_t h) {
    const uint32_t u = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  static uint16_t to_bf16(float f) {  // round to nearest even (NaN kept)
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
    return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }

  // Every rank's src [count] bf16, through the bootstrap (bounded by its timeout).
  std::vector<std::string> host_gather(const void* src, size_t count, cudaStream_t st) {
    if (size_t(c_.world()) * count * 2 > (size_t(512) << 20))
      mk::fail("mkbench: the host reference collective takes at most 512 MiB over all ranks (", c_.world(), " x ",
               count * 2, " B asked)");
    MKB_CUDA(cudaStreamSynchronize(st));
    std::string mine(count * 2, '\0');
    MKB_CUDA(cudaMemcpy(mine.data(), src, count * 2, cudaMemcpyDeviceToHost));
    return c_.bootstrap().allgather(mine, "the benchmark check's host reference collective");
  }

  // dst [len] = the fp32 sum over ranks of src[first, first + len) (src [total] bf16 on every rank).
  void host_sum(const void* src, void* dst, size_t total, size_t first, size_t len, cudaStream_t st) {
    const auto all = host_gather(src, total, st);
    std::vector<float> acc(len, 0.f);
    for (const auto& s : all) {
      const auto* p = reinterpret_cast<const uint16_t*>(s.data()) + first;
      for (size_t i = 0; i < len; ++i) acc[i] += to_f(p[i]);
    }
    std::vector<uint16_t> out(len);
    for (size_t i = 0; i < len; ++i) out[i] = to_bf16(acc[i]);
    MKB_CUDA(cudaMemcpy(dst, out.data(), len * 2, cudaMemcpyHostToDevice));
  }

  mk::Communicator& c_;
  ncclComm_t nc_;
};

}  // namespace mkb
