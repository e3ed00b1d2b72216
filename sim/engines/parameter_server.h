// ParameterServerCluster: tf.distribute's ParameterServerStrategy, simulated.
//
// W workers train asynchronously against variables sharded over P parameter-server
// tasks (variable i lives on task i mod P, TF's round-robin placement without a
// partitioner). A worker pulls the current variables, computes the gradient of its
// next batch (its loss code, sim/engines/loss_code.h, with num_replicas_in_sync = 1, as each
// PS worker is its own replica), and pushes it; each parameter server applies the gradients
// of its variables with its own optimizer. Which worker finishes next is decided by
// a simulated clock: a worker's step takes its compute time (the cost model's
// device speed) times a straggler factor drawn from CounterRng keyed by (seed,
// worker, epoch, batch),
// plus the pull and push transfer times (latency + bytes / bandwidth). Ties go to
// the lower worker id. The interleaving is therefore a pure function of the seed and
// the configuration: async runs are reproducible, for any thread count.
//
// Every update records its staleness: how many other updates the parameter servers
// applied between the worker's pull and its push.
//
// Across MPI ranks (a WorkerGroup, docs/mpi.md) the same strategy runs for real:
// rank 0 is the chief (the coordinator: it counts and reports the updates and, at
// the end of an epoch, gathers the variables and optimizer slots for evaluation
// and checkpoints), ranks 1..W are the workers, and ranks W+1..W+P the parameter
// servers, each owning its round-robin shard of the variables and its optimizer.
// A worker pulls every shard, computes its batch's gradient, pushes each shard's
// part to its server, which applies it at once, and reports to the chief; workers
// never wait for each other, so the interleaving (and the staleness) is whatever
// the machines make it: such runs are not reproducible bit for bit.
//
// Thread safety: not thread-safe; one caller drives it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "core/metrics.h"
#include "core/mnist.h"
#include "core/model.h"
#include "core/optimizer.h"
#include "core/training_state.h"
#include "sim/compute/batch_runner.h"
#include "sim/engines/loss_code.h"
#include "sim/comm/message_log.h"
#include "sim/timing/topology.h"
#include "sim/engines/training_engine.h"
#include "sim/comm/worker_group.h"

namespace dtlab {

struct ParameterServerOptions {
  std::int32_t workers = 2;
  std::int32_t parameter_servers = 1;
  std::uint64_t seed = 1;
  double straggler_spread = 0.5;  // step time x (1 + spread * u), u uniform in [0, 1)
  double device_flops_per_second = 100e9;
  double flops_per_example = 0;     // of one training example, forward and backward
  LinkParameters link;              // worker <-> parameter server transfers
  MathMode math = MathMode::kFast;  // exact: each worker's gradient is BatchRunner::ExactGradient
  /// The loss code every worker runs on its batch. TF's ParameterServerStrategy
  /// (parameter_server_strategy_v2.py) has num_replicas_in_sync = the GPUs of a
  /// worker, or 1: a worker's step is one replica on a whole batch, so the code is
  /// evaluated with N = 1. Every choice is honoured; with N = 1 most coincide on a
  /// full batch (see WorkerGradient), and they differ where TF's would.
  LossCode loss;
  /// The configured batch of a worker's step: the global_batch_size the worker's
  /// compute_average_loss passes (the per-replica batch x num_replicas_in_sync = 1).
  /// A short final batch is divided by it under the global denominator. 0: each
  /// batch's own size.
  std::int64_t batch_size = 0;
};

/// One applied update.
struct ParameterServerUpdate {
  std::int64_t update = 0;  // 1-based global update number (the optimizer step)
  std::int32_t worker = 0;
  std::int64_t pulled_version = 0;  // updates applied when the worker pulled
  std::int64_t staleness = 0;       // updates applied between its pull and its push
  double start_seconds = 0;         // simulated time of the pull
  double finish_seconds = 0;        // simulated time of the push
  float loss = 0;
  std::int64_t examples = 0;
};

class ParameterServerCluster final : public TrainingEngine {
 public:
  static StatusOr<std::unique_ptr<ParameterServerCluster>> Create(
      const Sequential<float>& model, const ParameterServerOptions& options, std::string_view optimizer,
      const OptimizerOptions& optimizer_options, const ParameterList<float>& initial, std::int64_t chunk_size,
      WorkerGroup* group = nullptr);

  /// Runs one epoch: worker w trains on per_worker_batches[w] in order. Calls
  /// `on_update` after every applied update (an error it returns ends the epoch
  /// and is returned); stops early (workers' unpushed work is
  /// dropped) once version() reaches `max_updates`, the total count of updates
  /// including those before a restore (< 0: no limit). Across MPI ranks every rank
  /// calls it; `on_update` is called on the chief only, in the order the reports
  /// arrive, and in-flight steps of other workers still finish after the limit.
  /// A resumed epoch: worker w starts at its batch first_batches[w] (empty: 0),
  /// pulling the variables as they are.
  Status RunEpoch(const ImageDataset& data,
                  const std::vector<std::vector<std::vector<std::int64_t>>>& per_worker_batches, std::int64_t epoch,
                  float learning_rate, std::int64_t max_updates,
                  const std::function<Status(const ParameterServerUpdate&)>& on_update,
                  std::span<const std::int64_t> first_batches = {});

  /// One RunEpoch over the epoch's batches, each worker's in order (sim/engines/training_engine.h;
  /// defined in parameter_server_epoch.cc).
  StatusOr<EpochOutcome> TrainEpoch(const EpochRequest& request,
                                    const std::function<Status(const EngineStep&)>& on_step) override;

  /// The variables as the parameter servers hold them (in model parameter order).
  const ParameterList<float>& variables() const override { return variables_; }
  std::int64_t version() const { return version_; }
  double simulated_seconds() const { return clock_; }
  const std::vector<ParameterServerUpdate>& updates() const { return updates_; }
  SparseCategoricalAccuracy MergedAccuracy() const override;
  void ResetMetrics() override;
  MessageLog& message_log() override { return log_; }

  void ExportState(TrainingState& state) const override;
  void ImportState(const TrainingState& state) override;

 private:
  ParameterServerCluster(const Sequential<float>& model, const ParameterServerOptions& options,
                         std::int64_t chunk_size);
  double StepSeconds(std::int32_t worker, std::int64_t examples, std::int64_t epoch, std::int64_t batch) const;
  // A worker's step on `batch` with the variables `params`: its gradient into
  // grads, labels_ and predictions_ filled; returns the loss.
  float WorkerGradient(const ImageDataset& data, const std::vector<std::int64_t>& batch,
                       const ParameterList<float>& params, ParameterList<float>& grads);
  // RunEpoch across MPI ranks, by role.
  Status RunChief(std::int64_t max_updates, const std::function<Status(const ParameterServerUpdate&)>& on_update);
  Status RunWorker(const ImageDataset& data, const std::vector<std::vector<std::int64_t>>& batches,
                   float learning_rate);
  Status RunServer(std::int32_t server);
  std::int32_t ServerRank(std::int32_t server) const { return 1 + options_.workers + server; }

  const Sequential<float>& model_;
  ParameterServerOptions options_;
  BatchRunner runner_;
  ParameterList<float> variables_;
  std::vector<std::unique_ptr<Optimizer>> server_optimizers_;  // one per parameter server
  std::vector<std::vector<std::size_t>> server_variables_;     // variable indices per server
  std::vector<SparseCategoricalAccuracy> worker_accuracy_;
  std::int64_t version_ = 0;
  double clock_ = 0;
  std::vector<ParameterServerUpdate> updates_;
  MessageLog log_;
  WorkerGroup* group_ = nullptr;  // across MPI ranks; not owned
  // Step buffers.
  Tensor<float> images_;
  std::vector<std::int32_t> labels_, predictions_;
  std::vector<float> losses_, coefficients_;
  std::vector<std::int64_t> words_;
};

}  // namespace dtlab
