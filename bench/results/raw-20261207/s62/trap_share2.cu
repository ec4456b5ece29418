// Session 62, second step of trap_share.cu: the same two processes on one GPU, now sharing one word of A's
// memory as mkernel's ranks share their abort words: B spins <b_ms>, writes the word (atomicCAS_system), then
// traps or returns; A spins until it sees the word (at most 5 s), then traps or returns. The word is shared by
// CUDA VMM (cuMemCreate with a POSIX fd handle, which B takes with pidfd_getfd: mkernel's default inside a node),
// by cudaIpcMemHandle, or not at all (B writes a word of its own).
// Build: nvcc -O2 -gencode=arch=compute_90a,code=sm_90a -o trap_share2 trap_share2.cu -lcuda
// Run:   trap_share2 A <vmm|ipc|none> <trap|return> <dir>   and
//        trap_share2 B <vmm|ipc|none> <trap|return> <dir> <b_ms> [flags: h (host-mapped write), n (noinline trap)]
#include <cuda.h>
#include <cuda_runtime.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#define CK(x) do { auto r_ = (x); if (r_ != 0) { std::printf("%s failed: %d\n", #x, (int)r_); _exit(4); } } while (0)

__device__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
// As mkernel's dev::fail_wait: a called function (a stack frame) that prints, then traps.
__device__ __noinline__ void fail_noinline(unsigned long long ms) {
  printf("device B: wrote the word after %llu ms, trapping from a called function\n", ms);
  __trap();
}
// flags: 'h' writes a host-mapped word first (as mkernel's diag record), 'n' traps in fail_noinline.
__global__ void b_kernel(unsigned* word, unsigned long long ns, int trap, volatile unsigned* host, int noinl) {
  const unsigned long long t0 = now_ns();
  while (now_ns() - t0 < ns) {}
  if (host) *host = 2u;
  atomicCAS_system(word, 0u, 2u);
  __threadfence_system();
  if (trap && noinl) fail_noinline(ns / 1000000);
  if (trap) { printf("device B: wrote the word, trapping\n"); __trap(); }
}
__global__ void a_kernel(const volatile unsigned* word, int trap) {
  const unsigned long long t0 = now_ns();
  while (*word == 0u && now_ns() - t0 < 5000000000ull) {}
  if (trap) { printf("device A: saw %u, trapping\n", *word); __trap(); }
}

static std::string g_name;
static std::chrono::steady_clock::time_point g_t0;
static void on_alarm(int) {
  char buf[160];
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - g_t0).count();
  const int n = std::snprintf(buf, sizeof buf, "%s: STILL in cudaDeviceSynchronize after %.1f s; exiting\n",
                              g_name.c_str(), s);
  (void)!write(1, buf, n);
  _exit(3);
}

int main(int argc, char** argv) {
  if (argc < 5) return 2;
  const bool is_a = argv[1][0] == 'A';
  const std::string mode = argv[2], dir = argv[4];
  const int trap = !std::strcmp(argv[3], "trap");
  g_name = std::string(argv[1]) + "(" + mode + "," + argv[3] + ")";
  CK(cudaFree(nullptr));
  unsigned* word = nullptr;
  CUmemGenericAllocationHandle h{};
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  size_t gran = 0;
  CK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  auto map = [&](CUmemGenericAllocationHandle hh) {
    CUdeviceptr p = 0;
    CK(cuMemAddressReserve(&p, gran, 0, 0, 0));
    CK(cuMemMap(p, gran, 0, hh, 0));
    CUmemAccessDesc ad{};
    ad.location = prop.location;
    ad.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CK(cuMemSetAccess(p, gran, &ad, 1));
    return reinterpret_cast<unsigned*>(p);
  };
  if (is_a || mode == "none") {
    if (mode == "vmm") {
      CK(cuMemCreate(&h, gran, &prop, 0));
      word = map(h);
      int fd = -1;
      CK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
      std::ofstream(dir + "/share.tmp") << getpid() << " " << fd << "\n";
    } else {
      CK(cudaMalloc(&word, 4096));
      if (mode == "ipc") {
        cudaIpcMemHandle_t ih;
        CK(cudaIpcGetMemHandle(&ih, word));
        std::ofstream(dir + "/share.tmp", std::ios::binary).write(reinterpret_cast<char*>(&ih), sizeof ih);
      }
    }
    CK(cudaMemset(word, 0, 4));
    CK(cudaDeviceSynchronize());
    if (is_a && mode != "none") std::rename((dir + "/share.tmp").c_str(), (dir + "/share").c_str());
  } else {
    for (int i = 0; i < 500 && access((dir + "/share").c_str(), F_OK) != 0; ++i) usleep(10000);
    if (mode == "vmm") {
      int pid = 0, fd = 0;
      std::ifstream(dir + "/share") >> pid >> fd;
      const int pfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
      const int myfd = static_cast<int>(syscall(SYS_pidfd_getfd, pfd, fd, 0));
      if (pfd < 0 || myfd < 0) { std::printf("pidfd failed\n"); _exit(4); }
      CK(cuMemImportFromShareableHandle(&h, reinterpret_cast<void*>(static_cast<uintptr_t>(myfd)),
                                        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
      word = map(h);
    } else {
      cudaIpcMemHandle_t ih;
      std::ifstream(dir + "/share", std::ios::binary).read(reinterpret_cast<char*>(&ih), sizeof ih);
      CK(cudaIpcOpenMemHandle(reinterpret_cast<void**>(&word), ih, cudaIpcMemLazyEnablePeerAccess));
    }
  }
  const std::string flags = (!is_a && argc > 6) ? argv[6] : "";
  const int noinl = flags.find('n') != std::string::npos;
  unsigned* host = nullptr;
  if (flags.find('h') != std::string::npos) {
    void* hp = nullptr;
    CK(cudaHostAlloc(&hp, 4096, cudaHostAllocMapped | cudaHostAllocPortable));
    CK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&host), hp, 0));
  }
  if (!flags.empty()) g_name += "[" + flags + "]";
  std::signal(SIGALRM, on_alarm);
  usleep(300000);
  g_t0 = std::chrono::steady_clock::now();
  alarm(15);
  if (is_a) a_kernel<<<1, 1>>>(word, trap);
  else b_kernel<<<1, 1>>>(word, std::strtoull(argv[5], nullptr, 10) * 1000000ull, trap, host, noinl);
  const cudaError_t e = cudaDeviceSynchronize();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - g_t0).count();
  std::printf("%s: synchronize returned after %.2f s: %s\n", g_name.c_str(), s, cudaGetErrorString(e));
  std::fflush(stdout);
  usleep(1500000);  // (A's memory stays until B is done)
  return 0;
}
