// direct: one-shot; replica i reduces chunk i reading every peer, then stores it
// into every peer, in one pass (docs/collectives.md, "direct").
#include "sim/comm/all_reduce_algorithm.h"

namespace dtlab {
namespace {

// Replica i sums chunk i of every replica in replica order (phase 0: a message from
// every peer) and stores it into chunk i of every replica (phase 1: a message to
// every peer). Both phases run in one pass, 256 bytes at a time: phase 1 only reads
// what phase 0 wrote to replica i's chunk i, and only writes chunk i of the
// others, which no other transfer of either phase touches, so interleaving them
// gives the same bits as doing them one after the other, and each element is read
// once and written once.
void Schedule(ScheduleTransport& transport, const AllReduceSpec& spec) {
  const std::int32_t n = transport.num_replicas();
  for (std::int32_t owner = 0; owner < n; ++owner) {
    const ElementRange chunk = Chunk(spec.count, n, owner);
    transport.BeginTransfer(owner, chunk.count, spec.divide);
    for (std::int32_t r = 0; r < n; ++r) transport.AddSource(r, BufferRole::kInput, chunk.begin, 0);
    transport.AddDestination(owner, chunk.begin, 0);
    for (std::int32_t r = 0; r < n; ++r)
      if (r != owner) transport.AddDestination(r, chunk.begin, 1);
  }
  transport.Run();
}

double LogMessages(double n) { return 2.0 * n * (n - 1); }

}  // namespace

extern const AllReduceAlgorithmInfo kDirectAllReduce = {"direct", "", &Schedule, &LogMessages};

}  // namespace dtlab
