// What a persistent op's grid leaves free for the network transport's
// delivery (MK_NET_FREE_SMS): none for RC verbs; for emu the knob, at least
// one SM for each agent CTA (MK_EMU_AGENTS); for fabric, and EFA whose proxy
// launches signal kernels, the knob, else 1, or 8 when the GPU is shared
// through MPS; one SM per agent CTA where delivery agents do the work.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "mkernel/error.hpp"
#include "src/net/transport.hpp"
#include "src/ops/ag_gemm/tp_plan.hpp"

namespace {

using mk::net::transport_free_sms;

TEST(NetFreeSms, ByTransportKnobAndMps) {
  EXPECT_EQ(transport_free_sms("verbs", 0, false), 0);
  EXPECT_EQ(transport_free_sms("verbs", 5, true), 0);  // verbs runs no kernel on the GPU
  EXPECT_EQ(transport_free_sms("emu", 0, false), 1);
  EXPECT_EQ(transport_free_sms("fabric", 0, false), 1);
  EXPECT_EQ(transport_free_sms("emu", 0, true), 1);  // the agent is a CTA of the grid: no kernel beside it
  EXPECT_EQ(transport_free_sms("fabric", 0, true), 8);
  EXPECT_EQ(transport_free_sms("emu", 3, true), 3);  // the knob wins
  EXPECT_EQ(transport_free_sms("emu", 2, false), 2);
  // emu leaves at least an SM for each of its agent CTAs (MK_EMU_AGENTS).
  EXPECT_EQ(transport_free_sms("emu", 0, false, 2), 2);
  EXPECT_EQ(transport_free_sms("emu", 1, true, 3), 3);
  EXPECT_EQ(transport_free_sms("emu", 4, false, 2), 4);
  // fabric staged by delivery agents (MK_FABRIC_STAGE=agent): like emu, no kernel beside the grid.
  EXPECT_EQ(transport_free_sms("fabric", 0, true, 1), 1);
  EXPECT_EQ(transport_free_sms("fabric", 0, false, 2), 2);
  EXPECT_EQ(transport_free_sms("fabric", 4, true, 1), 4);
  // verbs on EFA with its signals applied by a delivery agent: its SM.
  EXPECT_EQ(transport_free_sms("verbs", 0, false, 1), 1);
  EXPECT_EQ(transport_free_sms("verbs", 0, true, 1), 1);
  // verbs on EFA with MK_FABRIC_STAGE=cuda: the proxy's signal kernels, as fabric's.
  EXPECT_EQ(transport_free_sms("verbs", 0, false, 0, true), 1);
  EXPECT_EQ(transport_free_sms("verbs", 0, true, 0, true), 8);
  EXPECT_EQ(transport_free_sms("verbs", 3, true, 0, true), 3);
}

// What the plans take (tp::network_free_sms): the want clamped so that 2
// CTAs remain; a grid up to the SMs less that is accepted, one more refused
// (with the number), 0 is the default grid, a grid outside [2, sms] is left to
// the plans' range checks.
TEST(NetFreeSms, GridsBesideTheTransport) {
  using mk::tp::grid_free_sms;
  using mk::tp::grid_free_sms_error;
  EXPECT_EQ(grid_free_sms(0, 132), 0);
  EXPECT_EQ(grid_free_sms(1, 132), 1);
  EXPECT_EQ(grid_free_sms(8, 66), 8);
  EXPECT_EQ(grid_free_sms(64, 10), 8);
  EXPECT_EQ(grid_free_sms(-3, 132), 0);
  EXPECT_EQ(grid_free_sms_error(1, 131, 132), "");
  EXPECT_NE(grid_free_sms_error(1, 132, 132).find("use at most 131"), std::string::npos);  // as before the knob
  EXPECT_NE(grid_free_sms_error(1, 132, 132).find("needs 1 SM free"), std::string::npos);
  EXPECT_EQ(grid_free_sms_error(8, 58, 66), "");
  EXPECT_NE(grid_free_sms_error(8, 59, 66).find("needs 8 SMs free (MK_NET_FREE_SMS); use at most 58"),
            std::string::npos);
  EXPECT_EQ(grid_free_sms_error(8, 0, 66), "");       // the default grid
  EXPECT_EQ(grid_free_sms_error(8, 100000, 66), "");  // the plan's range check says it
  EXPECT_EQ(grid_free_sms_error(0, 66, 66), "");      // verbs, or one node
}

// Who is told that the proxy's CUDA work can wait behind the user's queued
// work (net::work_queue_warning): only networks whose proxy calls CUDA, and
// only with one hardware work queue or under MPS.
TEST(NetWorkQueues, WarnsWhereTheProxysWorkCanWaitBehindTheUsers) {
  using mk::net::work_queue_warning;
  const std::optional<std::string> unset, one("1"), eight("8");
  EXPECT_EQ(work_queue_warning("verbs", false, true, one), "");  // no CUDA work in the proxy
  EXPECT_EQ(work_queue_warning("emu", false, true, one), "");    // emu delivers with the kernels' agent
  EXPECT_EQ(work_queue_warning("efa", true, false, unset), "");
  EXPECT_EQ(work_queue_warning("efa", true, false, eight), "");
  const std::string w1 = work_queue_warning("efa", true, false, one);
  EXPECT_NE(w1.find("CUDA_DEVICE_MAX_CONNECTIONS=1 puts every stream of this process in one hardware work queue"),
            std::string::npos);
  EXPECT_NE(w1.find("efa network's proxy"), std::string::npos);
  const std::string wm = work_queue_warning("fabric", true, true, eight);
  EXPECT_NE(wm.find("shared through MPS"), std::string::npos);
  EXPECT_NE(wm.find("the fabric network"), std::string::npos);
  EXPECT_NE(work_queue_warning("efa", true, true, one).find("CUDA_DEVICE_MAX_CONNECTIONS=1"), std::string::npos);
  for (const char* v : {"01", " 1"})  // the driver reads an integer
    EXPECT_NE(work_queue_warning("efa", true, false, std::string(v)).find("one hardware work queue"), std::string::npos)
        << v;
  EXPECT_EQ(work_queue_warning("efa", true, false, std::string("x")), "");
}

// What the ranks' transports must agree on (Network compares it across ranks before connecting): fabric's
// provider and verbs' SRD mark count, a verbs device does not.
TEST(NetTransportKind, FabricProvidersAndVerbsQueuePairKindsDifferDevicesDoNot) {
  using mk::net::transport_kind;
  EXPECT_EQ(transport_kind("fabric:efa"), "fabric:efa");
  EXPECT_NE(transport_kind("fabric:efa"), transport_kind("fabric:tcp;ofi_rxm"));
  EXPECT_EQ(transport_kind("verbs:mlx5_0"), transport_kind("verbs:mlx5_3"));
  EXPECT_EQ(transport_kind("verbs:rdmap0s6(srd)"), "verbs (srd)");
  EXPECT_NE(transport_kind("verbs:mlx5_0"), transport_kind("verbs:efa_0(srd)"));
  EXPECT_EQ(transport_kind("emu"), "emu");
  EXPECT_EQ(transport_kind("emu (2 agents)"), "emu");
}

}  // namespace

// Every proxy thread's transport kind is compared across ranks (thread 0's only, before 2026-12-06), and a later
// thread's must be thread 0's, which the network layer goes by.
TEST(NetTransportKind, EveryProxyThreadsKindMustAgree) {
  using mk::net::check_transport_kinds;
  auto error = [](const std::vector<std::string>& kinds, int thread, const std::string& thread0) {
    try {
      check_transport_kinds(kinds, 0, thread, thread0);
    } catch (const mk::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error({"verbs", "verbs"}, 0, "verbs"), "");
  EXPECT_EQ(error({"verbs", "verbs"}, 1, "verbs"), "");
  EXPECT_NE(error({"verbs", "fabric:tcp"}, 1, "verbs").find("ranks chose different network transports for proxy "
                                                            "thread 1 (rank 0: verbs, rank 1: fabric:tcp)"),
            std::string::npos);
  EXPECT_NE(error({"fabric:tcp", "fabric:tcp"}, 1, "verbs").find("proxy thread 1 opened another network transport "
                                                                 "(fabric:tcp) than thread 0 (verbs)"),
            std::string::npos);
  EXPECT_NE(error({"emu", "verbs"}, 0, "emu").find("ranks chose different network transports (rank 0: emu"),
            std::string::npos);
}
