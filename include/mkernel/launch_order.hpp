// mkernel: orders a plan's launches on the device whatever streams they come
// on. A plan's kernels take their epoch from a counter on the device that the
// previous launch advances as its last CTA ends (device/epoch.cuh), and reuse
// the plan's buffers and signal words, so two launches of one plan must never
// run at once. On one stream they cannot. A launch on another stream than the
// plan's previous one first waits, on the device, for that launch: an event
// recorded after every launch (cudaEventRecord, ~1 us of host time) and a
// cudaStreamWaitEvent when the stream changes. The host never waits.
//
// Stream captures are left to the user: a launch captured into a CUDA graph
// neither waits for the previous launch nor is waited for by the next one
// (an event recorded in a capture cannot be waited on outside it; the next
// eager launch waits for the last eager one), so a graph's replays must be
// ordered with the plan's other launches by the stream the graph is launched
// on, as with any graph that uses a buffer.
#pragma once

#include <cuda_runtime_api.h>

namespace mk {

class LaunchOrder {
 public:
  explicit LaunchOrder(const char* who) : who_(who) {}
  ~LaunchOrder();
  LaunchOrder(const LaunchOrder&) = delete;
  LaunchOrder& operator=(const LaunchOrder&) = delete;

  // Before a launch on `stream`: makes it wait for the previous launch when
  // that was on another stream (and not captured).
  void before(cudaStream_t stream);
  // After a launch on `stream` was issued.
  void after(cudaStream_t stream);

 private:
  const char* who_;
  cudaEvent_t event_ = nullptr;   // recorded after the last launch outside a capture (eager)
  cudaStream_t stream_ = nullptr; // that launch's stream
  bool recorded_ = false;         // event_ stands for the plan's last launch
};

}  // namespace mk
