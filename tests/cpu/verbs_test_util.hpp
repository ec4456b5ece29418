// Shared by the verbs CPU tests: a WriteReq with fixed offsets.
#pragma once

#include "src/net/transport.hpp"

namespace mk::test {

inline net::WriteReq verbs_req(int peer, uint64_t bytes, net::SigOp op = net::SigOp::None, uint64_t cookie = 0,
                               uint64_t sig_off = 0, uint64_t sig_value = 0) {
  net::WriteReq w;
  w.peer = peer;
  w.region = 1;
  w.src_off = 64;
  w.dst_off = 128;
  w.bytes = bytes;
  w.sig_op = op;
  w.sig_off = sig_off;
  w.sig_value = sig_value;
  w.cookie = cookie;
  return w;
}

}  // namespace mk::test
