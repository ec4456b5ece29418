// Shared helpers of the GEMM engine's GPU tests: random bf16, poison,
// device-side comparison against an fp32 reference.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>
#include <string>

#include "mkernel/error.hpp"
#include "tests/gpu/cuda_raii.hpp"

namespace mkt {

// The mk::Error message `f` throws, or "" when it does not throw.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const mk::Error& e) {
    return e.what();
  }
  return "";
}

#define CUDA_OK(x) ASSERT_EQ(static_cast<int>(x), 0) << #x << ": " << cudaGetErrorString(x)
#define CUBLAS_OK(x) ASSERT_EQ(static_cast<int>(x), 0) << #x

inline constexpr uint16_t kPoison = 0xFFFF;  // bf16 NaN

static __device__ __forceinline__ float u01(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return static_cast<float>(x >> 40) * (1.0f / 16777216.0f);
}

static __device__ __forceinline__ uint16_t to_bf16(float f) {
  uint32_t u = __float_as_uint(f);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
static __device__ __forceinline__ float from_bf16(uint16_t h) { return __uint_as_float(uint32_t(h) << 16); }

static __global__ void fill_random(uint16_t* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = to_bf16(2.f * u01(seed * 0x9E3779B97F4A7C15ull + i) - 1.f);
}
static __global__ void fill_value(uint16_t* p, size_t n, uint16_t v) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) p[i] = v;
}
static __global__ void bf16_to_f32(const uint16_t* s, float* d, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    d[i] = from_bf16(s[i]);
}
// acc[i] += x[i] (bf16 into an fp32 sum), i < n.
static __global__ void add_bf16_rows(const uint16_t* x, float* acc, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    acc[i] += from_bf16(x[i]);
}

// acc[0] += sum (out - ref)^2, acc[1] += sum ref^2 over rows [0, m), cols
// [0, n); bad[0] counts non-finite outputs, bad[1] touched padding columns
// [n, ldo) (must still hold the poison).
static __global__ void compare(const uint16_t* out, int64_t ldo, const float* ref, int64_t ldr, int64_t m, int64_t n,
                        double* acc, unsigned long long* bad) {
  double e = 0, r = 0;
  unsigned long long nf = 0, touched = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < m * ldo; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = i / ldo, col = i % ldo;
    const uint16_t o = out[i];
    if (col >= n) {
      touched += o != kPoison;
      continue;
    }
    const float v = from_bf16(o);
    if (!isfinite(v)) {
      ++nf;
      continue;
    }
    const double d = double(v) - ref[row * ldr + col];
    e += d * d;
    r += double(ref[row * ldr + col]) * ref[row * ldr + col];
  }
  atomicAdd(&acc[0], e);
  atomicAdd(&acc[1], r);
  atomicAdd(&bad[0], nf);
  atomicAdd(&bad[1], touched);
}

// Counts elements farther from the reference than rtol |ref| + atol (the
// element-wise check: a few stale rows hardly move a Frobenius norm).
static __global__ void count_far(const uint16_t* out, int64_t ldo, const float* ref, int64_t ldr, int64_t m, int64_t n,
                                 float rtol, float atol, unsigned long long* far) {
  unsigned long long c = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < m * n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = i / n, col = i % n;
    const float v = from_bf16(out[row * ldo + col]), r = ref[row * ldr + col];
    c += !(fabsf(v - r) <= rtol * fabsf(r) + atol);
  }
  atomicAdd(far, c);
}

struct Buf {
  void* p = nullptr;
  // Zeroed: a test's buffers are all defined before any kernel reads them (inputs are filled, outputs
  // poisoned, and cuBLAS's TMA stores into a reference are not seen by compute-sanitizer's initcheck, which
  // then reports every read of it), so initcheck's reports point at the library's own buffers.
  explicit Buf(size_t bytes) {
    EXPECT_EQ(cudaMalloc(&p, bytes ? bytes : 16), cudaSuccess);
    EXPECT_EQ(cudaMemset(p, 0, bytes ? bytes : 16), cudaSuccess);
  }
  ~Buf() { cudaFree(p); }
  Buf(const Buf&) = delete;  // (a copy would free the memory twice)
  Buf& operator=(const Buf&) = delete;
  template <class T>
  T* as() const { return static_cast<T*>(p); }
};

// What `record` enqueues on `s`, captured (thread-local mode) and instantiated. The capture ends even when
// `record` stopped at a failed assertion; graph and executable are destroyed with the object. ok(): every
// step succeeded (tests assert it before launching).
class Captured {
 public:
  Captured(cudaStream_t s, const std::function<void()>& record) {
    if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) return;
    record();
    if (cudaStreamEndCapture(s, &graph_) != cudaSuccess) return;
    ok_ = cudaGraphInstantiate(&exec_, graph_, 0) == cudaSuccess;
  }
  ~Captured() {
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
  }
  Captured(const Captured&) = delete;
  Captured& operator=(const Captured&) = delete;
  bool ok() const { return ok_; }
  cudaGraph_t graph() const { return graph_; }
  cudaError_t launch(cudaStream_t s) const { return cudaGraphLaunch(exec_, s); }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  bool ok_ = false;
};

// 16-bit elements of two device buffers that differ (the bit-for-bit comparisons), read back to the host.
inline size_t count_diff(const void* x, const void* y, int64_t elems) {
  std::vector<uint16_t> hx(elems), hy(elems);
  EXPECT_EQ(cudaMemcpy(hx.data(), x, elems * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(hy.data(), y, elems * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  size_t d = 0;
  for (int64_t i = 0; i < elems; ++i) d += hx[i] != hy[i];
  return d;
}

inline void random_bf16(void* p, size_t n, uint64_t seed) { fill_random<<<264, 256>>>(static_cast<uint16_t*>(p), n, seed); }
inline void poison(void* p, size_t n) { fill_value<<<264, 256>>>(static_cast<uint16_t*>(p), n, kPoison); }


// Independent fp32 reference on CUDA cores (no tensor cores, no library):
// ref[m x n] (ld n) = a * b^T + beta * ref.
static __global__ void simt_gemm(const uint16_t* a, const uint16_t* b, float* ref, int64_t m, int64_t n, int64_t k,
                                 float beta) {
  const int64_t row = blockIdx.y, col = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (row >= m || col >= n) return;
  float acc = 0.f;
  for (int64_t i = 0; i < k; ++i) acc += from_bf16(a[row * k + i]) * from_bf16(b[col * k + i]);
  ref[row * n + col] = acc + (beta != 0.f ? beta * ref[row * n + col] : 0.f);
}

inline void simt_reference(const void* a, const void* b, float* ref, int64_t m, int64_t n, int64_t k,
                           float beta = 0.f) {
  if (m == 0) return;
  simt_gemm<<<dim3(static_cast<unsigned>((n + 127) / 128), static_cast<unsigned>(m)), 128>>>(
      static_cast<const uint16_t*>(a), static_cast<const uint16_t*>(b), ref, m, n, k, beta);
}

// Device-side comparison of a bf16 result with an fp32 reference.
class GemmCheck : public ::testing::Test {
 protected:
  struct Check {
    double rel;
    unsigned long long nonfinite, touched;
    double rms;  // of the reference
  };
  Check check(const void* out, int64_t ldo, const float* ref, int64_t m, int64_t n) {
    Buf acc(2 * sizeof(double)), bad(2 * sizeof(unsigned long long));
    cudaMemset(acc.p, 0, 2 * sizeof(double));
    cudaMemset(bad.p, 0, 2 * sizeof(unsigned long long));
    compare<<<528, 256>>>(static_cast<const uint16_t*>(out), ldo, ref, n, m, n, acc.as<double>(),
                          bad.as<unsigned long long>());
    double a[2];
    unsigned long long b[2];
    EXPECT_EQ(cudaMemcpy(a, acc.p, sizeof(a), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(b, bad.p, sizeof(b), cudaMemcpyDeviceToHost), cudaSuccess);
    return Check{a[1] > 0 ? std::sqrt(a[0] / a[1]) : std::sqrt(a[0]), b[0], b[1],
                 m * n > 0 ? std::sqrt(a[1] / double(m * n)) : 0.0};
  }

  // Elements of out farther than 2% of |ref| + 2% of the reference's RMS
  // (bf16 output rounding is < 0.4%).
  unsigned long long far_elements(const void* out, int64_t ldo, const float* ref, int64_t m, int64_t n,
                                  const Check& c) {
    Buf far(sizeof(unsigned long long));
    cudaMemset(far.p, 0, sizeof(unsigned long long));
    count_far<<<528, 256>>>(static_cast<const uint16_t*>(out), ldo, ref, n, m, n, 2e-2f, float(2e-2 * c.rms),
                            far.as<unsigned long long>());
    unsigned long long h = 0;
    EXPECT_EQ(cudaMemcpy(&h, far.p, sizeof(h), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }

  // Every element of out [m x n] (ld n) against ref: none non-finite (the
  // poison: never written), relative Frobenius error under 1e-2, and none
  // beyond far_elements' bound (stale or wrong tiles).
  void expect_near(const void* out, const float* ref, int64_t m, int64_t n, const std::string& what) {
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
    Check c = check(out, n, ref, m, n);
    EXPECT_EQ(c.nonfinite, 0u) << what << ": elements never written";
    EXPECT_LT(c.rel, 1e-2) << what;
    EXPECT_EQ(far_elements(out, n, ref, m, n, c), 0u) << what << ": stale elements";
  }
};

// Tests against cuBLAS (fp32 output of the same bf16 inputs).
class GemmFixture : public GemmCheck {
 protected:
  void SetUp() override { ASSERT_EQ(cublasCreate(&h_), CUBLAS_STATUS_SUCCESS); }
  void TearDown() override { cublasDestroy(h_); }

  // ref[m x n] (fp32, ld n) = a * b^T (+ ref if beta = 1).
  void reference(const void* a, const void* b, float* ref, int64_t m, int64_t n, int64_t k, float beta = 0.f) {
    if (m == 0) return;
    const float alpha = 1.f;
    ASSERT_EQ(cublasGemmEx(h_, CUBLAS_OP_T, CUBLAS_OP_N, int(n), int(m), int(k), &alpha, b, CUDA_R_16BF, int(k), a,
                           CUDA_R_16BF, int(k), &beta, ref, CUDA_R_32F, int(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_SUCCESS);
  }

  cublasHandle_t h_{};
};

}  // namespace mkt
