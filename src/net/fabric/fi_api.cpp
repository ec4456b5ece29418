// mkernel fabric backend: dlopen of libfabric.so.1 (see fi_api.hpp).
#include "src/net/fabric/fi_api.hpp"

#include <dlfcn.h>

#include <mutex>
#include <string>

#include "mkernel/error.hpp"

namespace mk::net::fabric {

namespace {

template <typename Fn>
void bind(void* lib, const char* sym, Fn& out) {
  void* p = dlsym(lib, sym);
  if (!p)
    fail("fabric: libfabric.so.1 lacks the symbol ", sym, " (", dlerror(),
         "); install a libfabric >= 1.14 (Debian/Ubuntu: libfabric1)");
  out = reinterpret_cast<Fn>(p);
}

FiApi load() {
  // NOTES: the handle is never dlclose'd: providers may keep threads and
  // atexit handlers inside the library for the life of the process.
  void* lib = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    fail("fabric: cannot load libfabric.so.1 (", e ? e : "unknown dlopen error",
         "); install libfabric (Debian/Ubuntu: libfabric1) or pick another transport with MK_NET");
  }
  FiApi api;
  bind(lib, "fi_getinfo", api.getinfo);
  bind(lib, "fi_freeinfo", api.freeinfo);
  bind(lib, "fi_dupinfo", api.dupinfo);
  bind(lib, "fi_fabric", api.fabric);
  bind(lib, "fi_strerror", api.strerror);
  bind(lib, "fi_version", api.version);
  uint32_t v = api.version();
  if (FI_VERSION_LT(v, kFiVersion))
    fail("fabric: libfabric ", FI_MAJOR(v), ".", FI_MINOR(v), " is too old (need >= ",
         FI_MAJOR(kFiVersion), ".", FI_MINOR(kFiVersion), ")");
  return api;
}

}  // namespace

const FiApi& fi_api() {
  // A failed load is retried on the next call (the error is rethrown each
  // time with the same reason) rather than cached as a half-filled table.
  static std::mutex mu;
  static FiApi api;
  static bool loaded = false;
  std::lock_guard<std::mutex> lk(mu);
  if (!loaded) {
    api = load();
    loaded = true;
  }
  return api;
}

}  // namespace mk::net::fabric
