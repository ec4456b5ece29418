// mkernel fabric backend: libfabric loaded at run time (DESIGN.md §5).
//
// libmkernel.so does not link libfabric. Only the few functions libfabric
// exports as symbols are looked up here with dlsym; everything else (fi_domain,
// fi_endpoint, fi_mr_reg, fi_write, fi_cq_read, fi_close, ...) is a static
// inline in the headers that calls through the provider's ops tables, so it
// needs no symbol. Header inlines that DO call exported symbols (fi_allocinfo
// calls fi_dupinfo) must not be used; use the table below instead.
#pragma once

#if defined(MK_NET_HAVE_FABRIC) && !MK_NET_HAVE_FABRIC
#error "a build without the fabric backend (MK_NET_BACKENDS) compiles a file that includes its RDMA header"
#endif

#include <rdma/fabric.h>

namespace mk::net::fabric {

struct FiApi {
  int (*getinfo)(uint32_t version, const char* node, const char* service, uint64_t flags,
                 const struct fi_info* hints, struct fi_info** info) = nullptr;
  void (*freeinfo)(struct fi_info* info) = nullptr;
  struct fi_info* (*dupinfo)(const struct fi_info* info) = nullptr;
  int (*fabric)(struct fi_fabric_attr* attr, struct fid_fabric** fabric, void* context) = nullptr;
  const char* (*strerror)(int errnum) = nullptr;
  uint32_t (*version)() = nullptr;

  // fi_allocinfo() without the header inline (which references fi_dupinfo).
  struct fi_info* allocinfo() const { return dupinfo(nullptr); }
  const char* err(int rc) const { return strerror(rc < 0 ? -rc : rc); }
};

// Loads libfabric.so.1 once per process (thread-safe) and returns its table.
// Throws mk::Error mentioning "libfabric" when the library or a symbol is
// missing, or when it is older than the API version we compile against.
const FiApi& fi_api();

// The libfabric API version we request from fi_getinfo.
constexpr uint32_t kFiVersion = FI_VERSION(1, 14);

}  // namespace mk::net::fabric
