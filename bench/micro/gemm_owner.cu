// The GEMM engine's owner-reduce epilogue on one GPU (the path of every
// GEMM+ReduceScatter / GEMM+AllReduce owner tile), with its source tile in
// local memory and its signal already set: what the epilogue costs per tile
// beside the plain GEMM, no NVLink or second GPU needed. Variants, same
// shape, same CTAs (the 128 of GemmRs at the issue shapes), interleaved:
//   plain, TMA store  - the standalone GEMM's epilogue (staged, TMA store)
//   plain, row stores - 16-byte stores from registers
//   owner, 0 sources  - the owner path's signal wait, barrier and row stores
//   owner, 1 source   - ... plus loading and adding one partial tile (RS 1x2)
// Every tile is an owner tile here (at W = 2 half of them are).
#include <cublas_v2.h>

#include "bench/baselines/cublas_util.hpp"
#include "bench/bench.hpp"
#include "src/ops/gemm/gemm_host.hpp"

namespace mkb {

namespace {

struct OwnInputs {
  Rotating a, b;
  void* c = nullptr;     // RowMajor out / own_out
  void* part = nullptr;  // the source's partial tiles (FragMajor bf16)
  uint64_t* sig = nullptr;    // per row-block, set to 1 (epoch 0 expects 1)
  uint64_t* epoch = nullptr;  // stays 0
  OwnInputs(int m, int n, int k, cudaStream_t st) : a(size_t(m) * k * 2), b(size_t(n) * k * 2) {
    for (int i = 0; i < a.copies(); ++i) fill_random_bf16(a.get(i), size_t(m) * k, 300 + i, st);
    for (int i = 0; i < b.copies(); ++i) fill_random_bf16(b.get(i), size_t(n) * k, 400 + i, st);
    const int64_t tiles = int64_t((m + 127) / 128) * ((n + 255) / 256);
    MKB_CUDA(cudaMalloc(&c, size_t(m) * n * 2));
    MKB_CUDA(cudaMalloc(&part, size_t(tiles) * 128 * 256 * 2));
    fill_random_bf16(part, size_t(tiles) * 128 * 256, 500, st);
    const int rb = (m + 127) / 128;
    MKB_CUDA(cudaMalloc(&sig, size_t(rb) * 8));
    MKB_CUDA(cudaMalloc(&epoch, 8));
    std::vector<uint64_t> ones(size_t(rb), 1);
    MKB_CUDA(cudaMemcpyAsync(sig, ones.data(), size_t(rb) * 8, cudaMemcpyHostToDevice, st));
    MKB_CUDA(cudaMemsetAsync(epoch, 0, 8, st));
    MKB_CUDA(cudaStreamSynchronize(st));
  }
  ~OwnInputs() {
    cudaFree(c);
    cudaFree(part);
    cudaFree(sig);
    cudaFree(epoch);
  }
};

enum class Variant { TmaStore, RowStores, Owner0, Owner1 };

std::function<void(int)> own_call(OwnInputs& in, int m, int n, int k, int ctas, Variant v, cudaStream_t st) {
  return [&in, m, n, k, ctas, v, st](int i) {
    mk::gemm::Operands o;
    o.a = in.a.get(i + 100);
    o.b = in.b.get(i + 100);
    o.out = in.c;
    o.m = m;
    o.n = n;
    o.k = k;
    mk::gemm::GemmParams p = mk::gemm::make_params(o, ctas);
    if (v == Variant::TmaStore) mk::gemm::use_tma_store(p);
    if (v == Variant::Owner0 || v == Variant::Owner1) {
      mk::gemm::EpilogueHook& e = p.epi;
      e.layout = mk::gemm::OutLayout::FragMajor;
      e.out[0] = in.part;  // never written: every tile is own_final's
      e.rows_per_dest = m;
      e.own_mask = 1;
      e.own_final = 0;
      e.own_nsrc = v == Variant::Owner1 ? 1 : 0;
      e.own_slots = static_cast<const uint16_t*>(in.part);
      e.own_signals = in.sig;
      e.own_sig_stride = (m + 127) / 128;
      e.own_expect = 1;
      e.own_out = in.c;
      e.own_ldo = n;
      p.load.epoch_counter = in.epoch;
    }
    mk::gemm::launch(p, ctas, mk::gemm::TestRoleParams{}, st);
  };
}

}  // namespace

void bench_gemm_owner(BenchContext& bc) {
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) mk::fail("cublasCreate failed");
  const int n = 8192, k = 14336, ctas = 128;
  std::vector<int> ms = {1024, 2048, 4096, 8192};
  if (bc.quick) ms = {4096};
  Table t{"GEMM engine's owner-reduce epilogue on one GPU (GEMM+RS / GEMM+AR owner tiles, source local)",
          {"M", "tiles per CTA", "cuBLAS ms", "plain, TMA store ms", "plain, row stores ms", "owner, 0 sources ms",
           "owner, 1 source ms", "owner 0 - TMA store, us per tile", "owner 1 - owner 0, us per tile"},
          {},
          "n 8192, k 14336 (GEMM+RS at hidden 8192, FFN 28672 / 2), bf16; mkernel variants on 128 CTAs (GemmRs's "
          "count), cuBLAS on every SM. Every tile is an owner tile (at W = 2 half are): 'owner, 0 sources' = the "
          "owner path's signal wait, barrier and row stores into own_out; '1 source' adds one partial tile "
          "(FragMajor bf16, local memory, prefetched into L2 by the producer as in GemmRs) to the accumulators "
          "first. Per tile: the difference of medians over the tiles per CTA. Calls interleaved, medians; A and B "
          "rotate through >= 256 MiB."};
  for (int m : ms) {
    OwnInputs in(m, n, k, bc.stream);
    auto st = time_interleaved(
        &bc.comm->bootstrap(), bc.stream, bc.opts,
        {[&](int i) { gemm_bf16_tn(h, m, n, k, in.a.get(i + 100), in.b.get(i + 100), in.c, bc.stream); },
         own_call(in, m, n, k, ctas, Variant::TmaStore, bc.stream),
         own_call(in, m, n, k, ctas, Variant::RowStores, bc.stream),
         own_call(in, m, n, k, ctas, Variant::Owner0, bc.stream),
         own_call(in, m, n, k, ctas, Variant::Owner1, bc.stream)});
    const double tiles_per_cta = double((m + 127) / 128) * ((n + 255) / 256) / ctas;
    t.rows.push_back({std::to_string(m), fmt(tiles_per_cta, 2), fmt(st[0].median_ms), fmt(st[1].median_ms),
                      fmt(st[2].median_ms), fmt(st[3].median_ms), fmt(st[4].median_ms),
                      fmt(1e3 * (st[3].median_ms - st[1].median_ms) / tiles_per_cta, 2),
                      fmt(1e3 * (st[4].median_ms - st[3].median_ms) / tiles_per_cta, 2)});
  }
  bc.report->add(t);
  cublasDestroy(h);
}

}  // namespace mkb
