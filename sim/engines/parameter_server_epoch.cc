// ParameterServerCluster as a TrainingEngine: one epoch of asynchronous updates.
//
// A checkpoint after update K holds the servers' variables and optimizer after
// that update, the running metrics of the K updates, and each worker's batches
// pushed so far (EngineStep::worker_batches). The updates are deterministic, so
// that is exactly the uninterrupted run's state after K. What it cannot hold is
// the work in flight: the other workers pulled older versions of the variables
// and are computing on them. A resumed epoch starts every worker afresh at its
// next batch, pulling the restored variables, as TF's ParameterServerStrategy
// re-runs the closures a restart dropped: every batch is still pushed once, but
// from the resume on the staleness (and so the numbers) differ from the
// uninterrupted run's, unless no other worker was in flight (one worker).
#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "sim/engines/parameter_server.h"

namespace dtlab {

StatusOr<EpochOutcome> ParameterServerCluster::TrainEpoch(const EpochRequest& request,
                                                          const std::function<Status(const EngineStep&)>& on_step) {
  const EpochBatches& steps = *request.batches;
  const auto workers = static_cast<std::size_t>(options_.workers);
  // Each worker's batches of this epoch, in order; one update per batch.
  EpochBatches per_worker(workers);
  std::int64_t updates_in_epoch = 0;
  for (const auto& step : steps)
    for (std::size_t w = 0; w < step.size() && w < workers; ++w)
      if (!step[w].empty()) {
        per_worker[w].push_back(step[w]);
        ++updates_in_epoch;
      }
  std::vector<std::int64_t> pushed = request.first_worker_batches;
  if (pushed.empty()) pushed.assign(workers, 0);
  if (pushed.size() != workers)
    return Status::InvalidArgument("the checkpoint holds the positions of " + std::to_string(pushed.size()) +
                                   " parameter_server workers in its epoch, and this run has " +
                                   std::to_string(workers) + "; resume with --workers " +
                                   std::to_string(pushed.size()));
  for (std::size_t w = 0; w < workers; ++w)
    if (pushed[w] > static_cast<std::int64_t>(per_worker[w].size()))
      return Status::InvalidArgument("the checkpoint says parameter_server worker " + std::to_string(w) + " pushed " +
                                     std::to_string(pushed[w]) + " batches of epoch " +
                                     std::to_string(request.epoch + 1) + ", but it has " +
                                     std::to_string(per_worker[w].size()) +
                                     " in this run; resume on the data set, "
                                     "workers and batch the checkpoint was written with");
  // The steps of the epoch whose batches every worker has pushed: where the
  // epoch stands in a synchronous count (TrainingState::step_in_epoch).
  std::vector<std::int64_t> counted(workers, 0);
  std::int64_t whole_steps = 0;
  auto count_whole_steps = [&] {
    for (; whole_steps < static_cast<std::int64_t>(steps.size()); ++whole_steps) {
      const auto& step = steps[static_cast<std::size_t>(whole_steps)];
      for (std::size_t w = 0; w < step.size() && w < workers; ++w)
        if (!step[w].empty() && counted[w] >= pushed[w]) return;
      for (std::size_t w = 0; w < step.size() && w < workers; ++w) counted[w] += step[w].empty() ? 0 : 1;
    }
  };
  count_whole_steps();
  EpochOutcome outcome;
  outcome.steps = request.steps_before;
  outcome.step_in_epoch = whole_steps;
  // The run already took its --steps (the last epoch ended on them): no update more.
  if (request.max_steps >= 0 && request.steps_before >= request.max_steps) {
    outcome.stopped = true;
    return outcome;
  }
  const std::int64_t already = std::accumulate(pushed.begin(), pushed.end(), std::int64_t{0});
  std::int64_t updates = 0;  // seen here: on the chief only, across MPI ranks
  DTLAB_RETURN_IF_ERROR(RunEpoch(
      *request.data, per_worker, request.epoch, request.learning_rate, request.max_steps,
      [&](const ParameterServerUpdate& u) -> Status {
        ++updates;
        ++pushed[static_cast<std::size_t>(u.worker)];
        count_whole_steps();
        EngineStep step;
        step.step = request.steps_before + updates;
        step.loss = u.loss;
        step.examples = u.examples;
        step.shown_done = already + updates;
        step.shown_total = updates_in_epoch;
        step.step_in_epoch = whole_steps;
        step.worker_batches = pushed;
        step.update = &u;
        return on_step(step);
      },
      request.first_worker_batches));
  // Across ranks only the chief saw the updates: every rank now knows their count.
  outcome.steps = group_ != nullptr ? version_ : request.steps_before + updates;
  const std::int64_t steps_this_epoch = outcome.steps - request.steps_before;
  outcome.stopped = request.max_steps >= 0 && outcome.steps >= request.max_steps &&
                    (steps_this_epoch < updates_in_epoch - already || group_ != nullptr);
  outcome.step_in_epoch = outcome.stopped ? whole_steps : static_cast<std::int64_t>(steps.size());
  return outcome;
}

}  // namespace dtlab
