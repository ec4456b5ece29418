// softverbs: registered GPU memory. A memory region whose address is device
// memory (cuPointerGetAttribute says so) is read and written by the NIC's
// rounds through the CUDA driver: copies on a non-blocking stream of the
// calling thread, each waited for, so that a write's data lands before the
// signal written after it, as a NIC's PCIe writes do. A fetch-and-add on
// device memory is a read and a write: atomic against the other NIC
// operations (all under the NIC's lock), not against the GPU's own stores,
// which mkernel never makes to a word a remote peer adds to. The driver is
// dlopened: on a machine without one (CI) every address is host memory.
// This lets a GPU machine without an RDMA NIC run mkernel's ops over the
// verbs transport (tools/gpu_test.sh verbs).
#include <cuda.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <utility>

#include "softverbs.hpp"

namespace softverbs {
namespace {

struct Driver {
  decltype(&cuPointerGetAttribute) pointer_attr = nullptr;
  decltype(&cuCtxSetCurrent) set_current = nullptr;
  decltype(&cuStreamCreate) stream_create = nullptr;
  decltype(&cuMemcpyDtoHAsync_v2) dtoh = nullptr;
  decltype(&cuMemcpyHtoDAsync_v2) htod = nullptr;
  decltype(&cuStreamSynchronize) sync = nullptr;
  decltype(&cuDeviceGet) device_get = nullptr;
  decltype(&cuDevicePrimaryCtxRetain) primary_ctx = nullptr;
  decltype(&cuCtxGetCurrent) get_current = nullptr;
  decltype(&cuThreadExchangeStreamCaptureMode) capture_mode = nullptr;
  decltype(&cuMemGetAddressRange_v2) address_range = nullptr;  // (optional)
  bool ok = false;
};

const Driver& driver() {
  static const Driver d = [] {
    Driver x;
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return x;
    x.pointer_attr = reinterpret_cast<decltype(x.pointer_attr)>(dlsym(lib, "cuPointerGetAttribute"));
    x.set_current = reinterpret_cast<decltype(x.set_current)>(dlsym(lib, "cuCtxSetCurrent"));
    x.stream_create = reinterpret_cast<decltype(x.stream_create)>(dlsym(lib, "cuStreamCreate"));
    x.dtoh = reinterpret_cast<decltype(x.dtoh)>(dlsym(lib, "cuMemcpyDtoHAsync_v2"));
    x.htod = reinterpret_cast<decltype(x.htod)>(dlsym(lib, "cuMemcpyHtoDAsync_v2"));
    x.sync = reinterpret_cast<decltype(x.sync)>(dlsym(lib, "cuStreamSynchronize"));
    x.device_get = reinterpret_cast<decltype(x.device_get)>(dlsym(lib, "cuDeviceGet"));
    x.primary_ctx = reinterpret_cast<decltype(x.primary_ctx)>(dlsym(lib, "cuDevicePrimaryCtxRetain"));
    x.get_current = reinterpret_cast<decltype(x.get_current)>(dlsym(lib, "cuCtxGetCurrent"));
    x.capture_mode = reinterpret_cast<decltype(x.capture_mode)>(dlsym(lib, "cuThreadExchangeStreamCaptureMode"));
    x.address_range = reinterpret_cast<decltype(x.address_range)>(dlsym(lib, "cuMemGetAddressRange_v2"));
    x.ok = x.pointer_attr && x.set_current && x.stream_create && x.dtoh && x.htod && x.sync && x.device_get &&
           x.primary_ctx && x.get_current && x.capture_mode;
    return x;
  }();
  return d;
}

// A failed copy ends the process, as a NIC's DMA fault would end the job,
// except while the process exits (the driver already gone: the copy is
// dropped; its peers are ending too).
bool failed(const char* what, CUresult r) {
  if (r == CUDA_SUCCESS) return false;
  if (r == CUDA_ERROR_DEINITIALIZED || r == CUDA_ERROR_CONTEXT_IS_DESTROYED) return true;
  std::fprintf(stderr, "softverbs: %s failed (CUresult %d)\n", what, static_cast<int>(r));
  std::abort();
}

// Runs `copy` on this thread's stream in `ctx`, made current for it (the
// thread's own context is restored after). The thread's capture mode is
// relaxed once, as the proxy's is (src/net/proxy.cpp): a stream capture in
// global mode on another thread must not refuse the NIC's copies.
template <class Copy>
void on_stream(void* ctx, Copy&& copy) {
  thread_local std::map<void*, CUstream> streams;
  thread_local bool relaxed = false;
  const Driver& d = driver();
  if (!relaxed) {
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    d.capture_mode(&m);
    relaxed = true;
  }
  CUcontext prev = nullptr;
  d.get_current(&prev);
  if (failed("cuCtxSetCurrent", d.set_current(static_cast<CUcontext>(ctx)))) return;
  auto it = streams.find(ctx);
  if (it == streams.end()) {
    CUstream s = nullptr;
    if (failed("cuStreamCreate", d.stream_create(&s, CU_STREAM_NON_BLOCKING))) return;
    it = streams.emplace(ctx, s).first;
  }
  if (!failed("a copy", copy(it->second))) failed("cuStreamSynchronize", d.sync(it->second));
  if (prev != ctx) d.set_current(prev);
}

}  // namespace

void* device_context(const void* addr) {
  const Driver& d = driver();
  if (!d.ok || !addr) return nullptr;
  unsigned int type = 0;
  const auto p = reinterpret_cast<CUdeviceptr>(addr);
  if (d.pointer_attr(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p) != CUDA_SUCCESS || type != CU_MEMORYTYPE_DEVICE)
    return nullptr;  // (an address the driver does not know is host memory)
  // The device's primary context (the CUDA runtime's, which mkernel uses): a
  // pointer into a VMM mapping (mkernel's symmetric heap) names no context.
  int ordinal = -1;
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  if (d.pointer_attr(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p) != CUDA_SUCCESS ||
      d.device_get(&dev, ordinal) != CUDA_SUCCESS || d.primary_ctx(&ctx, dev) != CUDA_SUCCESS) {
    std::fprintf(stderr, "softverbs: device memory at %p: its device's context cannot be found\n", addr);
    std::abort();  // (as host memory, a NIC's copy would fault)
  }
  return ctx;  // (retained for the process's life)
}

bool device_allocation(const void* addr, uint64_t* base, size_t* size) {
  const Driver& d = driver();
  if (!d.ok || !d.address_range || !device_context(addr)) return false;
  CUdeviceptr b = 0;
  if (d.address_range(&b, size, reinterpret_cast<CUdeviceptr>(addr)) != CUDA_SUCCESS) return false;
  *base = static_cast<uint64_t>(b);
  return true;
}

void device_read(void* ctx, void* dst, uint64_t src, size_t n) {
  on_stream(ctx, [&](CUstream s) { return driver().dtoh(dst, static_cast<CUdeviceptr>(src), n, s); });
}

void device_write(void* ctx, uint64_t dst, const void* src, size_t n) {
  on_stream(ctx, [&](CUstream s) { return driver().htod(static_cast<CUdeviceptr>(dst), src, n, s); });
}

}  // namespace softverbs
