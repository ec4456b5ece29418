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

#include <algorithm>
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
    host_chunks(src, 1, count, st, [&](size_t c0, size_t len, const std::vector<std::string>& all) {
      for (int r = 0; r < c_.world(); ++r)
        upload(static_cast<uint16_t*>(dst) + size_t(r) * count + c0,
               reinterpret_cast<const uint16_t*>(all[r].data()), len, st);
    });
  }

  // dst [count] = the sum over ranks of rows [rank count, (rank + 1) count) of every rank's src [world x count].
  void reduce_scatter(const void* src, void* dst, size_t count, cudaStream_t st) {
    if (nc_) {
      MKB_NCCL(ncclReduceScatter(src, dst, count, ncclBfloat16, ncclSum, nc_, st));
      return;
    }
    host_sum(src, dst, c_.world(), c_.rank(), count, st);
  }

  // dst [count] = the sum over ranks of src [count].
  void all_reduce(const void* src, void* dst, size_t count, cudaStream_t st) {
    if (nc_) {
      MKB_NCCL(ncclAllReduce(src, dst, count, ncclBfloat16, ncclSum, nc_, st));
      return;
    }
    host_sum(src, dst, 1, 0, count, st);
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

  // Host to device on `st`, finished before the host buffer goes (a pageable cudaMemcpy runs on the legacy
  // stream, which the benches' non-blocking stream does not wait for).
  static void upload(void* dst, const void* src, size_t elems, cudaStream_t st) {
    MKB_CUDA(cudaMemcpyAsync(dst, src, elems * 2, cudaMemcpyHostToDevice, st));
    MKB_CUDA(cudaStreamSynchronize(st));
  }

  // src holds `blocks` blocks of `count` bf16 on every rank. In chunks [c0, c0 + len) of a block (at most 64 MiB
  // gathered per step, whatever the sizes): every rank's chunk of each block, through the bootstrap (bounded by its
  // timeout), to `use(c0, len, all)`, all[r] = rank r's chunks of blocks 0..blocks-1 back to back.
  template <class Use>
  void host_chunks(const void* src, int blocks, size_t count, cudaStream_t st, Use&& use) {
    const size_t per_elem = size_t(c_.world()) * size_t(blocks) * 2;
    const size_t step = std::max<size_t>(1, (size_t(64) << 20) / per_elem);
    MKB_CUDA(cudaStreamSynchronize(st));  // src written on st
    std::string mine;
    for (size_t c0 = 0; c0 < count; c0 += step) {
      const size_t len = std::min(step, count - c0);
      mine.resize(size_t(blocks) * len * 2);
      for (int b = 0; b < blocks; ++b)
        MKB_CUDA(cudaMemcpy(mine.data() + size_t(b) * len * 2,
                            static_cast<const uint16_t*>(src) + size_t(b) * count + c0, len * 2,
                            cudaMemcpyDeviceToHost));
      use(c0, len, c_.bootstrap().allgather(mine, "the benchmark check's host reference collective"));
    }
  }

  // dst [count] = the fp32 sum over ranks of block `mine` of src ([blocks x count] bf16 on every rank).
  void host_sum(const void* src, void* dst, int blocks, int mine, size_t count, cudaStream_t st) {
    std::vector<float> acc;
    std::vector<uint16_t> out;
    host_chunks(src, blocks, count, st, [&](size_t c0, size_t len, const std::vector<std::string>& all) {
      acc.assign(len, 0.f);
      for (const auto& s : all) {
        const auto* p = reinterpret_cast<const uint16_t*>(s.data()) + size_t(mine) * len;
        for (size_t i = 0; i < len; ++i) acc[i] += to_f(p[i]);
      }
      out.resize(len);
      for (size_t i = 0; i < len; ++i) out[i] = to_bf16(acc[i]);
      upload(static_cast<uint16_t*>(dst) + c0, out.data(), len, st);
    });
  }

  mk::Communicator& c_;
  ncclComm_t nc_;
};

}  // namespace mkb
