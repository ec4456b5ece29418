// Shared by every C ABI translation unit (runtime and ops): exceptions become
// a non-zero return code and this thread's mk_last_error() message.
#pragma once

#include <exception>
#include <string>

namespace mk::capi {

std::string& last_error();  // this thread's message (c_api.cpp)

template <typename F>
int guarded(F&& f) {
  try {
    f();
    return 0;
  } catch (const std::exception& e) {
    last_error() = e.what();
  } catch (...) {
    last_error() = "mkernel: unknown error";
  }
  return 1;
}

inline int null_arg(const char* what) {
  last_error() = std::string("mkernel: ") + what + " is NULL";
  return 1;
}

}  // namespace mk::capi
