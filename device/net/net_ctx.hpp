// mkernel: what kernels need to use the network (plain data, host-visible).
#pragma once

#include <cstdint>

#include "device/net/cmd_queue.hpp"

namespace mk::net {

constexpr int kMaxNetQueues = 16;

struct NetCtx {
  CmdQueue queues[kMaxNetQueues];
  int32_t num_queues = 0;
  int32_t rank = 0;
  int32_t num_rail_peers = 0;  // peers a BARRIER command reaches
  int32_t emulated = 0;        // 1 when the transport is the emulated NIC
};

}  // namespace mk::net
