// mkernel: what verbs ranks tell each other at connect time, and the RoCE GID
// choice. Pure C++ (no verbs objects) so that it is unit-tested without a NIC.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace mk::net::verbs {

// This rank's port, as its peers need it to address it.
struct PortInfo {
  uint16_t lid = 0;                  // IB: the destination LID
  std::array<uint8_t, 16> gid{};     // RoCE (and IB across subnets): the destination GID
  uint8_t link_layer = 0;            // IBV_LINK_LAYER_*
  uint8_t mtu = 0;                   // enum ibv_mtu, active MTU; both sides use the smaller
};

// The QPs one rank created for one peer (qpn[k] pairs with the peer's qpn[k]).
struct PeerQps {
  int peer = -1;
  std::vector<uint32_t> qpn;
  std::vector<uint32_t> psn;
};

// One rank's connect blob. ok = false carries `error` instead, so that every
// rank fails together, naming the rank that could not set up (rather than
// the others timing out in the bootstrap).
struct ConnectInfo {
  bool ok = true;
  std::string error;
  int rank = -1;
  int qps_per_peer = 0;
  PortInfo port;
  // EFA/SRD (efa_srd.cpp): the QPs are SRD datagram QPs addressed by GID +
  // QPN + this Q-key (psn is unused); all ranks must agree on srd.
  bool srd = false;
  uint32_t qkey = 0;
  std::vector<PeerQps> peers;
};

std::string encode(const ConnectInfo& c);
// Throws mk::Error naming `from_rank` on a malformed blob.
ConnectInfo decode_connect(const std::string& blob, int from_rank);

// One registered region as its owner advertises it.
struct RegionInfo {
  bool ok = true;
  std::string error;
  int id = -1;
  uint64_t addr = 0;
  uint64_t bytes = 0;
  uint32_t rkey = 0;
};
std::string encode(const RegionInfo& r);
RegionInfo decode_region(const std::string& blob, int from_rank);

// A GID table entry for the automatic RoCE GID choice.
struct GidCandidate {
  int index = -1;
  std::array<uint8_t, 16> gid{};
  bool roce_v2 = false;
};
bool is_ipv4_mapped(const std::array<uint8_t, 16>& gid);  // ::ffff:a.b.c.d
// MK_IB_GID_INDEX=-1: the first RoCE v2 IPv4-mapped GID (routable, what
// RoCE fabrics are configured for), else the first RoCE v2 GID; zero GIDs
// are skipped. Returns -1 when there is none.
int pick_roce_gid(const std::vector<GidCandidate>& table);

}  // namespace mk::net::verbs
