// What one all-reduce algorithm is: a file sim/comm/all_reduce_<name>.cc that defines an
// AllReduceAlgorithmInfo (its names, its schedule, its message count) and a line in
// the registry (sim/comm/all_reduce_registry.h) that names it. Nothing else in dtlab
// knows the algorithms one by one: the command line, scenario files, help text,
// the message log and the memory estimate all read the registry.
//
// A schedule emits bulk-synchronous phases of transfers over a ScheduleTransport
// (sim/comm/transport.h). It sees only replica ids, buffer roles and element offsets,
// never memory or the element type, so the same schedule runs on float, double and
// int64 buffers, in one process, over MPI and in the drawings of lessons; every
// element's addends meet in the order the schedule gives, on every transport and
// for any thread count. The schedules, phase counts, bytes per replica and
// summation orders are in docs/collectives.md.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string_view>

#include "sim/comm/transport.h"

namespace dtlab {

/// What a schedule is asked for. REQUIRES: transport.num_replicas() >= 2 (the
/// caller handles one replica, which sends nothing).
struct AllReduceSpec {
  std::int64_t count = 0;  // elements per replica, 0 included
  bool divide = false;     // MEAN: the sum divided by the replica count, once per element
  /// Replicas per worker ([w*R, (w+1)*R) form worker w), for algorithms that know
  /// workers; 0 means one worker holding every replica. REQUIRES: divides N.
  std::int32_t replicas_per_worker = 0;
};

/// One all-reduce algorithm, as its file defines it. Constant-initialized (string
/// literals and function pointers only), so it is usable from any static initializer.
struct AllReduceAlgorithmInfo {
  /// Its name on the command line (--all-reduce), in scenario files
  /// (cluster.all_reduce, [[check]] algorithm), in the message log ("all_reduce/<name>").
  std::string_view name;
  /// An older name still accepted, "" if none. A run configured with the alias
  /// prints the alias, so its outputs do not change.
  std::string_view alias;
  /// Emits the phases of one all-reduce over `transport`: every replica reads its
  /// BufferRole::kInput and ends holding the reduction in its output.
  void (*schedule)(ScheduleTransport& transport, const AllReduceSpec& spec);
  /// Messages one all-reduce of `replicas` replicas records at most: sizes the
  /// message log in the memory estimate (sim/training/memory_estimate.h).
  double (*log_messages)(double replicas);
};

// Helpers the schedules share.

/// Elements [begin, begin + count) of a buffer.
struct ElementRange {
  std::int64_t begin = 0;
  std::int64_t count = 0;
};

/// Whether a worker's own slice is an addend of a reduce-scatter of slices
/// (ScheduleReduceScatterSlices, sim/comm/collectives.h), or left for it to add.
enum class OwnSlice { kSummed, kLeftOut };

/// Where chunk `index` of `parts` near-equal chunks of `count` elements begins: the
/// first count % parts chunks hold one element more than the others.
inline std::int64_t ChunkBegin(std::int64_t count, std::int64_t parts, std::int64_t index) {
  return index * (count / parts) + std::min(index, count % parts);
}
/// Chunk `index` of `parts` near-equal chunks of `count` elements.
inline ElementRange Chunk(std::int64_t count, std::int64_t parts, std::int64_t index) {
  const std::int64_t begin = ChunkBegin(count, parts, index);
  return {begin, ChunkBegin(count, parts, index + 1) - begin};
}
/// Chunks [first_block, end_block) of `parts` near-equal chunks, as elements.
inline ElementRange Blocks(std::int64_t count, std::int64_t parts, std::int64_t first_block, std::int64_t end_block) {
  const std::int64_t begin = ChunkBegin(count, parts, first_block);
  return {begin, ChunkBegin(count, parts, end_block) - begin};
}

/// The ring all-reduce among `members` (replica ids in ring order, M >= 2), reading
/// their `input_role` buffers, in phases first_phase .. first_phase + 2(M-1) - 1
/// (sim/comm/all_reduce_ring.cc). The hierarchical algorithm runs it among worker leaders.
void ScheduleRingAllReduce(ScheduleTransport& transport, std::span<const std::int32_t> members, BufferRole input_role,
                           std::int64_t count, bool divide, std::int32_t first_phase);

}  // namespace dtlab
