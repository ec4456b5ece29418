// mkernel: dlopen/dlsym of libibverbs.so.1 (and libefa.so.1). See ibv_loader.hpp.
#include "src/net/verbs/ibv_loader.hpp"

#include <dlfcn.h>

#include <cstring>
#include <mutex>
#include <string>

#include "mkernel/error.hpp"

namespace mk::net::verbs {

namespace {

template <typename F>
void sym(void* lib, F& fn, const char* name, bool required, const char* libname) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (!fn && required)
    fail("verbs: ", libname, " lacks ", name, " (rdma-core too old?); install a newer libibverbs1");
}

void load_all(IbvApi& a) {
  // NOTES: the handle is never closed: providers (libmlx5, libefa) keep
  // pointers into libibverbs for the life of the process.
  void* lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!lib) {
    const char* e = dlerror();
    fail("verbs: cannot load libibverbs.so.1 (", e ? e : "not found",
         "); install libibverbs1 and ibverbs-providers (apt) or rdma-core");
  }
  const char* L = "libibverbs.so.1";
  sym(lib, a.get_device_list, "ibv_get_device_list", true, L);
  sym(lib, a.free_device_list, "ibv_free_device_list", true, L);
  sym(lib, a.get_device_name, "ibv_get_device_name", true, L);
  sym(lib, a.open_device, "ibv_open_device", true, L);
  sym(lib, a.close_device, "ibv_close_device", true, L);
  sym(lib, a.query_device, "ibv_query_device", true, L);
  sym(lib, a.query_port_compat, "ibv_query_port", true, L);
  sym(lib, a.query_gid, "ibv_query_gid", true, L);
  sym(lib, a.query_gid_ex, "_ibv_query_gid_ex", false, L);
  sym(lib, a.alloc_pd, "ibv_alloc_pd", true, L);
  sym(lib, a.dealloc_pd, "ibv_dealloc_pd", true, L);
  sym(lib, a.reg_mr, "ibv_reg_mr", true, L);
  sym(lib, a.reg_mr_iova2, "ibv_reg_mr_iova2", false, L);
  sym(lib, a.reg_dmabuf_mr, "ibv_reg_dmabuf_mr", false, L);
  sym(lib, a.dereg_mr, "ibv_dereg_mr", true, L);
  sym(lib, a.create_cq, "ibv_create_cq", true, L);
  sym(lib, a.destroy_cq, "ibv_destroy_cq", true, L);
  sym(lib, a.create_qp, "ibv_create_qp", true, L);
  sym(lib, a.modify_qp, "ibv_modify_qp", true, L);
  sym(lib, a.destroy_qp, "ibv_destroy_qp", true, L);
  sym(lib, a.create_ah, "ibv_create_ah", true, L);
  sym(lib, a.destroy_ah, "ibv_destroy_ah", true, L);
  sym(lib, a.wc_status_str, "ibv_wc_status_str", true, L);
  sym(lib, a.qp_to_qp_ex, "ibv_qp_to_qp_ex", false, L);
#if MK_HAVE_EFADV
  if (void* efa = dlopen("libefa.so.1", RTLD_NOW | RTLD_GLOBAL)) {
    sym(efa, a.efadv_query_device, "efadv_query_device", false, "libefa.so.1");
    sym(efa, a.efadv_create_qp_ex, "efadv_create_qp_ex", false, "libefa.so.1");
  }
#endif
}

}  // namespace

int IbvApi::query_port(ibv_context* ctx, uint8_t port, ibv_port_attr* attr) const {
  std::memset(attr, 0, sizeof(*attr));
  if (verbs_context* v = verbs_get_ctx_op(ctx, query_port))
    return v->query_port(ctx, port, attr, sizeof(*attr));
  // The compat layout is a prefix of ibv_port_attr.
  return query_port_compat(ctx, port, reinterpret_cast<_compat_ibv_port_attr*>(attr));
}

const IbvApi& ibv() {
  static IbvApi a{};
  static std::once_flag once;
  static std::string error;
  std::call_once(once, [] {
    try {
      load_all(a);
    } catch (const Error& e) {
      error = e.what();
    }
  });
  if (!error.empty()) throw Error(error);
  return a;
}

}  // namespace mk::net::verbs
