// Test helper: an EnvLookup backed by a map.
#pragma once

#include <map>
#include <string>

#include "mkernel/knobs.hpp"

namespace mk::test {

inline EnvLookup env_of(std::map<std::string, std::string> m) {
  return [m = std::move(m)](const std::string& k) -> std::optional<std::string> {
    auto it = m.find(k);
    if (it == m.end()) return std::nullopt;
    return it->second;
  };
}

// Runs f, expects mk::Error whose message contains every needle.
template <typename F>
std::string expect_error(F&& f, std::initializer_list<const char*> needles) {
  try {
    f();
  } catch (const std::exception& e) {
    std::string msg = e.what();
    for (const char* n : needles)
      if (msg.find(n) == std::string::npos) return "message lacks '" + std::string(n) + "': " + msg;
    return "";
  }
  return "no error thrown";
}

}  // namespace mk::test
