// ring: reduce-scatter then all-gather around a ring of the N replicas, 2(N-1)
// phases, 2(N-1)/N of the buffer sent per replica (docs/collectives.md, "ring").
#include "sim/comm/all_reduce_algorithm.h"

#include <vector>

namespace dtlab {

// Reduce-scatter: in step p member r sends chunk (r-1-p) mod M to member r+1, which
// adds its own input chunk; chunk c is summed ((x[c+1] + x[c+2]) + ...) + x[c]
// (members mod M) and ends at member c. All-gather: in step p member r sends chunk
// (r-p) mod M to member r+1.
void ScheduleRingAllReduce(ScheduleTransport& transport, std::span<const std::int32_t> members, BufferRole input_role,
                           std::int64_t count, bool divide, std::int32_t first_phase) {
  const std::int32_t m = static_cast<std::int32_t>(members.size());
  for (std::int32_t step = 0; step < m - 1; ++step) {
    const std::int32_t phase = first_phase + step;
    for (std::int32_t sender = 0; sender < m; ++sender) {
      const std::int32_t receiver = (sender + 1) % m;
      const ElementRange chunk = Chunk(count, m, ((sender - 1 - step) % m + m) % m);
      // In the first step the sender's chunk is still its input; later it is the
      // partial sum the sender received in the previous step.
      transport.BeginTransfer(members[receiver], chunk.count, divide && step == m - 2);
      transport.AddSource(members[sender], step == 0 ? input_role : BufferRole::kOutput, chunk.begin, phase);
      transport.AddSource(members[receiver], input_role, chunk.begin, phase);
      transport.AddDestination(members[receiver], chunk.begin, phase);
    }
    transport.Run();
  }
  for (std::int32_t step = 0; step < m - 1; ++step) {
    const std::int32_t phase = first_phase + m - 1 + step;
    for (std::int32_t sender = 0; sender < m; ++sender) {
      const std::int32_t receiver = (sender + 1) % m;
      const ElementRange chunk = Chunk(count, m, ((sender - step) % m + m) % m);
      transport.BeginTransfer(members[receiver], chunk.count, false);
      transport.AddSource(members[sender], BufferRole::kOutput, chunk.begin, phase);
      transport.AddDestination(members[receiver], chunk.begin, phase);
    }
    transport.Run();
  }
}

namespace {

void Schedule(ScheduleTransport& transport, const AllReduceSpec& spec) {
  const std::int32_t n = transport.num_replicas();
  std::vector<std::int32_t> members(static_cast<std::size_t>(n));
  for (std::int32_t r = 0; r < n; ++r) members[static_cast<std::size_t>(r)] = r;
  ScheduleRingAllReduce(transport, members, BufferRole::kInput, spec.count, spec.divide, 0);
}

double LogMessages(double n) { return 2.0 * n * (n - 1); }

}  // namespace

extern const AllReduceAlgorithmInfo kRingAllReduce = {"ring", "", &Schedule, &LogMessages};

}  // namespace dtlab
