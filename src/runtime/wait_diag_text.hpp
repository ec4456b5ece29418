// The text of a device wait's diagnostic (WaitDiag, device/ctx.hpp): who waited for what, how long, and why it
// stopped. Empty while the record is not complete. Communicator::check and the device-health reports use it.
#pragma once

#include <string>

#include "device/ctx.hpp"

namespace mk {

std::string format_diag(const WaitDiag& d);

}  // namespace mk
