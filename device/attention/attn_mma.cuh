// mkernel: the Hopper instructions the attention engine adds to the GEMM
// engine's (device/gemm/sm90.cuh): 4-D TMA loads, the MN-major (transposed)
// shared-memory descriptor for V, WGMMA with A from shared memory at N = 128,
// 144 and 176 (S = Q K^T) and with A from registers at N = 64 / 128 (O += P V), and a
// fast exp2. Hand-written for the reasons sm90.cuh gives (one shape each,
// every instruction of the hot loop visible, seconds to compile).
#pragma once

#include "../gemm/sm90.cuh"

namespace mk::dev::sm90 {

// 4-D tile at coordinates (c0 innermost .. c3) into shared memory; completes
// the box's bytes on `bar` (out-of-bounds elements are zero-filled and count).
__device__ __forceinline__ void tma_load_4d(void* dst, const CUtensorMap* map, uint64_t* bar, int32_t c0, int32_t c1,
                                            int32_t c2, int32_t c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], "
      "[%2];" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}

// Descriptor of an MN-major operand (B = V: its N = head dimension is the
// contiguous one) stored as TMA's 128-byte-swizzled boxes of 64 columns x
// rows: rows (the K dimension, keys) 128 bytes apart, 8-row groups 1024
// bytes apart (stride byte offset), and the next 64 columns one box
// (`box_bytes`) further (leading byte offset). CuTe's canonical MN-major
// SW128 layout ((8,n),(8,k)) : ((1,LBO),(8,SBO)) in 16-byte units.
__device__ __forceinline__ uint64_t wgmma_desc_sw128_mn(const void* tile, uint32_t box_bytes) {
  const uint64_t addr = smem_addr(tile);
  uint64_t d = 0;
  d |= (addr & 0x3FFFFull) >> 4;
  d |= uint64_t((box_bytes >> 4) & 0x3FFF) << 16;  // leading byte offset: next 64 columns
  d |= uint64_t(1024 >> 4) << 32;                   // stride byte offset: next 8 rows (keys)
  d |= uint64_t(1) << 62;                           // 128-byte swizzle
  return d;
}

#define MK_F8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
                 "+f"(d[i + 6]), "+f"(d[i + 7])
#define MK_REGS32                                                                                              \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, " \
  "%23, %24, %25, %26, %27, %28, %29, %30, %31"
#define MK_REGS64                                                                                             \
  MK_REGS32 ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, " \
            "%51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"

// D(64x128, f32) = A(64x16, smem, K-major) * B(128x16, smem, K-major)^T + (scale_d ? D : 0).
__device__ __forceinline__ void wgmma_m64n128k16_ss(float (&d)[64], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" MK_REGS64 "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : MK_F8(0), MK_F8(8), MK_F8(16), MK_F8(24), MK_F8(32), MK_F8(40), MK_F8(48), MK_F8(56)
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// D(64x128, f32) += A(64x16, bf16 registers) * B(16x128, smem, MN-major).
__device__ __forceinline__ void wgmma_m64n128k16_rs_mn(float (&d)[64], const uint32_t (&a)[4], uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" MK_REGS64 "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
      : MK_F8(0), MK_F8(8), MK_F8(16), MK_F8(24), MK_F8(32), MK_F8(40), MK_F8(48), MK_F8(56)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}

// D(64x64, f32) += A(64x16, bf16 registers) * B(16x64, smem, MN-major).
__device__ __forceinline__ void wgmma_m64n64k16_rs_mn(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" MK_REGS32 "}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
      : MK_F8(0), MK_F8(8), MK_F8(16), MK_F8(24)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}


#define MK_REGS72 MK_REGS64 ", %64, %65, %66, %67, %68, %69, %70, %71"
#define MK_REGS88                                                                                             \
  MK_REGS64 ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, " \
            "%83, %84, %85, %86, %87"

// D(64x176, f32) = A(64x16, smem, K-major) * B(176x16, smem, K-major)^T + (scale_d ? D : 0): S = Q K^T for
// the one-GPU op's 176-key blocks (FlashAttention-3's block for D = 128 without a side role).
__device__ __forceinline__ void wgmma_m64n176k16_ss(float (&d)[88], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %90, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n176k16.f32.bf16.bf16 {" MK_REGS88 "}, %88, %89, p, 1, 1, 0, 0;\n}\n"
      : MK_F8(0), MK_F8(8), MK_F8(16), MK_F8(24), MK_F8(32), MK_F8(40), MK_F8(48), MK_F8(56), MK_F8(64), MK_F8(72),
        MK_F8(80)
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// D(64x144, f32) = A(64x16, smem, K-major) * B(144x16, smem, K-major)^T + (scale_d ? D : 0): S = Q K^T for
// 144-key blocks at D = 128 (the ring op's until 2026-12-02; Regs in attn_engine.cuh says when they fit).
__device__ __forceinline__ void wgmma_m64n144k16_ss(float (&d)[72], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %74, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n144k16.f32.bf16.bf16 {" MK_REGS72 "}, %72, %73, p, 1, 1, 0, 0;\n}\n"
      : MK_F8(0), MK_F8(8), MK_F8(16), MK_F8(24), MK_F8(32), MK_F8(40), MK_F8(48), MK_F8(56), MK_F8(64)
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

#undef MK_F8
#undef MK_REGS32
#undef MK_REGS64
#undef MK_REGS72
#undef MK_REGS88

// 2^x (the MUFU instruction; -inf gives 0).
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace mk::dev::sm90
