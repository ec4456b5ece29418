// mkernel: verbs connect/region blobs and the RoCE GID choice (endpoint.hpp).
#include "src/net/verbs/endpoint.hpp"

#include <cstring>

#include "mkernel/error.hpp"

namespace mk::net::verbs {

namespace {

// NOTES: blobs are host-endian PODs: all ranks of a job run the same build on
// the same architecture. A magic word per blob kind catches mixups.
constexpr uint32_t kConnectMagic = 0x6d6b5643;  // "mkVC"
constexpr uint32_t kRegionMagic = 0x6d6b5652;   // "mkVR"

class Writer {
 public:
  template <typename T>
  void put(const T& v) {
    out.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void put_str(const std::string& s) {
    put(static_cast<uint32_t>(s.size()));
    out += s;
  }
  std::string out;
};

class Reader {
 public:
  Reader(const std::string& s, int from, const char* what) : s_(s), from_(from), what_(what) {}
  template <typename T>
  T get() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, s_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string get_str() {
    const uint32_t n = get<uint32_t>();
    need(n);
    std::string r = s_.substr(pos_, n);
    pos_ += n;
    return r;
  }
  void done() const {
    if (pos_ != s_.size()) bad();
  }
  [[noreturn]] void bad() const {
    fail("verbs: malformed ", what_, " from rank ", from_, " (", s_.size(),
         " bytes); are all ranks running the same mkernel build?");
  }

 private:
  void need(size_t n) const {
    if (s_.size() - pos_ < n) bad();
  }
  const std::string& s_;
  size_t pos_ = 0;
  int from_;
  const char* what_;
};

}  // namespace

std::string encode(const ConnectInfo& c) {
  Writer w;
  w.put(kConnectMagic);
  w.put(static_cast<uint8_t>(c.ok));
  w.put(static_cast<int32_t>(c.rank));
  if (!c.ok) {
    w.put_str(c.error);
    return w.out;
  }
  w.put(static_cast<int32_t>(c.qps_per_peer));
  w.put(c.port.lid);
  w.put(c.port.gid);
  w.put(c.port.link_layer);
  w.put(c.port.mtu);
  w.put(static_cast<uint8_t>(c.srd));
  w.put(c.qkey);
  w.put(static_cast<uint32_t>(c.peers.size()));
  for (const PeerQps& p : c.peers) {
    if (p.qpn.size() != static_cast<size_t>(c.qps_per_peer) || p.psn.size() != p.qpn.size())
      fail("verbs: internal: peer ", p.peer, " has ", p.qpn.size(), " QPs, expected ", c.qps_per_peer);
    w.put(static_cast<int32_t>(p.peer));
    for (int k = 0; k < c.qps_per_peer; ++k) {
      w.put(p.qpn[k]);
      w.put(p.psn[k]);
    }
  }
  return w.out;
}

ConnectInfo decode_connect(const std::string& blob, int from_rank) {
  Reader r(blob, from_rank, "connect info");
  ConnectInfo c;
  if (r.get<uint32_t>() != kConnectMagic) r.bad();
  c.ok = r.get<uint8_t>() != 0;
  c.rank = r.get<int32_t>();
  if (!c.ok) {
    c.error = r.get_str();
    r.done();
    return c;
  }
  c.qps_per_peer = r.get<int32_t>();
  if (c.qps_per_peer < 1 || c.qps_per_peer > 4096) r.bad();
  c.port.lid = r.get<uint16_t>();
  c.port.gid = r.get<std::array<uint8_t, 16>>();
  c.port.link_layer = r.get<uint8_t>();
  c.port.mtu = r.get<uint8_t>();
  c.srd = r.get<uint8_t>() != 0;
  c.qkey = r.get<uint32_t>();
  const uint32_t n = r.get<uint32_t>();
  if (n > (1u << 20)) r.bad();
  for (uint32_t i = 0; i < n; ++i) {
    PeerQps p;
    p.peer = r.get<int32_t>();
    for (int k = 0; k < c.qps_per_peer; ++k) {
      p.qpn.push_back(r.get<uint32_t>());
      p.psn.push_back(r.get<uint32_t>());
    }
    c.peers.push_back(std::move(p));
  }
  r.done();
  return c;
}

std::string encode(const RegionInfo& x) {
  Writer w;
  w.put(kRegionMagic);
  w.put(static_cast<uint8_t>(x.ok));
  w.put(static_cast<int32_t>(x.id));
  if (!x.ok) {
    w.put_str(x.error);
    return w.out;
  }
  w.put(x.addr);
  w.put(x.bytes);
  w.put(x.rkey);
  return w.out;
}

RegionInfo decode_region(const std::string& blob, int from_rank) {
  Reader r(blob, from_rank, "region info");
  RegionInfo x;
  if (r.get<uint32_t>() != kRegionMagic) r.bad();
  x.ok = r.get<uint8_t>() != 0;
  x.id = r.get<int32_t>();
  if (!x.ok) {
    x.error = r.get_str();
  } else {
    x.addr = r.get<uint64_t>();
    x.bytes = r.get<uint64_t>();
    x.rkey = r.get<uint32_t>();
  }
  r.done();
  return x;
}

bool is_ipv4_mapped(const std::array<uint8_t, 16>& g) {
  for (int i = 0; i < 10; ++i)
    if (g[i] != 0) return false;
  return g[10] == 0xff && g[11] == 0xff;
}

int pick_roce_gid(const std::vector<GidCandidate>& table) {
  int first_v2 = -1;
  for (const GidCandidate& c : table) {
    bool zero = true;
    for (uint8_t b : c.gid) zero = zero && b == 0;
    if (zero || !c.roce_v2) continue;
    if (is_ipv4_mapped(c.gid)) return c.index;
    if (first_v2 < 0) first_v2 = c.index;
  }
  return first_v2;
}

}  // namespace mk::net::verbs
