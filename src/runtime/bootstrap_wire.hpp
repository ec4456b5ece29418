// mkernel: the bootstrap's wire (src/runtime/bootstrap.cpp): its frames, the unique id's layout, and the names
// its errors use. Only bootstrap.cpp includes it (tests/cpu/bootstrap_wire.hpp speaks the wire on its own, so
// that a change of the format shows there).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mkernel/bootstrap.hpp"
#include "mkernel/error.hpp"

namespace mk::bootstrap_wire {

// "MKB2": a gather's body starts with its step's name since session 43. A process of another build connecting
// with "MKBT" (before) is turned away with a reason that the join timeout names (parse_frames), not read as
// wrong data.
constexpr uint32_t kFrameMagic = 0x4d4b4232;
constexpr uint32_t kFrameMagicV1 = 0x4d4b4254;
constexpr int64_t kClientGraceMs = 5000;       // clients outwait the root's own timeout

enum FrameType : uint32_t { kHello = 1, kWelcome, kGather, kResult, kError, kBye, kAbort };

struct FrameHeader {
  uint32_t magic = kFrameMagic;
  uint32_t type = 0;
  int32_t rank = -1;
  int32_t world = 0;
  uint64_t seq = 0;
  uint64_t job = 0;
  uint64_t len = 0;
};
static_assert(sizeof(FrameHeader) == 40);

constexpr uint64_t kMaxPayload = 1ull << 30;
// The most ranks a job may have: a hello's world size allocates the root's tables, and an uninitialised or
// mistyped world (WORLD_SIZE=1000000000) must be refused by name, not end the root's process in bad_alloc.
constexpr int kMaxWorld = 1 << 20;

struct IdLayout {  // how UniqueId::bytes is used
  uint64_t magic;
  uint32_t addr;   // IPv4, network order
  uint16_t port;
  uint16_t version;
  // The root's MK_BOOTSTRAP_TIMEOUT_MS (0 in ids of builds before 2026-12-05, session 46): a rank waits for the
  // root at least that long, so that a rank with a shorter bound of its own does not give up (and blame the
  // root) while the root still waits for a late rank.
  uint32_t root_timeout_ms;
};
static_assert(sizeof(IdLayout) <= sizeof(UniqueId::bytes));

inline std::string frame(FrameType t, int rank, int world, uint64_t seq, uint64_t job, const std::string& body) {
  FrameHeader h;
  h.type = t;
  h.rank = rank;
  h.world = world;
  h.seq = seq;
  h.job = job;
  h.len = body.size();
  std::string out(reinterpret_cast<const char*>(&h), sizeof(h));
  out += body;
  return out;
}

inline std::string ranks_to_string(const std::vector<int>& r) {
  std::string s = "[";
  for (size_t i = 0; i < r.size(); ++i) s += (i ? ", " : "") + std::to_string(r[i]);
  return s + "]";
}

// A gather's body: the caller's step name (what the root names and compares across the ranks), then its data.
inline std::string gather_body(const char* step, const std::string& mine) {
  const std::string s = step ? std::string(step).substr(0, 0xffff) : std::string();
  const uint16_t n = static_cast<uint16_t>(s.size());
  std::string out(reinterpret_cast<const char*>(&n), sizeof(n));
  return out + s + mine;
}

// "'<step>'", or what an unnamed one is called.
inline std::string step_name(const std::string& step) {
  return step.empty() ? std::string("an unnamed collective") : cat("'", step, "'");
}

}  // namespace mk::bootstrap_wire
