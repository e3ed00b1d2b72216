#include "sim/parameter_server.h"

#include <algorithm>
#include <limits>

#include "core/batch.h"
#include "core/loss.h"
#include "core/rng.h"

namespace dtlab {

ParameterServerCluster::ParameterServerCluster(const Sequential<float>& model, const ParameterServerOptions& options,
                                               std::int64_t chunk_size)
    : model_(model), options_(options), runner_(model, chunk_size) {}

StatusOr<std::unique_ptr<ParameterServerCluster>> ParameterServerCluster::Create(
    const Sequential<float>& model, const ParameterServerOptions& options, std::string_view optimizer,
    const OptimizerOptions& optimizer_options, const ParameterList<float>& initial, std::int64_t chunk_size) {
  if (options.workers < 1) return Status::InvalidArgument("--workers must be at least 1 for parameter_server");
  if (options.parameter_servers < 1)
    return Status::InvalidArgument("--parameter-servers must be at least 1, got " +
                                   std::to_string(options.parameter_servers));
  if (!(options.straggler_spread >= 0)) return Status::InvalidArgument("--straggler-spread must be >= 0");
  std::unique_ptr<ParameterServerCluster> cluster(new ParameterServerCluster(model, options, chunk_size));
  cluster->variables_ = initial;
  cluster->server_variables_.resize(static_cast<std::size_t>(options.parameter_servers));
  for (std::size_t i = 0; i < initial.size(); ++i)
    cluster->server_variables_[i % static_cast<std::size_t>(options.parameter_servers)].push_back(i);
  for (const auto& owned : cluster->server_variables_) {
    DTLAB_ASSIGN_OR_RETURN(auto server_optimizer, MakeOptimizer(optimizer, optimizer_options));
    ParameterList<float> shard;
    for (const std::size_t i : owned) shard.push_back(initial[i]);
    server_optimizer->Build(shard);
    cluster->server_optimizers_.push_back(std::move(server_optimizer));
  }
  cluster->worker_accuracy_.resize(static_cast<std::size_t>(options.workers));
  return cluster;
}

double ParameterServerCluster::StepSeconds(std::int32_t worker, std::int64_t examples, std::int64_t epoch,
                                           std::int64_t batch) const {
  CounterRng rng(options_.seed, RngPurpose::kStraggler,
                 (static_cast<std::uint64_t>(worker) << 44) | (static_cast<std::uint64_t>(epoch) << 24) |
                     static_cast<std::uint64_t>(batch));
  const double compute = options_.flops_per_example * static_cast<double>(examples) / options_.device_flops_per_second;
  // Pull and push: each parameter server sends (receives) its shard in parallel.
  double largest_shard = 0;
  for (const auto& owned : server_variables_) {
    double bytes = 0;
    for (const std::size_t i : owned) bytes += static_cast<double>(variables_[i].size()) * sizeof(float);
    largest_shard = std::max(largest_shard, bytes);
  }
  const double transfer = options_.link.latency_seconds + largest_shard / options_.link.bandwidth_bytes_per_second;
  return 2 * transfer + compute * (1.0 + options_.straggler_spread * rng.UniformDouble());
}

Status ParameterServerCluster::RunEpoch(const ImageDataset& data,
                                        const std::vector<std::vector<std::vector<std::int64_t>>>& per_worker_batches,
                                        std::int64_t epoch, float learning_rate, std::int64_t max_updates,
                                        const std::function<void(const ParameterServerUpdate&)>& on_update) {
  struct WorkerState {
    ParameterList<float> pulled;
    std::int64_t pulled_version = 0;
    std::size_t next = 0;  // next batch
    double start = 0, finish = 0;
    bool busy = false;
  };
  const auto workers = static_cast<std::size_t>(options_.workers);
  if (per_worker_batches.size() != workers)
    return Status::InvalidArgument("parameter_server: " + std::to_string(per_worker_batches.size()) +
                                   " worker input streams for " + std::to_string(workers) + " workers");
  std::vector<WorkerState> state(workers);
  const std::int32_t servers = options_.parameter_servers;
  const std::int64_t variable_bytes = model_.num_parameter_values() * static_cast<std::int64_t>(sizeof(float));

  auto start = [&](std::size_t w, double now) {
    WorkerState& s = state[w];
    s.pulled = variables_;
    s.pulled_version = version_;
    s.start = now;
    const auto examples = static_cast<std::int64_t>(per_worker_batches[w][s.next].size());
    s.finish = now + StepSeconds(static_cast<std::int32_t>(w), examples, epoch, static_cast<std::int64_t>(s.next));
    s.busy = true;
  };
  const double epoch_start = clock_;
  for (std::size_t w = 0; w < workers; ++w)
    if (!per_worker_batches[w].empty()) start(w, epoch_start);

  ParameterList<float> grads = model_.ZeroParameters();
  Tensor<float> images;
  std::vector<std::int32_t> labels, predictions;
  std::vector<float> losses, coefficients;
  std::vector<std::int64_t> words;  // exact mode's gradient accumulators
  for (;;) {
    // The next push: the earliest finish, ties to the lower worker id.
    std::size_t w = workers;
    for (std::size_t i = 0; i < workers; ++i)
      if (state[i].busy && (w == workers || state[i].finish < state[w].finish)) w = i;
    if (w == workers) return Status::Ok();
    WorkerState& s = state[w];
    clock_ = s.finish;

    // The worker's gradient on its batch with the variables it pulled.
    const auto& batch = per_worker_batches[w][s.next];
    GatherBatch(data, batch, images, labels);
    const auto b = static_cast<std::int64_t>(labels.size());
    losses.assign(labels.size(), 0.0f);
    predictions.assign(labels.size(), 0);
    coefficients.assign(labels.size(), 0.0f);
    AverageLossCoefficients<float>({}, b, AverageLossDenominator(b, std::nullopt, 1), 1.0f, coefficients);
    float loss = 0.0f;
    if (options_.math == MathMode::kExact) {
      loss = runner_.ExactGradient(s.pulled, images, labels, coefficients, losses, predictions, words, grads);
    } else {
      const BatchSegment segment{&s.pulled, 0, b, &grads, nullptr};
      runner_.Run(images, labels, coefficients, losses, predictions, std::span(&segment, 1));
      model_.AddRegularizationGradient(s.pulled, 1.0f, grads);
      loss = ComputeAverageLoss<float>(losses, {}, AverageLossDenominator(b, std::nullopt, 1)) +
             model_.RegularizationLoss(s.pulled);
    }
    worker_accuracy_[w].UpdateState(labels, predictions);

    // Push: each parameter server applies the gradients of its variables.
    log_.Begin("ps/push", version_ + 1, static_cast<std::int32_t>(workers) + servers, variable_bytes);
    for (std::int32_t p = 0; p < servers; ++p) {
      const auto& owned = server_variables_[static_cast<std::size_t>(p)];
      ParameterList<float> shard, shard_grads;
      std::int64_t bytes = 0;
      for (const std::size_t i : owned) {
        shard.push_back(std::move(variables_[i]));
        shard_grads.push_back(grads[i]);
        bytes += grads[i].size() * static_cast<std::int64_t>(sizeof(float));
      }
      server_optimizers_[static_cast<std::size_t>(p)]->Apply(shard, shard_grads, learning_rate);
      for (std::size_t k = 0; k < owned.size(); ++k) variables_[owned[k]] = std::move(shard[k]);
      log_.Record({0, static_cast<std::int32_t>(w), static_cast<std::int32_t>(workers) + p, bytes});
    }
    log_.End();

    ParameterServerUpdate update;
    update.update = ++version_;
    update.worker = static_cast<std::int32_t>(w);
    update.pulled_version = s.pulled_version;
    update.staleness = version_ - 1 - s.pulled_version;
    update.start_seconds = s.start;
    update.finish_seconds = clock_;
    update.loss = loss;
    update.examples = b;
    updates_.push_back(update);
    on_update(update);
    s.busy = false;
    if (max_updates >= 0 && version_ >= max_updates) return Status::Ok();
    if (++s.next < per_worker_batches[w].size()) start(w, clock_);
  }
}

SparseCategoricalAccuracy ParameterServerCluster::MergedAccuracy() const {
  SparseCategoricalAccuracy merged;
  for (const auto& a : worker_accuracy_) merged.Merge(a);
  return merged;
}

void ParameterServerCluster::ResetMetrics() {
  for (auto& a : worker_accuracy_) a.ResetState();
}

void ParameterServerCluster::ExportState(TrainingState& state) const {
  state.params = variables_;
  for (std::size_t p = 0; p < server_variables_.size(); ++p) {
    const Optimizer& optimizer = *server_optimizers_[p];
    for (std::size_t s = 0; s < optimizer.SlotNames().size(); ++s)
      for (std::size_t k = 0; k < server_variables_[p].size(); ++k)
        state.optimizer->slot(s, server_variables_[p][k]) = optimizer.slot(s, k);
  }
  state.optimizer->set_iterations(version_);
  state.train_accuracy = MergedAccuracy();
}

void ParameterServerCluster::ImportState(const TrainingState& state) {
  variables_ = state.params;
  for (std::size_t p = 0; p < server_variables_.size(); ++p) {
    Optimizer& optimizer = *server_optimizers_[p];
    for (std::size_t s = 0; s < optimizer.SlotNames().size(); ++s)
      for (std::size_t k = 0; k < server_variables_[p].size(); ++k)
        optimizer.slot(s, k) = state.optimizer->slot(s, server_variables_[p][k]);
    optimizer.set_iterations(state.optimizer->iterations());
  }
  version_ = state.optimizer->iterations();
  ResetMetrics();
  worker_accuracy_[0] = state.train_accuracy;
}

}  // namespace dtlab
