#include "sim/comm/faulty_transport.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include <zlib.h>

#include "core/exact_sum.h"

namespace dtlab {
namespace {

// Flips one bit that changes the value: the top mantissa bit of a float, bit 31
// of each of the first accumulator words of an integer payload, bit 31 of the first
// limb of a packed one.
template <typename T>
void FlipBit(T* data, std::int64_t count) {
  if (count <= 0) return;
  if constexpr (std::is_floating_point_v<T>) {
    using Bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
    Bits bits;
    std::memcpy(&bits, data, sizeof bits);
    bits ^= Bits{1} << (sizeof(T) == 4 ? 22 : 51);
    std::memcpy(data, &bits, sizeof bits);
  } else if constexpr (std::is_same_v<T, Int448>) {
    data[0].limb[0] ^= std::uint64_t{1} << 31;
  } else {
    for (std::int64_t i = 0; i < std::min<std::int64_t>(count, kExactWords); ++i) data[i] ^= T{1} << 31;
  }
}

template <typename T>
unsigned long Crc(const std::vector<T>& payload) {
  return crc32(0L, reinterpret_cast<const Bytef*>(payload.data()), static_cast<uInt>(payload.size() * sizeof(T)));
}

template <typename T>
std::string Checksums(const T* payload, std::int64_t count) {
  std::vector<T> sent(payload, payload + count), received = sent;
  FlipBit(received.data(), count);
  char crcs[64];
  std::snprintf(crcs, sizeof crcs, "CRC-32 %08lx sent, %08lx received", Crc(sent), Crc(received));
  return crcs;
}

}  // namespace

std::string CorruptedChecksums(const float* payload, std::int64_t count) { return Checksums(payload, count); }
std::string CorruptedChecksums(const double* payload, std::int64_t count) { return Checksums(payload, count); }
std::string CorruptedChecksums(const std::int64_t* payload, std::int64_t count) { return Checksums(payload, count); }
std::string CorruptedChecksums(const Int448* payload, std::int64_t count) { return Checksums(payload, count); }

void HeldPhase::BeginTransfer(std::int32_t combiner, std::int64_t count, bool divide) {
  transfers_.push_back({combiner, count, divide, places_.size(), 0});
}

void HeldPhase::AddSource(std::int32_t replica, BufferRole role, std::int64_t offset, std::int32_t phase) {
  places_.push_back({replica, role, offset, phase, true});
  ++transfers_.back().num_places;
}

void HeldPhase::AddDestination(std::int32_t replica, std::int64_t offset, std::int32_t phase) {
  places_.push_back({replica, BufferRole::kOutput, offset, phase, false});
  ++transfers_.back().num_places;
}

bool HeldPhase::InjectFaults(MessageFaults& f,
                             const std::function<std::string(const Place& source, std::int64_t count)>& checksums) {
  if (f.failed()) return false;
  char timeout[32];
  std::snprintf(timeout, sizeof timeout, "%g", f.timeout_seconds);
  auto message = [](std::int32_t phase, std::int32_t sender, std::int32_t receiver, std::int64_t count) {
    return "the message replica " + std::to_string(sender) + " -> replica " + std::to_string(receiver) + " of phase " +
           std::to_string(phase + 1) + " (" + std::to_string(count) + " elements)";
  };
  // One message: sender -> receiver of `transfer`, whose payload is read at `payload`
  // (null when the transfer has no source to read).
  auto check = [&](std::int32_t phase, std::int32_t sender, std::int32_t receiver, const Transfer& transfer,
                   const Place* payload) {
    const std::int64_t count = transfer.count;
    for (const std::int32_t r : {sender, receiver})
      if (r < static_cast<std::int32_t>(f.dead.size()) && f.dead[static_cast<std::size_t>(r)]) {
        f.Fail("timed out after " + std::string(timeout) + " s waiting for replica " + std::to_string(r) +
               ", which stopped responding (" + message(phase, sender, receiver, count) + ")");
        return;
      }
    for (FaultSpec& spec : f.messages) {
      if (spec.step != f.step || spec.replica != sender || (spec.to >= 0 && spec.to != receiver) ||
          (spec.phase > 0 && spec.phase != phase + 1))
        continue;
      spec.step = -1;  // a fault hits one message
      if (spec.kind == FaultKind::kDrop) {
        f.Fail(message(phase, sender, receiver, count) + " was dropped and never arrived; replica " +
               std::to_string(receiver) + " timed out after " + timeout + " s");
        return;
      }
      // The sender's CRC-32 of the payload against the receiver's of what arrived.
      const std::string crcs = payload != nullptr ? checksums(*payload, count) : std::string();
      f.Fail(message(phase, sender, receiver, count) + " arrived corrupted (" +
             (crcs.empty() ? std::string("its CRC-32 check failed") : crcs) + ")");
      return;
    }
  };
  for (std::size_t t = 0; t < transfers_.size() && !f.failed(); ++t) {
    const Transfer& transfer = transfers_[t];
    if (transfer.count == 0) continue;  // an empty transfer sends nothing
    const Place* begin = places_.data() + transfer.first_place;
    const Place* end = begin + transfer.num_places;
    // A message combiner -> peer carries the combiner's sum; its first addend stands
    // in for it here: same size, and the check fails either way.
    const Place* first_source = std::find_if(begin, end, [](const Place& p) { return p.is_source; });
    for (const Place* p = begin; p != end; ++p)
      if (p->is_source && p->replica != transfer.combiner) check(p->phase, p->replica, transfer.combiner, transfer, p);
    for (const Place* p = begin; p != end; ++p)
      if (!p->is_source && p->replica != transfer.combiner)
        check(p->phase, transfer.combiner, p->replica, transfer, first_source != end ? first_source : nullptr);
  }
  return !f.failed();
}

void HeldPhase::HandOn(ScheduleTransport& transport) const {
  for (const Transfer& transfer : transfers_) {
    transport.BeginTransfer(transfer.combiner, transfer.count, transfer.divide);
    for (std::size_t i = transfer.first_place; i < transfer.first_place + transfer.num_places; ++i) {
      const Place& p = places_[i];
      if (p.is_source)
        transport.AddSource(p.replica, p.role, p.offset, p.phase);
      else
        transport.AddDestination(p.replica, p.offset, p.phase);
    }
  }
}

void HeldPhase::Clear() {
  transfers_.clear();
  places_.clear();
}

}  // namespace dtlab
