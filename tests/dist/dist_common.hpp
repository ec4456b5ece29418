// Shared by the dist tier's files: one communicator per process.
#pragma once

#include <memory>

#include "mkernel/mkernel.hpp"

namespace mk::test {

inline Communicator& comm() {
  static std::unique_ptr<Communicator> c = Communicator::from_env();
  return *c;
}

}  // namespace mk::test
