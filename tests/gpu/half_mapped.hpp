// Device memory whose mapping ends short of a buffer's length, for the raw-pointer checks' tests
// (test_tp_single_rank.cu, test_raw_pointers.cu).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstddef>

namespace mkt {

// Device memory whose mapping ends early: 2 granules of address space, the first one mapped (driver VMM, through
// the runtime's entry points as the library fetches them); `end` is the first unmapped byte.
struct HalfMapped {
  CUdeviceptr va = 0;
  size_t gran = 0;
  CUmemGenericAllocationHandle h = 0;
  char* end = nullptr;
  template <typename F>
  static F entry(const char* name) {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    EXPECT_EQ(cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q), cudaSuccess) << name;
    return reinterpret_cast<F>(p);
  }
  HalfMapped() {
    int dev = 0;
    cudaGetDevice(&dev);
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, dev};
    entry<decltype(&cuMemGetAllocationGranularity)>("cuMemGetAllocationGranularity")(
        &gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    EXPECT_EQ(entry<decltype(&cuMemAddressReserve)>("cuMemAddressReserve")(&va, 2 * gran, gran, 0, 0), CUDA_SUCCESS);
    EXPECT_EQ(entry<decltype(&cuMemCreate)>("cuMemCreate")(&h, gran, &prop, 0), CUDA_SUCCESS);
    EXPECT_EQ(entry<decltype(&cuMemMap)>("cuMemMap")(va, gran, 0, h, 0), CUDA_SUCCESS);
    CUmemAccessDesc acc{{CU_MEM_LOCATION_TYPE_DEVICE, dev}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    EXPECT_EQ(entry<decltype(&cuMemSetAccess)>("cuMemSetAccess")(va, gran, &acc, 1), CUDA_SUCCESS);
    end = reinterpret_cast<char*>(va) + gran;
  }
  ~HalfMapped() {
    entry<decltype(&cuMemUnmap)>("cuMemUnmap")(va, gran);
    entry<decltype(&cuMemRelease)>("cuMemRelease")(h);
    entry<decltype(&cuMemAddressFree)>("cuMemAddressFree")(va, 2 * gran);
  }
};

}  // namespace mkt
