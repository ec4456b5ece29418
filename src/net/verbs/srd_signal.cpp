// mkernel: EFA/SRD immediates, records and their receiver-side assembly
// (see srd_signal.hpp for the protocol and its ordering argument).
#include "src/net/verbs/srd_signal.hpp"

#include <cstring>

#include "mkernel/error.hpp"

namespace mk::net::verbs {

bool imm_fits(SigOp op, uint64_t sig_off, uint64_t value) {
  return (op == SigOp::Set || op == SigOp::Add) && sig_off % 8 == 0 && sig_off / 8 <= kImmMaxWord &&
         value <= kImmMaxValue;
}

uint32_t encode_imm(SigOp op, uint64_t sig_off, uint64_t value) {
  if (op != SigOp::Set && op != SigOp::Add) fail("verbs/efa: no signal op to encode");
  if (!imm_fits(op, sig_off, value))
    fail("verbs/efa: internal: signal (offset ", sig_off, ", value ", value,
         ") does not fit the immediate; it needs the record form");
  const uint32_t tag = op == SigOp::Set ? kImmTagSet : kImmTagAdd;
  return (tag << 30) | (static_cast<uint32_t>(value) << 20) | static_cast<uint32_t>(sig_off / 8);
}

uint32_t encode_part_imm(uint32_t msg_id) { return (kImmTagPart << 30) | (msg_id & kImmMsgIdMask); }

DecodedImm decode_imm(uint32_t imm) {
  DecodedImm d;
  const uint32_t tag = imm >> 30;
  if (tag == kImmTagSet || tag == kImmTagAdd) {
    d.kind = ImmKind::Inline;
    d.sig.op = tag == kImmTagSet ? SigOp::Set : SigOp::Add;
    d.sig.value = (imm >> 20) & kImmMaxValue;
    d.sig.sig_off = static_cast<uint64_t>(imm & kImmMaxWord) * 8;
  } else if (tag == kImmTagPart) {
    d.kind = ImmKind::Part;
    d.msg_id = imm & kImmMsgIdMask;
  }
  return d;
}

SrdRecord parse_record(const void* buf, uint32_t byte_len, int from_rank) {
  if (byte_len != sizeof(SrdRecord))
    fail("verbs/efa: rank ", from_rank, " sent a ", byte_len, "-byte message where a ",
         sizeof(SrdRecord), "-byte signal record was expected (same mkernel build on all ranks?)");
  SrdRecord r;
  std::memcpy(&r, buf, sizeof(r));
  if (r.magic != SrdRecord::kMagic || (r.op != static_cast<uint8_t>(SigOp::Set) &&
                                       r.op != static_cast<uint8_t>(SigOp::Add)))
    fail("verbs/efa: rank ", from_rank, " sent a malformed signal record (magic 0x", std::hex,
         int(r.magic), std::dec, ", op ", int(r.op), ")");
  if (r.sig_off % 8 != 0)
    fail("verbs/efa: rank ", from_rank, " sent a signal record with unaligned offset ", r.sig_off);
  return r;
}

bool SrdAssembler::release(int q, std::unordered_map<uint32_t, Msg>::iterator it, ImmSignal* out) {
  const Msg& m = it->second;
  if (!m.have_record || m.parts < m.rec.nparts) return false;
  out->op = static_cast<SigOp>(m.rec.op);
  out->sig_off = m.rec.sig_off;
  out->value = m.rec.value;
  qps_[q].erase(it);
  return true;
}

bool SrdAssembler::on_part(int q, uint32_t msg_id, ImmSignal* out) {
  auto& map = qps_.at(q);
  auto it = map.try_emplace(msg_id & kImmMsgIdMask).first;
  Msg& m = it->second;
  ++m.parts;
  if (m.have_record && m.parts > m.rec.nparts)
    fail("verbs/efa: internal: message ", msg_id, " on QP ", q, " got ", m.parts,
         " data parts, its record names ", m.rec.nparts);
  return release(q, it, out);
}

bool SrdAssembler::on_record(int q, const SrdRecord& r, ImmSignal* out) {
  auto& map = qps_.at(q);
  auto it = map.try_emplace(r.msg_id & kImmMsgIdMask).first;
  Msg& m = it->second;
  if (m.have_record) fail("verbs/efa: internal: duplicate signal record for message ", r.msg_id, " on QP ", q);
  if (m.parts > r.nparts)
    fail("verbs/efa: internal: message ", r.msg_id, " on QP ", q, " got ", m.parts,
         " data parts, its record names ", r.nparts);
  m.have_record = true;
  m.rec = r;
  return release(q, it, out);
}

size_t SrdAssembler::pending() const {
  size_t n = 0;
  for (const auto& m : qps_) n += m.size();
  return n;
}

}  // namespace mk::net::verbs
