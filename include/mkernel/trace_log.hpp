// mkernel: a plan's optional device event log (the host side of
// device/trace.hpp): a device buffer of per-CTA events that a plan's kernel
// fills when tracing is on, read back after the call. Diagnostics only: off
// by default, and then the kernels pay one predictable branch per event.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mk {

struct TraceEvent {
  int32_t cta;    // blockIdx.x
  uint32_t kind;  // dev::TraceKind (device/trace.hpp)
  uint32_t arg;
  uint64_t t_ns;  // the GPU's globaltimer
};

class TraceLog {
 public:
  explicit TraceLog(std::string who) : who_(std::move(who)) {}
  ~TraceLog();
  TraceLog(const TraceLog&) = delete;
  TraceLog& operator=(const TraceLog&) = delete;

  // Room for events_per_cta events of each of ctas CTAs (0: off; at most
  // 2^20 per CTA). Refused while a CUDA graph holding the plan's launches
  // exists (`graphs_alive`, GraphUses::alive): its replays keep writing the
  // buffer this would free.
  void enable(int ctas, int events_per_cta, bool graphs_alive);
  // Zeroes the log on `stream` (before a traced launch: its events only).
  void clear(void* stream) const;
  // Waits for the device; the events of the last traced launch, in CTA order.
  std::vector<TraceEvent> read() const;

  uint64_t* base() const { return buf_; }  // dev::TraceBuf::base (nullptr: off)
  int cap() const { return cap_; }

 private:
  size_t words() const { return size_t(ctas_) * (1 + 2 * size_t(cap_)); }
  std::string who_;
  uint64_t* buf_ = nullptr;
  int ctas_ = 0, cap_ = 0;
};

}  // namespace mk
