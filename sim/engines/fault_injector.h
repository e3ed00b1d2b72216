// FaultInjector: the injected faults of sim/comm/faults.h, wrapped around an engine's
// compute and around its transport, in the spirit of leveldb's fault-injecting Env:
// the engine runs unchanged, and the faults come from outside it.
//
//  - BeginStep (one process) decides, before a step computes, which replicas are
//    dead and which messages are dropped or corrupted (message_faults(), given to
//    the collectives through CollectiveOptions::faults: they wrap their transport in
//    a FaultyTransport, sim/comm/faulty_transport.h, that applies them), and how long
//    stragglers take (a Runtime when one outlasts the collective timeout).
//    BeginRealStep (under MPI) makes the step's die and straggler faults real.
//  - WrapCompute returns a ComputeBackend that runs the engine's compute, then
//    raises the step's throw faults (as the replica's task would) and puts the nan
//    faults' values into the replicas' gradients.
//  - CollectiveStatus turns what the FaultyTransport saw into the run's Runtime.
//
// Thread safety: one engine drives it; a FaultyTransport reads and writes
// message_faults() between the phases of a collective.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "sim/compute/device_backend.h"
#include "sim/comm/faults.h"

namespace dtlab {

class FaultInjector {
 public:
  /// `model` (which must outlive the injector) names the layer a throw fault
  /// defaults to and locates a nan fault's variable; `replicas` is N.
  FaultInjector(std::vector<FaultSpec> faults, const Sequential<float>& model, std::int32_t replicas,
                double collective_timeout_seconds);

  /// InvalidArgument if a throw fault names no layer of `model` or a nan fault no variable.
  static Status CheckAgainstModel(const std::vector<FaultSpec>& faults, const Sequential<float>& model);

  /// One process: prepares the step's dead replicas and message faults, and adds
  /// the stragglers' extra seconds to `straggler_seconds` (resized to N when one
  /// straggles). Runtime when the only replica is dead or a straggler outlasts the
  /// collective timeout.
  Status BeginStep(std::int64_t step, std::vector<double>& straggler_seconds);
  /// Under MPI: this rank's replicas are [first, end). A die fault kills this process
  /// with SIGKILL; a straggler sleeps (wall-clock seconds).
  void BeginRealStep(std::int64_t step, std::int32_t first, std::int32_t end, std::int32_t rank) const;

  /// The step's message faults, for CollectiveOptions::faults.
  MessageFaults* message_faults() { return &messages_; }
  /// Runtime "COLLECTIVE at step K: what failed" after the FaultyTransport saw a fault.
  Status CollectiveStatus(const std::string& collective, std::int64_t step) const;
  /// The nan fault of this step ("nan:replica=1,step=2"), empty if none.
  const std::string& injected_nan() const { return injected_nan_; }

  /// `base` with this step's throw and nan faults; its segments are the replicas
  /// [first_replica, first_replica + segments) in order. Valid while `base` and the
  /// injector are.
  std::unique_ptr<ComputeBackend> WrapCompute(ComputeBackend& base, std::int32_t first_replica, std::int64_t step);

 private:
  class Compute;
  // Runtime for the throw fault of replica `replica` at `step`, if any.
  Status Thrown(std::int32_t replica, std::int64_t step) const;
  // The nan fault's element: the flat offset of its variable's first value.
  std::size_t NonFiniteOffset(const FaultSpec& fault, std::size_t& variable) const;

  std::vector<FaultSpec> faults_;
  const Sequential<float>& model_;
  std::int32_t replicas_;
  double timeout_seconds_;
  MessageFaults messages_;
  std::string injected_nan_;
};

}  // namespace dtlab
