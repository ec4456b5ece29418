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

// Why `e` failed, for a message that embeds it: its text without the
// "mkernel: " that fail() puts first (the outer message says it once).
inline std::string error_reason(const std::exception& e) {
  std::string why = e.what();
  if (why.rfind("mkernel: ", 0) == 0) why.erase(0, 9);
  return why;
}

// Formats a CUDA runtime error code (kept out of this header so that it does
// not pull in cuda_runtime.h).
std::string cuda_error_string(int code);

// The CUDA runtime error left pending in this library's own runtime, as
// cudaPeekAtLastError reads it there (0: none). The library links the runtime
// statically, so its last error is apart from the application's, and one left
// set there would be reported by the library's next launch check as that
// launch's. The library clears the errors it reports (MK_CUDA_CHECK, its
// setup's own failure messages) and those teardown ignores; tests check that
// a refused teardown or checked call leaves none.
int pending_cuda_error();

// MK_CUDA_CHECK's failure: throws mk::Error ("<expr> failed: <error> (<file>:<line>)"), after clearing the
// error from the library's runtime unless it is one that leaves the device unusable (those cannot be
// cleared): the exception reports it, and left set the library's next launch check reported it again as
// that launch's failure (a caller that caught the first error and went on failed at its next call). It
// clears the library's runtime: a program's own MK_CUDA_CHECK leaves the program's last error as it was.
[[noreturn]] void cuda_check_failed(int code, const char* expr, const char* file, int line);

}  // namespace mk

// Throws mk::Error when a CUDA runtime call fails (mk::cuda_check_failed).
#define MK_CUDA_CHECK(expr)                                                        \
  do {                                                                             \
    int mk_err_ = static_cast<int>(expr);                                          \
    if (mk_err_ != 0) ::mk::cuda_check_failed(mk_err_, #expr, __FILE__, __LINE__); \
  } while (0)
