// hierarchical: within each worker, then across workers (one leader per worker, a
// ring), then back (docs/collectives.md, "hierarchical"). The multi-worker default.
#include "sim/comm/all_reduce_algorithm.h"

#include <cassert>
#include <vector>

namespace dtlab {
namespace {

// Within each worker of R replicas, the members send to the worker's first replica
// (its leader), which sums them in replica order; the W leaders run the ring; each
// leader sends the result to its members.
void Schedule(ScheduleTransport& transport, const AllReduceSpec& spec) {
  const std::int64_t count = spec.count;
  const bool divide = spec.divide;
  const std::int32_t n = transport.num_replicas();
  const std::int32_t per_worker = spec.replicas_per_worker == 0 ? n : spec.replicas_per_worker;
  assert(per_worker > 0 && n % per_worker == 0 && "replicas_per_worker must divide the replica count");
  const std::int32_t workers = n / per_worker;
  std::int32_t phase = 0;
  if (per_worker > 1) {
    for (std::int32_t leader = 0; leader < n; leader += per_worker) {
      transport.BeginTransfer(leader, count, divide && workers == 1);
      for (std::int32_t r = leader; r < leader + per_worker; ++r) transport.AddSource(r, BufferRole::kInput, 0, phase);
      transport.AddDestination(leader, 0, phase);
    }
    transport.Run();
    ++phase;
  }
  if (workers > 1) {
    std::vector<std::int32_t> leaders;
    for (std::int32_t leader = 0; leader < n; leader += per_worker) leaders.push_back(leader);
    // The leaders' partial sums are in their outputs once the workers have reduced.
    ScheduleRingAllReduce(transport, leaders, per_worker > 1 ? BufferRole::kOutput : BufferRole::kInput, count, divide,
                          phase);
    phase += 2 * (workers - 1);
  }
  if (per_worker > 1) {
    for (std::int32_t leader = 0; leader < n; leader += per_worker) {
      transport.BeginTransfer(leader, count, false);
      transport.AddSource(leader, BufferRole::kOutput, 0, phase);
      for (std::int32_t r = leader + 1; r < leader + per_worker; ++r) transport.AddDestination(r, 0, phase);
    }
    transport.Run();
  }
}

// At most the ring's count (one worker of N, or N workers of one).
double LogMessages(double n) { return 2.0 * n * (n - 1); }

}  // namespace

extern const AllReduceAlgorithmInfo kHierarchicalAllReduce = {"hierarchical", "", &Schedule, &LogMessages};

}  // namespace dtlab
