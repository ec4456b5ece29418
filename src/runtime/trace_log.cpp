// mkernel: TraceLog (include/mkernel/trace_log.hpp).
#include "mkernel/trace_log.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>

#include "mkernel/error.hpp"
#include "mkernel/knobs.hpp"
#include "src/runtime/device_health.hpp"
#include "src/runtime/reported_wait.hpp"

namespace mk {

TraceLog::~TraceLog() {
  if (buf_) teardown_call(cudaFree(buf_), "a trace buffer");
}

void TraceLog::enable(int ctas, int events_per_cta, bool graphs_alive) {
  if (events_per_cta < 0 || events_per_cta > (1 << 20))
    fail(who_, "::enable_trace: events_per_cta must be in [0, 2^20] (got ", events_per_cta, ")");
  if (graphs_alive)
    fail(who_, "::enable_trace: a launch of this plan was captured in a CUDA graph that still exists, whose "
               "replays write the current trace buffer; enable tracing before capturing, or after destroying "
               "that graph and its executable graphs (or use a new plan)");
  if (ctas < 0) fail(who_, "::enable_trace: ", ctas, " CTAs");
  if (buf_) MK_CUDA_CHECK(cudaFree(buf_));
  buf_ = nullptr;
  ctas_ = ctas;
  cap_ = events_per_cta;
  if (events_per_cta == 0 || ctas == 0) return;
  MK_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&buf_), words() * sizeof(uint64_t)));
  MK_CUDA_CHECK(cudaMemset(buf_, 0, words() * sizeof(uint64_t)));
  // (cudaMemset runs on the legacy stream, which a non-blocking stream's next traced call does not wait for)
  MK_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
}

void TraceLog::clear(void* stream) const {
  if (buf_) MK_CUDA_CHECK(cudaMemsetAsync(buf_, 0, words() * sizeof(uint64_t), static_cast<cudaStream_t>(stream)));
}

std::vector<TraceEvent> TraceLog::read() const {
  std::vector<TraceEvent> out;
  if (!buf_) return out;
  const size_t per = 1 + 2 * size_t(cap_);
  std::vector<uint64_t> h(words());
  MK_DEVICE_SYNC("reading a plan's device trace");
  MK_CUDA_CHECK(cudaMemcpy(h.data(), buf_, h.size() * sizeof(uint64_t), cudaMemcpyDeviceToHost));
  uint64_t dropped = 0;
  int full = 0;
  for (int c = 0; c < ctas_; ++c) {
    const uint64_t* mine = h.data() + size_t(c) * per;
    const uint64_t n = std::min<uint64_t>(mine[0], uint64_t(cap_));
    if (mine[0] > n) dropped += mine[0] - n, ++full;
    for (uint64_t i = 0; i < n; ++i)
      out.push_back(TraceEvent{c, static_cast<uint32_t>(mine[2 + 2 * i] >> 32),
                               static_cast<uint32_t>(mine[2 + 2 * i] & 0xffffffffu), mine[1 + 2 * i]});
  }
  // The device counts every event and keeps the first events_per_cta of each CTA: a cut trace is said.
  if (dropped)
    log(LogLevel::Warn, cat(who_, "::read_trace: ", dropped, " events past events_per_cta (", cap_,
                            ") were dropped on ", full, " of ", ctas_, " CTAs (the first ", cap_,
                            " of each are kept); enable_trace with more"));
  return out;
}

}  // namespace mk
