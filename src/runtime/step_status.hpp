#pragma once
// The answers ranks exchange at a collective step that can fail on some ranks
// only (SymmetricHeap::alloc's allocation and mapping, a transport's
// register_region): "ok:" (then the step's payload: a CUDA IPC handle, a
// memory registration's key) or "failed:" and why. Every rank reads the same
// list, so every rank throws the same error, naming the first rank that
// failed, or goes on together: a rank that fails alone no longer leaves the
// others waiting in the step's exchange until the bootstrap bound.

#include <cstddef>
#include <exception>
#include <string>
#include <vector>

#include "mkernel/error.hpp"

namespace mk::step_status {

inline constexpr char kOk[] = "ok:";
inline constexpr char kFailed[] = "failed:";
// A step may tag its answers with its own pair (the plans' check:
// tp::PlanArgs), so that a rank in another step at this point reads them as
// out of step, not as its own step's answers.
struct Tags {
  const char* ok = kOk;
  const char* failed = kFailed;
};

// This rank's answer for a step that threw `e` (its "mkernel: " prefix is
// dropped: the error built from the answers says it once).
inline std::string failed(const std::exception& e, Tags tags = {}) { return tags.failed + error_reason(e); }

// "" when every rank's answer is ok; else the message of the error every rank
// throws: "<call>: rank R <what>: <why>" for the first rank that failed, or
// one naming a rank whose answer is neither (its collective call at this
// point is another one). `call` names the step ("alloc_symmetric of 4096
// bytes"), `what` the failure ("could not allocate its part").
inline std::string step_error(const std::vector<std::string>& got, int me, const std::string& call, const char* what,
                              Tags tags = {}) {
  const std::string ok = tags.ok, bad = tags.failed;
  for (size_t r = 0; r < got.size(); ++r) {
    if (got[r].rfind(ok, 0) == 0) continue;
    if (got[r].rfind(bad, 0) == 0) return cat(call, ": rank ", r, " ", what, ": ", got[r].substr(bad.size()));
    return cat(call, ": rank ", r, " made another collective call at this point (rank ", me, " is in ", call,
               "): the ranks' collective calls are out of step");
  }
  return "";
}

// The payloads of an all-ok answer list (the ok tag removed).
inline std::vector<std::string> payloads(std::vector<std::string> got, Tags tags = {}) {
  const size_t n = std::string(tags.ok).size();
  for (std::string& g : got) g.erase(0, n);
  return got;
}

}  // namespace mk::step_status
