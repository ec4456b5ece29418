// The attention engine's failure path: a launch whose consumers can never
// get their K block (the K map delivers half of each block's bytes, so the
// stage's barrier never completes) must end with an error naming the wait,
// not hang. Both the consumers' trap-free give-up (ConsumerStop, then the
// producer thread's watchdog) and the producer's own bounded wait can end
// it, whichever gives up first (both after 4 x MK_TIMEOUT_MS); either way
// the launch fails with a record. Runs in a child (a trapped context cannot
// be reused).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "src/ops/attention/attn_host.hpp"
#include "tests/gpu/child.hpp"
#include "tests/test_comm.hpp"

namespace {

TEST(AttentionChild, StarvedConsumersEndTheLaunchWithARecord) {
  // The waits end near 4 x MK_TIMEOUT_MS=300: a consumer's on "its own pipeline stage s", or the producer's
  // watchdog on "the attention engine's consumer warps to finish" (src/runtime/wait_diag_text.cpp).
  mk::test::expect_child_failure("attn_starved",
                                 {"CHILD ERROR", "role Compute", "gave up after", " ms waiting on ", "MK_TIMEOUT_MS"});
  int code = 0;
  double secs = 0;
  const std::string out = mk::test::run_child("attn_starved", &code, &secs);  // (again: which wait reported)
  EXPECT_TRUE(out.find("waiting on its own pipeline stage ") != std::string::npos ||
              out.find("waiting on the attention engine's consumer warps to finish (") != std::string::npos)
      << out;
}

}  // namespace

int run_attention_child_scenario(const char* name) {
  if (std::string(name) != "attn_starved") {
    std::printf("unknown scenario %s\n", name);
    return 2;
  }
  return mk::test::expect_device_failure("attention with a short K map", [&]() -> mk::Communicator& {
    mk::Communicator& c = mk::test::comm();
    const int64_t b = 1, s = 512, h = 2, d = 128;
    const size_t bytes = size_t(b * s * h * d * 2);
    void *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr, *lse = nullptr;
    cudaMalloc(&q, bytes);
    cudaMalloc(&k, bytes);
    cudaMalloc(&v, bytes);
    cudaMalloc(&o, bytes);
    cudaMalloc(&lse, size_t(b * h * s) * 4);
    cudaMemset(q, 0, bytes);
    cudaMemset(k, 0, bytes);
    cudaMemset(v, 0, bytes);
    mk::AttentionArgs a{.q = q, .k = k, .v = v, .out = o, .lse = static_cast<float*>(lse), .batch = b, .seq_q = s,
                        .seq_kv = s, .heads = h, .kv_heads = h, .head_dim = d};
    mk::attn::AttnParams p = mk::attn::make_params(a);
    // K boxes of half a key block: each K load brings half the bytes its
    // barrier expects.
    const int64_t dims[4] = {d, h, s, b};
    const int64_t strides[3] = {d * 2, h * d * 2, s * h * d * 2};
    p.k[0] = mk::attn::make_map(k, dims, strides, 1, static_cast<uint32_t>(p.block_n / 2), "short K");
    p.has_ctx = 1;
    p.ctx = c.device_ctx();
    p.timeout_ns = p.ctx.timeout_ns;
    mk::attn::launch(p, p.num_compute, nullptr);
    return c;
  });
}
