// Shared by the gpu and dist tiers: one communicator per process, from the
// launcher environment (a single rank when there is none).
#pragma once

#include <memory>

#include "mkernel/mkernel.hpp"

namespace mk::test {

inline Communicator& comm() {
  static std::unique_ptr<Communicator> c = Communicator::from_env();
  return *c;
}

}  // namespace mk::test
