// Transport: where a collective's phases are carried out.
//
// A collective algorithm (sim/comm/all_reduce_*.cc, sim/comm/collectives.cc) is a schedule: bulk-synchronous phases,
// each a set of transfers. A transfer is carried out by one replica, its combiner:
// it reads `count` elements at an offset of each of its sources (its own buffer or
// a peer's: a message peer -> combiner), adds them in the order they were given,
// divides by the replica count for MEAN, and stores the result at an offset of each
// destination (a message combiner -> peer, or its own buffer). Buffers are named by
// (replica, role, offset), never by address, so the same schedule runs over any
// transport: replicas in one process (sim/comm/in_process_transport.h, oneTBB tasks over
// the replicas' own memory), MPI ranks (sim/comm/mpi_group.cc) or CUDA streams (later backends).
// The transport changes; the schedule, and so the order every element's addends
// meet, does not.
//
// A transport may carry out the transfers of a phase in any order and in parallel;
// a schedule guarantees that within a phase no two transfers write the same
// elements and no transfer writes what another reads.
//
// A transport knows nothing of faults: injected message faults (dead replicas,
// dropped and corrupted messages) come from a decorator, FaultyTransport
// (sim/comm/faulty_transport.h), that wraps any Transport<T> and hands on only the
// phases that succeed.
//
// Thread safety: one schedule at a time drives a transport.
#pragma once

#include <cstdint>

namespace dtlab {

/// Which of a replica's buffers: the collective's input or its output (the same
/// memory for an in-place collective).
enum class BufferRole : std::uint8_t { kInput, kOutput };

/// The interface a schedule drives. It does not depend on the element type, so one
/// schedule (sim/comm/all_reduce_algorithm.h) serves float, double and int64 buffers.
class ScheduleTransport {
 public:
  virtual ~ScheduleTransport() = default;
  /// Replicas taking part (ids 0 .. N-1).
  virtual std::int32_t num_replicas() const = 0;
  /// Starts a transfer of `count` elements carried out by replica `combiner`; with
  /// `divide`, the sum is divided by num_replicas() (MEAN). An empty transfer is
  /// dropped with its sources and destinations.
  virtual void BeginTransfer(std::int32_t combiner, std::int64_t count, bool divide) = 0;
  /// Adds an addend of the current transfer: elements [offset, offset + count) of
  /// `replica`'s buffer `role`. Addends are summed in call order. `phase` is the
  /// phase of the message (for the message log).
  virtual void AddSource(std::int32_t replica, BufferRole role, std::int64_t offset, std::int32_t phase) = 0;
  /// Adds a place the result is stored to: `replica`'s output at `offset`.
  virtual void AddDestination(std::int32_t replica, std::int64_t offset, std::int32_t phase) = 0;
  /// Carries out every transfer added since the last Run (one phase) and returns
  /// when all are done.
  virtual void Run() = 0;
};

/// A transport of buffers of T (float, double, std::int64_t or Int448): what a backend implements.
template <typename T>
class Transport : public ScheduleTransport {
 public:
  /// Read-only: element `offset` of `replica`'s buffer `role` as it is now, which is
  /// what a message from that source carries; null where this process cannot read
  /// that buffer (the default; a replica of another rank). FaultyTransport reads a
  /// corrupted message's payload through it, to checksum it, without knowing addresses.
  virtual const T* SourceData(std::int32_t /*replica*/, BufferRole /*role*/, std::int64_t /*offset*/) const {
    return nullptr;
  }
};

}  // namespace dtlab
