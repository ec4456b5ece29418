// mkernel: GEMM host side: validation, TMA descriptors, the public entry
// points of include/mkernel/gemm.hpp.
#include "src/ops/gemm/gemm_host.hpp"

#include <cuda.h>

#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mkernel/error.hpp"
#include "mkernel/gemm.hpp"
#include "mkernel/knobs.hpp"
#include "src/runtime/cuda_driver.hpp"
#include "src/runtime/device_health.hpp"
#include "src/runtime/device_pointer.hpp"
#include "src/runtime/device_support.hpp"
#include "src/runtime/stream_scratch.hpp"

namespace mk::gemm {

namespace {

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// A 2-D bf16 matrix [rows x cols] with row stride ld (elements) for TMA, in
// boxes of box_cols x box_rows: the operands (loads) in kBlockK-deep boxes
// with the 128-byte swizzle the wgmma descriptors expect, out (TMA stores)
// in kTmaStoreCols x 64 boxes with the same swizzle (epilogue.cuh).
struct TmaShape {
  const void* base = nullptr;
  int64_t rows = 0, cols = 0, ld = 0;
  int box_cols = 0, box_rows = 0;
  bool swizzle = false;
  bool operator==(const TmaShape&) const = default;
};

CUtensorMap encode_tma(const TmaShape& t, const char* what) {
  CUtensorMap m{};
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(t.cols), static_cast<cuuint64_t>(t.rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(t.ld) * 2};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(t.box_cols), static_cast<cuuint32_t>(t.box_rows)};
  const cuuint32_t elem[2] = {1, 1};
  CUresult r = drv::api().cuTensorMapEncodeTiled(
      &m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(t.base), dims, strides, box, elem,
      CU_TENSOR_MAP_INTERLEAVE_NONE, t.swizzle ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE,
      t.swizzle ? CU_TENSOR_MAP_L2_PROMOTION_L2_256B : CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    const char* s = "unknown";
    drv::api().cuGetErrorString(r, &s);
    fail("gemm: cannot describe ", what, " [", t.rows, " x ", t.cols, "] (row stride ", t.ld, ") at ", t.base,
         " for TMA: ", s);
  }
  return m;
}

// Steady-state calls reuse their operands' descriptors: a small per-thread
// cache of the last encodings (keyed by everything the encoding depends on)
// saves the driver call on every launch (bench: host cost per call).
CUtensorMap cached_tma(const TmaShape& t, const char* what) {
  struct Entry {
    TmaShape shape;
    CUtensorMap map;
  };
  constexpr int kEntries = 16;  // operands and outputs
  thread_local Entry cache[kEntries];
  thread_local int next = 0;
  for (const Entry& e : cache)
    if (e.shape.base && e.shape == t) return e.map;
  Entry& e = cache[next];
  next = (next + 1) % kEntries;
  e.map = encode_tma(t, what);
  e.shape = t;
  return e.map;
}

// [rows x k] bf16 operand, row-major, loaded kBlockK x box_rows at a time.
CUtensorMap make_tma(const void* base, int64_t rows, int64_t k, int box_rows, const char* what) {
  return cached_tma(TmaShape{base, rows, k, k, kBlockK, box_rows, true}, what);
}

}  // namespace

bool use_tma_store(GemmParams& p) {
  const EpilogueHook& e = p.epi;
  if (e.layout != OutLayout::RowMajor || e.op != EpiOp::Store || e.signal != EpiSignal::None || e.net || e.own_mask ||
      e.async_store || e.rows_per_dest || p.sched.order == sched::TileOrder::Grouped || p.m < 1 || e.ldo % 8 ||
      e.ldo >= (int64_t(1) << 39) || !e.out[0] || !aligned16(e.out[0])) {  // (TMA's strides: below 2^40 bytes)
    p.epi.tma_store = 0;
    return false;
  }
  p.tma_out = cached_tma(TmaShape{e.out[0], p.m, p.n, e.ldo, kTmaStoreCols, 64, true}, "out (TMA stores)");
  p.epi.tma_store = 1;
  return true;
}

bool use_own_tma(GemmParams& p, void* out2) {
  const EpilogueHook& e = p.epi;
  if (e.own_final < 0 || !e.own_out || e.rows_per_dest < 1 || e.own_ldo < p.n || e.own_ldo % 8 || e.bcast_n ||
      e.tma_store || !aligned16(e.own_out) || (out2 && !aligned16(out2))) {
    p.epi.own_tma = 0;
    return false;
  }
  p.tma_out = cached_tma(TmaShape{e.own_out, e.rows_per_dest, p.n, e.own_ldo, kTmaStoreCols, 64, true},
                         "own final rows (TMA stores)");
  if (out2)
    p.tma_out2 = cached_tma(TmaShape{out2, e.rows_per_dest, p.n, e.own_ldo, kTmaStoreCols, 64, true},
                            "own final rows, second buffer (TMA stores)");
  p.epi.own_tma = out2 ? 2 : 1;
  return true;
}

namespace {
struct DeviceFacts {
  int dev = -1, sms = 0, l2 = 0;
};
const DeviceFacts& device_facts() {
  int dev = 0;
  MK_CUDA_CHECK(cudaGetDevice(&dev));
  thread_local DeviceFacts cached;
  if (dev != cached.dev) {  // every op's launch asks: a GPU that cannot run the kernels gets its error here
    check_device_supported(dev);
    DeviceFacts f;
    MK_CUDA_CHECK(cudaDeviceGetAttribute(&f.sms, cudaDevAttrMultiProcessorCount, dev));
    MK_CUDA_CHECK(cudaDeviceGetAttribute(&f.l2, cudaDevAttrL2CacheSize, dev));
    f.dev = dev;
    cached = f;
  }
  return cached;
}
}  // namespace

int num_sms() { return device_facts().sms; }
int64_t l2_bytes() { return device_facts().l2; }

namespace {
// The rules a call and its workspace query (gemm_workspace_bytes) share. n and k:
void check_n_k(int64_t n, int64_t k) {
  if (n < 64 || n % 64) fail("gemm: n must be a positive multiple of 64 (got ", n, ")");
  if (k < 64 || k % 64) fail("gemm: k must be a positive multiple of 64 (got ", k, ")");
}
// m, n x groups and k: the kernel's row and column math is int32, and a last block's start plus its size (256 at
// most) must fit too (an m within 127 of 2^31 overflowed row0 + kBlockM in the producer: UB, then a fault).
void check_dims(int64_t m, int64_t n, int64_t groups, int64_t k) {
  if (m > kMaxDim || n > kMaxDim / groups || k > kMaxDim)
    fail("gemm: dimensions must stay at or below 2^31 - 256 = ", kMaxDim, " (m=", m, ", n=", n, " x ", groups,
         " groups, k=", k, ")");
}
// The compute CTAs (asks the device: after the checks that need none); returns the SM count.
int check_ctas(int num_compute) {
  const int sms = num_sms();
  if (num_compute < 0 || num_compute > sms)
    fail("gemm: num_compute_ctas must be in [0, ", sms, "] (got ", num_compute, ")");
  return sms;
}
}  // namespace

GemmParams make_params(const Operands& o, int num_compute) {
  if (!o.a || !o.b || !o.out) fail("gemm: a, b and out must be device pointers (got a=", o.a, " b=", o.b, " out=", o.out, ")");
  if (o.m < 1 && o.num_groups == 0) fail("gemm: m must be >= 1 (got ", o.m, ")");
  if (o.m < 0) fail("gemm: m must be >= 0 (got ", o.m, ")");
  check_n_k(o.n, o.k);
  const int64_t ldo = o.ldo ? o.ldo : o.n;
  if (ldo < o.n || ldo % 2) fail("gemm: ldo must be even and >= n (got ldo=", ldo, ", n=", o.n, ")");
  // out's extent, (m - 1) x ldo + n elements, below 2^61 (checked by division: its byte count then fits; a product
  // that wrapped let a few bytes of out pass the pointer check). Strides past TMA's limit store without TMA.
  if (o.m > 1 && ldo > ((int64_t(1) << 61) - o.n) / (o.m - 1))
    fail("gemm: out's rows reach too far: (m - 1) x ldo + n must stay below 2^61 elements (got m=", o.m, ", ldo=",
         ldo, ", n=", o.n, ")");
  if (!aligned16(o.a) || !aligned16(o.b) || !aligned16(o.out))
    fail("gemm: a, b and out must be 16-byte aligned (got a=", o.a, " b=", o.b, " out=", o.out, ")");
  const int64_t groups = o.num_groups > 0 ? o.num_groups : 1;
  check_dims(o.m, o.n, groups, o.k);
  const int sms = check_ctas(num_compute);

  GemmParams p{};
  // A with no rows (grouped launch whose groups are all empty) still needs a
  // valid descriptor; it is never loaded.
  p.tma_a = make_tma(o.a, o.m > 0 ? o.m : 1, o.k, kBlockM, "a");
  p.tma_b = make_tma(o.b, o.n * groups, o.k, kBlockN, "b");
  p.m = static_cast<int32_t>(o.m);
  p.n = static_cast<int32_t>(o.n);
  p.k = static_cast<int32_t>(o.k);
  p.num_compute = num_compute ? num_compute : sms;
  p.sched.order = sched::TileOrder::Swizzled;
  p.sched.swizzle = 8;
  p.sched.m_blocks = static_cast<int32_t>((o.m + kBlockM - 1) / kBlockM);
  p.sched.n_blocks = static_cast<int32_t>((o.n + kBlockN - 1) / kBlockN);
  p.epi.out[0] = o.out;
  p.epi.ldo = ldo;
  p.timeout_ns = static_cast<uint64_t>(knob_int(Knob::MK_TIMEOUT_MS)) * 1000000ull;
  return p;
}

void set_second_a(GemmParams& p, const void* a2, int64_t row_lo, int64_t rows) {
  if (!a2 || !aligned16(a2)) fail("gemm: the second A source must be a 16-byte aligned device pointer (got ", a2, ")");
  if (row_lo < 0 || rows < 1 || row_lo + rows > p.m)
    fail("gemm: second A rows [", row_lo, ", ", row_lo + rows, ") outside [0, ", p.m, ")");
  p.tma_a2 = make_tma(a2, rows, p.k, kBlockM, "a (second source)");
  p.a2_row_lo = static_cast<int32_t>(row_lo);
  p.a2_row_hi = static_cast<int32_t>(row_lo + rows);
}

}  // namespace mk::gemm

namespace mk {

namespace {

thread_local int64_t t_last_split = 0;

// The standalone GEMM's split of a short last wave (gemm::standalone_split) and its scratch: the parts' fp32
// slots (ws bytes), then the tile counter, the epoch and the parts' flags (ctrl bytes, zeroed per call: the flags
// are compared with epoch 1).
struct SplitScratch {
  gemm::SplitTail sp;
  size_t ws = 0, ctrl = 0;
  size_t bytes() const { return sp.tiles > 0 ? ws + ctrl : 0; }
};

SplitScratch split_scratch(int64_t tiles, int num_compute, int64_t k) {
  SplitScratch s;
  s.sp = gemm::standalone_split(tiles, num_compute, k / gemm::kBlockK);
  const size_t slots = s.sp.tiles > 0 ? size_t(s.sp.tiles) * size_t(s.sp.parts - 1) : 0;
  s.ws = slots * gemm::kBlockM * gemm::kBlockN * sizeof(float);
  s.ctrl = (2 + slots * gemm::kConsumerWarpgroups) * sizeof(uint64_t);
  return s;
}

}  // namespace

namespace gemm {
int64_t last_split_tiles() { return t_last_split; }
void set_last_split_tiles(int64_t v) { t_last_split = v; }
}  // namespace gemm

namespace {

// [lo, hi) of a row-major bf16 matrix of `rows` rows of `cols` elements, `ld` apart; empty without rows.
struct Span {
  const char* name;
  uintptr_t lo, hi;
};
Span span_of(const char* name, const void* p, int64_t rows, int64_t ld, int64_t cols) {
  const auto lo = reinterpret_cast<uintptr_t>(p);
  return {name, lo, rows > 0 ? lo + uint64_t((rows - 1) * ld + cols) * 2 : lo};
}
// Fails when `w` shares a byte with one of `others`, saying why that is wrong (`why`). Empty spans share none.
void refuse_overlap(const char* op, const Span& w, std::initializer_list<Span> others, const char* why) {
  for (const Span& o : others)
    if (overlap(reinterpret_cast<const void*>(w.lo), w.hi - w.lo, reinterpret_cast<const void*>(o.lo), o.hi - o.lo))
      fail(op, ": ", w.name, " overlaps ", o.name, " (", why, ")");
}

// The caller's operands and stream on the current device (the GEMM runs there): host memory or another GPU's
// would fault inside the kernel (or, with peer access on, be read over the link without a word). A workspace is
// checked where the call uses it, over the bytes it uses (one it ignores may be anything). Returns the device.
int check_memory(const char* op, std::initializer_list<Span> operands, cudaStream_t stream) {
  int device = -1;
  MK_CUDA_CHECK(cudaGetDevice(&device));
  for (const Span& s : operands)
    check_device_pointer(op, s.name, reinterpret_cast<const void*>(s.lo), s.hi - s.lo, device);
  check_stream_device(op, stream, device);
  return device;
}

}  // namespace

void gemm_bf16(const GemmArgs& args, cudaStream_t stream) {
  gemm::GemmParams p = gemm::make_params(
      gemm::Operands{.a = args.a, .b = args.b, .out = args.out, .m = args.m, .n = args.n, .k = args.k, .ldo = args.ldo},
      args.num_compute_ctas);
  if (args.swizzle < 0) fail("gemm: swizzle must be >= 0 (got ", args.swizzle, ")");
  const int64_t ldo = args.ldo ? args.ldo : args.n;
  const Span sa = span_of("a", args.a, args.m, args.k, args.k), sb = span_of("b", args.b, args.n, args.k, args.k);
  const Span so = span_of("out", args.out, args.m, ldo, args.n);
  const int device = check_memory("gemm", {sa, sb, so}, stream);
  // out is written while other tiles still read a and b: no byte in common (its rows span ldo elements).
  refuse_overlap("gemm", so, {sa, sb}, "out is written while a and b are read");
  if (args.order == GemmOrder::RowMajor) p.sched.order = sched::TileOrder::RowMajor;
  if (args.swizzle) p.sched.swizzle = args.swizzle;
  gemm::use_tma_store(p);
  // A short last wave: its tiles in halves of K (GemmParams::split_tiles; gemm::standalone_split), their scratch
  // (SplitScratch) in the caller's workspace or a block of the library's pool. Without a workspace, not while the
  // stream is captured into a graph (the graph would own pool memory): unsplit there, so such a captured call's
  // split tiles sum in another order than an eager call's (bits may differ; include/mkernel/gemm.hpp).
  t_last_split = 0;
  const SplitScratch ss = split_scratch(sched::total_tiles(p.sched), p.num_compute, p.k);
  const gemm::SplitTail sp = ss.sp;
  std::optional<StreamScratch> scratch;
  if (sp.tiles > 0 && args.workspace && args.workspace_bytes >= ss.bytes()) {  // (a smaller one: StreamScratch says)
    check_device_pointer("gemm", "workspace", args.workspace, ss.bytes(), device);
    const auto w = reinterpret_cast<uintptr_t>(args.workspace);
    refuse_overlap("gemm", Span{"the workspace", w, w + ss.bytes()}, {sa, sb, so},
                   "the split tiles' parts, counter and flags are written there while the kernel runs");
  }
  if (sp.tiles > 0)
    scratch.emplace(ss.bytes(), ss.ws, ss.ctrl, stream, "the GEMM's split tiles", args.workspace, args.workspace_bytes);
  if (scratch && scratch->get()) {
    auto* c = reinterpret_cast<uint64_t*>(static_cast<char*>(scratch->get()) + ss.ws);
    p.tile_counter = c;
    p.load.epoch_counter = c + 1;
    p.split_flags = c + 2;
    p.split_ws = static_cast<float*>(scratch->get());
    p.split_tiles = static_cast<int32_t>(sp.tiles);
    p.split_parts = sp.parts;
    t_last_split = sp.tiles;
  }
  gemm::launch(p, p.num_compute, gemm::TestRoleParams{}, stream);  // on a throw, ~StreamScratch frees
  if (scratch) scratch->release();
}

size_t gemm_workspace_bytes(const GemmArgs& args) {
  if (args.m < 1) fail("gemm: m must be >= 1 (got ", args.m, ")");
  gemm::check_n_k(args.n, args.k);
  gemm::check_dims(args.m, args.n, 1, args.k);  // (the call's own rules: a size for a call it refuses is no answer)
  const int sms = gemm::check_ctas(args.num_compute_ctas);
  const int64_t tiles = ((args.m + gemm::kBlockM - 1) / gemm::kBlockM) * ((args.n + gemm::kBlockN - 1) / gemm::kBlockN);
  return split_scratch(tiles, args.num_compute_ctas ? args.num_compute_ctas : sms, args.k).bytes();
}

size_t grouped_gemm_workspace_bytes(int num_groups) {
  if (num_groups < 1 || num_groups >= (1 << 25))  // (the call's rules)
    fail("grouped gemm: num_groups must be in [1, 2^25) (got ", num_groups, ")");
  return (static_cast<size_t>(num_groups) + 1) * (sizeof(int64_t) + sizeof(int32_t)) + 16;
}

void grouped_gemm_bf16(const GroupedGemmArgs& args, cudaStream_t stream) {
  if (args.num_groups < 1) fail("grouped gemm: num_groups must be >= 1 (got ", args.num_groups, ")");
  if (args.num_groups >= (1 << 25))  // (n >= 64 and n x num_groups < 2^31; before any table is sized)
    fail("grouped gemm: num_groups must be below 2^25 (got ", args.num_groups, ")");
  if (!args.m_per_group) fail("grouped gemm: m_per_group (host array of num_groups counts) is null");
  if (!args.workspace || (reinterpret_cast<uintptr_t>(args.workspace) & 15u))
    fail("grouped gemm: workspace must be 16-byte aligned device memory of grouped_gemm_workspace_bytes(",
         args.num_groups, ") bytes");
  const int g = args.num_groups;
  std::vector<int64_t> tiles(g + 1);
  std::vector<int32_t> rows(g + 1);
  int64_t total = 0;
  for (int i = 0; i < g; ++i) {
    if (args.m_per_group[i] < 0) fail("grouped gemm: group ", i, " has m = ", args.m_per_group[i], " < 0");
    rows[i] = static_cast<int32_t>(total);
    total += args.m_per_group[i];
    if (total > gemm::kMaxDim) fail("grouped gemm: total rows exceed 2^31 - 256 = ", gemm::kMaxDim);
  }
  rows[g] = static_cast<int32_t>(total);
  gemm::GemmParams p = gemm::make_params(gemm::Operands{.a = args.a, .b = args.b, .out = args.out, .m = total,
                                                        .n = args.n, .k = args.k, .num_groups = g},
                                         args.num_compute_ctas);
  // (a and out span nothing when every group is empty)
  const Span sa = span_of("a", args.a, total, args.k, args.k), sb = span_of("b", args.b, int64_t(g) * args.n, args.k,
                                                                            args.k);
  const Span so = span_of("out", args.out, total, args.n, args.n);
  const int device = check_memory("grouped gemm", {sa, sb, so}, stream);
  check_device_pointer("grouped gemm", "workspace", args.workspace, grouped_gemm_workspace_bytes(g), device);
  // out is written while other tiles read a and b; the workspace holds the tile tables the kernel reads (copied in
  // below).
  const auto ws = reinterpret_cast<uintptr_t>(args.workspace);
  refuse_overlap("grouped gemm", so, {sa, sb}, "out is written while a and b are read");
  refuse_overlap("grouped gemm", Span{"the workspace", ws, ws + grouped_gemm_workspace_bytes(g)}, {sa, sb, so},
                 "it holds the tile tables the kernel reads");
  // The tile tables come from the host's m_per_group on every call, through copies from pageable memory that a
  // graph would replay from freed host memory (or that the capture refuses, invalidating it): refused before
  // anything is enqueued, the capture left valid.
  if (stream_capturing(stream).value_or(false))
    fail("grouped gemm: cannot be captured into a CUDA graph (its tile tables are built on the host from "
         "m_per_group at every call); call it outside the capture");
  const int64_t all = sched::build_group_tiles(args.m_per_group, g, gemm::kBlockM, p.sched.n_blocks, tiles.data());
  if (all == 0) return;  // every group empty: nothing to compute
  auto* ws_tiles = static_cast<int64_t*>(args.workspace);
  auto* ws_rows = reinterpret_cast<int32_t*>(ws_tiles + g + 1);
  // Pageable sources: the copies are staged before the calls return.
  MK_CUDA_CHECK(cudaMemcpyAsync(ws_tiles, tiles.data(), tiles.size() * sizeof(int64_t), cudaMemcpyHostToDevice, stream));
  MK_CUDA_CHECK(cudaMemcpyAsync(ws_rows, rows.data(), rows.size() * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
  p.sched.order = sched::TileOrder::Grouped;
  p.sched.num_groups = g;
  p.sched.group_tile_start = ws_tiles;
  p.group_row_start = ws_rows;
  gemm::launch(p, p.num_compute, gemm::TestRoleParams{}, stream);
}

}  // namespace mk
