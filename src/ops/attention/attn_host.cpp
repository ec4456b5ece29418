// mkernel: attention host side: validation, 4-D tensor maps, parameters.
#include "src/ops/attention/attn_host.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <string>

#include "device/attention/attn_walk.hpp"
#include "mkernel/error.hpp"
#include "mkernel/knobs.hpp"
#include "src/ops/gemm/gemm_host.hpp"
#include "src/runtime/cuda_driver.hpp"
#include "src/runtime/device_pointer.hpp"
#include "src/runtime/stream_scratch.hpp"

namespace mk::attn {

namespace {

struct MapKey {
  const void* base = nullptr;
  int64_t dims[4] = {};
  int64_t strides[3] = {};
  uint32_t box1 = 0, box2 = 0;
  bool operator==(const MapKey& o) const {
    return base == o.base && std::memcmp(dims, o.dims, sizeof dims) == 0 &&
           std::memcmp(strides, o.strides, sizeof strides) == 0 && box1 == o.box1 && box2 == o.box2;
  }
};

CUtensorMap encode(const MapKey& k, const char* what) {
  CUtensorMap m{};
  cuuint64_t dims[4], strides[3];
  for (int i = 0; i < 4; ++i) dims[i] = static_cast<cuuint64_t>(k.dims[i]);
  for (int i = 0; i < 3; ++i) strides[i] = static_cast<cuuint64_t>(k.strides[i]);
  const cuuint32_t box[4] = {64, k.box1, k.box2, 1};
  const cuuint32_t elem[4] = {1, 1, 1, 1};
  CUresult r = drv::api().cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, const_cast<void*>(k.base),
                                                 dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                                 CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                                 CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    const char* s = "unknown";
    drv::api().cuGetErrorString(r, &s);
    fail("attention: cannot describe ", what, " [", k.dims[3], " x ", k.dims[2], " x ", k.dims[1], " x ", k.dims[0],
         "] at ", k.base, " for TMA: ", s);
  }
  return m;
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

CUtensorMap make_map(const void* base, const int64_t (&dims)[4], const int64_t (&strides)[3], uint32_t box1,
                     uint32_t box2, const char* what) {
  MapKey k;
  k.base = base;
  std::memcpy(k.dims, dims, sizeof k.dims);
  std::memcpy(k.strides, strides, sizeof k.strides);
  k.box1 = box1;
  k.box2 = box2;
  struct Entry {
    MapKey key;
    CUtensorMap map;
  };
  constexpr int kEntries = 16;
  thread_local Entry cache[kEntries];
  thread_local int next = 0;
  for (const Entry& e : cache)
    if (e.key.base && e.key == k) return e.map;
  Entry& e = cache[next];
  next = (next + 1) % kEntries;
  e.map = encode(k, what);
  e.key = k;
  return e.map;
}

void check_shape(const char* op, int64_t batch, int64_t seq_q, int64_t seq_kv, int64_t heads, int64_t kv_heads,
                 int64_t head_dim) {
  if (head_dim != 64 && head_dim != 128) fail(op, ": head_dim must be 64 or 128 (got ", head_dim, ")");
  if (batch < 1 || seq_q < 1 || seq_kv < 1 || heads < 1 || kv_heads < 1)
    fail(op, ": batch, sequence lengths and head counts must be >= 1 (got batch ", batch, ", seq_q ", seq_q,
         ", seq_kv ", seq_kv, ", heads ", heads, ", kv_heads ", kv_heads, ")");
  if (heads % kv_heads) fail(op, ": kv_heads (", kv_heads, ") must divide heads (", heads, ")");
  constexpr int64_t kMax = int64_t(1) << 30;
  if (batch >= kMax || heads >= kMax) fail(op, ": batch (", batch, ") and heads (", heads, ") must be < 2^30");
  if (seq_q >= kMax || seq_kv >= kMax) fail(op, ": sizes too large (seq_q ", seq_q, ", seq_kv ", seq_kv, ")");
  // (in steps, each product below 2^63: batch x heads < 2^60, then x ceil(seq_q / 128) < 2^53)
  const int64_t bh = batch * heads, units = bh < kMax ? bh * ((seq_q + kBlockM - 1) / kBlockM) : kMax;
  if (units >= kMax)
    fail(op, ": sizes too large (batch ", batch, " x heads ", heads, " x ceil(seq_q / ", kBlockM,
         ") work units must be < 2^30)");
  // Each tensor's bytes (q and out: batch x seq_q x heads x head_dim; k and v: batch x seq_kv x kv_heads x head_dim;
  // bf16) below 2^48, checked factor by factor: a product past 2^63 wrapped (to 0, say), and the pointer checks
  // then passed a buffer of any size.
  const auto bytes_ok = [](std::initializer_list<int64_t> factors) {
    constexpr int64_t kLimit = int64_t(1) << 48;
    int64_t b = 2;
    for (const int64_t f : factors) {
      if (b > (kLimit - 1) / f) return false;  // (b x f < 2^48)
      b *= f;
    }
    return true;
  };
  if (!bytes_ok({batch, seq_q, heads, head_dim}) || !bytes_ok({batch, seq_kv, kv_heads, head_dim}))
    fail(op, ": sizes too large (batch ", batch, " x seq_q ", seq_q, " x heads ", heads, " or batch x seq_kv ", seq_kv,
         " x kv_heads ", kv_heads, ", x head_dim ", head_dim, " x 2 bytes, must be < 2^48 bytes a tensor)");
}

CUtensorMap q_map(const void* q, int64_t batch, int64_t seq, int64_t heads, int64_t head_dim, const char* what) {
  const int64_t dims[4] = {head_dim, heads, seq, batch};
  const int64_t strides[3] = {head_dim * 2, heads * head_dim * 2, seq * heads * head_dim * 2};
  return make_map(q, dims, strides, 1, kBlockM, what);
}

AttnParams make_params(const AttentionArgs& a, int block_n, const char* op) {
  const int64_t seq_kv = a.seq_kv ? a.seq_kv : a.seq_q;
  const int64_t kv_heads = a.kv_heads ? a.kv_heads : a.heads;
  check_shape(op, a.batch, a.seq_q, seq_kv, a.heads, kv_heads, a.head_dim);
  if (!a.q || !a.k || !a.v || !a.out || !a.lse)
    fail(op, ": q, k, v, out and lse must be device pointers (got q=", a.q, " k=", a.k, " v=", a.v,
         " out=", a.out, " lse=", a.lse, ")");
  const int64_t qbytes = a.batch * a.seq_q * a.heads * a.head_dim * 2;
  const int64_t kvbytes = a.batch * seq_kv * kv_heads * a.head_dim * 2;
  const int64_t lbytes = a.batch * a.heads * a.seq_q * 4;
  struct Tensor {
    const void* p;
    int64_t bytes;
    const char* name;
  };
  const Tensor tensors[] = {{a.q, qbytes, "q"}, {a.k, kvbytes, "k"}, {a.v, kvbytes, "v"}, {a.out, qbytes, "out"},
                            {a.lse, lbytes, "lse"}};
  for (const Tensor& t : tensors)
    if (!aligned16(t.p)) fail(op, ": q, k, v, out and lse must be 16-byte aligned (", t.name, " is at ", t.p, ")");
  if (!scale_ok(a.scale)) fail(op, ": scale must be finite and >= 0, and scale log2(e) finite (got ", a.scale, ")");
  for (const auto& [p, n, name] : {std::tuple{a.q, qbytes, "q"}, std::tuple{a.k, kvbytes, "k"},
                                   std::tuple{a.v, kvbytes, "v"}}) {
    if (overlap(a.out, qbytes, p, n)) fail(op, ": out overlaps ", name, " (it is written while ", name, " is read)");
    if (overlap(a.lse, lbytes, p, n)) fail(op, ": lse overlaps ", name);
  }
  if (overlap(a.out, qbytes, a.lse, lbytes)) fail(op, ": out and lse overlap");
  // The caller's workspace's first 8 bytes (the unit counter a causal call zeroes, then claims from while the
  // kernel runs; attention_workspace_bytes) apart from all of them (a workspace in q zeroed its first values; in
  // out or lse the kernel wrote over the live counter).
  const int64_t ws_used = static_cast<int64_t>(std::min<size_t>(a.workspace_bytes, sizeof(uint64_t)));
  if (a.workspace && ws_used > 0)
    for (const Tensor& t : tensors)
      if (overlap(a.workspace, ws_used, t.p, t.bytes))
        fail(op, ": the workspace overlaps ", t.name, " (it holds the call's work counter while the kernel runs)");
  const int sms = gemm::num_sms();
  if (a.num_ctas < 0 || a.num_ctas > sms) fail(op, ": num_ctas must be in [0, ", sms, "] (got ", a.num_ctas, ")");
  // Memory of the GPU the kernel runs on (the current one; RingAttention checked that it is its communicator's):
  // host memory or another GPU's would fault inside the kernel, leaving the context unusable.
  int device = -1;
  MK_CUDA_CHECK(cudaGetDevice(&device));
  for (const Tensor& t : tensors) check_device_pointer(op, t.name, t.p, static_cast<size_t>(t.bytes), device);

  AttnParams p{};
  p.q = q_map(a.q, a.batch, a.seq_q, a.heads, a.head_dim, "q");
  if (block_n != kBlockNOneGpu && block_n != block_n_side(a.head_dim))
    fail("attention: internal: key blocks of ", block_n, " (the kernels take ", kBlockNOneGpu, " or ",
         block_n_side(a.head_dim), " at head_dim ", a.head_dim, ")");
  {
    const int64_t dims[4] = {a.head_dim, kv_heads, seq_kv, a.batch};
    const int64_t strides[3] = {a.head_dim * 2, kv_heads * a.head_dim * 2, seq_kv * kv_heads * a.head_dim * 2};
    p.k[0] = make_map(a.k, dims, strides, 1, static_cast<uint32_t>(block_n), "k");
    p.v[0] = make_map(a.v, dims, strides, 1, static_cast<uint32_t>(block_n), "v");
  }
  p.block_n = block_n;
  p.kv_seq_dim[0] = 2;
  p.o = a.out;
  p.lse = a.lse;
  p.batch = static_cast<int32_t>(a.batch);
  p.heads = static_cast<int32_t>(a.heads);
  p.kv_heads = static_cast<int32_t>(kv_heads);
  p.s_q = static_cast<int32_t>(a.seq_q);
  p.head_dim = static_cast<int32_t>(a.head_dim);
  p.causal = a.causal;
  const float scale = a.scale > 0.f ? a.scale : 1.f / std::sqrt(static_cast<float>(a.head_dim));
  p.scale_log2 = scale * 1.4426950408889634f;
  p.n_qsegs = 1;
  p.qseg[0] = QSeg{0, static_cast<int32_t>(a.seq_q), static_cast<int32_t>(seq_kv - a.seq_q), 0};  // bottom-right causal alignment
  p.q_tiles = static_cast<int32_t>((a.seq_q + kBlockM - 1) / kBlockM);
  p.n_kvsegs = 1;
  p.kvseg[0] = KvSeg{0, 0, 0, static_cast<int32_t>(seq_kv), 0, -1};
  p.num_compute = a.num_ctas ? a.num_ctas : sms;
  p.group_heads = 1;  // head-major; attention_fwd and the ring op set their own
  p.timeout_ns = static_cast<uint64_t>(knob_int(Knob::MK_TIMEOUT_MS)) * 1000000ull;
  return p;
}

void ring_segments(AttnParams& p, int rank, int world, int32_t s_local, bool causal, const std::vector<int>& kv_order,
                   int64_t batch, int64_t chunks) {
  if (static_cast<int>(kv_order.size()) != world || kv_order.empty() || kv_order[0] != rank || 2 * world > kMaxKvSegs)
    fail("attention: ring_segments needs every rank once, own first, at most ", kMaxKvSegs / 2, " ranks");
  if (causal && s_local % 2) fail("attention: zigzag shards need an even s_local (got ", s_local, ")");
  struct Seg {
    int32_t s0, len, pos0;
  };
  auto segs_of = [&](int r, Seg* out) {
    if (!causal) {
      out[0] = Seg{0, s_local, r * s_local};
      return 1;
    }
    const int32_t c = s_local / 2;
    out[0] = Seg{0, c, r * c};
    out[1] = Seg{c, c, (2 * world - 1 - r) * c};
    return 2;
  };
  Seg seg[2];
  p.n_qsegs = segs_of(rank, seg);
  int32_t tiles = 0;
  for (int i = 0; i < p.n_qsegs; ++i) {
    p.qseg[i] = QSeg{seg[i].s0, seg[i].len, seg[i].pos0, tiles};
    tiles += (seg[i].len + kBlockM - 1) / kBlockM;
  }
  p.q_tiles = tiles;
  p.n_kvsegs = 0;
  for (const int src : kv_order) {
    const int n = segs_of(src, seg);
    const bool own = src == rank;
    for (int i = 0; i < n; ++i)
      p.kvseg[p.n_kvsegs++] = KvSeg{own ? 0 : 1, own ? 0 : static_cast<int32_t>(src * batch), seg[i].s0, seg[i].len,
                                    seg[i].pos0, own ? -1 : static_cast<int32_t>(src * chunks)};
  }
}

}  // namespace mk::attn

namespace mk {

namespace {

// Whether a call claims its units (MK_ATTN_UNITS; attn_walk.hpp default_claimed: why); its counter's bytes.
bool claims(bool causal) {
  const std::string units = knob_str(Knob::MK_ATTN_UNITS);
  return units == "claimed" || (units == "auto" && attn::detail::default_claimed(causal));
}
constexpr size_t kCounterBytes = sizeof(uint64_t);

}  // namespace

size_t attention_workspace_bytes(const AttentionArgs& args) {
  // A size asked for a call that attention_fwd would refuse is refused too, for the same reason (it took any shape).
  const char* op = "attention_workspace_bytes";
  attn::check_shape(op, args.batch, args.seq_q, args.seq_kv ? args.seq_kv : args.seq_q, args.heads,
                    args.kv_heads ? args.kv_heads : args.heads, args.head_dim);
  if (args.num_ctas < 0) fail(op, ": num_ctas must be >= 0 (0: every SM; got ", args.num_ctas, ")");
  return claims(args.causal) ? kCounterBytes : 0;
}

void attention_fwd(const AttentionArgs& args, cudaStream_t stream) {
  attn::AttnParams p = attn::make_params(args);
  int device = -1;
  MK_CUDA_CHECK(cudaGetDevice(&device));
  check_stream_device("attention", stream, device);
  // Work units claimed from a counter zeroed per call, in the caller's workspace or the library's pool, or walked
  // statically (inside a graph capture without a workspace: StreamScratch is empty there). Then their order
  // (MK_ATTN_GROUP_HEADS; default_group_heads). The knobs are read before anything is queued.
  const bool claim = claims(p.causal);
  const int64_t group = knob_int(Knob::MK_ATTN_GROUP_HEADS);
  // the workspace where the call uses it, over the bytes it uses (a smaller one: StreamScratch says)
  if (claim && args.workspace && args.workspace_bytes >= kCounterBytes)
    check_device_pointer("attention", "workspace", args.workspace, kCounterBytes, device);
  std::optional<StreamScratch> counter;
  if (claim)
    counter.emplace(kCounterBytes, 0, kCounterBytes, stream, "attention's unit counter", args.workspace,
                    args.workspace_bytes);
  if (counter && counter->get()) p.unit_counter = static_cast<uint64_t*>(counter->get());
  p.group_heads = group > 0 ? static_cast<int32_t>(std::min<int64_t>(group, int64_t(p.batch) * p.heads))
                            : attn::detail::default_group_heads(p.causal, p.batch, p.heads, p.kv_heads,
                                                                args.seq_kv ? args.seq_kv : args.seq_q, p.head_dim,
                                                                p.unit_counter != nullptr, gemm::l2_bytes());
  attn::launch(p, p.num_compute, stream);  // on a throw, ~StreamScratch frees
  if (counter) counter->release();
}

}  // namespace mk
