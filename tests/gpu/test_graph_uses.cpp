// mk::GraphUses (mkernel/graph_uses.hpp) on one GPU: a capture's graph, and every copy CUDA makes of it (an
// executable graph, a clone, a child-graph node), keeps alive() true until the last of them is destroyed and its
// launches have ended; ever() stays true. Eager calls note nothing; a capture that cannot be tied holds for good.
// (ThePlanMayGoBeforeItsGraphs would show a destructor writing into the freed plan only under a host memory
// checker, which no GPU step runs: here it checks that the late destructors run without a crash or a CUDA error.)
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "mkernel/error.hpp"
#include "mkernel/graph_uses.hpp"
#include "tests/gpu/cuda_raii.hpp"

namespace {

// Whether `uses` reads as held by no graph within `seconds` (its user objects' destructors run on a CUDA thread,
// a moment after the last destroy).
bool released_within(const mk::GraphUses& uses, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (uses.alive()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

using mkt::Stream;

// Captures a memset of `buf` on `s` in global mode (torch.cuda.graph's), noting it in `uses` as a plan's call does
// (twice: the second call of a capture adds nothing); returns the graph.
cudaGraph_t capture_noted(cudaStream_t s, void* buf, mk::GraphUses& uses) {
  cudaGraph_t g = nullptr;
  EXPECT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  cudaStreamCaptureStatus st{};
  unsigned long long id = 0;
  EXPECT_EQ(cudaStreamGetCaptureInfo(s, &st, &id), cudaSuccess);
  EXPECT_NE(id, 0ull);
  for (int call = 0; call < 2; ++call) {
    EXPECT_EQ(cudaMemsetAsync(buf, call, 256, s), cudaSuccess);
    uses.note(s, id);
  }
  EXPECT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  // (the library's own runtime: it links cudart statically, so this binary's cudaGetLastError would not see it)
  EXPECT_EQ(mk::pending_cuda_error(), 0) << "note() left an error behind";
  return g;
}

}  // namespace

TEST(GraphUses, EagerCallsNoteNothing) {
  const Stream s;
  mk::GraphUses uses;
  uses.note(s.s, 0);
  EXPECT_FALSE(uses.ever());
  EXPECT_FALSE(uses.alive());
}

// Each kind of copy alone (the captured graph destroyed first) holds it until that copy goes.
TEST(GraphUses, EveryCopyOfTheGraphHoldsThePlanUntilItGoes) {
  const Stream s;
  void* buf = nullptr;
  ASSERT_EQ(cudaMalloc(&buf, 256), cudaSuccess);
  for (const char* copy : {"executable graph", "clone", "child-graph node"}) {
    SCOPED_TRACE(copy);
    const std::string kind = copy;
    mk::GraphUses uses;
    EXPECT_FALSE(uses.alive());
    cudaGraph_t g = capture_noted(s.s, buf, uses);
    ASSERT_NE(g, nullptr);
    EXPECT_TRUE(uses.ever());
    EXPECT_TRUE(uses.alive());
    cudaGraphExec_t exec = nullptr;
    cudaGraph_t other = nullptr;  // the clone, or the child node's parent
    if (kind == "executable graph") {
      ASSERT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
    } else if (kind == "clone") {
      ASSERT_EQ(cudaGraphClone(&other, g), cudaSuccess);
    } else {
      ASSERT_EQ(cudaGraphCreate(&other, 0), cudaSuccess);
      cudaGraphNode_t child = nullptr;
      ASSERT_EQ(cudaGraphAddChildGraphNode(&child, other, nullptr, 0, g), cudaSuccess);
    }
    ASSERT_EQ(cudaGraphDestroy(g), cudaSuccess);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // (an early release would show by now)
    EXPECT_TRUE(uses.alive()) << "the " << kind << " alone still holds it";
    if (exec) {
      ASSERT_EQ(cudaGraphLaunch(exec, s.s), cudaSuccess);
      ASSERT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);  // (its launch may still run: the release waits for it)
      ASSERT_EQ(cudaStreamSynchronize(s.s), cudaSuccess);
    } else {
      ASSERT_EQ(cudaGraphDestroy(other), cudaSuccess);
    }
    EXPECT_TRUE(released_within(uses, 5)) << "alive() after the last graph holding the call was destroyed";
    EXPECT_TRUE(uses.ever());
  }
  cudaFree(buf);
}

TEST(GraphUses, EachCaptureHoldsItUntilItsOwnGraphGoes) {
  const Stream s;
  void* buf = nullptr;
  ASSERT_EQ(cudaMalloc(&buf, 256), cudaSuccess);
  mk::GraphUses uses;
  cudaGraph_t first = capture_noted(s.s, buf, uses), second = capture_noted(s.s, buf, uses);
  ASSERT_EQ(cudaGraphDestroy(first), cudaSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(uses.alive()) << "the second capture's graph still holds it";
  ASSERT_EQ(cudaGraphDestroy(second), cudaSuccess);
  EXPECT_TRUE(released_within(uses, 5));
  cudaFree(buf);
}

// A plan destroyed before the graphs holding its calls (the caller's mistake if the graph is replayed, not if it is
// only destroyed): the destructors that run later touch only the shared count.
TEST(GraphUses, ThePlanMayGoBeforeItsGraphs) {
  const Stream s;
  void* buf = nullptr;
  ASSERT_EQ(cudaMalloc(&buf, 256), cudaSuccess);
  auto uses = std::make_unique<mk::GraphUses>();
  cudaGraph_t g = capture_noted(s.s, buf, *uses);
  uses.reset();
  ASSERT_EQ(cudaGraphDestroy(g), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // (the destructor's moment)
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  // (the library's CUDA runtime is its own, linked statically: its pending error is asked of it)
  EXPECT_EQ(mk::pending_cuda_error(), 0) << mk::cuda_error_string(mk::pending_cuda_error());
  cudaFree(buf);
}

// A call whose capture's graph cannot be given a reference (here: the capture named is not the stream's, as where
// the capture ended or was invalidated between LaunchOrder::begin and note) leaves the plan held for good, since no
// destructor will say when its graph is gone, and leaves no error in the library's runtime.
TEST(GraphUses, ACaptureThatCannotBeTiedHoldsThePlanForGood) {
  const Stream s, other;
  void* buf = nullptr;
  ASSERT_EQ(cudaMalloc(&buf, 256), cudaSuccess);
  mk::GraphUses uses;
  ASSERT_EQ(cudaStreamBeginCapture(s.s, cudaStreamCaptureModeGlobal), cudaSuccess);
  cudaStreamCaptureStatus st{};
  unsigned long long id = 0;
  ASSERT_EQ(cudaStreamGetCaptureInfo(s.s, &st, &id), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(buf, 0, 256, s.s), cudaSuccess);
  uses.note(other.s, id);  // (`other` is not capturing)
  EXPECT_TRUE(uses.ever());
  EXPECT_TRUE(uses.alive());
  EXPECT_EQ(mk::pending_cuda_error(), 0) << "note() left an error behind";
  cudaGraph_t g = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(s.s, &g), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(g), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_FALSE(released_within(uses, 0.2)) << "a plan whose graph had no reference reads as released";
  uses.note(other.s, 0);  // an eager call afterwards changes nothing
  EXPECT_TRUE(uses.alive());
  cudaFree(buf);
}
