// Shared by every C ABI translation unit (runtime and ops): exceptions become
// a non-zero return code and this thread's mk_last_error() message.
#pragma once

#include <atomic>
#include <exception>
#include <memory>
#include <string>
#include <utility>

#include "mkernel/communicator.hpp"
#include "mkernel/error.hpp"

namespace mk::capi {

// What a handle is: the first member of every handle struct (offset 0: none has a base class or a virtual
// function), overwritten with Destroyed as the handle is destroyed. Every entry point that takes a handle checks it
// (handle_arg): a handle of another kind (C converts any pointer: an mk_gemm_rs_t passed as an mk_ag_gemm_t was used
// as one) or one destroyed already (a second destroy freed the same memory twice) is refused instead. Best effort:
// the allocator writes its own list pointers over a freed block's first bytes (glibc), so a destroyed handle is
// mostly refused as "not a live handle of this library" rather than named as destroyed, and its memory may since
// hold a live handle again.
enum class HandleKind : uint32_t {
  Comm = 0x6d6b4301,
  Symm,
  AgGemm,
  GemmRs,
  GemmAr,
  RingAttn,
  Destroyed = 0x6d6b44ea
};

}  // namespace mk::capi

// The opaque communicator handle of include/mkernel/mkernel.h. It counts the plan handles made on it and its
// own calls in flight (mk_comm_destroy refuses while either is: they would use a destroyed communicator), and
// shares a flag with its symmetric buffers' handles, false once it is destroyed (which frees those buffers).
struct mk_comm_s {
  static constexpr mk::capi::HandleKind handle_kind() { return mk::capi::HandleKind::Comm; }
  mk::capi::HandleKind kind = handle_kind();  // (first: mk::capi::HandleKind)
  std::unique_ptr<mk::Communicator> comm;
  static constexpr int kClosing = -(1 << 30);  // open_plans once mk_comm_destroy has begun
  std::atomic<int> open_plans{0};  // open plans + own calls in flight (mk::capi::comm_call); kClosing: destroying
  std::atomic<int> calls{0};       // of those, own calls in flight (for mk_comm_destroy's message)
  std::atomic<const char*> call_name{nullptr};  // the latest of them to begin ("mk_comm_barrier")
  std::shared_ptr<std::atomic<bool>> alive = std::make_shared<std::atomic<bool>>(true);
};

namespace mk::capi {

std::string& last_error();  // this thread's message (c_api.cpp)

// Sets this thread's message; out of memory for it, a fixed one (nothing may escape an extern "C" function).
inline void set_last_error(const char* msg) noexcept {
  try {
    last_error() = msg;
  } catch (...) {
    try {
      last_error().clear();
    } catch (...) {
    }
  }
}

template <typename F>
int guarded(F&& f) {
  try {
    f();
    return 0;
  } catch (const std::exception& e) {
    set_last_error(e.what());
  } catch (...) {
    set_last_error("mkernel: unknown error");
  }
  return 1;
}

// `call`: the C function (__func__), named in the message with the argument(s) `what`.
inline int null_arg(const char* call, const char* what) {
  try {
    last_error() = std::string("mkernel: ") + call + ": " + what + " is NULL";
  } catch (...) {
    set_last_error("mkernel: an argument is NULL");
  }
  return 1;
}

inline const char* kind_name(HandleKind k) {
  switch (k) {
    case HandleKind::Comm: return "a communicator (mk_comm_t)";
    case HandleKind::Symm: return "a symmetric buffer (mk_symm_t)";
    case HandleKind::AgGemm: return "an AllGather+GEMM plan (mk_ag_gemm_t)";
    case HandleKind::GemmRs: return "a GEMM+ReduceScatter plan (mk_gemm_rs_t)";
    case HandleKind::GemmAr: return "a GEMM+AllReduce plan (mk_gemm_ar_t)";
    case HandleKind::RingAttn: return "a ring attention plan (mk_ring_attn_t)";
    case HandleKind::Destroyed: return "a destroyed handle";
  }
  return nullptr;  // (not a kind: a stray or reused pointer)
}

// 0 when `h` is a live handle of kind `want`; else 1, with this thread's message naming `call` (the C function),
// the argument `arg` and what it holds (NULL: null_arg's message).
inline int handle_arg(const char* call, const char* arg, const void* h, HandleKind want) {
  if (!h) return null_arg(call, arg);
  const HandleKind got = *static_cast<const HandleKind*>(h);
  if (got == want) return 0;
  return guarded([&] {
    if (got == HandleKind::Destroyed)
      fail(call, ": ", arg, " was destroyed already (its destroy call ran): a handle is used until its destroy");
    const char* name = kind_name(got);
    fail(call, ": ", arg, " is not ", kind_name(want), name ? " but " : "",
         name ? name : " (not a live handle of this library: a stray pointer, or a destroyed one whose memory was "
                       "reused?)");
  });
}

// Counts one use of `comm` (a plan being made or open, one of its own calls in flight): false, counting nothing,
// once a mk_comm_destroy has begun (its count closed), with this thread's message saying so (naming `call`, the
// C function, where one is given).
inline bool count_use(mk_comm_s* comm, const char* call = nullptr) {
  if (comm->open_plans.fetch_add(1) >= 0) return true;
  --comm->open_plans;
  guarded([&] {
    fail(call ? call : "", call ? ": " : "", "the communicator is being destroyed (mk_comm_destroy on another thread)");
  });
  return false;
}

// One of the communicator's own calls (`call`, e.g. "mk_comm_barrier"): f() counted as a use of it while it runs,
// so that a mk_comm_destroy on another host thread meanwhile is refused (it would free what the call uses; a
// barrier waits for the other ranks for up to MK_BOOTSTRAP_TIMEOUT_MS), and refused itself once a destroy has
// begun. A call on a communicator another thread already destroyed is the caller's error, as for any call.
template <typename F>
int comm_call(mk_comm_s* comm, const char* call, F&& f) {
  if (const int rc = handle_arg(call, "comm", comm, HandleKind::Comm)) return rc;
  // calls goes up before open_plans and down before it: a destroy that finds open_plans > 0 because of this call
  // sees calls > 0 too, except in the instant between the two decrements (then it names a plan; never unsafe).
  comm->call_name = call;
  ++comm->calls;
  if (!count_use(comm, call)) {
    --comm->calls;
    return 1;
  }
  const int rc = guarded(std::forward<F>(f));
  --comm->calls;
  --comm->open_plans;
  return rc;
}

// Creates an op plan handle (a struct holding std::unique_ptr<Plan> plan and
// mk_comm_s* owner) over a communicator: Plan(*comm, args...), counted on it.
template <typename Handle, typename Plan, typename... Args>
int create_plan(const char* call, mk_comm_s* comm, Handle** out, const Args&... args) {
  if (!out) return null_arg(call, "out");
  if (const int rc = handle_arg(call, "comm", comm, HandleKind::Comm)) return rc;
  // Counted while it is made too: a destroy meanwhile is refused. One that began first (the count closed:
  // mk_comm_destroy) refuses this; a call on a communicator another thread already destroyed is the caller's
  // error, as for any call.
  if (!count_use(comm, call)) return 1;
  const int rc = guarded([&] {
    auto h = std::make_unique<Handle>();
    h->plan = std::make_unique<Plan>(*comm->comm, args...);
    h->owner = comm;
    *out = h.release();
  });
  if (rc) --comm->open_plans;
  return rc;
}

// Destroys a plan handle (NULL: nothing), then uncounts it on its communicator. Refused, the plan left open, while
// one of its calls is enqueuing its work on another host thread (it would use what the destroy frees); a destroy
// racing a call that is only beginning is not seen (one host thread at a time calls a plan and destroys it).
template <typename Handle>
int destroy_plan(const char* call, Handle* plan) {
  if (!plan) return 0;
  if (const int rc = handle_arg(call, "plan", plan, Handle::handle_kind())) return rc;
  if (plan->plan->in_call())
    return guarded([call] {
      fail(call, ": a plan's destroy came while one of its calls, on another host thread, was still enqueuing its "
           "work: destroy it once that call returned (one host thread at a time calls a plan and destroys it); the "
           "plan stays open");
    });
  return guarded([&] {
    mk_comm_s* owner = plan->owner;
    plan->kind = HandleKind::Destroyed;
    delete plan;
    if (owner) --owner->open_plans;
  });
}

// *out = 0 when no launch of the plan was ever captured in a CUDA graph (Plan::captured()), 1 while a graph
// holding one may still exist (Plan::graphs_alive()), 2 once every such graph is gone.
template <typename Handle>
int plan_captured(const char* call, const Handle* plan, int* out) {
  if (!out) return null_arg(call, "out");
  if (const int rc = handle_arg(call, "plan", plan, Handle::handle_kind())) return rc;
  *out = !plan->plan->captured() ? 0 : plan->plan->graphs_alive() ? 1 : 2;
  return 0;
}

}  // namespace mk::capi
