// The header-only device API, installed in include/mkernel/device/: a kernel that waits on a signal word and
// publishes another (compiled and linked, not launched: the test machine has no GPU).
#include <mkernel/device/signals.cuh>

__global__ void consumer_relay(mk::DeviceCtx ctx, uint64_t* in, uint64_t* out, uint64_t expected) {
  if (threadIdx.x == 0) {
    const uint64_t v = mk::dev::wait_ge(ctx, in, expected, mk::dev::WaitSite{0, -1, -1});
    mk::dev::signal_set(out, v);
  }
}

void* consumer_kernel() { return reinterpret_cast<void*>(&consumer_relay); }
