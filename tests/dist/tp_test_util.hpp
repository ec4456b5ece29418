// Shared by the tensor-parallel op tests (dist tier): capture one call in a
// CUDA graph and replay it.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <string>

#include "mkernel/error.hpp"
#include "tests/test_comm.hpp"

namespace mkt {

// The TP op tests run on 2 or more ranks: one node of 2 GPUs (1x2), two
// nodes of one (2x1, MK_RANKS_PER_NODE=1: the network path, emu on one
// host), or 2 nodes of 2 (2x2, 4 ranks; on 2 GPUs with MK_SHARE_GPUS=1).
inline bool tp_ranks() { return mk::test::comm().world() >= 2; }
constexpr const char* kNeedsRanks = "needs 2 or more ranks (1x2 over NVLink, 2x1 over the network, 2x2)";

// Rows of a test shape given for 2 ranks, scaled to the world size (every
// rank keeps the same share).
inline int64_t rows_for_world(int64_t m_for_two) { return m_for_two * mk::test::comm().world() / 2; }

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

// Captures what `record` enqueues on `stream` into an executable graph.
class CapturedGraph {
 public:
  CapturedGraph(cudaStream_t stream, const std::function<void()>& record) {
    auto& c = mk::test::comm();
    c.check(static_cast<int>(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal)), "begin capture");
    record();
    c.check(static_cast<int>(cudaStreamEndCapture(stream, &graph_)), "end capture");
    c.check(static_cast<int>(cudaGraphInstantiate(&exec_, graph_, 0)), "instantiate graph");
  }
  ~CapturedGraph() {
    cudaGraphExecDestroy(exec_);
    cudaGraphDestroy(graph_);
  }
  void launch(cudaStream_t stream) {
    mk::test::comm().check(static_cast<int>(cudaGraphLaunch(exec_, stream)), "graph launch");
  }

 private:
  cudaGraph_t graph_{};
  cudaGraphExec_t exec_{};
};

}  // namespace mkt
