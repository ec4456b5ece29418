// NVLink byte counters (NVML) against a known transfer, so that the TP and
// ring benchmarks can later report measured NVLink bytes per GPU beside each
// op's formula (issues [tp-ag-rs], [multi-gpu-run]): rank 0 writes 256 MiB
// into rank 1's symmetric buffer with the copy engine; both ranks read
// NVML's NVLink counters before and after, in the readings whose behaviour
// on this driver is not yet known here (the aggregate scope, one link, the
// per-link sum; which fields count at all; when they update), and print
// each delta over the payload. The reading that
// shows ~1.00 on rank 0 (TX) and rank 1 (RX) is the one to use.
//
// NVML is opened at run time (libnvidia-ml.so.1, part of the driver), so
// neither the build nor a machine without it needs NVML: the table then
// says why it has no rows. The few declarations below follow NVML's C ABI
// (nvml.h; the field ids as in NVIDIA's nvidia-ml-py binding); NVML is not
// a build dependency because no header of it ships with the CUDA toolkit
// here.
#include <dlfcn.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench.hpp"

namespace mkb {

namespace {

// NVML C ABI (the subset used).
struct NvmlValue {
  union {
    double d;
    unsigned int ui;
    unsigned long ul;
    unsigned long long ull;
    long long sll;
    int si;
    unsigned short us;
  };
};
struct NvmlFieldValue {
  uint32_t field_id;
  uint32_t scope_id;
  int64_t timestamp;
  int64_t latency_usec;
  uint32_t value_type;  // 0 double, 1 uint, 2 ulong, 3 ulonglong, 4 slonglong, 5 sint, 6 ushort
  uint32_t nvml_return;
  NvmlValue value;
};
static_assert(sizeof(NvmlFieldValue) == 40, "nvmlFieldValue_t is 40 bytes");
using NvmlDevice = void*;

constexpr uint32_t kFiLinkCount = 91;       // NVML_FI_DEV_NVLINK_LINK_COUNT
constexpr uint32_t kFiThroughputTx = 138;   // NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX (KiB)
constexpr uint32_t kFiThroughputRx = 139;   // NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX (KiB)
constexpr uint32_t kFiCountXmitBytes = 202; // NVML_FI_DEV_NVLINK_COUNT_XMIT_BYTES
constexpr uint32_t kFiCountRcvBytes = 204;  // NVML_FI_DEV_NVLINK_COUNT_RCV_BYTES
constexpr int kMaxLinks = 18;               // NVLink 4 (H100 / H200)

struct Nvml {
  void* so = nullptr;
  int (*init)(unsigned int) = nullptr;
  int (*shutdown)() = nullptr;
  int (*by_pci)(const char*, NvmlDevice*) = nullptr;
  int (*fields)(NvmlDevice, int, NvmlFieldValue*) = nullptr;
  NvmlDevice dev = nullptr;
  bool inited = false;
  std::string why;  // empty: usable

  explicit Nvml(int cuda_device) {
    so = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!so) {
      why = "libnvidia-ml.so.1 not found";
      return;
    }
    init = reinterpret_cast<int (*)(unsigned int)>(dlsym(so, "nvmlInitWithFlags"));
    shutdown = reinterpret_cast<int (*)()>(dlsym(so, "nvmlShutdown"));
    by_pci = reinterpret_cast<int (*)(const char*, NvmlDevice*)>(dlsym(so, "nvmlDeviceGetHandleByPciBusId_v2"));
    fields = reinterpret_cast<int (*)(NvmlDevice, int, NvmlFieldValue*)>(dlsym(so, "nvmlDeviceGetFieldValues"));
    if (!init || !shutdown || !by_pci || !fields) {
      why = "NVML lacks nvmlInitWithFlags / nvmlDeviceGetHandleByPciBusId_v2 / nvmlDeviceGetFieldValues";
      return;
    }
    if (int r = init(0)) {
      why = "nvmlInitWithFlags returned " + std::to_string(r);
      return;
    }
    inited = true;
    char bus[32] = {};
    MKB_CUDA(cudaDeviceGetPCIBusId(bus, sizeof(bus), cuda_device));
    if (int r = by_pci(bus, &dev))
      why = std::string("nvmlDeviceGetHandleByPciBusId_v2(") + bus + ") returned " + std::to_string(r);
  }
  ~Nvml() {
    if (inited) shutdown();
    if (so) dlclose(so);
  }
  // One field at one scope: the value (as unsigned) or -1 with the NVML code in *err.
  long double read(uint32_t field, uint32_t scope, int* err) const {
    NvmlFieldValue v{};
    v.field_id = field;
    v.scope_id = scope;
    const int r = fields(dev, 1, &v);
    *err = r ? r : static_cast<int>(v.nvml_return);
    if (*err) return -1;
    switch (v.value_type) {
      case 0: return v.value.d;
      case 1: return v.value.ui;
      case 2: return v.value.ul;
      case 3: return v.value.ull;
      case 4: return static_cast<long double>(v.value.sll);
      case 5: return v.value.si;
      case 6: return v.value.us;
      default: *err = -2; return -1;
    }
  }
};

// The readings compared: a field at one scope (a link id; kAllLinks asks
// nvml.h's aggregate over the links), or summed over the links.
constexpr uint32_t kAllLinks = 0xFFFFFFFFu;
struct Reading {
  std::string name;
  uint32_t field;
  bool per_link;
  double unit;  // bytes per counter unit
  uint32_t scope = 0;
};

}  // namespace

void bench_nvlink_count(BenchContext& bc) {
  auto& c = *bc.comm;
  Table t{"NVLink counters (NVML) against a known transfer: rank 0 writes 256 MiB into rank 1 (copy engine)",
          {"rank", "reading", "links", "delta after sync, MiB", "delta / payload", "after +500 ms, MiB",
           "delta / payload"},
          {},
          "Each rank reads its own GPU's counters before and after the copy (synchronised, then a barrier); a "
          "second reading 500 ms later shows whether the counters lag. The reading with delta / payload ~1.00 for "
          "rank 0 TX and rank 1 RX measures NVLink payload; the others are shown to tell what they count. "
          "Written 2026-12-01 without a GPU to try it on."};
  if (!node_pair_or_skip(bc, t)) return;
  Nvml nvml(c.device());
  int err = 0;
  int links = 0;
  if (nvml.why.empty()) {
    const long double n = nvml.read(kFiLinkCount, 0, &err);
    links = err ? kMaxLinks : static_cast<int>(n);
    if (links < 1 || links > kMaxLinks) links = kMaxLinks;
  }
  // Every rank decides alike whether to go on (a collective follows).
  const std::string usable = nvml.why.empty() ? "1" : "0";
  for (const auto& s : c.bootstrap().allgather(usable))
    if (s != "1") {
      t.note = "skipped: NVML not usable on some rank (" +
               (nvml.why.empty() ? std::string("another rank") : nvml.why) + ")";
      bc.report->add(t);
      return;
    }
  const std::vector<Reading> readings = {
      {"THROUGHPUT_DATA_TX, all links (scope UINT_MAX)", kFiThroughputTx, false, 1024.0, kAllLinks},
      {"THROUGHPUT_DATA_RX, all links (scope UINT_MAX)", kFiThroughputRx, false, 1024.0, kAllLinks},
      {"COUNT_XMIT_BYTES, all links (scope UINT_MAX)", kFiCountXmitBytes, false, 1.0, kAllLinks},
      {"COUNT_RCV_BYTES, all links (scope UINT_MAX)", kFiCountRcvBytes, false, 1.0, kAllLinks},
      {"THROUGHPUT_DATA_TX, link 0", kFiThroughputTx, false, 1024.0},
      {"THROUGHPUT_DATA_RX, link 0", kFiThroughputRx, false, 1024.0},
      {"THROUGHPUT_DATA_TX, summed over links", kFiThroughputTx, true, 1024.0},
      {"THROUGHPUT_DATA_RX, summed over links", kFiThroughputRx, true, 1024.0},
      {"COUNT_XMIT_BYTES, summed over links", kFiCountXmitBytes, true, 1.0},
      {"COUNT_RCV_BYTES, summed over links", kFiCountRcvBytes, true, 1.0},
  };
  auto sample = [&](std::vector<long double>* out, std::vector<int>* errs) {
    out->assign(readings.size(), 0);
    errs->assign(readings.size(), 0);
    for (size_t i = 0; i < readings.size(); ++i) {
      const Reading& r = readings[i];
      for (int l = 0; l < (r.per_link ? links : 1); ++l) {
        int e = 0;
        const long double v = nvml.read(r.field, r.per_link ? static_cast<uint32_t>(l) : r.scope, &e);
        if (e) (*errs)[i] = e;
        else (*out)[i] += v * r.unit;
      }
    }
  };
  const size_t bytes = size_t(256) << 20;
  mk::SymmetricBuffer& remote = c.alloc_symmetric(bytes);
  void* local = nullptr;
  MKB_CUDA(cudaMalloc(&local, bytes));
  fill_random_bytes(local, bytes, 5 + c.rank(), bc.stream);
  MKB_CUDA(cudaStreamSynchronize(bc.stream));
  c.barrier();
  std::vector<long double> before, after, later;
  std::vector<int> e0, e1, e2;
  sample(&before, &e0);
  c.barrier();
  if (c.rank() == 0)
    MKB_CUDA(cudaMemcpyAsync(remote.peer[1 - c.topology().local_rank], local, bytes, cudaMemcpyDefault, bc.stream));
  MKB_CUDA(cudaStreamSynchronize(bc.stream));
  c.barrier();
  sample(&after, &e1);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  sample(&later, &e2);
  // Every rank's deltas to every rank (the report is rank 0's).
  struct Delta {
    double now, later;
    int err;
  };
  std::vector<Delta> mine(readings.size());
  for (size_t i = 0; i < readings.size(); ++i) {
    mine[i].err = e0[i] ? e0[i] : (e1[i] ? e1[i] : e2[i]);
    mine[i].now = static_cast<double>(after[i] - before[i]);
    mine[i].later = static_cast<double>(later[i] - before[i]);
  }
  const auto all = c.bootstrap().allgather(
      std::string(reinterpret_cast<const char*>(mine.data()), mine.size() * sizeof(Delta)));
  const double mib = 1024.0 * 1024.0;
  for (size_t r = 0; r < all.size(); ++r) {
    const auto* d = reinterpret_cast<const Delta*>(all[r].data());
    for (size_t i = 0; i < readings.size(); ++i) {
      std::vector<std::string> row = {std::to_string(r), readings[i].name,
                                      readings[i].per_link ? std::to_string(links) : "-"};
      if (d[i].err)
        row.insert(row.end(), {"n/a (NVML " + std::to_string(d[i].err) + ")", "", "", ""});
      else
        row.insert(row.end(), {fmt(d[i].now / mib, 1), fmt(d[i].now / bytes, 3), fmt(d[i].later / mib, 1),
                               fmt(d[i].later / bytes, 3)});
      t.rows.push_back(row);
    }
  }
  bc.report->add(t);
  cudaFree(local);
  c.free_symmetric(remote);
}

}  // namespace mkb
