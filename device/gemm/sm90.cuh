// mkernel: the Hopper (sm_90a) instructions the GEMM engine is built on:
// mbarriers, TMA tile loads, WGMMA and register reallocation.
//
// Why hand-written rather than CuTe: the engine needs exactly one MMA shape
// and one shared-memory layout (128-byte swizzled, K-major), and its value is
// in the pipeline structure and fusion hooks, which are ours either way. A
// dozen PTX wrappers compile in seconds on the 2-core build machines, where
// CuTe's templates cost minutes per translation unit, and keep every
// instruction the hot loop issues visible in one file.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "../mbarrier.cuh"

namespace mk::dev::sm90 {

// The mbarrier vocabulary is shared with the bulk copier (device/mbarrier.cuh).
using dev::mbar_arrive;
using dev::mbar_arrive_expect_tx;
using dev::mbar_fence_init;
using dev::mbar_init;
using dev::mbar_try_wait;
using dev::smem_addr;

// ---- TMA ------------------------------------------------------------------

__device__ __forceinline__ void tma_prefetch_desc(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// 2-D tile at (c0 = inner/contiguous coordinate, c1 = row) into shared memory;
// completes `bytes` on `bar`. Out-of-bounds elements are zero-filled.
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, uint64_t* bar, int32_t c0, int32_t c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];" ::"r"(
          smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1)
      : "memory");
}

// Starts moving `bytes` (a multiple of 16) of global memory at `p` into L2.
__device__ __forceinline__ void prefetch_l2(const void* p, uint32_t bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(reinterpret_cast<uint64_t>(p)), "r"(bytes) : "memory");
}

// 2-D tile from shared memory (laid out as the tensor map says: tma_out
// is in the 128-byte swizzle, epilogue.cuh) to (c0, c1)
// of the tensor map's global matrix, as a bulk group of this thread
// (bulk_commit / bulk_wait_read / bulk_wait_all). Out-of-bounds elements
// are not written.
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, const void* src, int32_t c0, int32_t c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(smem_addr(src)), "r"(c0), "r"(c1)
               : "memory");
}

// Orders global-memory writes this thread observed (through the generic
// proxy: peers' stores, an acquire on their signal) before its later TMA
// (async proxy) reads of the same memory.
__device__ __forceinline__ void fence_proxy_async_global() {
  asm volatile("fence.proxy.async.global;" ::: "memory");
}

// Makes this thread's generic shared-memory writes visible to the async
// proxy (a bulk copy that reads them next).
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// ---- WGMMA ------------------------------------------------------------------

// Shared-memory matrix descriptor for a K-major tile stored as rows of 128
// bytes (64 bf16) in TMA's 128-byte swizzle, 8-row groups 1024 bytes apart.
// The tile must start on a 1024-byte boundary (base offset field 0).
__device__ __forceinline__ uint64_t wgmma_desc_sw128(const void* tile) {
  const uint64_t addr = smem_addr(tile);
  uint64_t d = 0;
  d |= (addr & 0x3FFFFull) >> 4;           // start address, 16-byte units
  d |= uint64_t(1) << 16;                  // leading byte offset (unused when swizzled)
  d |= uint64_t(1024 >> 4) << 32;          // stride byte offset: next 8-row group
  d |= uint64_t(1) << 62;                  // layout: 128-byte swizzle
  return d;
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// Keeps the compiler from moving accumulator accesses across wgmma calls.
__device__ __forceinline__ void fence_operand(float& r) { asm volatile("" : "+f"(r)::"memory"); }
// Every element of an accumulator array (the fence around wgmma's async operands).
template <int N>
__device__ __forceinline__ void fence_operands(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) fence_operand(r[i]);
}

// D(64x256, f32) = A(64x16, bf16, smem) * B(256x16, bf16, smem)^T + (scale_d ? D : 0).
__device__ __forceinline__ void wgmma_m64n256k16_bf16(float (&d)[128], uint64_t desc_a, uint64_t desc_b,
                                                      int scale_d) {
#define MK_D8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
                 "+f"(d[i + 6]), "+f"(d[i + 7])
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
      "%128, %129, p, 1, 1, 0, 0;\n"
      "}\n"
      : MK_D8(0), MK_D8(8), MK_D8(16), MK_D8(24), MK_D8(32), MK_D8(40), MK_D8(48), MK_D8(56), MK_D8(64), MK_D8(72),
        MK_D8(80), MK_D8(88), MK_D8(96), MK_D8(104), MK_D8(112), MK_D8(120)
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
#undef MK_D8
}

// ---- registers and barriers -------------------------------------------------

template <uint32_t N>
__device__ __forceinline__ void regs_dealloc() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
}
template <uint32_t N>
__device__ __forceinline__ void regs_alloc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}

// Barrier among `threads` threads (multiple of 32) on hardware barrier `id`
// (1..15; 0 is __syncthreads).
__device__ __forceinline__ void named_sync(uint32_t id, uint32_t threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// Two bf16 packed (low = a).
__device__ __forceinline__ uint32_t pack_bf16x2(float a, float b) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(b), "f"(a));
  return r;
}

// Four 8 x 8 b16 matrices to shared memory (a warp's collective): lane l
// gives the address of row l % 8 of matrix l / 8; register i holds lane l's
// two elements of matrix i (row l / 4, columns 2 (l % 4) + {0, 1}).
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
}

// System scope: the target may be a peer GPU's memory that its own GPU adds into too (EpiOp::Add*, "local or
// peer"); two GPUs' reductions are atomic with each other only where both name a scope holding the other's
// thread (PTX ISA, memory consistency model: morally strong operations). Without a scope they are .gpu's.
__device__ __forceinline__ void red_add_bf16x2(void* p, uint32_t v) {
  asm volatile("red.relaxed.sys.global.add.noftz.bf16x2 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ void red_add_f32x2(void* p, float a, float b) {
  asm volatile("red.relaxed.sys.global.add.v2.f32 [%0], {%1, %2};" ::"l"(p), "f"(a), "f"(b) : "memory");
}

}  // namespace mk::dev::sm90
