// The bootstrap's wire, as tests that play a rank by hand speak it (src/runtime/bootstrap.cpp: FrameHeader).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "mkernel/bootstrap.hpp"
#include "src/runtime/socket.hpp"

namespace mk::test {

enum WireType : uint32_t { kWireHello = 1, kWireWelcome, kWireGather, kWireResult, kWireError };

// A frame's 40-byte header: this build's magic, type, rank, world; seq, job (the id's first 8 bytes), body length.
inline std::string wire_header(const UniqueId& id, uint32_t type, int32_t rank, int32_t world, uint64_t seq,
                               uint64_t len) {
  uint32_t head[4] = {0x4d4b4232u, type, static_cast<uint32_t>(rank), static_cast<uint32_t>(world)};
  uint64_t tail[3] = {seq, 0, len};
  std::memcpy(&tail[1], id.bytes, sizeof(uint64_t));
  std::string f(40, '\0');
  std::memcpy(f.data(), head, sizeof(head));
  std::memcpy(f.data() + 16, tail, sizeof(tail));
  return f;
}

// The root's address and port, as mk::get_unique_id lays them out in the id (magic, IPv4 address, port).
inline int connect_to_ids_root(const UniqueId& id) {
  uint32_t addr = 0;
  uint16_t port = 0;
  std::memcpy(&addr, id.bytes + 8, sizeof(addr));
  std::memcpy(&port, id.bytes + 12, sizeof(port));
  return sock::tcp_connect(sock::ipv4_to_string(addr), port, sock::deadline_in_ms(5000));
}

}  // namespace mk::test
