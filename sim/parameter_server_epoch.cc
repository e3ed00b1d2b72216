// ParameterServerCluster as a TrainingEngine: one epoch of asynchronous updates.
#include <string>
#include <vector>

#include "sim/parameter_server.h"

namespace dtlab {

StatusOr<EpochOutcome> ParameterServerCluster::TrainEpoch(const EpochRequest& request,
                                                          const std::function<Status(const EngineStep&)>& on_step) {
  const EpochBatches& steps = *request.batches;
  // Each worker's batches of this epoch, in order; one update per batch.
  EpochBatches per_worker(static_cast<std::size_t>(options_.workers));
  std::int64_t updates_in_epoch = 0;
  for (const auto& step : steps)
    for (std::size_t w = 0; w < step.size() && w < per_worker.size(); ++w)
      if (!step[w].empty()) {
        per_worker[w].push_back(step[w]);
        ++updates_in_epoch;
      }
  std::int64_t updates = 0;  // seen here: on the chief only, across MPI ranks
  DTLAB_RETURN_IF_ERROR(RunEpoch(*request.data, per_worker, request.epoch, request.learning_rate, request.max_steps,
                                 [&](const ParameterServerUpdate& u) -> Status {
                                   ++updates;
                                   EngineStep step;
                                   step.step = request.steps_before + updates;
                                   step.loss = u.loss;
                                   step.examples = u.examples;
                                   step.shown_done = updates;
                                   step.shown_total = updates_in_epoch;
                                   step.step_in_epoch = static_cast<std::int64_t>(steps.size());
                                   step.update = &u;
                                   return on_step(step);
                                 }));
  EpochOutcome outcome;
  // Across ranks only the chief saw the updates: every rank now knows their count.
  outcome.steps = group_ != nullptr ? version_ : request.steps_before + updates;
  const std::int64_t steps_this_epoch = outcome.steps - request.steps_before;
  outcome.stopped = request.max_steps >= 0 && outcome.steps >= request.max_steps &&
                    (steps_this_epoch < updates_in_epoch || group_ != nullptr);
  outcome.step_in_epoch = static_cast<std::int64_t>(steps.size());
  return outcome;
}

}  // namespace dtlab
