// Fault injection in the virtual cluster (docs/reliability.md, "Injected faults").
//
// A fault is written "KIND:key=value,...", the same in `dtlab train
// --inject-fault` and in a scenario's `[run] faults = [...]`:
//
//   throw:replica=1,step=3[,layer=dense]   the replica's step raises an exception in that layer
//   die:replica=2,step=5                   the replica stops responding from that step on
//   straggler:replica=0,step=4,seconds=90  the replica's compute takes that much longer (simulated)
//   drop:replica=1,step=2[,to=2][,phase=1] a message the replica sends in the step's collective is lost
//   corrupt:replica=1,step=2[,to=2][,phase=1]  a bit of such a message flips in flight
//   nan:replica=3,step=6[,variable=dense/kernel][,value=inf]  a non-finite value enters its gradient
//
// Every fault is detected and reported with the replica, the step, and the layer,
// variable or collective involved, and the run stops with a runtime fault (exit 3):
// a thrown exception stops the replica's compute (FaultInjector, sim/engines/fault_injector.h,
// wraps the engine's compute and hands the message faults to its collectives, which
// wrap their transport in FaultyTransport, sim/comm/faulty_transport.h); a dead replica, a
// straggler slower than the collective timeout and a dropped message make the
// collective time out (simulated seconds: nothing really waits, so tests are fast
// and deterministic); a corrupted message (one bit flipped in flight) fails the
// receiver's CRC-32 check of the payload; a non-finite gradient is stopped before
// the all-reduce (Cluster::CheckReplicaGradients). A straggler faster than the
// timeout only delays the step in the simulated timeline.
//
// Thread safety: values; a FaultyTransport reads and writes a MessageFaults between
// the phases of the one schedule it serves, and only the first failure is written
// (under a mutex, so that a transport may report from the tasks of a phase too).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace dtlab {

enum class FaultKind { kThrow, kDie, kStraggler, kDrop, kCorrupt, kNonFinite };

struct FaultSpec {
  FaultKind kind = FaultKind::kThrow;
  std::int32_t replica = 0;
  std::int64_t step = 1;   // 1-based optimizer step
  std::string layer;       // throw: the layer (default: the model's first)
  double seconds = 0;      // straggler: extra simulated seconds of compute
  std::int32_t to = -1;    // drop, corrupt: the receiver (-1: the first message the replica sends)
  std::int32_t phase = 0;  // drop, corrupt: 1-based phase of the collective (0: any)
  std::string variable;    // nan: the variable (default: the first)
  bool infinity = false;   // nan: +inf instead of NaN
};

/// Parses "KIND:key=value,...". InvalidArgument naming the allowed kinds and keys.
StatusOr<FaultSpec> ParseFaultSpec(std::string_view text);
/// The spec written back ("die:replica=2,step=5").
std::string FaultSpecText(const FaultSpec& fault);

/// What FaultyTransport does to the messages of a step's collectives, and what it saw.
struct MessageFaults {
  std::int64_t step = 0;
  std::vector<char> dead;           // dead[r]: replica r no longer sends or receives
  std::vector<FaultSpec> messages;  // this step's drop and corrupt faults
  double timeout_seconds = 60;      // how long a receiver waits for a message (simulated)

  /// Records the first failure (later ones are consequences); thread-safe.
  void Fail(std::string what);
  bool failed() const { return !failure.empty(); }
  std::string failure;

 private:
  std::mutex mutex_;
};

}  // namespace dtlab
