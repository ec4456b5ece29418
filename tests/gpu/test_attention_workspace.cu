// The one-GPU attention with the caller's workspace (AttentionArgs::workspace): a causal call captured into a
// CUDA graph claims its work units from the workspace (the graph zeroes it: a memset node before the kernel)
// and gives the eager call's bits; without a workspace a captured call walks its units statically (one node,
// the same bits); the size query; too small or misaligned workspaces refused before anything is queued.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "mkernel/attention.hpp"
#include "mkernel/error.hpp"

namespace {

__global__ void fill_bf16(uint16_t* p, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint64_t x = (uint64_t(i) + 1) * 0x9E3779B97F4A7C15ull ^ seed * 0xBF58476D1CE4E5B9ull;
    x ^= x >> 31;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 29;
    const float v = float(int(x % 2001) - 1000) / 1000.f;  // [-1, 1]
    p[i] = static_cast<uint16_t>(__float_as_uint(v) >> 16);
  }
}

struct Dev {
  void* p = nullptr;
  size_t bytes;
  explicit Dev(size_t b) : bytes(b) {
    EXPECT_EQ(cudaMalloc(&p, b), cudaSuccess);
    EXPECT_EQ(cudaMemset(p, 0xff, b), cudaSuccess);  // poison: NaN in bf16 and fp32
  }
  ~Dev() { cudaFree(p); }
  std::vector<uint8_t> host() const {
    std::vector<uint8_t> h(bytes);
    EXPECT_EQ(cudaMemcpy(h.data(), p, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
};

struct Graph {
  cudaGraph_t g = nullptr;
  cudaGraphExec_t e = nullptr;
  ~Graph() {
    if (e) cudaGraphExecDestroy(e);
    if (g) cudaGraphDestroy(g);
  }
  size_t nodes() const {
    size_t n = 0;
    EXPECT_EQ(cudaGraphGetNodes(g, nullptr, &n), cudaSuccess);
    return n;
  }
};

TEST(AttentionWorkspace, ACapturedCausalCallClaimsWithTheEagerBits) {
  if (const char* u = std::getenv("MK_ATTN_UNITS"); u && std::string(u) != "auto")
    GTEST_SKIP() << "MK_ATTN_UNITS=" << u << " is set; this test checks the default";
  const int64_t b = 2, s = 1024, h = 4, hkv = 2, d = 128;
  const size_t qbytes = size_t(b * s * h * d * 2), kvbytes = size_t(b * s * hkv * d * 2);
  const size_t lbytes = size_t(b * h * s * 4);
  Dev q(qbytes), k(kvbytes), v(kvbytes), ws(64);
  fill_bf16<<<264, 256>>>(static_cast<uint16_t*>(q.p), qbytes / 2, 1);
  fill_bf16<<<264, 256>>>(static_cast<uint16_t*>(k.p), kvbytes / 2, 2);
  fill_bf16<<<264, 256>>>(static_cast<uint16_t*>(v.p), kvbytes / 2, 3);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const mk::AttentionArgs base{.q = q.p, .k = k.p, .v = v.p, .batch = b, .seq_q = s, .heads = h, .kv_heads = hkv,
                               .head_dim = d, .causal = true};
  const size_t need = mk::attention_workspace_bytes(base);
  EXPECT_GE(need, 8u) << "a causal call claims its units (MK_ATTN_UNITS=auto)";
  mk::AttentionArgs nc = base;
  nc.causal = false;
  EXPECT_EQ(mk::attention_workspace_bytes(nc), 0u) << "a call without a mask walks its units statically";

  cudaStream_t st = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  auto call = [&](const Dev& o, const Dev& l, void* w, size_t wb, bool causal = true) {
    mk::AttentionArgs a = base;
    a.out = o.p;
    a.lse = static_cast<float*>(l.p);
    a.workspace = w;
    a.workspace_bytes = wb;
    a.causal = causal;
    mk::attention_fwd(a, st);
  };
  auto capture = [&](Graph& g, const std::function<void()>& record) {
    ASSERT_EQ(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    record();
    ASSERT_EQ(cudaStreamEndCapture(st, &g.g), cudaSuccess);
    ASSERT_EQ(cudaGraphInstantiate(&g.e, g.g, 0), cudaSuccess);
  };
  Dev o_eager(qbytes), l_eager(lbytes), o_ws(qbytes), l_ws(lbytes), o_g(qbytes), l_g(lbytes), o_st(qbytes),
      l_st(lbytes);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // (the poison, on the legacy stream, before st's work)
  call(o_eager, l_eager, nullptr, 0);  // the library's pool
  call(o_ws, l_ws, ws.p, need);
  ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
  EXPECT_EQ(o_eager.host(), o_ws.host()) << "out: the workspace and the pool's counter differ";
  EXPECT_EQ(l_eager.host(), l_ws.host()) << "lse: the workspace and the pool's counter differ";
  const std::vector<uint8_t> out = o_eager.host();
  size_t unwritten = 0;  // the poison's 0xffff halves: never written
  for (size_t i = 0; i + 1 < out.size(); i += 2) unwritten += out[i] == 0xff && out[i + 1] == 0xff;
  EXPECT_EQ(unwritten, 0u) << "elements of out never written";

  Graph claimed, walked;
  capture(claimed, [&] { call(o_g, l_g, ws.p, need); });
  capture(walked, [&] { call(o_st, l_st, nullptr, 0); });
  EXPECT_EQ(claimed.nodes(), 2u) << "the counter's zeroing (a memset node) and the kernel";
  EXPECT_EQ(walked.nodes(), 1u) << "without a workspace a captured call has no counter";
  for (int replay = 0; replay < 2; ++replay) {  // the memset node re-zeroes the counter on every replay
    // (on st, non-blocking: the legacy stream's memset would not be ordered before the launches)
    ASSERT_EQ(cudaMemsetAsync(o_g.p, 0xff, qbytes, st), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(l_g.p, 0xff, lbytes, st), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(o_st.p, 0xff, qbytes, st), cudaSuccess);  // (each replay's own writes are checked)
    ASSERT_EQ(cudaMemsetAsync(l_st.p, 0xff, lbytes, st), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(claimed.e, st), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(walked.e, st), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
    EXPECT_EQ(o_eager.host(), o_g.host()) << "replay " << replay << ": out differs from the eager call's";
    EXPECT_EQ(l_eager.host(), l_g.host()) << "replay " << replay << ": lse differs from the eager call's";
    EXPECT_EQ(o_eager.host(), o_st.host()) << "replay " << replay << ": the static walk's out differs";
    EXPECT_EQ(l_eager.host(), l_st.host()) << "replay " << replay << ": the static walk's lse differs";
  }
  Graph noncausal;  // a workspace given to a call that claims nothing is left alone
  capture(noncausal, [&] { call(o_g, l_g, ws.p, 0, false); });
  EXPECT_EQ(noncausal.nodes(), 1u);

  for (const auto& [w, wb, what] : {std::tuple{ws.p, need - 1, "too small"},
                                    std::tuple{static_cast<void*>(static_cast<char*>(ws.p) + 8), need,
                                               "16-byte aligned"}}) {
    try {
      call(o_ws, l_ws, w, wb);
      ADD_FAILURE() << "a workspace that is " << what << " was accepted";
    } catch (const mk::Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(cudaStreamSynchronize(st), cudaSuccess);
  cudaStreamDestroy(st);
}

}  // namespace
