// halving_doubling (alias tree): recursive halving (a reduce-scatter) then recursive
// doubling (an all-gather), Rabenseifner's algorithm; Gloo and astra-sim call it
// halving-doubling. 2 log2 N phases for a power of two N, two more otherwise
// (docs/collectives.md, "halving_doubling").
#include "sim/comm/all_reduce_algorithm.h"

#include <bit>
#include <cmath>
#include <vector>

namespace dtlab {
namespace {

// With MPICH's folding for N that is not a power of two: with P the largest power
// of two <= N and E = N - P, replica 2i (i < E) first sends its whole buffer to
// 2i+1 and sits out; the P others run the power-of-two algorithm as virtual ranks;
// at the end 2i+1 sends the whole result back to 2i.
void Schedule(ScheduleTransport& transport, const AllReduceSpec& spec) {
  const std::int64_t count = spec.count;
  const std::int32_t n = transport.num_replicas();
  const std::int32_t powered = static_cast<std::int32_t>(std::bit_floor(static_cast<std::uint32_t>(n)));
  const std::int32_t extra = n - powered;
  auto replica_of = [extra](std::int32_t virtual_rank) {
    return virtual_rank < extra ? 2 * virtual_rank + 1 : virtual_rank + extra;
  };
  std::int32_t phase = 0;
  if (extra > 0) {
    for (std::int32_t i = 0; i < extra; ++i) {
      transport.BeginTransfer(2 * i + 1, count, false);
      transport.AddSource(2 * i, BufferRole::kInput, 0, phase);
      transport.AddSource(2 * i + 1, BufferRole::kInput, 0, phase);
      transport.AddDestination(2 * i + 1, 0, phase);
    }
    transport.Run();
    ++phase;
  }
  // Where each virtual rank's data lives: its output once it has received anything.
  std::vector<BufferRole> current(static_cast<std::size_t>(powered));
  for (std::int32_t v = 0; v < powered; ++v) current[v] = v < extra ? BufferRole::kOutput : BufferRole::kInput;
  // Each virtual rank's segment, in blocks of `powered` near-equal blocks: it halves
  // in every step of the reduce-scatter and ends as block v.
  std::vector<std::int32_t> segment_begin(static_cast<std::size_t>(powered), 0);
  std::vector<std::int32_t> segment_end(static_cast<std::size_t>(powered), powered);
  for (std::int32_t mask = powered / 2; mask >= 1; mask /= 2, ++phase) {
    for (std::int32_t v = 0; v < powered; ++v) {
      const std::int32_t partner = v ^ mask;
      const std::int32_t middle = (segment_begin[v] + segment_end[v]) / 2;
      if (v & mask) {
        segment_begin[v] = middle;
      } else {
        segment_end[v] = middle;
      }
      const ElementRange kept = Blocks(count, powered, segment_begin[v], segment_end[v]);
      const std::int32_t lower = std::min(v, partner), upper = std::max(v, partner);
      transport.BeginTransfer(replica_of(v), kept.count, spec.divide && mask == 1);
      transport.AddSource(replica_of(lower), current[lower], kept.begin, phase);
      transport.AddSource(replica_of(upper), current[upper], kept.begin, phase);
      transport.AddDestination(replica_of(v), kept.begin, phase);
    }
    transport.Run();
    for (std::int32_t v = 0; v < powered; ++v) current[v] = BufferRole::kOutput;
  }
  for (std::int32_t mask = 1; mask < powered; mask *= 2, ++phase) {
    for (std::int32_t v = 0; v < powered; ++v) {
      const std::int32_t partner = v ^ mask;
      const std::int32_t first_block = v / mask * mask;
      const ElementRange segment = Blocks(count, powered, first_block, first_block + mask);
      transport.BeginTransfer(replica_of(partner), segment.count, false);
      transport.AddSource(replica_of(v), BufferRole::kOutput, segment.begin, phase);
      transport.AddDestination(replica_of(partner), segment.begin, phase);
    }
    transport.Run();
  }
  if (extra > 0) {
    for (std::int32_t i = 0; i < extra; ++i) {
      transport.BeginTransfer(2 * i, count, false);
      transport.AddSource(2 * i + 1, BufferRole::kOutput, 0, phase);
      transport.AddDestination(2 * i, 0, phase);
    }
    transport.Run();
  }
}

double LogMessages(double n) { return 2.0 * n * std::ceil(std::log2(n)); }

}  // namespace

// "tree" was its first name in dtlab; the sum it computes is a balanced binary tree
// over the virtual ranks, but the messages are those of halving and doubling.
extern const AllReduceAlgorithmInfo kHalvingDoublingAllReduce = {"halving_doubling", "tree", &Schedule, &LogMessages};

}  // namespace dtlab
