// WorkerGroup: the other workers of a multi-worker run, as the engine sees them.
//
// In a single-process run there is no group: the Cluster (sim/engines/cluster.h) holds
// every replica. In a multi-worker run on MPI (sim/comm/mpi_group.h, `mpirun -np W
// dtlab train --strategy multi_worker_mirrored`), each process is one worker
// holding R = N / W consecutive replicas ([rank x R, (rank + 1) x R)), and the
// group carries what crosses workers: the gradient all-reduce (the same schedule
// as in one process, sim/comm/collectives.h, so the same bits) and the small exchanges
// that keep every worker's view of a step identical (per-example losses,
// predictions, per-replica losses).
//
// Every call is collective: every worker makes the same calls in the same order.
// A call returns Runtime, naming the worker and the step, when a peer does not
// answer within the group's timeout; the run then stops (exit 3).
//
// Thread safety: one thread drives the group.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/status.h"
#include "sim/comm/collectives.h"

namespace dtlab {

class WorkerGroup {
 public:
  virtual ~WorkerGroup() = default;
  /// This worker's index (its MPI rank) and the number of workers.
  virtual std::int32_t rank() const = 0;
  virtual std::int32_t size() const = 0;
  /// Every worker w contributes bytes_per_rank[w] bytes (`mine` on this worker);
  /// `all` receives them concatenated in rank order. `what` and `step` name the
  /// exchange in errors.
  virtual Status AllGather(std::span<const std::byte> mine, std::span<std::byte> all,
                           std::span<const std::size_t> bytes_per_rank, std::string_view what, std::int64_t step) = 0;
  /// The all-reduce of options.algorithm over the `replicas` replicas of all
  /// workers, in place; `local` holds this worker's replicas' buffers in order.
  virtual Status AllReduce(std::span<const std::span<float>> local, std::int32_t replicas, ReduceOp op,
                           const CollectiveOptions& options) = 0;
  virtual Status AllReduce(std::span<const std::span<std::int64_t>> local, std::int32_t replicas, ReduceOp op,
                           const CollectiveOptions& options) = 0;
  virtual Status AllReduce(std::span<const std::span<Int448>> local, std::int32_t replicas, ReduceOp op,
                           const CollectiveOptions& options) = 0;

  /// The halves of the compact exact all-reduce's window sums between workers
  /// (sim/comm/compact_exact.h, ExactSumCollectives::Scattered): ScheduleReduceScatterSlices and
  /// ScheduleAllGatherSlices (sim/comm/collectives.h) over the `replicas` replicas of
  /// all workers, `slices` one per worker; in options.log as "reduce_scatter" and
  /// "all_gather". `own`: OwnSlice::kLeftOut only where each worker holds one replica.
  /// The reduce-scatter runs in place, or, where `inputs` (one per local replica, the
  /// size of `local`'s) is not empty, reads its addends from inputs and writes
  /// only the sums into `local`.
  virtual Status ReduceScatterSlices(std::span<const std::span<std::int64_t>> local, std::int32_t replicas,
                                     std::span<const ElementRange> slices, OwnSlice own,
                                     const CollectiveOptions& options,
                                     std::span<const std::span<const std::int64_t>> inputs = {}) = 0;
  virtual Status AllGatherSlices(std::span<const std::span<float>> local, std::int32_t replicas,
                                 std::span<const ElementRange> slices, const CollectiveOptions& options) = 0;
  virtual Status AllGatherSlices(std::span<const std::span<std::int64_t>> local, std::int32_t replicas,
                                 std::span<const ElementRange> slices, const CollectiveOptions& options) = 0;

  /// Point-to-point, for the asynchronous parameter-server protocol: sends `bytes`
  /// to worker `to`; returns once it is on its way (Runtime after the timeout).
  virtual Status Send(std::int32_t to, std::span<const std::byte> bytes, std::string_view what) = 0;
  /// A message sent with Send: its sender and bytes.
  struct Received {
    std::int32_t from = -1;
    std::vector<std::byte> bytes;
  };
  /// Receives the next message from worker `from` (kAnySender: from anyone);
  /// Runtime naming `what` if none comes within the timeout.
  static constexpr std::int32_t kAnySender = -1;
  virtual StatusOr<Received> Receive(std::int32_t from, std::string_view what) = 0;

  /// AllGather of trivially copyable values: worker w contributes counts[w] values.
  template <typename T>
  Status AllGatherValues(std::span<const T> mine, std::span<T> all, std::span<const std::size_t> counts,
                         std::string_view what, std::int64_t step) {
    static_assert(std::is_trivially_copyable_v<T>);
    std::vector<std::size_t> bytes(counts.begin(), counts.end());
    for (auto& b : bytes) b *= sizeof(T);
    return AllGather(std::as_bytes(mine), std::as_writable_bytes(all), bytes, what, step);
  }
  /// One value from every worker, in rank order (AllGatherValues of one each).
  template <typename T>
  StatusOr<std::vector<T>> AllGatherOne(const T& mine, std::string_view what, std::int64_t step) {
    std::vector<T> all(static_cast<std::size_t>(size()));
    const std::vector<std::size_t> one(all.size(), 1);
    DTLAB_RETURN_IF_ERROR(AllGatherValues(std::span<const T>(&mine, 1), std::span<T>(all), one, what, step));
    return all;
  }
  /// Returns when every worker has called it (or Runtime after the timeout).
  Status Barrier(std::string_view what, std::int64_t step) {
    const std::byte mine{1};
    std::vector<std::byte> all(static_cast<std::size_t>(size()));
    std::vector<std::size_t> bytes(static_cast<std::size_t>(size()), 1);
    return AllGather(std::span(&mine, 1), all, bytes, what, step);
  }
};

}  // namespace dtlab
