// Collectives between the replicas of one process: all-reduce (any algorithm of the
// registry, sim/comm/all_reduce_registry.h), reduce, broadcast, all-gather, reduce-scatter.
//
// Every replica owns its buffer; a collective really moves data between them. It
// runs as bulk-synchronous phases: in each phase the replicas' sends are carried
// out in parallel on oneTBB (copy a chunk out of the sender's buffer, then the
// receiver reduces or stores it), and no thread ever blocks waiting for a peer.
// The schedule (which chunk goes where in which phase, and the order in which a
// value's addends are summed) depends only on the algorithm, the replica count and
// the element count, never on the thread count: results are bit-identical for any
// number of threads. Different algorithms sum in different orders, so their float
// results may differ in the last bits; integer results never differ.
//
// T is float, double, std::int64_t (exact mode moves int64 accumulator words) or
// Int448 (the compact exact all-reduce's packed windows, sim/comm/int448.h).
// MEAN is only for floating types: the sum divided by the replica count.
//
// Thread safety: one collective at a time per set of buffers.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "sim/comm/all_reduce_algorithm.h"
#include "sim/comm/all_reduce_registry.h"
#include "sim/comm/faults.h"
#include "sim/comm/int448.h"
#include "sim/comm/message_log.h"
#include "sim/comm/transport.h"

namespace dtlab {

enum class ReduceOp { kSum, kMean };

struct CollectiveOptions {
  AllReduceAlgorithm algorithm = AllReduceAlgorithm::kRing;
  /// Replicas per worker, for hierarchical (replicas [w*R, (w+1)*R) form worker w).
  /// 0 means one worker holding every replica. REQUIRES: divides the replica count.
  std::int32_t replicas_per_worker = 0;
  std::int64_t step = 0;      // recorded with the messages
  MessageLog* log = nullptr;  // if not null, every message is recorded
  /// If not null: dead replicas, dropped and corrupted messages, message checksums
  /// (sim/comm/faults.h), injected by a FaultyTransport (sim/comm/faulty_transport.h)
  /// wrapped around the in-process transport. After a failure the collective moves
  /// nothing more, and faults->failure says what happened; the buffers are then
  /// unspecified.
  MessageFaults* faults = nullptr;
};

// The schedules, their phase counts, bytes per replica and summation orders are
// in docs/collectives.md. Common contract of the functions below:
//  - N = buffers.size() >= 1 replicas; N = 1 sends nothing (MEAN is then the identity).
//  - Element counts may be anything, 0 included; chunks differ by at most one element.
//  - A message of zero bytes is neither carried out nor recorded, so a tiny buffer
//    may leave gaps in the phase numbers of its record; the phase numbers of the
//    messages that are sent are those of the full schedule.
//  - options.log, when set, gets one record per call (MessageLog::Begin ... End),
//    named "all_reduce/<name>" (AllReduceAlgorithm::name: the name the algorithm was
//    chosen by), "reduce", "broadcast", "all_gather" or "reduce_scatter"; its bytes_per_replica is the larger of a
//    replica's buffers (the output of AllGather, the input of ReduceScatter), as nccl-tests counts.
//  - REQUIRES (checked by assert): MEAN only for float and double; root in [0, N);
//    the buffer sizes named below; buffers of different replicas do not overlap.
//  - Reduce, Broadcast, AllGather and ReduceScatter use the direct schedule:
//    replica i handles chunk i (Reduce: sums chunk i, then sends it to the root;
//    Broadcast: the root scatters chunk i to replica i, which sends it to all).

/// Emits the all-reduce schedule of `algorithm` for buffers of `count` elements
/// over `transport` (sim/comm/transport.h): the phases and transfers every replica
/// carries out, reading its BufferRole::kInput and writing its output. AllReduce
/// below runs it over the in-process transport; other backends (MPI ranks, CUDA
/// streams) run the same schedule over theirs, so every element's addends meet in
/// the same order on every backend. One replica sends nothing. REQUIRES: for
/// hierarchical, replicas_per_worker (0: all in one worker) divides
/// transport.num_replicas().
template <typename T>
void ScheduleAllReduce(Transport<T>& transport, AllReduceAlgorithm algorithm, std::int64_t count, ReduceOp op,
                       std::int32_t replicas_per_worker = 0);

/// The direct schedules of Reduce (chunk i summed by replica i, phase 0, then sent
/// to `root`, phase 1) and Broadcast (the root scatters chunk i to replica i, which
/// sends it to every other replica) over any transport. REQUIRES: N >= 2.
void ScheduleReduce(ScheduleTransport& transport, std::int64_t count, std::int32_t root, bool divide);
void ScheduleBroadcast(ScheduleTransport& transport, std::int64_t count, std::int32_t root);

/// The two halves of an all-reduce across workers, for the compact exact all-reduce
/// between processes (sim/comm/compact_exact.h, ExactSumCollectives::Scattered): worker w holds replicas
/// [w R, (w + 1) R), R = replicas_per_worker (0: one worker holding all), and its
/// leader is replica w R. `slices` (one per worker, in order, partitioning [0, count))
/// say which elements each worker ends holding.
///  - ScheduleReduceScatterSlices: each worker's replicas summed into its leader
///    (phase 0, where R > 1), then slice w of every leader summed, in worker order,
///    into leader w's (the next phase, direct: one message from each other leader).
///    The other elements of the leaders' buffers are then unspecified. With
///    OwnSlice::kLeftOut (R = 1 only), leader w's own slice is not an addend: its
///    slice ends with the sum of the other leaders', and the worker adds its own
///    (the compact all-reduce extracts it as it decides).
///  - ScheduleAllGatherSlices: slice w of leader w's buffer to every other leader (one
///    phase), then each leader's whole buffer to its worker's other replicas (the
///    next, where R > 1).
/// REQUIRES: R divides transport.num_replicas(); slices.size() == the worker count.
void ScheduleReduceScatterSlices(ScheduleTransport& transport, std::int32_t replicas_per_worker, std::int64_t count,
                                 std::span<const ElementRange> slices, OwnSlice own = OwnSlice::kSummed);
void ScheduleAllGatherSlices(ScheduleTransport& transport, std::int32_t replicas_per_worker,
                             std::span<const ElementRange> slices);

/// Runs one of those schedules over the in-process transport of `buffers` (in place),
/// recorded in options.log as `name`: a collective's way to run schedules of its own.
template <typename T>
void RunSchedule(std::span<const std::span<T>> buffers, const char* name, const CollectiveOptions& options,
                 const std::function<void(Transport<T>&)>& emit);
/// The same out of place: sources read as BufferRole::kInput come from `inputs`.
template <typename T>
void RunSchedule(std::span<const std::span<const T>> inputs, std::span<const std::span<T>> outputs, const char* name,
                 const CollectiveOptions& options, const std::function<void(Transport<T>&)>& emit);

/// The record of one collective of `replicas` buffers of `count` elements of
/// `element_bytes` each, as the message log would hold it after a real call, from
/// its schedule alone (`emit` runs it over a transport that moves nothing): what
/// the cost model needs to price a collective without allocating its buffers
/// (dtlab train --dry-run).
CollectiveRecord RecordSchedule(std::string name, std::int32_t replicas, std::int64_t count, std::int64_t element_bytes,
                                const std::function<void(ScheduleTransport&)>& emit);

/// In place: every buffer ends holding the reduction of all buffers.
/// REQUIRES: all buffers have the same size.
template <typename T>
void AllReduce(std::span<const std::span<T>> buffers, ReduceOp op, const CollectiveOptions& options);

/// Out of place: outputs[i] = reduction of all inputs; inputs are unchanged.
template <typename T>
void AllReduce(std::span<const std::span<const T>> inputs, std::span<const std::span<T>> outputs, ReduceOp op,
               const CollectiveOptions& options);

/// buffers[root] ends holding the reduction; the others are left unspecified.
template <typename T>
void Reduce(std::span<const std::span<T>> buffers, std::int32_t root, ReduceOp op, const CollectiveOptions& options);

/// Every buffer ends equal to buffers[root].
template <typename T>
void Broadcast(std::span<const std::span<T>> buffers, std::int32_t root, const CollectiveOptions& options);

/// outputs[i] (size N*n) = concatenation of inputs[0..N) (each size n), in replica order.
template <typename T>
void AllGather(std::span<const std::span<const T>> inputs, std::span<const std::span<T>> outputs,
               const CollectiveOptions& options);

/// inputs[i] has size N*n; outputs[i] (size n) = reduction over replicas of block i.
template <typename T>
void ReduceScatter(std::span<const std::span<const T>> inputs, std::span<const std::span<T>> outputs, ReduceOp op,
                   const CollectiveOptions& options);

}  // namespace dtlab
