#pragma once
// The answers ranks exchange at each step of alloc_symmetric
// (SymmetricHeap::alloc): "ok:" (then, for CUDA IPC, the rank's handle) or
// "failed:" and why. Every rank reads the same list, so every rank throws the
// same error, naming the first rank that failed, or goes on together.

#include <cstddef>
#include <exception>
#include <string>
#include <vector>

#include "mkernel/error.hpp"

namespace mk::alloc_status {

inline constexpr char kOk[] = "ok:";
inline constexpr char kFailed[] = "failed:";

// This rank's answer for a step that threw `e` (its "mkernel: " prefix is
// dropped: the error built from the answers says it once).
inline std::string failed(const std::exception& e) {
  std::string why = e.what();
  if (why.rfind("mkernel: ", 0) == 0) why.erase(0, 9);
  return kFailed + why;
}

// "" when every rank's answer is ok; else the message of the error every rank
// throws: the first rank that failed, or one whose answer is neither (its
// collective call at this point is another one).
inline std::string step_error(const std::vector<std::string>& got, int me, const char* what, size_t bytes) {
  for (size_t r = 0; r < got.size(); ++r) {
    if (got[r].rfind(kOk, 0) == 0) continue;
    if (got[r].rfind(kFailed, 0) == 0)
      return cat("alloc_symmetric of ", bytes, " bytes: rank ", r, " ", what, ": ", got[r].substr(sizeof(kFailed) - 1));
    return cat("alloc_symmetric: rank ", r, " made another collective call at this point (rank ", me,
               " is in alloc_symmetric of ", bytes, " bytes): the ranks' collective calls are out of step");
  }
  return "";
}

}  // namespace mk::alloc_status
