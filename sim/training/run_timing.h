// RunTiming: a training run's simulated time (the cost model, sim/timing/cost_model.h)
// and its Chrome trace (--trace, sim/timing/trace.h).
//
// A synchronous step costs each replica's compute (its examples' flops at the
// simulated device speed, plus any injected straggling), then the step's
// collectives on the run's topology; the trace shows the first --trace-steps
// steps, every phase and message. An asynchronous parameter_server run keeps its
// own clock: each update brings its simulated span from pull to push and its
// staleness, and the trace has one track per worker.
//
// Thread safety: not thread-safe; the training loop drives it.
#pragma once

#include <cstdint>
#include <string>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "sim/timing/cost_model.h"
#include "sim/comm/message_log.h"
#include "sim/engines/parameter_server.h"
#include "sim/timing/topology.h"
#include "sim/training/trainer.h"
#include "sim/engines/training_engine.h"

namespace dtlab {

/// The cost model's time of one full synchronous step, priced from the schedules
/// alone (no buffer is allocated, no message sent): each replica computes its
/// share of the global batch (ceil(G / N) examples, K micro-batches' worth with
/// accumulation), then the step's collectives (the gradient's all-reduce; a reduce
/// and a broadcast under central_storage), as RunTiming::AddStep adds them.
/// (StepTimeEstimate is in sim/training/trainer.h, beside the report that holds it.)
/// `not_estimated` says why when the step is not priced (parameter_server keeps an
/// asynchronous clock; a collective of more messages than dtlab records at once):
/// then the estimate is zero. InvalidArgument if the topology cannot be built.
StatusOr<StepTimeEstimate> EstimateFullStep(const TrainConfig& config, double flops_per_example,
                                            std::int64_t parameter_values, std::string* not_estimated);

class RunTiming {
 public:
  /// InvalidArgument if the run's topology cannot be built. `flops_per_example`:
  /// one training example's forward and backward pass.
  static StatusOr<RunTiming> Create(const TrainConfig& config, double flops_per_example, std::int64_t parameter_values);

  /// Adds the time of `step`. A synchronous step's collectives are read from
  /// `log`, which is then cleared; their costs and each replica's compute go into
  /// record.collectives and record.compute_seconds. A folded step (StepResult::folded)
  /// sent no message: it is priced as the collective the run names, from its
  /// schedule alone, once per run (its costs carry no per-message entries).
  Status AddStep(const EngineStep& step, MessageLog& log, StepRecord& record);
  /// At the end of an epoch: counts the bytes an asynchronous engine's transfers
  /// recorded in `log`, and clears it.
  void AddEpoch(MessageLog& log);

  /// Sets the report's simulated seconds, collective bytes and staleness, and
  /// writes the trace if the run asked for one (IOError if it cannot).
  /// REQUIRES: report.resumed_from_step is final.
  Status Finish(TrainReport& report) const;

 private:
  RunTiming(const TrainConfig& config, double flops_per_example, std::int64_t parameter_values, Topology topology);
  // The priced schedule of a folded step (FoldedCosts computes it on the first one).
  Status FoldedCosts();

  const TrainConfig* config_;
  bool asynchronous_;
  double flops_per_example_;
  std::int64_t parameter_values_;
  Topology topology_;
  std::optional<std::vector<CollectiveCost>> folded_costs_;
  std::int64_t folded_bytes_ = 0;
  std::string folded_not_priced_;  // why a folded step's collectives were not priced, if so
  SimulatedTimeline timeline_;
  std::int64_t collective_bytes_ = 0;
  // Asynchronous: every update's staleness, and the clock at the last update.
  std::vector<std::int64_t> staleness_;
  double asynchronous_seconds_ = 0;
  // What the trace shows.
  std::vector<CollectiveRecord> traced_collectives_;
  std::vector<std::vector<double>> traced_compute_;  // per traced step, each replica's compute seconds
  std::vector<ParameterServerUpdate> traced_updates_;
};

}  // namespace dtlab
