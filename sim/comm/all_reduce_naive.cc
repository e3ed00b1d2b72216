// naive: reduce everything to replica 0, then broadcast from it; 2 phases, replica
// 0 receives and sends N-1 whole buffers (docs/collectives.md, "naive").
#include "sim/comm/all_reduce_algorithm.h"

namespace dtlab {
namespace {

// Phase 0: every replica sends its buffer to replica 0, which sums x0 + x1 + ... in
// replica order. Phase 1: replica 0 sends the result to every other replica.
void Schedule(ScheduleTransport& transport, const AllReduceSpec& spec) {
  const std::int32_t n = transport.num_replicas();
  transport.BeginTransfer(0, spec.count, spec.divide);
  for (std::int32_t r = 0; r < n; ++r) transport.AddSource(r, BufferRole::kInput, 0, 0);
  transport.AddDestination(0, 0, 0);
  transport.Run();
  transport.BeginTransfer(0, spec.count, false);
  transport.AddSource(0, BufferRole::kOutput, 0, 1);
  for (std::int32_t r = 1; r < n; ++r) transport.AddDestination(r, 0, 1);
  transport.Run();
}

double LogMessages(double n) { return 2.0 * (n - 1); }

}  // namespace

extern const AllReduceAlgorithmInfo kNaiveAllReduce = {"naive", "", &Schedule, &LogMessages};

}  // namespace dtlab
