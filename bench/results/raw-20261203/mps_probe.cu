// Co-residency probe (2026-12-03): does a grid of one CTA per reported SM
// run all at once? Each CTA (all of the shared memory: one per SM) arrives
// on a counter and spins until every CTA arrived or 1 s passed; the host
// prints how many were there at once and on how many distinct SMs.
// Built here: nvcc -O2 -gencode=arch=compute_90a,code=sm_90a mps_probe.cu -o mps_probe
// Run: mps_probe <iterations> <label>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <vector>

__global__ void probe(unsigned* arrived, unsigned* at_once, int* smid, unsigned long long limit_ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  if (threadIdx.x == 0) {
    unsigned id;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    smid[blockIdx.x] = int(id);
    atomicAdd(arrived, 1u);
    for (;;) {
      const unsigned a = *static_cast<volatile unsigned*>(arrived);
      atomicMax(at_once, a);
      if (a >= gridDim.x) break;
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
      if (t - t0 > limit_ns) break;
      __nanosleep(1000);
    }
  }
}

int main(int argc, char** argv) {
  const int iters = argc > 1 ? atoi(argv[1]) : 10;
  const char* label = argc > 2 ? argv[2] : "";
  int sms = 0, optin = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0);
  cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, optin);
  unsigned *arrived, *at_once;
  int* smid;
  cudaMalloc(&arrived, 4);
  cudaMalloc(&at_once, 4);
  cudaMalloc(&smid, sms * 4);
  for (int i = 0; i < iters; ++i) {
    cudaMemset(arrived, 0, 4);
    cudaMemset(at_once, 0, 4);
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    cudaEventRecord(a);
    probe<<<sms, 32, optin>>>(arrived, at_once, smid, 1000000000ull);
    cudaEventRecord(b);
    cudaError_t e = cudaDeviceSynchronize();
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    unsigned got = 0;
    cudaMemcpy(&got, at_once, 4, cudaMemcpyDeviceToHost);
    std::vector<int> ids(sms);
    cudaMemcpy(ids.data(), smid, sms * 4, cudaMemcpyDeviceToHost);
    std::set<int> distinct(ids.begin(), ids.end());
    printf("%s iter %d: reported SMs %d, CTAs at once %u, distinct SMs %zu, %.1f ms, %s\n", label, i, sms, got,
           distinct.size(), ms, cudaGetErrorString(e));
  }
  return 0;
}
