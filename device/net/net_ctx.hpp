// mkernel: what kernels need to use the network (plain data, host-visible).
#pragma once

#include <cstdint>

#include "cmd_queue.hpp"
#include "delivery.hpp"

namespace mk::net {

constexpr int kMaxNetQueues = 16;
// Regions whose puts may travel inline (PUT_INLINE): ids below this.
constexpr int kMaxInlineRegions = 32;

struct NetCtx {
  CmdQueue queues[kMaxNetQueues];
  int32_t num_queues = 0;
  int32_t rank = 0;
  int32_t num_rail_peers = 0;  // peers a BARRIER command reaches
  int32_t emulated = 0;        // 1 when the transport is the emulated NIC
  // When the transport delivers through rings (device/net/delivery.hpp),
  // the delivery agent CTAs (device/net/agent.cuh) every kernel that pushes
  // commands must run, or its writes never happen (MK_EMU_AGENTS); else 0.
  int32_t agent = 0;
  // The delivery ring of each queue's transport (size 0: none).
  DeliveryRing delivery[kMaxNetQueues] = {};
  // SMs a persistent kernel whose CTAs wait for network data must leave
  // free (0: none) because the transport delivers on this GPU (emu: the
  // delivery agent CTAs; fabric: signal-add kernels), or the ranks
  // deadlock (seen with AG+GEMM and GEMM+RS on emu): MK_NET_FREE_SMS.
  // Host-side only.
  int32_t free_sms = 0;
  // Puts of at most this many bytes (a multiple of 4 from a 4-byte aligned
  // source) carry their bytes in the command (PUT_INLINE), when the transport
  // asks for it (Transport::inline_bytes); 0: never.
  uint32_t inline_max = 0;
  // This rank's base address of each registered region (nullptr: not
  // registered yet, or id >= kMaxInlineRegions), for PUT_INLINE.
  const void* region_base[kMaxInlineRegions] = {};
};

// Blocks a kernel that pushes commands adds for the delivery agent.
MK_HD int agent_ctas(const NetCtx& nc) { return nc.agent > 0 ? nc.agent : 0; }

// A kernel's launch argument for the delivery agent: `ctas` (0: none) CTAs,
// the lowest indices (made resident first), run net::run_agent on *nc
// instead of the kernel's roles; the others shift down by `ctas`.
struct AgentLaunch {
  const NetCtx* nc = nullptr;  // device memory
  int32_t ctas = 0;
};

}  // namespace mk::net
