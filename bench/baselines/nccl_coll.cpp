// NCCL collective baselines (all-reduce, all-gather, reduce-scatter, bf16)
// on the same ranks, NCCL bootstrapped through mkernel's own rendezvous.
// NVLink SHARP (multicast) stays off: NCCL_NVLS_ENABLE=0.
#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>

#include "bench/baselines/nccl_util.hpp"
#include "bench/bench.hpp"

namespace mkb {


void bench_nccl(BenchContext& bc) {
  auto& c = *bc.comm;
  const int W = c.world();
  Table t{"NCCL " + std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + "." + std::to_string(NCCL_PATCH) +
              " collectives, bf16",
          {"collective", "MiB per rank", "ms", "algbw GB/s", "busbw GB/s"},
          {},
          "MiB per rank = one share: AR's input (and output), AG's input (its output is W shares), RS's output "
          "(its input is W shares). Each timed call follows an untimed 1-element all-reduce that lines the ranks up "
          "(no call absorbs another rank's lag). busbw = algbw x 2(W-1)/W (AR) or (W-1)/W "
          "(AG, RS), NCCL's convention. Reference here: AR busbw ~205 GB/s at 16 MiB, ~301 at 256 MiB."};
  if (W < 2 || bc.shared_gpu) {
    t.note = W < 2 ? "skipped: needs >= 2 ranks" : "skipped: the ranks share a GPU (NCCL refuses that)";
    bc.report->add(t);
    return;
  }
  ncclComm_t nc = make_nccl_comm(c);
  auto bar = std::make_unique<NcclBarrier>(nc, bc.stream);  // (reset before the communicator is destroyed)
  std::vector<size_t> mibs = {1, 16, 64, 256};
  if (bc.quick) mibs = {16};
  for (const char* coll : {"all_reduce", "all_gather", "reduce_scatter"}) {
    for (size_t mib : mibs) {
      const size_t share = mib << 20;  // bytes
      const size_t elems = share / 2;
      const bool ar = !std::strcmp(coll, "all_reduce"), ag = !std::strcmp(coll, "all_gather");
      const size_t in_bytes = ar || ag ? share : share * W;  // RS reads W shares
      const size_t out_bytes = ag ? share * W : share;       // AG writes W shares
      Rotating in(in_bytes, size_t(128) << 20);  // > 2x L2 in all (MEASURING.md), small sizes too
      void* out = nullptr;
      MKB_CUDA(cudaMalloc(&out, out_bytes));
      // (filled last to first: the calls read copies from 95 on, which the fill then left long before its end,
      // out of L2)
      for (int i = in.copies() - 1; i >= 0; --i)
        fill_random_bf16(in.get(i), in_bytes / 2, 300 + i + 7 * c.rank(), bc.stream);
      auto st = time_calls(&c.bootstrap(), bc.stream, bc.opts, [&](int i) {
        const void* src = in.get(i + 100);
        if (ar) MKB_NCCL(ncclAllReduce(src, out, elems, ncclBfloat16, ncclSum, nc, bc.stream));
        else if (ag) MKB_NCCL(ncclAllGather(src, out, elems, ncclBfloat16, nc, bc.stream));
        else MKB_NCCL(ncclReduceScatter(src, out, elems, ncclBfloat16, ncclSum, nc, bc.stream));
      }, std::cref(*bar));
      // algbw over the per-rank size for AR, over the full W*share for AG/RS.
      double algbw = (ar ? share : share * W) / (st.median_ms * 1e6);
      double busbw = algbw * (ar ? 2.0 * (W - 1) / W : double(W - 1) / W);
      t.rows.push_back({coll, std::to_string(mib), fmt(st.median_ms), fmt(algbw, 1), fmt(busbw, 1)});
      cudaFree(out);
    }
  }
  bar.reset();
  ncclCommDestroy(nc);
  bc.report->add(t);
}

}  // namespace mkb
