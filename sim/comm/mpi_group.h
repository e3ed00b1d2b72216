// MpiWorkerGroup: the WorkerGroup (sim/comm/worker_group.h) of a multi-worker run on
// MPI, one worker per rank of MPI_COMM_WORLD. Built only where CMake finds MPI
// (DTLAB_WITH_MPI; OpenMPI on Debian: libopenmpi-dev openmpi-bin).
//
// The all-reduce runs the schedule of sim/comm/collectives.h over MpiTransport: every
// rank emits the whole schedule (all W x R replicas), carries out the transfers
// whose combiner it holds, and sends the addends and results that cross ranks as
// MPI point-to-point messages (MPI_Isend / MPI_Irecv). Addends meet in the
// schedule's order and are summed by the same kernel (sim/comm/combine.h) as in one
// process, so a multi-worker run gives the same bits as the single-process run of
// the same replicas, in fast mode as in exact mode.
//
// No call blocks without a deadline: every wait polls its requests against the
// collective timeout (wall-clock seconds), and a message that does not arrive in
// time fails the call with Runtime naming the silent rank, its replicas, the
// message and the step.
//
// Thread safety: MPI is initialized with MPI_THREAD_FUNNELED; one thread (the
// one that called Create) makes every call. oneTBB tasks only combine buffers.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/status.h"
#include "sim/comm/worker_group.h"

namespace dtlab {

class MpiWorkerGroup final : public WorkerGroup {
 public:
  /// MPI_Init_thread and the group of MPI_COMM_WORLD; Runtime if MPI cannot start.
  static StatusOr<std::unique_ptr<MpiWorkerGroup>> Create(int* argc, char*** argv, double timeout_seconds);
  /// MPI_Finalize, when Finish was called; otherwise nothing (see Finish).
  ~MpiWorkerGroup() override;

  std::int32_t rank() const override { return rank_; }
  std::int32_t size() const override { return size_; }

  Status AllGather(std::span<const std::byte> mine, std::span<std::byte> all,
                   std::span<const std::size_t> bytes_per_rank, std::string_view what, std::int64_t step) override;
  Status AllReduce(std::span<const std::span<float>> local, std::int32_t replicas, ReduceOp op,
                   const CollectiveOptions& options) override;
  Status AllReduce(std::span<const std::span<Int448>> local, std::int32_t replicas, ReduceOp op,
                   const CollectiveOptions& options) override;
  Status AllReduce(std::span<const std::span<std::int64_t>> local, std::int32_t replicas, ReduceOp op,
                   const CollectiveOptions& options) override;
  Status ReduceScatterSlices(std::span<const std::span<std::int64_t>> local, std::int32_t replicas,
                             std::span<const ElementRange> slices, OwnSlice own, const CollectiveOptions& options,
                             std::span<const std::span<const std::int64_t>> inputs = {}) override;
  Status AllGatherSlices(std::span<const std::span<float>> local, std::int32_t replicas,
                         std::span<const ElementRange> slices, const CollectiveOptions& options) override;
  Status AllGatherSlices(std::span<const std::span<std::int64_t>> local, std::int32_t replicas,
                         std::span<const ElementRange> slices, const CollectiveOptions& options) override;
  Status Send(std::int32_t to, std::span<const std::byte> bytes, std::string_view what) override;
  StatusOr<Received> Receive(std::int32_t from, std::string_view what) override;

  /// After a successful run: every rank calls it, and the destructor finalizes MPI.
  /// A rank that stops on an error does not (MPI_Finalize would wait for peers that
  /// may be gone); it exits, and mpirun stops the others.
  void Finish() { finish_ = true; }

 private:
  MpiWorkerGroup();
  template <typename T>
  Status RunAllReduce(std::span<const std::span<T>> local, std::int32_t replicas, ReduceOp op,
                      const CollectiveOptions& options);
  /// Runs `emit`'s schedule over the replicas of all ranks, recorded as `name`.
  template <typename T>
  Status RunSchedule(std::span<const std::span<T>> local, std::int32_t replicas, const std::string& name,
                     const CollectiveOptions& options, const std::function<void(Transport<T>&)>& emit,
                     std::span<const std::span<const T>> inputs = {});

  std::int32_t rank_ = 0, size_ = 1;
  double timeout_seconds_ = 60;
  std::int64_t phases_ = 0;  // phases run so far, the same on every rank (message tags)
  struct Staging;            // receive buffers, kept between calls (mpi_group.cc)
  std::unique_ptr<Staging> staging_;
  bool finish_ = false;
};

}  // namespace dtlab
