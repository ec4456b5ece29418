// Shared by every C ABI translation unit (runtime and ops): exceptions become
// a non-zero return code and this thread's mk_last_error() message.
#pragma once

#include <exception>
#include <memory>
#include <string>

#include "mkernel/communicator.hpp"

// The opaque communicator handle of include/mkernel/mkernel.h.
struct mk_comm_s {
  std::unique_ptr<mk::Communicator> comm;
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

inline int null_arg(const char* what) {
  try {
    last_error() = std::string("mkernel: ") + what + " is NULL";
  } catch (...) {
    set_last_error("mkernel: an argument is NULL");
  }
  return 1;
}

// Creates an op plan handle (a struct holding std::unique_ptr<Plan> plan)
// over a communicator: Plan(*comm, args...).
template <typename Handle, typename Plan, typename... Args>
int create_plan(mk_comm_s* comm, Handle** out, const Args&... args) {
  if (!comm || !out) return null_arg("comm or out");
  return guarded([&] {
    auto h = std::make_unique<Handle>();
    h->plan = std::make_unique<Plan>(*comm->comm, args...);
    *out = h.release();
  });
}

// *out = 1 when a launch of the plan was ever captured in a CUDA graph, else 0 (Plan::captured()).
template <typename Handle>
int plan_captured(const Handle* plan, int* out) {
  if (!plan || !out) return null_arg("plan or out");
  *out = plan->plan->captured() ? 1 : 0;
  return 0;
}

}  // namespace mk::capi
