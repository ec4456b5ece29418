// mkernel: errors. Every host-side failure is an mk::Error whose message says
// who failed, doing what, and what to change.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace mk {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Concatenate anything streamable into one string.
template <typename... Args>
std::string cat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

template <typename... Args>
[[noreturn]] void fail(Args&&... args) {
  throw Error(cat("mkernel: ", std::forward<Args>(args)...));
}

// Formats a CUDA runtime error code (kept out of this header so that it does
// not pull in cuda_runtime.h).
std::string cuda_error_string(int code);

// The CUDA runtime error left pending in this library's own runtime, as
// cudaPeekAtLastError reads it there (0: none). The library links the runtime
// statically, so its last error is apart from the application's: every error
// of a call the library handles or ignores is cleared there, else its next
// launch check would report it as that launch's. Tests check that none is left.
int pending_cuda_error();

}  // namespace mk

// Throws mk::Error when a CUDA runtime call fails.
#define MK_CUDA_CHECK(expr)                                                          \
  do {                                                                               \
    int mk_err_ = static_cast<int>(expr);                                            \
    if (mk_err_ != 0)                                                                \
      ::mk::fail(#expr, " failed: ", ::mk::cuda_error_string(mk_err_), " (", __FILE__, \
                 ":", __LINE__, ")");                                                \
  } while (0)
