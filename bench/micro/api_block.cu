// api_block: which CUDA calls a second host thread can still make while the
// first thread waits inside a copy of a running kernel's result into
// pageable host memory. Why: on emulated nodes (`emu`) the host proxy copies
// the data a kernel waits for with cudaMemcpyBatchAsync; a user's `out.cpu()`
// (pageable, no synchronize first) issued while that kernel runs blocked the
// proxy's call until the kernel timed out (tools/emu_pageable_probe.py,
// bench/results/emu-pageable-20261201.md). Which of the proxy's ways to move
// data and signals are blocked decides how the proxy can avoid it.
//
// One GPU, one process. Per case: a one-thread kernel spins (bounded, 1 s)
// on a device word; the main thread then enters the "main" step; 50 ms later
// a second thread makes the "action" call on its own non-blocking stream,
// which writes the word the kernel waits for. The table gives how long the
// action's call took, whether the kernel was released by it (or timed out),
// and how long the main step took. Also: the kernel on a non-blocking stream
// that the legacy stream joins through an event (what a library could do
// with the user's stream), and the calls made from a second context of the
// same device (whether the lock is per context; kernels of two contexts
// time-slice, so a kernel there shows the slice's latency).
#include <cuda.h>
#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "bench/bench.hpp"
#include "mkernel/error.hpp"
#include "src/runtime/cuda_driver.hpp"

namespace mkb {

namespace {

constexpr uint64_t kSpinNs = 1000000000ull;  // the kernel's bound

__device__ __forceinline__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

// res[0]: 1 released, 2 timed out; res[1]: ns from start to release.
__global__ void spin_on(const volatile uint32_t* word, uint32_t want, uint64_t* res) {
  const uint64_t t0 = now_ns();
  while (*word != want) {
    if (now_ns() - t0 > kSpinNs) {
      res[0] = 2;
      res[1] = now_ns() - t0;
      return;
    }
  }
  res[0] = 1;
  res[1] = now_ns() - t0;
}

__global__ void set_word(uint32_t* word, uint32_t v) { *reinterpret_cast<volatile uint32_t*>(word) = v; }

// Every CTA's first thread waits until *word >= want (bounded, 2 s): a kernel holding every SM, as a
// persistent fused kernel does while it waits on the network.
__global__ void spin_all(const volatile uint32_t* word, uint32_t want, uint64_t* res) {
  if (threadIdx.x != 0) return;
  const uint64_t t0 = now_ns();
  while (*word < want) {
    if (now_ns() - t0 > 2 * kSpinNs) {
      if (blockIdx.x == 0) res[0] = 2;
      return;
    }
  }
  if (blockIdx.x == 0) res[0] = 1;
}

enum class Main { Pageable, PageableNonBlocking, Pinned, SyncFirst, EventJoin };
enum class Action { Memcpy4, Memcpy128k, MemcpyBatch4, MemcpyBatch128k, MemOp, Kernel, StreamQuery, Ctx2Memcpy,
                    Ctx2Kernel, Ctx2MemOp };

const char* name(Main m) {
  switch (m) {
    case Main::Pageable: return "pageable D2H copy (legacy default stream) + sync";
    case Main::PageableNonBlocking: return "pageable D2H copy (non-blocking stream) + sync";
    case Main::Pinned: return "pinned D2H copy + sync";
    case Main::SyncFirst: return "stream sync, then pageable D2H copy";
    case Main::EventJoin: return "kernel on a non-blocking stream, legacy stream waits its event, pageable D2H + sync";
  }
  return "?";
}
const char* name(Action a) {
  switch (a) {
    case Action::Memcpy4: return "cudaMemcpyAsync D2D 4 B";
    case Action::Memcpy128k: return "cudaMemcpyAsync D2D 128 KiB";
    case Action::MemcpyBatch4: return "cudaMemcpyBatchAsync D2D 4 B";
    case Action::MemcpyBatch128k: return "cudaMemcpyBatchAsync D2D 128 KiB";
    case Action::MemOp: return "cuStreamBatchMemOp WRITE_VALUE_32";
    case Action::Kernel: return "kernel launch (loaded before)";
    case Action::StreamQuery: return "cudaStreamQuery (then a kernel launch releases)";
    case Action::Ctx2Memcpy: return "second context: cudaMemcpyAsync D2D 128 KiB";
    case Action::Ctx2Kernel: return "second context: kernel launch (loaded before)";
    case Action::Ctx2MemOp: return "second context: cuStreamBatchMemOp WRITE_VALUE_32";
  }
  return "?";
}

// Driver calls this probe needs beyond mk::drv::api() (cuCtxCreate v4 and friends), by entry point.
template <class F>
F entry(const char* sym) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q{};
  if (cudaGetDriverEntryPointByVersion(sym, &p, 13000, cudaEnableDefault, &q) != cudaSuccess || !p)
    mk::fail("api_block: no driver entry point ", sym);
  return reinterpret_cast<F>(p);
}

// One WRITE_VALUE_32 stream memory op (the call the emu proxy uses for inline data and signal sets).
CUresult write_word(cudaStream_t st, uint32_t* word, uint32_t v) {
  CUstreamBatchMemOpParams p{};
  p.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
  p.writeValue.address = reinterpret_cast<CUdeviceptr>(word);
  p.writeValue.value = v;
  return mk::drv::api().cuStreamBatchMemOp(reinterpret_cast<CUstream>(st), 1, &p, 0);
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

void bench_api_block(BenchContext& bc) {
  Table t{"CUDA calls of a second thread while the first waits in a D2H copy of a running kernel's result (one GPU)",
          {"main thread", "second thread's call", "call ms", "kernel", "released after ms", "main step ms"},
          {},
          ""};
  // One rank, and the symmetric heap's CUDA VMM memory, which every context of the device can use (the
  // second-context cases need that; MK_SYMM_MODE=ipc memory belongs to the primary context).
  if (bc.comm->world() != 1 || !bc.comm->uses_vmm()) {
    t.note = "skipped: needs one rank (tools/mkrun -n 1) and VMM symmetric memory (the default MK_SYMM_MODE)";
    bc.report->add(t);
    return;
  }
  constexpr size_t kBuf = 128 << 10;
  int dev = 0;
  MK_CUDA_CHECK(cudaGetDevice(&dev));
  MK_CUDA_CHECK(cudaFree(nullptr));
  using CtxCreate = CUresult (*)(CUcontext*, CUctxCreateParams*, unsigned, CUdevice);
  using CtxSet = CUresult (*)(CUcontext);
  using CtxGet = CUresult (*)(CUcontext*);
  const auto ctx_create = entry<CtxCreate>("cuCtxCreate");
  const auto ctx_set = entry<CtxSet>("cuCtxSetCurrent");
  const auto ctx_get = entry<CtxGet>("cuCtxGetCurrent");
  CUcontext primary = nullptr, ctx2 = nullptr;
  MK_CU_CHECK(ctx_get(&primary));
  mk::SymmetricBuffer& mem = bc.comm->alloc_symmetric(2 * kBuf);
  auto* src = static_cast<uint32_t*>(mem.local);
  auto* dst = src + kBuf / sizeof(uint32_t);
  uint64_t* res = nullptr;
  MK_CUDA_CHECK(cudaMalloc(&res, 2 * sizeof(uint64_t)));
  // A second context on the same device, with its own stream and the kernel loaded.
  CUdevice cudev = 0;
  MK_CU_CHECK(mk::drv::api().cuDeviceGet(&cudev, dev));
  MK_CU_CHECK(ctx_create(&ctx2, nullptr, 0, cudev));  // makes it current
  cudaStream_t side2 = nullptr;
  MK_CUDA_CHECK(cudaStreamCreateWithFlags(&side2, cudaStreamNonBlocking));
  set_word<<<1, 1, 0, side2>>>(dst, 0);
  MK_CUDA_CHECK(cudaMemcpyAsync(dst, src, kBuf, cudaMemcpyDeviceToDevice, side2));
  MK_CUDA_CHECK(cudaStreamSynchronize(side2));
  MK_CU_CHECK(ctx_set(primary));
  std::vector<char> pageable(4096);
  void* pinned = nullptr;
  MK_CUDA_CHECK(cudaMallocHost(&pinned, 4096));
  cudaStream_t side = nullptr, main_nb = nullptr;
  MK_CUDA_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  MK_CUDA_CHECK(cudaStreamCreateWithFlags(&main_nb, cudaStreamNonBlocking));
  // Load both kernels and every copy path before the first case.
  spin_on<<<1, 1, 0, side>>>(dst, 0, res);
  set_word<<<1, 1, 0, side>>>(dst, 0);
  MK_CUDA_CHECK(cudaMemcpyAsync(dst, src, kBuf, cudaMemcpyDeviceToDevice, side));
  MK_CUDA_CHECK(cudaStreamSynchronize(side));

  uint32_t want = 100;
  cudaEvent_t ev = nullptr;
  MK_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  for (Main m : {Main::Pageable, Main::EventJoin, Main::PageableNonBlocking, Main::Pinned, Main::SyncFirst}) {
    for (Action a : {Action::Memcpy4, Action::Memcpy128k, Action::MemcpyBatch4, Action::MemcpyBatch128k,
                     Action::MemOp, Action::Kernel, Action::StreamQuery, Action::Ctx2Memcpy, Action::Ctx2Kernel,
                     Action::Ctx2MemOp}) {
      // The second-context cases only under the blocking main steps (the others pass either way).
      const bool ctx2_case = a == Action::Ctx2Memcpy || a == Action::Ctx2Kernel || a == Action::Ctx2MemOp;
      if (ctx2_case && m != Main::Pageable && m != Main::EventJoin) continue;
      ++want;
      MK_CUDA_CHECK(cudaMemset(dst, 0, kBuf));
      MK_CUDA_CHECK(cudaMemcpy(src, &want, sizeof(want), cudaMemcpyHostToDevice));
      MK_CUDA_CHECK(cudaMemset(res, 0, 2 * sizeof(uint64_t)));
      MK_CUDA_CHECK(cudaDeviceSynchronize());
      cudaStream_t ms = m == Main::PageableNonBlocking ? main_nb : cudaStream_t{0};
      if (m == Main::EventJoin) {
        spin_on<<<1, 1, 0, main_nb>>>(dst, want, res);
        MK_CUDA_CHECK(cudaEventRecord(ev, main_nb));
        MK_CUDA_CHECK(cudaStreamWaitEvent(ms, ev, 0));
      } else {
        spin_on<<<1, 1, 0, ms>>>(dst, want, res);
      }
      std::atomic<bool> go{false};
      double call_ms = 0;
      int err = 0;  // the helper's call failed (CUDA or driver error code); never thrown from the thread
      std::thread helper([&] {
        while (!go.load()) std::this_thread::yield();
        if (ctx2_case) ctx_set(ctx2);
        cudaStream_t hs = ctx2_case ? side2 : side;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        const auto t0 = std::chrono::steady_clock::now();
        const size_t bytes = (a == Action::Memcpy4 || a == Action::MemcpyBatch4) ? 4 : kBuf;
        switch (a) {
          case Action::Memcpy4:
          case Action::Memcpy128k:
            err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, side);
            break;
          case Action::MemcpyBatch4:
          case Action::MemcpyBatch128k: {
            void* d[1] = {dst};
            void* s[1] = {src};
            size_t n[1] = {bytes};
            cudaMemcpyAttributes attr{};
            attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
            attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
            size_t attr_idx = 0;
            err = cudaMemcpyBatchAsync(d, s, n, 1, &attr, &attr_idx, 1, side);
            break;
          }
          case Action::MemOp:
            err = write_word(side, dst, want);
            break;
          case Action::Kernel:
            set_word<<<1, 1, 0, side>>>(dst, want);
            break;
          case Action::StreamQuery:
            (void)cudaStreamQuery(side);
            break;
          case Action::Ctx2Memcpy:
            err = cudaMemcpyAsync(dst, src, kBuf, cudaMemcpyDeviceToDevice, hs);
            break;
          case Action::Ctx2Kernel:
            set_word<<<1, 1, 0, hs>>>(dst, want);
            break;
          case Action::Ctx2MemOp:
            err = write_word(hs, dst, want);
            break;
        }
        call_ms = ms_since(t0);
        if (a == Action::StreamQuery) set_word<<<1, 1, 0, side>>>(dst, want);
      });
      const auto t0 = std::chrono::steady_clock::now();
      go.store(true);
      switch (m) {
        case Main::Pageable:
        case Main::EventJoin:
        case Main::PageableNonBlocking:
          MK_CUDA_CHECK(cudaMemcpyAsync(pageable.data(), res, 16, cudaMemcpyDeviceToHost, ms));
          MK_CUDA_CHECK(cudaStreamSynchronize(ms));
          break;
        case Main::Pinned:
          MK_CUDA_CHECK(cudaMemcpyAsync(pinned, res, 16, cudaMemcpyDeviceToHost, ms));
          MK_CUDA_CHECK(cudaStreamSynchronize(ms));
          break;
        case Main::SyncFirst:
          MK_CUDA_CHECK(cudaStreamSynchronize(ms));
          MK_CUDA_CHECK(cudaMemcpyAsync(pageable.data(), res, 16, cudaMemcpyDeviceToHost, ms));
          break;
      }
      const double main_ms = ms_since(t0);
      helper.join();
      MK_CUDA_CHECK(cudaDeviceSynchronize());
      if (ctx2_case) {
        MK_CU_CHECK(ctx_set(ctx2));
        MK_CUDA_CHECK(cudaStreamSynchronize(side2));
        MK_CU_CHECK(ctx_set(primary));
      }
      uint64_t r[2] = {0, 0};
      MK_CUDA_CHECK(cudaMemcpy(r, res, sizeof(r), cudaMemcpyDeviceToHost));
      if (err) mk::fail("api_block: the second thread's ", name(a), " failed (error ", err, ")");
      t.rows.push_back({name(m), name(a), fmt(call_ms, 2),
                        r[0] == 1 ? "released" : r[0] == 2 ? "timed out (1 s)" : "?", fmt(r[1] / 1e6, 2),
                        fmt(main_ms, 2)});
      std::printf("api_block: %s | %s | call %.2f ms | %s\n", name(m), name(a), call_ms,
                  r[0] == 1 ? "released" : "timed out");
      std::fflush(stdout);
    }
  }
  // Part 2: what each way costs in the normal case: round trips (issue, then synchronize the issuing
  // stream) while a kernel of the primary context holds every SM and waits for the values they write.
  Table lat{"round trip of one proxy-style operation: same context vs a second context (one GPU)",
            {"operation", "GPU idle us", "while a kernel of the primary context holds every SM, us", "kernel"},
            {},
            ""};
  {
    constexpr uint32_t kRounds = 50;
    int sms = 0;
    MK_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    std::vector<uint32_t> vals(kRounds);
    for (uint32_t i = 0; i < kRounds; ++i) vals[i] = i + 1;
    MK_CUDA_CHECK(cudaMemcpy(src, vals.data(), kRounds * sizeof(uint32_t), cudaMemcpyHostToDevice));
    enum Op { kKernel, kMemOp, kCopy };
    for (bool second : {false, true}) {
      for (Op op : {kKernel, kMemOp, kCopy}) {
        double us[2] = {0, 0};
        const char* verdict = "";
        for (int busy = 0; busy < 2; ++busy) {
          MK_CUDA_CHECK(cudaMemset(dst, 0, 4));
          MK_CUDA_CHECK(cudaMemset(res, 0, 2 * sizeof(uint64_t)));
          MK_CUDA_CHECK(cudaDeviceSynchronize());
          if (busy) {
            spin_all<<<sms, 32, 0, main_nb>>>(dst, kRounds, res);
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
          }
          if (second) MK_CU_CHECK(ctx_set(ctx2));
          cudaStream_t hs = second ? side2 : side;
          const auto t0 = std::chrono::steady_clock::now();
          for (uint32_t i = 0; i < kRounds; ++i) {
            if (op == kKernel) {
              set_word<<<1, 1, 0, hs>>>(dst, i + 1);
            } else if (op == kMemOp) {
              MK_CU_CHECK(write_word(hs, dst, i + 1));
            } else {
              MK_CUDA_CHECK(cudaMemcpyAsync(dst, src + i, 4, cudaMemcpyDeviceToDevice, hs));
            }
            MK_CUDA_CHECK(cudaStreamSynchronize(hs));
          }
          us[busy] = ms_since(t0) * 1e3 / kRounds;
          if (second) MK_CU_CHECK(ctx_set(primary));
          MK_CUDA_CHECK(cudaDeviceSynchronize());
          if (busy) {
            uint64_t r = 0;
            MK_CUDA_CHECK(cudaMemcpy(&r, res, sizeof(r), cudaMemcpyDeviceToHost));
            verdict = r == 1 ? "released" : "timed out";
          }
        }
        const char* what = op == kKernel ? "kernel launch (one thread writes the word)"
                           : op == kMemOp ? "cuStreamBatchMemOp WRITE_VALUE_32"
                                          : "cudaMemcpyAsync D2D 4 B";
        lat.rows.push_back({std::string(second ? "second context: " : "primary context: ") + what, fmt(us[0], 1),
                            fmt(us[1], 1), verdict});
        std::printf("api_block: %s%s: idle %.1f us, busy %.1f us (%s)\n", second ? "ctx2 " : "", what, us[0], us[1],
                    verdict);
        std::fflush(stdout);
      }
    }
  }
  lat.note =
      "Each operation writes the next value of the word the kernel waits for; us = issue + stream synchronize, "
      "averaged over 50. Kernels of two contexts time-slice the GPU: a second context's kernel waits for a slice.";
  bc.report->add(lat);
  t.note =
      "A call that blocks while the main thread waits shows call ms ~ the kernel's 1 s bound less 50 ms and the "
      "kernel timed out; one that does not block releases the kernel at ~50 ms. The emu proxy can only use the "
      "calls that do not block (src/net/emu NOTES).";
  bc.report->add(t);
  MK_CUDA_CHECK(cudaStreamDestroy(side));
  MK_CUDA_CHECK(cudaStreamDestroy(main_nb));
  MK_CUDA_CHECK(cudaEventDestroy(ev));
  MK_CUDA_CHECK(cudaFreeHost(pinned));
  MK_CUDA_CHECK(cudaFree(res));
  bc.comm->free_symmetric(mem);
  using CtxDestroy = CUresult (*)(CUcontext);
  MK_CU_CHECK(entry<CtxDestroy>("cuCtxDestroy")(ctx2));  // its stream goes with it
  MK_CU_CHECK(ctx_set(primary));
}

}  // namespace mkb
