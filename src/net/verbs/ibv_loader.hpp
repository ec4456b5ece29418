// mkernel: libibverbs (and, where its header exists, libefa) loaded at run
// time with dlopen, so that libmkernel.so has no link-time dependency on
// RDMA libraries and loads on machines without them (DESIGN.md §5).
//
// Only exported functions are resolved here. The data path (ibv_post_send,
// ibv_poll_cq, ibv_post_recv, the ibv_wr_* of extended QPs) is static inline
// in <infiniband/verbs.h>, dispatching through the context's ops table, and
// needs no symbol. Members are named without the ibv_ prefix on purpose:
// verbs.h defines function-like macros (ibv_reg_mr, ibv_query_port) that
// would rewrite `api.ibv_reg_mr(...)`.
#pragma once

#if defined(MK_NET_HAVE_VERBS) && !MK_NET_HAVE_VERBS
#error "a build without the verbs backend (MK_NET_BACKENDS) compiles a file that includes its RDMA header"
#endif

#include <infiniband/verbs.h>

#if __has_include(<infiniband/efadv.h>)
#include <infiniband/efadv.h>
#define MK_HAVE_EFADV 1
#else
// Without efadv.h (older rdma-core) the EFA/SRD path is compiled out; EFA
// devices are then reported as unsupported by this backend.
#define MK_HAVE_EFADV 0
#endif

namespace mk::net::verbs {

struct IbvApi {
  ibv_device** (*get_device_list)(int*);
  void (*free_device_list)(ibv_device**);
  const char* (*get_device_name)(ibv_device*);
  ibv_context* (*open_device)(ibv_device*);
  int (*close_device)(ibv_context*);
  int (*query_device)(ibv_context*, ibv_device_attr*);
  // The exported query_port takes the old (compat) port_attr layout; query_port()
  // below prefers the context op that fills the full struct.
  int (*query_port_compat)(ibv_context*, uint8_t, struct _compat_ibv_port_attr*);
  int (*query_gid)(ibv_context*, uint8_t, int, ibv_gid*);
  // Optional (rdma-core >= 32): GID type (RoCE v1/v2). Null: read sysfs.
  int (*query_gid_ex)(ibv_context*, uint32_t, uint32_t, ibv_gid_entry*, uint32_t, size_t);
  ibv_pd* (*alloc_pd)(ibv_context*);
  int (*dealloc_pd)(ibv_pd*);
  ibv_mr* (*reg_mr)(ibv_pd*, void*, size_t, int);
  ibv_mr* (*reg_mr_iova2)(ibv_pd*, void*, size_t, uint64_t, unsigned);  // optional
  ibv_mr* (*reg_dmabuf_mr)(ibv_pd*, uint64_t, size_t, uint64_t, int, int);  // optional (rdma-core >= 34)
  int (*dereg_mr)(ibv_mr*);
  ibv_cq* (*create_cq)(ibv_context*, int, void*, ibv_comp_channel*, int);
  int (*destroy_cq)(ibv_cq*);
  ibv_qp* (*create_qp)(ibv_pd*, ibv_qp_init_attr*);
  int (*modify_qp)(ibv_qp*, ibv_qp_attr*, int);
  int (*destroy_qp)(ibv_qp*);
  ibv_ah* (*create_ah)(ibv_pd*, ibv_ah_attr*);
  int (*destroy_ah)(ibv_ah*);
  const char* (*wc_status_str)(ibv_wc_status);
  ibv_qp_ex* (*qp_to_qp_ex)(ibv_qp*);  // optional
#if MK_HAVE_EFADV
  // From libefa.so.1, all null when it is absent.
  int (*efadv_query_device)(ibv_context*, efadv_device_attr*, uint32_t);
  ibv_qp* (*efadv_create_qp_ex)(ibv_context*, ibv_qp_init_attr_ex*, efadv_qp_init_attr*, uint32_t);
#endif

  // Port attributes through the context op when the provider has it (full
  // struct), else the exported compat entry point.
  int query_port(ibv_context* ctx, uint8_t port, ibv_port_attr* attr) const;
};

// Loads on first use (thread-safe) and returns the table. Throws mk::Error
// naming libibverbs when the library or a required symbol is missing.
const IbvApi& ibv();

}  // namespace mk::net::verbs
