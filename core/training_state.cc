#include "core/training_state.h"

#include <cmath>

namespace dtlab {
namespace {

Status AddScalar(SafetensorsFile& file, const std::string& name, std::int64_t value) {
  return file.Add(name, std::span<const std::int64_t>(&value, 1), Shape{});
}
Status AddScalar(SafetensorsFile& file, const std::string& name, float value) {
  return file.Add(name, std::span<const float>(&value, 1), Shape{});
}

StatusOr<std::int64_t> GetI64Scalar(const SafetensorsFile& file, const std::string& name) {
  DTLAB_ASSIGN_OR_RETURN(auto values, file.GetI64(name));
  if (values.size() != 1) return Status::Corruption("checkpoint tensor " + name + " is not a scalar");
  return values[0];
}
StatusOr<float> GetF32Scalar(const SafetensorsFile& file, const std::string& name) {
  DTLAB_ASSIGN_OR_RETURN(auto t, file.GetF32(name));
  if (t.size() != 1) return Status::Corruption("checkpoint tensor " + name + " is not a scalar");
  return t[0];
}

StatusOr<Tensor<float>> GetShaped(const SafetensorsFile& file, const std::string& name, const Shape& shape) {
  DTLAB_ASSIGN_OR_RETURN(Tensor<float> t, file.GetF32(name));
  if (t.shape() != shape)
    return Status::Corruption("checkpoint tensor " + name + " has shape " + ShapeToString(t.shape()) +
                              " but the model expects " + ShapeToString(shape) +
                              " (was it written for another model?)");
  return t;
}

// Corruption unless the counters restored into `state` can have come from a
// training run: a checkpoint's CRC proves it was not damaged, not that its writer
// told the truth, so its numbers are held to what an option would be.
Status CheckRestoredCounters(const TrainingState& state, std::int64_t iterations, float accuracy_total,
                             float accuracy_count) {
  auto damaged = [](const std::string& what) {
    return Status::Corruption("checkpoint " + what +
                              "; the checkpoint is damaged or was not written by dtlab "
                              "(delete it, or use another --checkpoint-dir)");
  };
  auto count = [&](const char* name, std::int64_t value, std::int64_t limit) -> Status {
    if (value < 0 || value > limit)
      return damaged(std::string(name) + " is " + std::to_string(value) + ", not a count from 0 to " +
                     std::to_string(limit));
    return Status::Ok();
  };
  DTLAB_RETURN_IF_ERROR(count("optimizer/iterations", iterations, kMaxRestoredSteps));
  DTLAB_RETURN_IF_ERROR(count("progress/step", state.step, kMaxRestoredSteps));
  DTLAB_RETURN_IF_ERROR(count("progress/step_in_epoch", state.step_in_epoch, kMaxRestoredSteps));
  DTLAB_RETURN_IF_ERROR(count("progress/epoch", state.epoch, kMaxRestoredEpochs));
  if (state.worker_batches.size() > static_cast<std::size_t>(kMaxRestoredEpochs))
    return damaged("progress/worker_batches has " + std::to_string(state.worker_batches.size()) + " workers");
  for (const std::int64_t batches : state.worker_batches)
    DTLAB_RETURN_IF_ERROR(count("progress/worker_batches", batches, kMaxRestoredSteps));
  // Every finished epoch took at least one step.
  if (state.epoch > state.step)
    return damaged("progress/epoch is " + std::to_string(state.epoch) + " finished epochs after only " +
                   std::to_string(state.step) + " steps (progress/step)");
  // The running means of the current epoch: sums of finite, non-negative values.
  const float batches = state.train_batches;
  if (!std::isfinite(batches) || batches < 0 || batches != std::floor(batches) || batches > 16777216.0f)
    return damaged("metrics/train_batches is " + std::to_string(batches) + ", not a whole count of batches");
  if (!std::isfinite(state.train_loss_total) || state.train_loss_total < 0 ||
      (batches == 0 && state.train_loss_total != 0))
    return damaged("metrics/train_loss_total is " + std::to_string(state.train_loss_total) + " over " +
                   std::to_string(static_cast<std::int64_t>(batches)) + " batches, not a sum of losses");
  if (!std::isfinite(accuracy_total) || !std::isfinite(accuracy_count) || accuracy_total < 0 ||
      accuracy_total > accuracy_count)
    return damaged("metrics/train_accuracy_total is " + std::to_string(accuracy_total) + " of " +
                   std::to_string(accuracy_count) + " examples (metrics/train_accuracy_count)");
  return Status::Ok();
}

}  // namespace

SafetensorsFile MakeCheckpoint(const Sequential<float>& model, const TrainingState& state,
                               const std::map<std::string, std::string>& metadata) {
  SafetensorsFile file;
  file.metadata = metadata;
  file.metadata["dtlab.model"] = model.name();
  file.metadata["dtlab.optimizer"] = std::string(state.optimizer->name());
  const auto& params = model.parameters();
  // Names are unique by construction, so Add cannot fail here.
  for (std::size_t i = 0; i < params.size(); ++i) (void)file.Add("model/" + params[i].name, state.params[i]);
  const auto slots = state.optimizer->SlotNames();
  for (std::size_t s = 0; s < slots.size(); ++s)
    for (std::size_t i = 0; i < params.size(); ++i)
      (void)file.Add("optimizer/" + slots[s] + "/" + params[i].name, state.optimizer->slot(s, i));
  (void)AddScalar(file, "optimizer/iterations", state.optimizer->iterations());
  (void)AddScalar(file, "progress/step", state.step);
  (void)AddScalar(file, "progress/epoch", state.epoch);
  (void)AddScalar(file, "progress/step_in_epoch", state.step_in_epoch);
  if (!state.worker_batches.empty())
    (void)file.Add("progress/worker_batches", std::span<const std::int64_t>(state.worker_batches),
                   Shape{static_cast<std::int64_t>(state.worker_batches.size())});
  (void)AddScalar(file, "metrics/train_loss_total", state.train_loss_total);
  (void)AddScalar(file, "metrics/train_batches", state.train_batches);
  (void)AddScalar(file, "metrics/train_accuracy_total", state.train_accuracy.state().total());
  (void)AddScalar(file, "metrics/train_accuracy_count", state.train_accuracy.state().count());
  if (state.loss_scale) {
    (void)AddScalar(file, "optimizer/loss_scale", state.loss_scale->scale);
    (void)AddScalar(file, "optimizer/loss_scale_counter", state.loss_scale->counter);
  }
  return file;
}

StatusOr<ParameterList<float>> RestoreParameters(const SafetensorsFile& checkpoint, const Sequential<float>& model) {
  ParameterList<float> params;
  for (const auto& p : model.parameters()) {
    DTLAB_ASSIGN_OR_RETURN(Tensor<float> t, GetShaped(checkpoint, "model/" + p.name, p.spec.shape));
    params.push_back(std::move(t));
  }
  return params;
}

Status RestoreCheckpoint(const SafetensorsFile& checkpoint, const Sequential<float>& model, TrainingState& state) {
  DTLAB_ASSIGN_OR_RETURN(state.params, RestoreParameters(checkpoint, model));
  const auto slots = state.optimizer->SlotNames();
  const auto& params = model.parameters();
  for (std::size_t s = 0; s < slots.size(); ++s)
    for (std::size_t i = 0; i < params.size(); ++i) {
      DTLAB_ASSIGN_OR_RETURN(
          state.optimizer->slot(s, i),
          GetShaped(checkpoint, "optimizer/" + slots[s] + "/" + params[i].name, params[i].spec.shape));
    }
  DTLAB_ASSIGN_OR_RETURN(std::int64_t iterations, GetI64Scalar(checkpoint, "optimizer/iterations"));
  state.optimizer->set_iterations(iterations);
  DTLAB_ASSIGN_OR_RETURN(state.step, GetI64Scalar(checkpoint, "progress/step"));
  DTLAB_ASSIGN_OR_RETURN(state.epoch, GetI64Scalar(checkpoint, "progress/epoch"));
  DTLAB_ASSIGN_OR_RETURN(state.step_in_epoch, GetI64Scalar(checkpoint, "progress/step_in_epoch"));
  state.worker_batches.clear();
  if (checkpoint.Find("progress/worker_batches") != nullptr) {
    DTLAB_ASSIGN_OR_RETURN(state.worker_batches, checkpoint.GetI64("progress/worker_batches"));
  }
  DTLAB_ASSIGN_OR_RETURN(state.train_loss_total, GetF32Scalar(checkpoint, "metrics/train_loss_total"));
  DTLAB_ASSIGN_OR_RETURN(state.train_batches, GetF32Scalar(checkpoint, "metrics/train_batches"));
  DTLAB_ASSIGN_OR_RETURN(float accuracy_total, GetF32Scalar(checkpoint, "metrics/train_accuracy_total"));
  DTLAB_ASSIGN_OR_RETURN(float accuracy_count, GetF32Scalar(checkpoint, "metrics/train_accuracy_count"));
  state.train_accuracy.state().SetState(accuracy_total, accuracy_count);
  state.loss_scale.reset();
  if (checkpoint.Find("optimizer/loss_scale") != nullptr) {
    TrainingState::LossScaleState loss_scale;
    DTLAB_ASSIGN_OR_RETURN(loss_scale.scale, GetF32Scalar(checkpoint, "optimizer/loss_scale"));
    DTLAB_ASSIGN_OR_RETURN(loss_scale.counter, GetI64Scalar(checkpoint, "optimizer/loss_scale_counter"));
    if (!(std::isfinite(loss_scale.scale) && loss_scale.scale > 0.0f))
      return Status::Corruption("checkpoint tensor optimizer/loss_scale is not finite and positive");
    if (loss_scale.counter < 0 || loss_scale.counter > kMaxRestoredSteps)
      return Status::Corruption("checkpoint tensor optimizer/loss_scale_counter is outside [0, 2^53]");
    state.loss_scale = loss_scale;
  }
  return CheckRestoredCounters(state, iterations, accuracy_total, accuracy_count);
}

}  // namespace dtlab
