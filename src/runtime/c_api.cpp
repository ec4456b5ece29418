// C ABI over the C++ API: exceptions become return codes + mk_last_error().
#include "mkernel/mkernel.h"

#include <cstring>
#include <string>
#include <vector>

#include "mkernel/mkernel.hpp"
#include "src/runtime/c_api_util.hpp"
#include "src/runtime/gpu_spin.hpp"

static_assert(MK_MAX_LOCAL_RANKS == mk::kMaxLocalRanks);

struct mk_symm_s {
  mk::capi::HandleKind kind = mk::capi::HandleKind::Symm;  // (first: mk::capi::HandleKind)
  mk::SymmetricBuffer* buf;
  std::shared_ptr<std::atomic<bool>> comm_alive;  // its communicator's mk_comm_s::alive
  // What mk_symm_info returns, copied as the buffer is made (it never changes): mk_symm_info then reads nothing the
  // communicator owns, which a mk_comm_destroy on another thread could free between its alive check and the reads.
  mk_symm_info_t info{};
};

std::string& mk::capi::last_error() {
  static thread_local std::string s;
  return s;
}

using mk::capi::comm_call;
using mk::capi::guarded;
using mk::capi::handle_arg;
using mk::capi::HandleKind;
using mk::capi::null_arg;

namespace {

// The knob a binding names, of the type its call reads; throws naming the call and the knob otherwise.
mk::Knob knob_named(const char* call, const char* name, mk::KnobType type, const char* what) {
  const auto& specs = mk::knob_specs();
  for (size_t i = 0; i < specs.size(); ++i)
    if (std::strcmp(specs[i].name, name) == 0) {
      if (specs[i].type != type)
        mk::fail(call, ": ", name, " is not ", what, " knob (mkernel.print_config() gives its type)");
      return static_cast<mk::Knob>(i);
    }
  mk::fail(call, ": no knob named ", name, " (mkernel.print_config() lists them)");
}

}  // namespace

extern "C" {

int mk_abi_version(void) { return MK_ABI_VERSION; }
const char* mk_last_error(void) { return mk::capi::last_error().c_str(); }
#if !defined(MK_NET_HAVE_VERBS) || !defined(MK_NET_HAVE_FABRIC)
#error "MK_NET_HAVE_VERBS and MK_NET_HAVE_FABRIC come from CMakeLists.txt (MK_NET_BACKENDS)"
#endif
const char* mk_net_backends(void) {
  return MK_NET_HAVE_VERBS ? (MK_NET_HAVE_FABRIC ? "verbs fabric emu" : "verbs emu")
                           : (MK_NET_HAVE_FABRIC ? "fabric emu" : "emu");
}

int mk_get_unique_id(mk_unique_id_t* out) {
  if (!out) return null_arg(__func__, "out");
  static_assert(sizeof(out->internal) == sizeof(mk::UniqueId::bytes));
  return guarded([&] {
    auto id = mk::get_unique_id();
    std::memcpy(out->internal, id.bytes, sizeof(id.bytes));
  });
}

int mk_comm_init(mk_comm_t* out, int rank, int world, const mk_unique_id_t* id, int device) {
  if (!out || !id) return null_arg(__func__, "out or id");
  return guarded([&] {
    mk::UniqueId uid;
    std::memcpy(uid.bytes, id->internal, sizeof(uid.bytes));
    auto c = std::make_unique<mk_comm_s>();
    c->comm = std::make_unique<mk::Communicator>(rank, world, uid, device);
    *out = c.release();
  });
}

int mk_comm_init_env(mk_comm_t* out, int device) {
  if (!out) return null_arg(__func__, "out");
  return guarded([&] {
    auto c = std::make_unique<mk_comm_s>();
    c->comm = mk::Communicator::from_env(device);
    *out = c.release();
  });
}

int mk_comm_destroy(mk_comm_t comm) {
  if (!comm) return 0;
  if (const int rc = handle_arg(__func__, "comm", comm, HandleKind::Comm)) return rc;
  // Closed to new plans in the same step that finds none open (a plan being made on another thread counts as
  // open: refused; one begun after this step is refused by create_plan while the communicator still exists).
  int n = 0;
  if (!comm->open_plans.compare_exchange_strong(n, mk_comm_s::kClosing))
    return guarded([&] {
      if (n < 0) mk::fail("mk_comm_destroy: another thread is destroying this communicator already");
      const int calls = comm->calls.load();
      if (calls > 0) {
        const char* name = comm->call_name.load();
        mk::fail("mk_comm_destroy: ", calls == 1 ? "a call" : "calls", " of this communicator (", name ? name : "?",
                 calls == 1 ? ") is" : " the latest) are", " in flight on another host thread: destroy it once ",
                 calls == 1 ? "that call returns" : "they return",
                 " (one host thread at a time calls a communicator and destroys it); the communicator stays open");
      }
      mk::fail("mk_comm_destroy: ", n, n == 1 ? " plan made on this communicator is still open: destroy it"
                                                : " plans made on this communicator are still open: destroy them",
               " first (a plan uses its communicator until its own destroy call); the communicator stays open");
    });
  return guarded([&] {
    comm->alive->store(false);  // (its buffers' handles: freed with it)
    comm->kind = HandleKind::Destroyed;
    delete comm;
  });
}

int mk_comm_info(mk_comm_t comm, mk_comm_info_t* out) {
  if (!comm || !out) return null_arg(__func__, "comm or out");
  return comm_call(comm, "mk_comm_info", [&] {
    const auto& t = comm->comm->topology();
    *out = mk_comm_info_t{t.rank, t.world, t.node, t.num_nodes, t.local_rank, t.local_size,
                          comm->comm->device(), comm->comm->uses_vmm() ? 1 : 0};
  });
}

int mk_comm_barrier(mk_comm_t comm) {
  if (!comm) return null_arg(__func__, "comm");
  return comm_call(comm, "mk_comm_barrier", [&] { comm->comm->barrier(); });
}

int mk_comm_allgather(mk_comm_t comm, const void* mine, size_t bytes, void* all) {
  if (!comm) return null_arg(__func__, "comm");
  return comm_call(comm, "mk_comm_allgather", [&] {
    // A NULL pointer still joins the exchange (with no bytes), so that the other ranks fail at once on the count
    // instead of waiting for this rank until the bootstrap's bound.
    const bool bad = bytes && (!mine || !all);
    const std::vector<std::string> got = comm->comm->bootstrap().allgather(
        bytes && !bad ? std::string(static_cast<const char*>(mine), bytes) : std::string(), "mk_comm_allgather");
    if (bad) mk::fail("mk_comm_allgather: mine or all is NULL with bytes = ", bytes);
    for (size_t r = 0; r < got.size(); ++r)
      if (got[r].size() != bytes)
        mk::fail("mk_comm_allgather: rank ", r, " passed ", got[r].size(), " bytes, this rank ", bytes,
                 " (every rank must pass the same count)");
    if (bytes)
      for (size_t r = 0; r < got.size(); ++r) std::memcpy(static_cast<char*>(all) + r * bytes, got[r].data(), bytes);
  });
}

int mk_comm_check(mk_comm_t comm) {
  if (!comm) return null_arg(__func__, "comm");
  return comm_call(comm, "mk_comm_check", [&] { comm->comm->check(0, "check"); });
}

int mk_comm_network_bytes_put(mk_comm_t comm, uint64_t* out) {
  if (!comm || !out) return null_arg(__func__, "comm or out");
  return comm_call(comm, "mk_comm_network_bytes_put", [&] { *out = comm->comm->network_bytes_put(); });
}

int mk_comm_symmetric_bytes(mk_comm_t comm, uint64_t* out) {
  if (!comm || !out) return null_arg(__func__, "comm or out");
  return comm_call(comm, "mk_comm_symmetric_bytes", [&] { *out = comm->comm->symmetric_bytes(); });
}

int mk_symm_alloc(mk_comm_t comm, size_t bytes, mk_symm_t* out) {
  if (!comm || !out) return null_arg(__func__, "comm or out");
  return comm_call(comm, "mk_symm_alloc", [&] {
    auto s = std::make_unique<mk_symm_s>();
    s->buf = &comm->comm->alloc_symmetric(bytes);
    s->comm_alive = comm->alive;
    s->info.local = s->buf->local;
    s->info.bytes = s->buf->bytes;
    for (int i = 0; i < MK_MAX_LOCAL_RANKS; ++i) s->info.peers[i] = s->buf->peer[i];
    s->info.local_rank = s->buf->local_rank;
    s->info.local_size = s->buf->local_size;
    *out = s.release();
  });
}

int mk_symm_info(mk_symm_t buf, mk_symm_info_t* out) {
  if (!out) return null_arg(__func__, "out");
  if (const int rc = handle_arg(__func__, "buf", buf, HandleKind::Symm)) return rc;
  return guarded([&] {
    if (!buf->comm_alive->load())
      mk::fail("mk_symm_info: this buffer's communicator was destroyed, and the buffer with it (mk_symm_free "
               "only deletes its handle now)");
    *out = buf->info;
  });
}

int mk_symm_free(mk_comm_t comm, mk_symm_t buf) {
  if (!buf) return 0;  // (like free(NULL) and the destroy calls)
  if (const int rc = handle_arg(__func__, "buf", buf, HandleKind::Symm)) return rc;
  if (!buf->comm_alive->load()) {  // (`comm` is not read: the destroyed one's handle dangles)
    buf->kind = HandleKind::Destroyed;
    delete buf;
    return 0;
  }
  if (!comm) return null_arg(__func__, "comm");
  return comm_call(comm, "mk_symm_free", [&] {
    // (before anything collective: another communicator's free would wait in a collective its peers never enter)
    if (buf->comm_alive != comm->alive)
      mk::fail("mk_symm_free: buf was allocated on another communicator (pass the one mk_symm_alloc was given)");
    comm->comm->free_symmetric(*buf->buf);
    buf->kind = HandleKind::Destroyed;
    delete buf;
  });
}

int mk_print_config(char* buf, size_t len) {
  if (!buf) return null_arg(__func__, "buf");
  if (len == 0)
    return mk::capi::guarded([] { mk::fail("mk_print_config: len is 0 (no room even for the terminating NUL)"); });
  return guarded([&] {
    std::string s = mk::print_config();
    std::strncpy(buf, s.c_str(), len - 1);
    buf[len - 1] = '\0';
  });
}

int mk_knob_int(const char* name, int64_t* out) {
  if (!name || !out) return null_arg(__func__, "name or out");
  return guarded([&] { *out = mk::knob_int(knob_named("mk_knob_int", name, mk::KnobType::Int, "an integer")); });
}

int mk_gpu_spin(int64_t cycles, void* stream) {
  return guarded([&] { mk::gpu_spin(cycles, static_cast<cudaStream_t>(stream), "mk_gpu_spin"); });
}

int mk_knob_bool(const char* name, int* out) {
  if (!name || !out) return null_arg(__func__, "name or out");
  return guarded([&] { *out = mk::knob_bool(knob_named("mk_knob_bool", name, mk::KnobType::Bool, "a bool")) ? 1 : 0; });
}

}  // extern "C"
