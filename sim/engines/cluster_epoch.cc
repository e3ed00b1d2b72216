// Cluster as a TrainingEngine: one epoch of synchronous steps (an accumulating
// cluster's in cluster_accumulation.cc), its variables, metrics and state.
#include <cmath>
#include <string>

#include "sim/engines/cluster.h"

namespace dtlab {

const ParameterList<float>& Cluster::variables() const { return central() ? host_params_ : replicas_[0].params; }

bool Cluster::ReplicasInSync() const {
  for (std::size_t r = 1; r < replicas_.size(); ++r)
    for (std::size_t p = 0; p < replicas_[0].params.size(); ++p)
      if (model_.parameters()[p].spec.trainable && !(replicas_[r].params[p] == replicas_[0].params[p])) return false;
  return true;
}

SparseCategoricalAccuracy Cluster::MergedAccuracy() const {
  SparseCategoricalAccuracy merged;
  for (const auto& accuracy : accuracies_) merged.Merge(accuracy);
  return merged;
}

void Cluster::ResetMetrics() {
  for (auto& accuracy : accuracies_) accuracy.ResetState();
}

void Cluster::ExportState(TrainingState& state) const {
  state.params = variables();
  const Optimizer& source = central() ? *host_optimizer_ : *replicas_[0].optimizer;
  for (std::size_t s = 0; s < source.SlotNames().size(); ++s)
    for (std::size_t p = 0; p < state.params.size(); ++p) state.optimizer->slot(s, p) = source.slot(s, p);
  state.optimizer->set_iterations(source.iterations());
  const SparseCategoricalAccuracy merged = MergedAccuracy();
  state.train_accuracy = merged;
  // Replica 0's loss scale, as reading TF's (mirrored) variable does.
  state.loss_scale.reset();
  if (config_.precision.dynamic_loss_scale)
    state.loss_scale = {replicas_[0].loss_scale.scale(), replicas_[0].loss_scale.counter()};
}

void Cluster::ImportState(const TrainingState& state) {
  auto load = [&](ParameterList<float>& params, Optimizer& optimizer) {
    params = state.params;
    for (std::size_t s = 0; s < optimizer.SlotNames().size(); ++s)
      for (std::size_t p = 0; p < params.size(); ++p) optimizer.slot(s, p) = state.optimizer->slot(s, p);
    optimizer.set_iterations(state.optimizer->iterations());
  };
  if (central())
    load(host_params_, *host_optimizer_);  // the replicas hold none (they read the host's)
  else
    for (auto& replica : replicas_) load(replica.params, *replica.optimizer);
  for (auto& accuracy : accuracies_) accuracy.ResetState();
  // The merged metric state lives on replica 0; summing states reads it back unchanged.
  accuracies_[0] = state.train_accuracy;
  // A checkpoint's loss scale continues (a counter at or past a smaller
  // --loss-scale-growth-steps restarts the count); one without starts afresh.
  if (config_.precision.dynamic_loss_scale && state.loss_scale)
    for (auto& replica : replicas_) {
      const std::int64_t counter =
          state.loss_scale->counter < replica.loss_scale.growth_steps() ? state.loss_scale->counter : 0;
      (void)replica.loss_scale.Restore(state.loss_scale->scale, counter);  // both checked when restored
    }
}

Status Cluster::CheckStepLoss(const StepResult& result, std::int64_t step, std::int64_t epoch) {
  if (std::isfinite(result.loss)) return Status::Ok();
  const std::string where = " at step " + std::to_string(step) + " (epoch " + std::to_string(epoch + 1) + ")";
  for (std::size_t r = 0; r < result.replica_losses.size(); ++r)
    if (std::isnan(result.replica_losses[r]) && result.replica_batch_sizes[r] == 0)
      return Status::Runtime("the loss became NaN" + where + LossCode::EmptyReplicaNanCause(r));
  return Status::Runtime("the loss became " + std::string(std::isnan(result.loss) ? "NaN" : "infinite") + where +
                         "; try a smaller --lr");
}

StatusOr<EpochOutcome> Cluster::TrainEpoch(const EpochRequest& request,
                                           const std::function<Status(const EngineStep&)>& on_step) {
  if (config_.accumulation.on()) return TrainAccumulatedEpoch(request, on_step);
  const EpochBatches& steps = *request.batches;
  return RunEpoch(
      request, static_cast<std::int64_t>(steps.size()),
      [&](std::int64_t index, std::int64_t step, ParameterList<float>* reduced_gradient,
          const ReplicaBatches** batch) -> StatusOr<StepResult> {
        *batch = &steps[static_cast<std::size_t>(index)];
        return TrainStep(*request.data, **batch, request.global_batch, request.learning_rate, step, reduced_gradient);
      },
      on_step);
}

StatusOr<EpochOutcome> Cluster::RunEpoch(const EpochRequest& request, std::int64_t steps_in_epoch,
                                         const EpochStep& train,
                                         const std::function<Status(const EngineStep&)>& on_step) {
  EpochOutcome outcome;
  outcome.steps = request.steps_before;
  std::int64_t index = request.first_step;
  for (; index < steps_in_epoch; ++index) {
    if (request.max_steps >= 0 && outcome.steps >= request.max_steps) {
      outcome.stopped = true;
      break;
    }
    const std::int64_t step = outcome.steps + 1;
    const bool capture = step == request.capture_step;
    const ParameterList<float> weights_before = capture ? variables() : ParameterList<float>{};
    ParameterList<float> reduced_gradient;
    const ReplicaBatches* batch = nullptr;
    DTLAB_ASSIGN_OR_RETURN(
        StepResult result,
        train(index, step, capture || request.every_reduced_gradient ? &reduced_gradient : nullptr, &batch));
    DTLAB_RETURN_IF_ERROR(CheckStepLoss(result, step, request.epoch));
    outcome.steps = step;
    EngineStep report;
    report.step = step;
    report.loss = result.loss;
    report.examples = result.examples;
    report.shown_done = report.step_in_epoch = index + 1;
    report.shown_total = steps_in_epoch;
    report.result = &result;
    report.batch = batch;
    if (capture) report.weights_before = &weights_before;
    if (!reduced_gradient.empty()) report.reduced_gradient = &reduced_gradient;
    DTLAB_RETURN_IF_ERROR(on_step(report));
    if (request.stop_after_step) {
      DTLAB_ASSIGN_OR_RETURN(const bool stop, request.stop_after_step());
      if (stop) {
        outcome.stopped = true;
        ++index;  // this step is done: a resume continues after it
        break;
      }
    }
  }
  outcome.step_in_epoch = index;
  if ((!outcome.stopped || outcome.steps > request.steps_before) && !ReplicasInSync())
    return Status::Runtime("the replicas' mirrored variables diverged by epoch " + std::to_string(request.epoch + 1) +
                           "; this is a bug in dtlab, please report it");
  return outcome;
}

}  // namespace dtlab
