/* mkernel: C ABI for bindings (Python ctypes, other languages).
 * Every function but mk_abi_version, mk_last_error, mk_build_commit and mk_net_backends
 * returns 0 on success and non-zero on failure; then mk_last_error() returns
 * this thread's message, naming the function (a success leaves the last
 * message as it was: read it only after a failure). Handles are opaque; a
 * handle of another kind is refused by name rather than used, and so, as a
 * handle that is not live, is one whose destroy ran (while its memory holds
 * no new handle: best effort).
 * mk_comm_destroy refuses (non-zero; the communicator stays open) while a
 * plan made on it is open: destroy the plans first, on every rank (the
 * refusal is this rank's alone: ranks that go on wait in the teardown up to
 * MK_BOOTSTRAP_TIMEOUT_MS for this one). It frees the symmetric
 * buffers still allocated on it: such a buffer's handle then takes only
 * mk_symm_free, which deletes the handle without reading its comm argument
 * (mk_symm_info fails). A plan's destroy refuses likewise (the plan stays
 * open) while one of its calls is enqueuing its work on another thread; one
 * host thread at a time calls a plan and destroys it, which is what makes
 * this safe (a call only beginning is not seen). No handle may be used after
 * its own destroy call.
 * Refusals before a collective starts are the calling rank's alone: a
 * plan create given a null comm or out, or refused while mk_comm_destroy
 * runs on another thread, returns at once on that rank while the others
 * wait in the plan's check (MK_BOOTSTRAP_TIMEOUT_MS, naming it); a run
 * refused (bad pointer, stream, shape) returns before anything is
 * enqueued while the others' kernels wait for it up to MK_TIMEOUT_MS. */
#ifndef MKERNEL_MKERNEL_H_
#define MKERNEL_MKERNEL_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MK_ABI_VERSION 1
#define MK_MAX_LOCAL_RANKS 8

typedef struct mk_comm_s* mk_comm_t;
typedef struct mk_symm_s* mk_symm_t;

typedef struct {
  unsigned char internal[128];
} mk_unique_id_t;

typedef struct {
  int rank, world, node, num_nodes, local_rank, local_size, device, uses_vmm;
} mk_comm_info_t;

typedef struct {
  void* local;
  size_t bytes;
  void* peers[MK_MAX_LOCAL_RANKS]; /* by local rank; NULL outside the node */
  int local_rank, local_size;
} mk_symm_info_t;

int mk_abi_version(void);
const char* mk_last_error(void);
/* The commit the library was built from (12 hex digits; "-dirty" when tracked files had uncommitted changes;
 * "unknown" when built outside git). Static storage, never NULL. Reports name it beside their own tree's. */
const char* mk_build_commit(void);
/* The network backends this library was built with (MK_NET takes these), space-separated in MK_NET=auto's order of
 * preference: "verbs fabric emu" where configure found the RDMA headers (CMake's MK_NET_BACKENDS), down to "emu"
 * (one host only) without them. Static storage, never NULL. */
const char* mk_net_backends(void);

int mk_get_unique_id(mk_unique_id_t* out);
/* device < 0: keep the current device (init; init_env without a launcher) /
 * local rank mod GPUs (init_env under a launcher). */
int mk_comm_init(mk_comm_t* out, int rank, int world, const mk_unique_id_t* id, int device);
int mk_comm_init_env(mk_comm_t* out, int device);
/* Refused (non-zero, the communicator left open) while a plan made on it is
 * open or one of its own calls (mk_comm_barrier, mk_symm_alloc, ...) runs on
 * another host thread. */
int mk_comm_destroy(mk_comm_t comm);
int mk_comm_info(mk_comm_t comm, mk_comm_info_t* out);
int mk_comm_barrier(mk_comm_t comm);
/* Collective (every rank, the same bytes): all[r * bytes ..] = rank r's
 * `mine`, over the communicator's host bootstrap (bounded by
 * MK_BOOTSTRAP_TIMEOUT_MS, as its barrier); `all` holds world * bytes.
 * mine and all may be NULL only when bytes is 0. Ranks passing different
 * counts (or a NULL pointer) all fail, each naming the first count that
 * differs from its own (or the NULL). For small host data (Python's plan
 * cache agrees on which plans a CUDA graph still holds with it). */
int mk_comm_allgather(mk_comm_t comm, const void* mine, size_t bytes, void* all);
/* Non-zero (with the device diagnostic as the message) once a device wait of
 * this rank failed or an abort was raised. */
int mk_comm_check(mk_comm_t comm);
/* Payload bytes of the puts this rank's host proxy has taken so far (0 on one
 * node); exact for a call once every rank synchronised it and passed a barrier. */
int mk_comm_network_bytes_put(mk_comm_t comm, uint64_t* out);
/* Bytes of symmetric memory this rank holds now (plans' staging and gathered
 * buffers, the signal region; as mapped); MK_SYMM_MAX_BYTES bounds it. */
int mk_comm_symmetric_bytes(mk_comm_t comm, uint64_t* out);

int mk_symm_alloc(mk_comm_t comm, size_t bytes, mk_symm_t* out);
int mk_symm_info(mk_symm_t buf, mk_symm_info_t* out);
/* Collective, as mk_symm_alloc; a NULL buf is nothing to free (0, as free(NULL)). */
int mk_symm_free(mk_comm_t comm, mk_symm_t buf);

/* Writes the knob table (NUL-terminated, truncated to len). */
int mk_print_config(char* buf, size_t len);
/* The value of the integer knob `name` (an MK_* variable of type Int, its
 * default when unset); a malformed or out-of-range value, an unknown name or a
 * knob of another type is an error. For bindings that read a knob the library
 * declares. */
int mk_knob_int(const char* name, int64_t* out);
/* The value of the bool knob `name` as 0 or 1, under mk_knob_int's rules. */
int mk_knob_bool(const char* name, int* out);

/* Queues on `stream` (a cudaStream_t; NULL: the legacy default stream) of the
 * current device one GPU thread that waits as long as `cycles` SM cycles take
 * at the device's top clock, timed on the global timer: benchmarks put it
 * before a timed call, so that ranks at different clocks leave it together.
 * cycles in [0, 2^40]; 0 queues nothing. */
int mk_gpu_spin(int64_t cycles, void* stream);

/* Ops. Present when libmkernel.so was built with the op (MK_OPS); bindings
 * look the symbol up and say so when it is missing. `stream` is a
 * cudaStream_t (NULL: the legacy default stream). */

/* bf16 out[m x n] (row stride ldo, 0: n) = a[m x k] * b[n x k]^T (see
 * include/mkernel/gemm.hpp); num_compute_ctas 0: every SM. */
int mk_gemm_bf16(const void* a, const void* b, void* out, int64_t m, int64_t n, int64_t k, int64_t ldo,
                 int num_compute_ctas, void* stream);
/* The same with the caller's workspace for split tiles (gemm.hpp: why, and
 * that only a given workspace splits inside a CUDA-graph capture; NULL: the
 * library's pool), of at least *out bytes from mk_gemm_workspace_bytes (0:
 * the call splits nothing). */
int mk_gemm_bf16_ws(const void* a, const void* b, void* out, int64_t m, int64_t n, int64_t k, int64_t ldo,
                    int num_compute_ctas, void* workspace, size_t workspace_bytes, void* stream);
int mk_gemm_workspace_bytes(int64_t m, int64_t n, int64_t k, int num_compute_ctas, size_t* out);

/* Attention forward on one GPU (include/mkernel/attention.hpp): q, out
 * [batch, seq_q, heads, head_dim], k, v [batch, seq_kv, kv_heads, head_dim]
 * bf16, lse [batch, heads, seq_q] fp32; seq_kv / kv_heads / scale 0: seq_q /
 * heads / 1/sqrt(head_dim); num_ctas 0: every SM. */
int mk_attention_fwd(const void* q, const void* k, const void* v, void* out, float* lse, int64_t batch,
                     int64_t seq_q, int64_t seq_kv, int64_t heads, int64_t kv_heads, int64_t head_dim, int causal,
                     float scale, int num_ctas, void* stream);
/* The same with the caller's workspace for the causal unit counter
 * (attention.hpp: why, and that only a given workspace claims inside a
 * CUDA-graph capture; NULL: the library's pool), of at least *out bytes from
 * mk_attention_workspace_bytes (0: the call claims nothing). */
int mk_attention_fwd_ws(const void* q, const void* k, const void* v, void* out, float* lse, int64_t batch,
                        int64_t seq_q, int64_t seq_kv, int64_t heads, int64_t kv_heads, int64_t head_dim, int causal,
                        float scale, int num_ctas, void* workspace, size_t workspace_bytes, void* stream);
int mk_attention_workspace_bytes(int64_t batch, int64_t seq_q, int64_t seq_kv, int64_t heads, int64_t kv_heads,
                                 int64_t head_dim, int causal, int num_ctas, size_t* out);

/* Ring attention (include/mkernel/ring_attention.hpp): create and destroy
 * are collective; q, out [batch, s_local, heads, head_dim], k, v [batch,
 * s_local, kv_heads, head_dim] bf16, lse [batch, heads, s_local] fp32; causal
 * plans take zigzag shards. 0 for scale / CTA counts picks the default;
 * kv_heads 0 means heads. */
typedef struct mk_ring_attn_s* mk_ring_attn_t;
int mk_ring_attn_create(mk_comm_t comm, int64_t batch, int64_t s_local, int64_t heads, int64_t kv_heads,
                        int64_t head_dim, int causal, float scale, int num_comm_ctas, int num_ctas,
                        mk_ring_attn_t* out);
int mk_ring_attn_run(mk_ring_attn_t plan, const void* q, const void* k, const void* v, void* out, float* lse,
                     void* stream);
/* *out = 0 when no launch of the plan was ever captured in a CUDA graph; 1
 * when one was and a graph holding it (a captured graph, an executable graph
 * instantiated from it, a clone or a child-graph node of it) may still exist
 * or run: the plan must outlive them; 2 when one was, but every such graph
 * has been destroyed and its launches have ended (seen a moment after the
 * last destroy: CUDA tells it asynchronously). Non-zero reads as before
 * (2026-12-07): "ever captured". The same for the plans below. */
int mk_ring_attn_captured(mk_ring_attn_t plan, int* out);
int mk_ring_attn_destroy(mk_ring_attn_t plan);
/* Diagnostics: record up to events_per_cta device events per CTA of every
 * later run (0: off; device/trace.hpp); read_trace waits for the device and
 * writes min(capacity, *count) events of the last run as 4 words each (cta,
 * kind, arg, globaltimer ns); *count: events recorded. */
int mk_ring_attn_trace(mk_ring_attn_t plan, int events_per_cta);
int mk_ring_attn_read_trace(mk_ring_attn_t plan, uint64_t* events, int64_t capacity, int64_t* count);

/* Tensor-parallel plans (include/mkernel/tp.hpp). create and destroy are
 * collective over the communicator; 0 for a CTA count picks the default. */
typedef struct mk_ag_gemm_s* mk_ag_gemm_t;
int mk_ag_gemm_create(mk_comm_t comm, int64_t m_local, int64_t n, int64_t k, int num_comm_ctas, int num_ctas,
                      mk_ag_gemm_t* out);
/* out[world m_local x n] = allgather(a_local) b^T; gathered may be NULL. */
int mk_ag_gemm_run(mk_ag_gemm_t plan, const void* a_local, const void* b, void* out, void* gathered, void* stream);
int mk_ag_gemm_all_gather(mk_ag_gemm_t plan, const void* a_local, void* gathered, void* stream);
int mk_ag_gemm_captured(mk_ag_gemm_t plan, int* out);
int mk_ag_gemm_destroy(mk_ag_gemm_t plan);

typedef struct mk_gemm_rs_s* mk_gemm_rs_t;
int mk_gemm_rs_create(mk_comm_t comm, int64_t m, int64_t n, int64_t k_local, int num_reduce_ctas, int num_ctas,
                      mk_gemm_rs_t* out);
/* out[m / world x n] = this rank's rows of sum_ranks a b^T. */
int mk_gemm_rs_run(mk_gemm_rs_t plan, const void* a, const void* b, void* out, void* stream);
int mk_gemm_rs_reduce_scatter(mk_gemm_rs_t plan, const void* x, void* out, void* stream);
int mk_gemm_rs_captured(mk_gemm_rs_t plan, int* out);
int mk_gemm_rs_destroy(mk_gemm_rs_t plan);

typedef struct mk_gemm_ar_s* mk_gemm_ar_t;
int mk_gemm_ar_create(mk_comm_t comm, int64_t m, int64_t n, int64_t k_local, int num_gather_ctas, int num_ctas,
                      mk_gemm_ar_t* out);
/* The same with run()'s variant chosen (GemmArOptions::one_shot): -1 by the measured crossover (what
   mk_gemm_ar_create does), 0 two-shot (a plan used only for mk_gemm_ar_all_reduce then holds no one-shot
   staging), 1 one-shot (one node of 2 ranks only). */
int mk_gemm_ar_create_ex(mk_comm_t comm, int64_t m, int64_t n, int64_t k_local, int num_gather_ctas, int num_ctas,
                         int one_shot, mk_gemm_ar_t* out);
/* out[m x n] = sum_ranks a b^T, the same bits on every rank. */
int mk_gemm_ar_run(mk_gemm_ar_t plan, const void* a, const void* b, void* out, void* stream);
/* out[m x n] = sum_ranks x. */
int mk_gemm_ar_all_reduce(mk_gemm_ar_t plan, const void* x, void* out, void* stream);
int mk_gemm_ar_captured(mk_gemm_ar_t plan, int* out);
int mk_gemm_ar_destroy(mk_gemm_ar_t plan);

#ifdef __cplusplus
}
#endif

#endif /* MKERNEL_MKERNEL_H_ */
