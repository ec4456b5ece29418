#include "src/runtime/device_pointer.hpp"

#include <mutex>
#include <string>

#include "mkernel/error.hpp"

namespace mk {

namespace {
// Pure queries, refused (cudaErrorStreamCaptureUnsupported) while a capture in global mode is open (the caller's
// stream's, or another thread's): this thread's capture mode is relaxed around them, and restored.
struct RelaxedCapture {
  cudaStreamCaptureMode before = cudaStreamCaptureModeRelaxed;
  RelaxedCapture() { cudaThreadExchangeStreamCaptureMode(&before); }
  ~RelaxedCapture() { cudaThreadExchangeStreamCaptureMode(&before); }
  RelaxedCapture(const RelaxedCapture&) = delete;
  RelaxedCapture& operator=(const RelaxedCapture&) = delete;
};

// "memory of CUDA device d", "managed memory", "host memory", ...: what p is, from the runtime's pointer
// attributes; *usable when a kernel of `device` may take it.
std::string kind_of(const void* p, bool* usable, int device) {
  cudaPointerAttributes a{};
  const cudaError_t e = cudaPointerGetAttributes(&a, p);
  if (e != cudaSuccess) {
    cudaGetLastError();  // (not left pending for the caller's next check)
    *usable = false;
    return cat("an address the CUDA runtime cannot describe (", cudaGetErrorString(e), ")");
  }
  switch (a.type) {
    case cudaMemoryTypeDevice:
      *usable = a.device == device;
      return cat("memory of CUDA device ", a.device);
    case cudaMemoryTypeManaged:
      *usable = true;
      return "managed memory";
    case cudaMemoryTypeHost:
      *usable = false;
      return "host memory (page-locked)";
    default:
      *usable = false;
      return "host memory, or an address no CUDA allocation covers";
  }
}

// What passed lately (the checks' memo: a loop passes the same buffers and streams); a process-wide ring.
struct Seen {
  const void* p = nullptr;
  size_t bytes = 0;
  int device = -1;
};
std::mutex seen_mu;
Seen seen[64];
unsigned seen_next = 0;

bool seen_lately(const void* p, size_t bytes, int device) {
  std::lock_guard<std::mutex> g(seen_mu);
  for (const Seen& s : seen)
    if (s.p == p && s.bytes == bytes && s.device == device) return true;
  return false;
}

void remember(const void* p, size_t bytes, int device) {
  std::lock_guard<std::mutex> g(seen_mu);
  seen[seen_next++ % 64] = Seen{p, bytes, device};
}
}  // namespace

void check_device_pointer(const char* op, const char* what, const void* p, size_t bytes, int device) {
  if (!p || bytes == 0 || seen_lately(p, bytes, device)) return;
  const RelaxedCapture relaxed;
  const char* last = static_cast<const char*>(p) + (bytes - 1);
  for (const void* q : {p, static_cast<const void*>(last)}) {
    bool usable = false;
    const std::string kind = kind_of(q, &usable, device);
    if (!usable)
      fail(op, ": ", what, " (", p, ", ", bytes, " bytes) must be device memory of the call's GPU (CUDA device ",
           device, "), but ", q == p ? "it starts in " : "its last byte lies in ", kind,
           q == p ? "" : ": the buffer is shorter than the call's shape needs");
  }
  remember(p, bytes, device);
}

void check_stream_device(const char* op, cudaStream_t stream, int device) {
  if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread) return;
  if (seen_lately(stream, 0, device)) return;  // (bytes 0: a stream's entry; every call asked otherwise)
  int dev = -1;
  cudaError_t e;
  {
    const RelaxedCapture relaxed;
    // cudaStreamGetDevice on a capturing stream fails even in relaxed mode, and its failure invalidates the
    // capture (session 52): a stream being captured is left to the launch, which fails on a wrong device as well.
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &st) != cudaSuccess) {
      cudaGetLastError();
      return;
    }
    if (st != cudaStreamCaptureStatusNone) return;
    e = cudaStreamGetDevice(stream, &dev);
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    fail(op, ": the stream ", static_cast<const void*>(stream), " is not a valid CUDA stream (",
         cudaGetErrorString(e), ")");
  }
  if (dev != device)
    fail(op, ": the stream belongs to CUDA device ", dev, ", the call's GPU is device ", device,
         ": pass a stream made on device ", device);
  remember(stream, 0, device);
}

}  // namespace mk
