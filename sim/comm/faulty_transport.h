// FaultyTransport: injected message faults (sim/comm/faults.h) wrapped around any
// transport (sim/comm/transport.h), in the spirit of leveldb's fault-injecting Env:
// the transport it wraps carries out phases as always and knows nothing of faults.
// collectives.cc wraps its in-process transport in one when CollectiveOptions::faults
// is set.
//
// A phase is held as the schedule adds it. On Run, every message of the phase (a
// source or a destination on another replica than the transfer's combiner) is
// checked, transfer by transfer, sources before destinations, in the order they
// were added:
//  - a message from or to a dead replica never completes, so its receiver times out;
//  - the first message of the step that matches a drop fault (its sender, and its
//    receiver and 1-based phase where the fault names them) is lost, so its
//    receiver times out;
//  - the first that matches a corrupt fault has one bit flipped in flight, and the
//    receiver's CRC-32 of what arrived differs from the sender's.
// Each fault hits one message. The first failure is written to the MessageFaults,
// and that phase and every later one never reach the wrapped transport: a failed
// collective moves nothing more (the Transport interface cannot take back transfers
// once added, so a phase is handed on only once it is known to succeed). A phase
// without a failure is handed on call for call, then run.
//
// Thread safety: one schedule at a time drives it, as any transport.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/comm/faults.h"
#include "sim/comm/int448.h"
#include "sim/comm/transport.h"

namespace dtlab {

/// The phase a FaultyTransport holds until Run, and the checks that do not depend
/// on the element type (faulty_transport.cc).
class HeldPhase {
 public:
  /// A source or a destination of a transfer, as the schedule named it.
  struct Place {
    std::int32_t replica = 0;
    BufferRole role = BufferRole::kOutput;  // a destination is always an output
    std::int64_t offset = 0;
    std::int32_t phase = 0;
    bool is_source = false;
  };

  void BeginTransfer(std::int32_t combiner, std::int64_t count, bool divide);
  void AddSource(std::int32_t replica, BufferRole role, std::int64_t offset, std::int32_t phase);
  void AddDestination(std::int32_t replica, std::int64_t offset, std::int32_t phase);

  /// Checks the phase's messages against `faults` (see the file comment). Returns
  /// false when the collective failed, now or in an earlier phase; faults.failure
  /// then says how. `checksums(source, count)` gives "CRC-32 x sent, y received" for
  /// a corrupted message whose payload is the `count` elements at `source`, or ""
  /// where they cannot be read.
  bool InjectFaults(MessageFaults& faults,
                    const std::function<std::string(const Place& source, std::int64_t count)>& checksums);
  /// Adds the phase to `transport`, call for call, in the order it was added here.
  void HandOn(ScheduleTransport& transport) const;
  void Clear();

 private:
  struct Transfer {
    std::int32_t combiner = 0;
    std::int64_t count = 0;
    bool divide = false;
    std::size_t first_place = 0, num_places = 0;
  };
  std::vector<Transfer> transfers_;
  std::vector<Place> places_;  // sources and destinations in call order
};

/// "CRC-32 xxxxxxxx sent, yyyyyyyy received": the sender's zlib CRC-32 of a
/// message's `count` elements at `payload` against the receiver's of the same
/// elements with one bit flipped in flight (the top mantissa bit of a float; bit 31
/// of each of the first accumulator words of exact mode's int64 payload).
std::string CorruptedChecksums(const float* payload, std::int64_t count);
std::string CorruptedChecksums(const double* payload, std::int64_t count);
std::string CorruptedChecksums(const std::int64_t* payload, std::int64_t count);
std::string CorruptedChecksums(const Int448* payload, std::int64_t count);

/// Injects the message faults of `faults` into the phases it hands on to `base`.
/// REQUIRES: `base` and `faults` outlive it.
template <typename T>
class FaultyTransport final : public Transport<T> {
 public:
  FaultyTransport(Transport<T>& base, MessageFaults& faults) : base_(base), faults_(faults) {}

  std::int32_t num_replicas() const override { return base_.num_replicas(); }
  void BeginTransfer(std::int32_t combiner, std::int64_t count, bool divide) override {
    phase_.BeginTransfer(combiner, count, divide);
  }
  void AddSource(std::int32_t replica, BufferRole role, std::int64_t offset, std::int32_t phase) override {
    phase_.AddSource(replica, role, offset, phase);
  }
  void AddDestination(std::int32_t replica, std::int64_t offset, std::int32_t phase) override {
    phase_.AddDestination(replica, offset, phase);
  }
  /// Checks the held phase; hands it on and runs it if nothing failed, else drops it.
  void Run() override {
    const bool delivered = phase_.InjectFaults(faults_, [this](const HeldPhase::Place& source, std::int64_t count) {
      const T* payload = base_.SourceData(source.replica, source.role, source.offset);
      return payload == nullptr ? std::string() : CorruptedChecksums(payload, count);
    });
    if (delivered) phase_.HandOn(base_);
    phase_.Clear();
    if (delivered) base_.Run();
  }
  const T* SourceData(std::int32_t replica, BufferRole role, std::int64_t offset) const override {
    return base_.SourceData(replica, role, offset);
  }

 private:
  Transport<T>& base_;
  MessageFaults& faults_;
  HeldPhase phase_;
};

}  // namespace dtlab
