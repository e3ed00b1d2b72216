// MessageLog: the record of every message a collective sends between replicas.
//
// Collectives run in bulk-synchronous phases; in each phase every replica may send
// messages to others. The log keeps, per collective call, each message's (phase,
// sender, receiver, bytes). The cost model (sim/timing/cost_model.h) turns the record into
// simulated time and the trace writer (sim/timing/trace.h) into a timeline.
//
// Thread safety: Record() may be called concurrently from the tasks of one phase;
// Begin/End and the accessors must not run concurrently with anything else.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace dtlab {

struct Message {
  std::int32_t phase = 0;   // 0-based phase within its collective
  std::int32_t sender = 0;  // replica ids
  std::int32_t receiver = 0;
  std::int64_t bytes = 0;
};

/// The most messages one collective's record may hold for the cost model to price
/// a step from its schedules alone (sim/training/run_timing.cc): one record of
/// 2n(n-1) messages at 4096 ring replicas would be 800 MB.
inline constexpr double kMaxPricedMessages = 4e6;

struct CollectiveRecord {
  std::string name;       // e.g. "all_reduce/ring", "broadcast/tree"
  std::int64_t step = 0;  // training step the collective belongs to
  std::int32_t num_replicas = 0;
  std::int32_t num_phases = 0;
  std::int64_t bytes_per_replica = 0;  // payload of one replica's buffer
  std::vector<Message> messages;       // sorted by (phase, sender, receiver) at End()
};

class MessageLog {
 public:
  /// Starts the record of one collective call.
  void Begin(std::string name, std::int64_t step, std::int32_t num_replicas, std::int64_t bytes_per_replica);
  /// Records one message of the current collective. Thread-safe.
  void Record(const Message& message);
  /// Closes the current collective: sorts its messages into a deterministic order
  /// and sets num_phases.
  void End();

  const std::vector<CollectiveRecord>& collectives() const { return collectives_; }
  void Clear() { collectives_.clear(); }
  /// Total bytes of all messages recorded.
  std::int64_t TotalBytes() const;

 private:
  std::mutex mutex_;
  std::vector<CollectiveRecord> collectives_;
};

}  // namespace dtlab
