// TrainingEngine: what the training loop (sim/training/trainer.h) needs from any strategy's
// engine, synchronous (Cluster) or asynchronous (ParameterServerCluster): one epoch
// of optimizer steps, each reported back as an EngineStep, the variables to
// evaluate and save, the cross-replica metrics, and the state a checkpoint holds.
// The loop never asks which engine it drives.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/metrics.h"
#include "core/mnist.h"
#include "core/model.h"
#include "core/status.h"
#include "core/training_state.h"
#include "sim/comm/message_log.h"

namespace dtlab {

struct StepResult;             // sim/engines/cluster.h
struct ParameterServerUpdate;  // sim/engines/parameter_server.h

/// The batches of one epoch: per step, per input slot (a replica, or a
/// parameter_server worker), indices into the training set (DistributedDataset::Iterate).
using EpochBatches = std::vector<std::vector<std::vector<std::int64_t>>>;

/// What the loop asks of one epoch.
struct EpochRequest {
  const ImageDataset* data = nullptr;
  const EpochBatches* batches = nullptr;
  std::int64_t epoch = 0;  // 0-based
  float learning_rate = 0;
  std::int64_t global_batch = 0;  // the configured global batch (of one micro-batch, with gradient accumulation)
  bool drop_remainder = false;    // gradient accumulation (global rule): drop the epoch's partial group
  std::int64_t steps_before = 0;  // optimizer steps the run has taken before this epoch
  std::int64_t max_steps = -1;    // stop once the run has taken this many (< 0: no limit)
  // Where a resumed epoch continues: synchronous engines skip the first
  // `first_step` steps; asynchronous worker w skips its first first_worker_batches[w]
  // batches (empty: none).
  std::int64_t first_step = 0;
  std::vector<std::int64_t> first_worker_batches;
  std::int64_t capture_step = -1;       // keep the weights before this step and its gradient (--dump-step)
  bool every_reduced_gradient = false;  // report every step's reduced gradient
  // Asked after every step (after on_step), on every rank of a synchronous engine,
  // so it may be collective: true ends the epoch there, as max_steps does (a
  // graceful stop, sim/training/trainer.h). Unset: never. Asynchronous engines do
  // not ask it.
  std::function<StatusOr<bool>()> stop_after_step;
};

/// What one optimizer step did, as the engine reports it to the loop. Pointers
/// and spans are valid during the callback only.
struct EngineStep {
  std::int64_t step = 0;  // 1-based optimizer step of the run
  float loss = 0;
  std::int64_t examples = 0;
  // The progress bar's view: steps (synchronous) or updates (asynchronous) of the
  // epoch done, and in all.
  std::int64_t shown_done = 0, shown_total = 0;
  // Where a checkpoint taken after this step resumes: batches of the epoch every
  // input slot has taken, and (asynchronous) each worker's batches pushed.
  std::int64_t step_in_epoch = 0;
  std::span<const std::int64_t> worker_batches;
  // Synchronous steps.
  const StepResult* result = nullptr;
  const std::vector<std::vector<std::int64_t>>* batch = nullptr;  // per replica
  const ParameterList<float>* weights_before = nullptr;           // at EpochRequest::capture_step
  const ParameterList<float>* reduced_gradient = nullptr;         // if captured or asked for
  // Asynchronous updates: which worker, its staleness and simulated times.
  const ParameterServerUpdate* update = nullptr;
};

/// How an epoch ended.
struct EpochOutcome {
  std::int64_t steps = 0;          // optimizer steps of the run after the epoch (every rank's count)
  std::int64_t step_in_epoch = 0;  // where the epoch stopped (EngineStep::step_in_epoch), or its step count
  bool stopped = false;            // max_steps or stop_after_step ended the run in this epoch
};

class TrainingEngine {
 public:
  virtual ~TrainingEngine() = default;
  /// Runs the optimizer steps of one epoch, calling `on_step` after each (on the
  /// chief only, for an engine spread over MPI ranks whose steps only it sees); an
  /// error from `on_step` stops the epoch and is returned. Runtime when the loss
  /// becomes non-finite or the engine's replicas diverge.
  virtual StatusOr<EpochOutcome> TrainEpoch(const EpochRequest& request,
                                            const std::function<Status(const EngineStep&)>& on_step) = 0;
  /// The variables every replica computes with (the canonical copy).
  virtual const ParameterList<float>& variables() const = 0;
  /// The training accuracy read across replicas or workers: their states summed.
  virtual SparseCategoricalAccuracy MergedAccuracy() const = 0;
  virtual void ResetMetrics() = 0;
  /// Copies the variables, optimizer state and merged metric into `state`.
  virtual void ExportState(TrainingState& state) const = 0;
  /// Loads them into every replica (or parameter server).
  virtual void ImportState(const TrainingState& state) = 0;
  /// The messages the engine's collectives or transfers recorded.
  virtual MessageLog& message_log() = 0;
};

}  // namespace dtlab
