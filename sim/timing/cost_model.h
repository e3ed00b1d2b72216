// Cost model: simulated time of the collectives recorded in a MessageLog, on a
// Topology, and of the computation around them.
//
// This is the textbook alpha-beta (latency-bandwidth) model with link contention,
// not a packet simulator (docs/cost_model.md explains it, with worked examples and
// its limits). A collective runs as bulk-synchronous phases: each phase starts when
// the previous one has ended. Within a phase every message is routed over the
// topology; each directed link carries the sum of the bytes of the messages routed
// over it, all links transfer in parallel, and
//
//   phase seconds = max over links (bytes on link / bandwidth)
//                 + max over messages (hops * latency).
//
// So two messages sharing a link take twice as long as one, and a ring all-reduce
// of S bytes on a ring of N replicas costs 2(N-1)(alpha + S/(N beta)).
//
// Thread safety: the free functions are thread-safe; CollectiveCost and
// SimulatedTimeline are values (concurrent const use is safe, mutation needs
// external synchronization).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "sim/comm/message_log.h"
#include "sim/timing/topology.h"

namespace dtlab {

/// The cost of one phase of a collective.
struct PhaseCost {
  double seconds = 0;               // duration of the phase
  std::int64_t bytes = 0;           // sum of the bytes of all its messages
  std::int64_t max_link_bytes = 0;  // bytes on its busiest directed link
  std::int32_t max_hops = 0;        // hops of its longest route
  std::int32_t num_messages = 0;
};

/// The cost of one message, as laid out in a trace: it starts with its phase and
/// ends when the busiest link on its route has drained, plus its path latency:
///   seconds = max over its links (bytes on link / bandwidth) + hops * latency,
/// which is at most its phase's seconds (equal for a message on the bottleneck).
struct MessageCost {
  double seconds = 0;
  std::int32_t hops = 0;
};

/// The cost of one collective call.
struct CollectiveCost {
  std::string name;       // CollectiveRecord::name
  std::int64_t step = 0;  // CollectiveRecord::step
  /// Sum of the phase seconds, added in phase order.
  double seconds = 0;
  /// One entry per phase 0..P-1, P = max(num_phases, last message phase + 1); a
  /// phase without messages costs 0.
  std::vector<PhaseCost> phases;
  /// Parallel to CollectiveRecord::messages.
  std::vector<MessageCost> messages;
};

/// Simulated time of `record` on `topology` (the model above). Messages from a
/// replica to itself cross no link and cost nothing. InvalidArgument, naming the
/// collective, if record.num_replicas differs from topology.num_replicas(), or a
/// message has a negative phase or bytes, a sender or receiver outside
/// [0, num_replicas), or byte counts whose sum overflows 64 bits.
StatusOr<CollectiveCost> EstimateCollective(const CollectiveRecord& record, const Topology& topology);

/// Seconds to compute `flops` floating-point operations at
/// `device_flops_per_second`. REQUIRES: flops >= 0, device_flops_per_second > 0.
double EstimateCompute(double flops, double device_flops_per_second);

/// Where one stage of a SimulatedTimeline lies in simulated time.
struct TimelineStage {
  enum class Kind { kCompute, kCollective };
  Kind kind = Kind::kCompute;
  std::int64_t step = 0;
  double start_seconds = 0;
  double end_seconds = 0;
  /// kCompute: seconds each replica computed in this stage (size num_replicas; 0
  /// for a replica that did not compute). The stage ends with the slowest one.
  std::vector<double> replica_seconds;
  /// kCollective: the index of the collective in SimulatedTimeline::collectives()
  /// and the absolute time each of its phases ends (phase k starts where phase
  /// k-1 ends, phase 0 at start_seconds).
  std::size_t collective_index = 0;
  std::vector<double> phase_end_seconds;
};

/// The simulated time of a training run: per step, computation on every replica,
/// then collectives.
///
/// Steps run one after another in increasing step number (whatever the order
/// in which they were added). Within a step, stages run in the order they were
/// added: consecutive AddCompute calls form one compute stage, in which the
/// replicas compute in parallel and which ends when the slowest replica is done;
/// each AddCollective is a stage of its own, starting when the previous stage
/// ended (the collective waits for the slowest replica). Computation added after
/// a collective in the same step (say, an optimizer update) is a new stage after
/// it. There is no overlap of computation and communication.
class SimulatedTimeline {
 public:
  /// REQUIRES: num_replicas >= 1.
  explicit SimulatedTimeline(std::int32_t num_replicas);

  /// Adds `seconds` of computation by `replica` in `step` (summed with earlier
  /// computation of the same replica in the same stage). InvalidArgument if the
  /// replica is outside [0, num_replicas) or seconds is negative or not finite.
  Status AddCompute(std::int64_t step, std::int32_t replica, double seconds);
  /// Adds a collective to the end of step cost.step.
  /// REQUIRES: phase seconds >= 0 and finite (as EstimateCollective gives).
  void AddCollective(const CollectiveCost& cost);

  std::int32_t num_replicas() const { return num_replicas_; }
  /// Every collective added, in the order of the AddCollective calls.
  const std::vector<CollectiveCost>& collectives() const { return collectives_; }

  /// Every stage with its absolute start and end, in time order. The first stage
  /// starts at 0.
  std::vector<TimelineStage> Layout() const;
  /// When the last stage ends; 0 for an empty timeline.
  double total_seconds() const;
  /// Total duration of the compute stages (bounded by their slowest replica)
  /// and of the collective stages; they add up to total_seconds() up to rounding.
  double compute_seconds() const;
  double collective_seconds() const;

 private:
  struct Stage {
    bool is_collective = false;
    std::vector<double> replica_seconds;  // compute stages
    std::size_t collective_index = 0;     // collective stages
  };

  std::int32_t num_replicas_;
  std::map<std::int64_t, std::vector<Stage>> steps_;
  std::vector<CollectiveCost> collectives_;
};

}  // namespace dtlab
