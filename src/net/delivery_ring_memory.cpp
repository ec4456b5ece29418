// mkernel: see delivery_ring_memory.hpp.
#include "src/net/delivery_ring_memory.hpp"

#include <cuda_runtime_api.h>

#include <cstring>

#include "mkernel/error.hpp"
#include "src/runtime/device_health.hpp"

namespace mk::net {

DeliveryRingMemory::DeliveryRingMemory(int cuda_device, uint32_t slots) {
  if (slots == 0 || (slots & (slots - 1)) != 0) fail("delivery ring: ", slots, " slots is not a power of two");
  try {
    allocate(cuda_device, slots);
  } catch (...) {
    release();  // the destructor does not run for a constructor that throws
    throw;
  }
}

void DeliveryRingMemory::allocate(int cuda_device, uint32_t slots) {
  const DeviceScope on(cuda_device);  // (the caller's current device restored)
  const size_t host_bytes = size_t(slots) * sizeof(DeliverySlot) + size_t(slots) * 8 + 64;
  MK_CUDA_CHECK(cudaHostAlloc(&host_, host_bytes, cudaHostAllocMapped | cudaHostAllocPortable));
  std::memset(host_, 0, host_bytes);
  ring_.slots = static_cast<DeliverySlot*>(host_);
  ring_.done = reinterpret_cast<uint64_t*>(ring_.slots + slots);
  ring_.claimed = ring_.done + slots;
  // The GPU addresses pinned host memory by the same pointer (UVA); checked.
  void* dev = nullptr;
  MK_CUDA_CHECK(cudaHostGetDevicePointer(&dev, host_, 0));
  if (dev != host_) fail("delivery ring: mapped host memory has a different device address (no unified addressing?)");
  void* words = nullptr;  // the claim counter and the busy counter
  MK_CUDA_CHECK(cudaMalloc(&words, 16));
  ring_.claim = static_cast<uint64_t*>(words);
  ring_.busy = ring_.claim + 1;
  cudaStream_t s = nullptr;
  MK_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaError_t zeroed = cudaMemsetAsync(words, 0, 16, s);
  if (zeroed == cudaSuccess) zeroed = cudaStreamSynchronize(s);
  teardown_call(cudaStreamDestroy(s), "the delivery ring's setup stream");
  MK_CUDA_CHECK(zeroed);
  ring_.size = slots;
}

void DeliveryRingMemory::release() noexcept {
  if (ring_.claim) teardown_call(cudaFree(ring_.claim), "the delivery ring's claim words");
  if (host_) teardown_call(cudaFreeHost(host_), "the delivery ring");
  ring_ = DeliveryRing{};
  host_ = nullptr;
}

}  // namespace mk::net
