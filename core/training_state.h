// TrainingState: everything a training run needs to continue exactly where it
// stopped, and its mapping to a checkpoint file.
//
// Tensor names in the checkpoint (docs/checkpoints.md):
//   model/<layer>/<kernel|bias>         F32, Keras layout (HWIO, [in, out])
//   optimizer/<slot>/<layer>/<...>      F32, e.g. optimizer/m/conv2d/kernel (Adam)
//   optimizer/iterations                I64 []
//   progress/step, progress/epoch, progress/step_in_epoch     I64 []
//   progress/worker_batches   I64 [workers], only in the middle of an asynchronous epoch
//   metrics/train_loss_total, metrics/train_batches           F32 []
//   metrics/train_accuracy_total, metrics/train_accuracy_count F32 []
//   optimizer/loss_scale F32 [], optimizer/loss_scale_counter I64 []: only with a
//     dynamic loss scale (core/loss_scale.h)
// Metadata: dtlab.model, dtlab.optimizer and the run's configuration (dtlab.*).
//
// Thread safety: a value; one writer at a time.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/metrics.h"
#include "core/model.h"
#include "core/optimizer.h"
#include "core/safetensors.h"

namespace dtlab {

struct TrainingState {
  ParameterList<float> params;
  std::unique_ptr<Optimizer> optimizer;
  std::int64_t step = 0;           // optimizer steps taken so far
  std::int64_t epoch = 0;          // 0-based epoch in progress
  std::int64_t step_in_epoch = 0;  // batches of `epoch` already consumed
  // In the middle of an asynchronous (parameter_server) epoch: the batches of
  // `epoch` each worker has pushed, which step_in_epoch (the steps whose batches
  // every worker has pushed) cannot say. Empty otherwise.
  std::vector<std::int64_t> worker_batches;
  // Running training metrics of the epoch in progress (the tutorial's total_loss /
  // num_batches and its SparseCategoricalAccuracy).
  float train_loss_total = 0.0f, train_batches = 0.0f;
  SparseCategoricalAccuracy train_accuracy;
  // A dynamic loss scale's state (Keras's LossScaleOptimizer: dynamic_scale and
  // step_counter), when the run has one.
  struct LossScaleState {
    float scale = 0.0f;
    std::int64_t counter = 0;
  };
  std::optional<LossScaleState> loss_scale;
};

/// The largest counters a checkpoint may hold (RestoreCheckpoint refuses more):
/// steps and iterations stay exact in a double, epochs in an int.
inline constexpr std::int64_t kMaxRestoredSteps = std::int64_t{1} << 53;
inline constexpr std::int64_t kMaxRestoredEpochs = (std::int64_t{1} << 31) - 1;

/// Builds the checkpoint of `state`; `metadata` is stored alongside (dtlab.* keys).
SafetensorsFile MakeCheckpoint(const Sequential<float>& model, const TrainingState& state,
                               const std::map<std::string, std::string>& metadata);

/// Restores `state` (whose optimizer must already be built) from a checkpoint.
/// Corruption naming the tensor if one is missing or has another shape than the
/// model's, or if its counters cannot come from a training run: negative or past
/// the limits above, more finished epochs than steps, running metrics that are
/// not finite, non-negative sums (accuracy: at most its count), worker positions
/// that are negative, past the limits or more than 2^31 workers.
Status RestoreCheckpoint(const SafetensorsFile& checkpoint, const Sequential<float>& model, TrainingState& state);

/// Restores only the model parameters (for evaluation).
StatusOr<ParameterList<float>> RestoreParameters(const SafetensorsFile& checkpoint, const Sequential<float>& model);

}  // namespace dtlab
