// mkernel: the EFA/SRD signal protocol of the verbs backend, pure C++ (no
// verbs objects) so that it is unit-tested without an EFA device.
//
// SRD delivers each operation reliably but in NO order, and EFA has no remote
// atomics, so a signal cannot be a separate write or atomic after its data
// (as on RC). Instead the RECEIVER applies it, when its NIC reports that the
// data is in place. Two forms (the sender's WrBatcher picks, see
// plan in wr_batcher.cpp):
//
//   inline   one RDMA_WRITE_WITH_IMM of the whole request; the 32-bit
//            immediate carries (op, signal word, value). Used when the data
//            fits one WR and value/word fit the fields below.
//   record   the data as N RDMA_WRITE_WITH_IMM parts, each immediate
//            carrying a message id, plus one SEND whose payload is an
//            SrdRecord (op, sig_off, full 64-bit value, N, id). Used for
//            large values, far signal words, split data and signal-only
//            requests (N = 0).
//
// NOTES (ordering argument):
// - On SRD a receive completion (IBV_WC_RECV_RDMA_WITH_IMM or IBV_WC_RECV) is
//   generated only after that one operation's payload has been placed in
//   memory (per-operation delivery; there is no ordering ACROSS operations).
//   So one completion certifies exactly the bytes of its own WR.
// - Inline form: the signal travels in the same WR as all of its data, so
//   its completion certifies all data bytes.
// - Record form: SrdAssembler releases the signal only when the record AND
//   all N parts named by it have completed, in whatever order they arrive;
//   each completion certifies its part, hence all bytes are in place.
// - The receiver applies the signal after that point (host atomic, or after a
//   GPUDirect-RDMA flush by a delivery agent or a CUDA stream: efa_srd.cpp),
//   so the signal is never visible before its data. No mailbox memory is reused: the record lives in
//   its own posted receive buffer, reposted only after it is read.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "src/net/transport.hpp"

namespace mk::net::verbs {

// Immediate layout (host order; the wire carries it big-endian):
//   bits 31..30  tag: 1 = inline Set, 2 = inline Add, 3 = record part, 0 = invalid
//   inline:      bits 29..20 value (0..1023), bits 19..0 signal word (sig_off / 8)
//   part:        bits 29..0  message id (per sending QP, wraps)
constexpr uint32_t kImmTagSet = 1, kImmTagAdd = 2, kImmTagPart = 3;
constexpr uint64_t kImmMaxValue = (1u << 10) - 1;
constexpr uint64_t kImmMaxWord = (1u << 20) - 1;
constexpr uint32_t kImmMsgIdMask = (1u << 30) - 1;

// True when (op, sig_off, value) fits the inline form.
bool imm_fits(SigOp op, uint64_t sig_off, uint64_t value);
// Throws mk::Error when it does not fit (callers test imm_fits first).
uint32_t encode_imm(SigOp op, uint64_t sig_off, uint64_t value);
uint32_t encode_part_imm(uint32_t msg_id);

struct ImmSignal {
  SigOp op = SigOp::None;
  uint64_t sig_off = 0;
  uint64_t value = 0;
};
enum class ImmKind : uint8_t { Invalid, Inline, Part };
struct DecodedImm {
  ImmKind kind = ImmKind::Invalid;
  ImmSignal sig;        // Inline
  uint32_t msg_id = 0;  // Part
};
DecodedImm decode_imm(uint32_t imm);

// The record form's SEND payload (sent inline; 24 bytes, EFA inline buffers
// are >= 32). Host-endian: all ranks run the same build (as the blobs).
struct SrdRecord {
  uint8_t magic = kMagic;
  uint8_t op = 0;        // SigOp
  uint16_t nparts = 0;   // data parts (RDMA_WRITE_WITH_IMM) that carry msg_id
  uint32_t msg_id = 0;   // 30 bits
  uint64_t sig_off = 0;  // byte offset of the word in region 0
  uint64_t value = 0;
  static constexpr uint8_t kMagic = 0xA5;
};
static_assert(sizeof(SrdRecord) == 24, "SrdRecord is a wire format");
constexpr uint64_t kMaxRecordParts = 0xffff;

// Validates a received record payload (size, magic, op); throws mk::Error
// naming `from_rank` when it is malformed.
SrdRecord parse_record(const void* buf, uint32_t byte_len, int from_rank);

// Receiver side of the record form, per local QP (one sending QP each).
// NOTES: a message id is unique among the messages in flight on one sending
// QP (30 bits vs. at most MK_IB_MAX_INFLIGHT WRs in flight), so (q, id) names
// one message; its entry is erased when its signal is released.
class SrdAssembler {
 public:
  explicit SrdAssembler(int num_qps = 0) : qps_(num_qps) {}
  // A data part of message `msg_id` completed on QP q. Returns true and
  // fills `out` when this completes the message.
  bool on_part(int q, uint32_t msg_id, ImmSignal* out);
  // The record of a message completed on QP q. Same return contract.
  // Throws mk::Error on a duplicate record or more parts than it names.
  bool on_record(int q, const SrdRecord& r, ImmSignal* out);
  size_t pending() const;  // messages waiting for parts or their record

 private:
  struct Msg {
    uint32_t parts = 0;
    bool have_record = false;
    SrdRecord rec;
  };
  bool release(int q, std::unordered_map<uint32_t, Msg>::iterator it, ImmSignal* out);
  std::vector<std::unordered_map<uint32_t, Msg>> qps_;
};

}  // namespace mk::net::verbs
