#include "sim/cluster.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <thread>

#include <tbb/parallel_for.h>

#include "core/batch.h"
#include "core/loss.h"
#include "core/text.h"
#include "sim/device_backend.h"

namespace dtlab {

namespace {

double L2Norm(std::span<const float> values) {
  double squares = 0;
  for (const float v : values) squares += static_cast<double>(v) * v;
  return std::sqrt(squares);
}

// "dense/kernel (NaN), dense/bias (infinite)": the variables for which
// classify(p) -> {has NaN, has infinity} finds a non-finite value; empty if none.
template <typename Classify>
std::string NonFiniteNames(const Sequential<float>& model, Classify classify) {
  std::string names;
  for (std::size_t p = 0; p < model.parameters().size(); ++p) {
    const auto [nan, inf] = classify(p);
    if (nan || inf)
      names += (names.empty() ? "" : ", ") + model.parameters()[p].name + (nan ? " (NaN)" : " (infinite)");
  }
  return names;
}

std::string NonFiniteVariables(const Sequential<float>& model, const ParameterList<float>& values) {
  return NonFiniteNames(model, [&](std::size_t p) {
    bool nan = false, inf = false;
    for (const float v : values[p].span()) nan |= std::isnan(v), inf |= std::isinf(v);
    return std::pair(nan, inf);
  });
}

// The same for exact mode's gradient words: an accumulator's last word counts the
// non-finite terms added to it.
std::string NonFiniteAccumulators(const Sequential<float>& model, std::span<const std::int64_t> words) {
  std::int64_t element = 0;
  return NonFiniteNames(model, [&](std::size_t p) {
    bool nan = false, inf = false;
    for (const std::int64_t end = element + NumElements(model.parameters()[p].spec.shape); element < end; ++element) {
      const std::int64_t special = words[static_cast<std::size_t>(element * kExactWords + kExactDigitWords)];
      nan |= special >= kExactNanUnit, inf |= special != 0;
    }
    return std::pair(nan, inf);
  });
}

}  // namespace

Status Cluster::CheckReplicaGradients(std::int64_t step, const std::vector<std::int64_t>& offsets) {
  for (std::size_t k = 0; k < replicas_.size(); ++k) {
    const std::string bad = config_.math == MathMode::kExact ? NonFiniteAccumulators(model_, replicas_[k].words)
                                                             : NonFiniteVariables(model_, replicas_[k].grads);
    if (bad.empty()) continue;
    const std::size_t r = k + static_cast<std::size_t>(first_);
    std::int64_t losses = 0;
    for (std::int64_t i = offsets[r]; i < offsets[r + 1]; ++i) losses += !std::isfinite(losses_[static_cast<std::size_t>(i)]);
    const std::string weights = NonFiniteVariables(model_, central() ? host_params_ : replicas_[k].params);
    return Status::Runtime(
        "step " + std::to_string(step) + ": replica " + std::to_string(r) + " of " + std::to_string(config_.replicas) +
        " computed a non-finite gradient for " + bad + "; " + std::to_string(losses) + " of its " +
        std::to_string(offsets[r + 1] - offsets[r]) + " examples have a non-finite loss; " +
        (weights.empty() ? "its weights were finite before the step" : "its weights were already non-finite: " + weights) +
        (injected_nan_.empty() ? ". Try a smaller --lr" : "; the value was injected by the fault " + injected_nan_));
  }
  return Status::Ok();
}

Status Cluster::PrepareFaults(std::int64_t step, StepResult& result) {
  const std::int32_t n = config_.replicas;
  message_faults_.failure.clear();
  message_faults_.step = step;
  message_faults_.dead.assign(static_cast<std::size_t>(n), 0);
  message_faults_.messages.clear();
  message_faults_.timeout_seconds = config_.collective_timeout_seconds;
  injected_nan_.clear();
  char timeout[32];
  std::snprintf(timeout, sizeof timeout, "%g", config_.collective_timeout_seconds);
  for (const FaultSpec& fault : config_.faults) {
    const auto r = static_cast<std::size_t>(fault.replica);
    if (fault.kind == FaultKind::kDie && fault.step <= step) {
      message_faults_.dead[r] = 1;
      if (n == 1)
        return Status::Runtime("step " + std::to_string(step) + ": replica 0, the only one, stopped responding (fault " +
                               FaultSpecText(fault) + ")");
    }
    if (fault.step != step) continue;
    if (fault.kind == FaultKind::kDrop || fault.kind == FaultKind::kCorrupt) {
      message_faults_.messages.push_back(fault);
    } else if (fault.kind == FaultKind::kStraggler) {
      if (fault.seconds > config_.collective_timeout_seconds && n > 1) {
        char late[32];
        std::snprintf(late, sizeof late, "%g", fault.seconds);
        return Status::Runtime("step " + std::to_string(step) + ": the collective timed out after " + timeout +
                               " s waiting for replica " + std::to_string(fault.replica) +
                               ", a straggler whose compute took " + late + " s longer (fault " + FaultSpecText(fault) +
                               "); raise --collective-timeout to wait longer");
      }
      result.straggler_seconds.resize(static_cast<std::size_t>(n), 0.0);
      result.straggler_seconds[r] += fault.seconds;
    }
  }
  return Status::Ok();
}

void Cluster::ThrowIfInjected(std::int32_t replica, std::int64_t step) const {
  for (const FaultSpec& fault : config_.faults)
    if (fault.kind == FaultKind::kThrow && fault.replica == replica && fault.step == step) {
      const std::string layer = fault.layer.empty() ? std::string(model_.layers().front()->name()) : fault.layer;
      throw std::runtime_error("step " + std::to_string(step) + ": replica " + std::to_string(replica) +
                               " raised an exception in layer '" + layer + "' (fault " + FaultSpecText(fault) + ")");
    }
}

void Cluster::InjectNonFinite(std::int64_t step) {
  for (const FaultSpec& fault : config_.faults) {
    if (fault.kind != FaultKind::kNonFinite || fault.step != step) continue;
    const auto& params = model_.parameters();
    std::size_t variable = 0, offset = 0;
    for (std::size_t p = 0; p < params.size(); ++p)
      if (params[p].name == fault.variable) variable = p;
    for (std::size_t p = 0; p < variable; ++p) offset += static_cast<std::size_t>(NumElements(params[p].spec.shape));
    Replica* local = Local(fault.replica);
    if (local == nullptr) continue;  // another worker's replica
    Replica& replica = *local;
    const float value = fault.infinity ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
    if (config_.math == MathMode::kExact) {
      replica.words[offset * kExactWords + kExactDigitWords] += fault.infinity ? kExactPosInfUnit : kExactNanUnit;
    } else {
      replica.grads[variable].data()[0] = value;
      replica.flat[offset] = value;
    }
    injected_nan_ = FaultSpecText(fault);
  }
}

// {0, 1, ..., n}: the slices of values that hold one value per replica.
static std::vector<std::int64_t> ReplicaSlices(std::int32_t n) {
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(n) + 1);
  for (std::int32_t r = 0; r <= n; ++r) offsets[static_cast<std::size_t>(r)] = r;
  return offsets;
}

template <typename T>
Status Cluster::ShareSlices(std::vector<T>& values, const std::vector<std::int64_t>& offsets, std::string_view what,
                            std::int64_t step) {
  if (group_ == nullptr) return Status::Ok();
  const std::int32_t workers = group_->size();
  const std::int32_t per_worker = config_.replicas / workers;
  std::vector<std::size_t> counts(static_cast<std::size_t>(workers));
  for (std::int32_t w = 0; w < workers; ++w)
    counts[static_cast<std::size_t>(w)] = static_cast<std::size_t>(offsets[static_cast<std::size_t>((w + 1) * per_worker)] -
                                                                   offsets[static_cast<std::size_t>(w * per_worker)]);
  const auto begin = values.begin() + offsets[static_cast<std::size_t>(first_)];
  const std::vector<T> mine(begin, begin + static_cast<std::ptrdiff_t>(counts[static_cast<std::size_t>(group_->rank())]));
  return group_->AllGatherValues(std::span<const T>(mine), std::span<T>(values), counts, what, step);
}

Status Cluster::RealFaults(std::int64_t step) {
  for (const FaultSpec& fault : config_.faults) {
    if (fault.step != step || Local(fault.replica) == nullptr) continue;
    if (fault.kind == FaultKind::kDie) {
      std::fprintf(stderr, "fault %s: rank %d kills itself with SIGKILL at step %lld\n", FaultSpecText(fault).c_str(),
                   group_->rank(), static_cast<long long>(step));
      std::fflush(stderr);
      std::raise(SIGKILL);
    }
    if (fault.kind == FaultKind::kStraggler)
      std::this_thread::sleep_for(std::chrono::duration<double>(fault.seconds));
  }
  return Status::Ok();
}

Status Cluster::CollectiveStatus(const std::string& collective, std::int64_t step) const {
  if (!faults_active_ || !message_faults_.failed()) return Status::Ok();
  return Status::Runtime(collective + " at step " + std::to_string(step) + ": " + message_faults_.failure);
}

void PackParameters(const ParameterList<float>& params, std::span<float> flat) {
  std::size_t offset = 0;
  for (const auto& p : params) {
    std::copy(p.data(), p.data() + p.size(), flat.begin() + static_cast<std::ptrdiff_t>(offset));
    offset += static_cast<std::size_t>(p.size());
  }
}

void UnpackParameters(std::span<const float> flat, ParameterList<float>& params) {
  std::size_t offset = 0;
  for (auto& p : params) {
    std::copy_n(flat.begin() + static_cast<std::ptrdiff_t>(offset), p.size(), p.data());
    offset += static_cast<std::size_t>(p.size());
  }
}

Status ClusterConfig::Validate() const {
  if (replicas < 1) return Status::InvalidArgument("--replicas must be at least 1, got " + std::to_string(replicas));
  if (workers < 1) return Status::InvalidArgument("--workers must be at least 1, got " + std::to_string(workers));
  if (strategy == StrategyKind::kParameterServer && replicas != workers)
    return Status::InvalidArgument("parameter_server: each worker is one replica, so --replicas (" +
                                   std::to_string(replicas) + ") must equal --workers (" + std::to_string(workers) +
                                   "); leave --replicas out");
  if (replicas % workers != 0)
    return Status::InvalidArgument("--workers " + std::to_string(workers) + " does not divide --replicas " +
                                   std::to_string(replicas) + ": every worker holds the same number of replicas");
  if (strategy == StrategyKind::kOneDevice && replicas != 1)
    return Status::InvalidArgument("the one_device strategy has exactly one replica (got --replicas " +
                                   std::to_string(replicas) + "); use mirrored for several");
  if (workers > 1 && strategy != StrategyKind::kMultiWorkerMirrored && strategy != StrategyKind::kParameterServer)
    return Status::InvalidArgument("--workers " + std::to_string(workers) + " needs the multi_worker_mirrored or "
                                   "parameter_server strategy (" + std::string(StrategyName(strategy)) +
                                   " runs on one worker)");
  DTLAB_RETURN_IF_ERROR(LossCode::Validate());
  for (const FaultSpec& fault : faults) {
    // Both fields index the replicas (PrepareFaults, the transport): in range or refused.
    for (const auto& [field, value] : {std::pair<const char*, std::int32_t>{"replica", fault.replica},
                                       std::pair<const char*, std::int32_t>{"to", fault.to}}) {
      if (value < (std::string_view(field) == "to" ? -1 : 0) || value >= replicas)
        return Status::InvalidArgument("fault " + FaultSpecText(fault) + ": " + field + "=" + std::to_string(value) +
                                       " names no replica; there are " + std::to_string(replicas) + " replicas, so " +
                                       field + " must be from 0 to " + std::to_string(replicas - 1) +
                                       " (or raise --replicas)");
    }
    if (fault.step < 1 || fault.phase < 0)
      return Status::InvalidArgument("fault " + FaultSpecText(fault) + ": step must be 1 or more and phase 0 or more");
    if (strategy == StrategyKind::kParameterServer)
      return Status::InvalidArgument("fault injection applies to synchronous strategies, not parameter_server");
  }
  if (!(collective_timeout_seconds > 0))
    return Status::InvalidArgument("--collective-timeout must be positive (simulated seconds)");
  return Status::Ok();
}

Cluster::Cluster(const Sequential<float>& model, const ClusterConfig& config, std::int64_t chunk_size)
    : model_(model), config_(config), runner_(model, chunk_size) {}

StatusOr<std::unique_ptr<Cluster>> Cluster::Create(const Sequential<float>& model, const ClusterConfig& config,
                                                   std::string_view optimizer, const OptimizerOptions& options,
                                                   const ParameterList<float>& initial, std::int64_t chunk_size,
                                                   WorkerGroup* group) {
  DTLAB_RETURN_IF_ERROR(config.Validate());
  if (group != nullptr) {
    if (config.workers != group->size())
      return Status::InvalidArgument("--workers " + std::to_string(config.workers) + " but " +
                                     std::to_string(group->size()) + " MPI ranks: each rank is one worker");
    if (config.strategy != StrategyKind::kMultiWorkerMirrored)
      return Status::InvalidArgument("a run on several MPI ranks needs --strategy multi_worker_mirrored (got " +
                                     std::string(StrategyName(config.strategy)) + ")");
    for (const FaultSpec& fault : config.faults)
      if (fault.kind == FaultKind::kDrop || fault.kind == FaultKind::kCorrupt)
        return Status::InvalidArgument("fault " + FaultSpecText(fault) +
                                       ": dropped and corrupted messages are simulated in one process; under MPI the "
                                       "messages are real (use die or straggler to stop or stall a rank)");
  }
  if (config.strategy == StrategyKind::kParameterServer)
    return Status::InvalidArgument("the parameter_server strategy is asynchronous and is not run by Cluster");
  for (const FaultSpec& fault : config.faults) {
    const auto& params = model.parameters();
    const auto& layers = model.layers();
    if (fault.kind == FaultKind::kThrow && !fault.layer.empty() &&
        std::none_of(layers.begin(), layers.end(), [&](const auto& l) { return l->name() == fault.layer; })) {
      return Status::InvalidArgument("fault " + FaultSpecText(fault) + ": the model has no layer '" + fault.layer +
                                     "' (layers: " + JoinText(layers, ", ", [](const auto& l) { return l->name(); }) +
                                     ")");
    }
    if (fault.kind == FaultKind::kNonFinite && !fault.variable.empty() &&
        std::none_of(params.begin(), params.end(), [&](const auto& p) { return p.name == fault.variable; })) {
      return Status::InvalidArgument("fault " + FaultSpecText(fault) + ": the model has no variable '" + fault.variable +
                                     "' (variables: " + JoinText(params, ", ", [](const auto& p) { return p.name; }) +
                                     ")");
    }
  }
  std::unique_ptr<Cluster> cluster(new Cluster(model, config, chunk_size));
  cluster->faults_active_ = !config.faults.empty();
  const auto flat_size = static_cast<std::size_t>(model.num_parameter_values());
  cluster->group_ = group;
  const std::int32_t local = group != nullptr ? config.replicas / group->size() : config.replicas;
  cluster->first_ = group != nullptr ? group->rank() * local : 0;
  cluster->replicas_.resize(static_cast<std::size_t>(local));
  cluster->accuracies_.resize(static_cast<std::size_t>(config.replicas));
  for (auto& replica : cluster->replicas_) {
    replica.params = initial;
    replica.grads = model.ZeroParameters();
    replica.flat.assign(flat_size, 0.0f);
    if (config.math == MathMode::kExact) replica.words.assign(flat_size * kExactWords, 0);
    DTLAB_ASSIGN_OR_RETURN(replica.optimizer, MakeOptimizer(optimizer, options));
    replica.optimizer->Build(replica.params);
  }
  if (cluster->central()) {
    cluster->host_params_ = initial;
    DTLAB_ASSIGN_OR_RETURN(cluster->host_optimizer_, MakeOptimizer(optimizer, options));
    cluster->host_optimizer_->Build(cluster->host_params_);
  }
  return cluster;
}

const ParameterList<float>& Cluster::variables() const { return central() ? host_params_ : replicas_[0].params; }

bool Cluster::ReplicasInSync() const {
  for (std::size_t r = 1; r < replicas_.size(); ++r)
    for (std::size_t p = 0; p < replicas_[0].params.size(); ++p)
      if (!(replicas_[r].params[p] == replicas_[0].params[p])) return false;
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
    for (std::size_t p = 0; p < state.params.size(); ++p)
      state.optimizer->slot(s, p) = source.slot(s, p);
  state.optimizer->set_iterations(source.iterations());
  const SparseCategoricalAccuracy merged = MergedAccuracy();
  state.train_accuracy = merged;
}

void Cluster::ImportState(const TrainingState& state) {
  auto load = [&](ParameterList<float>& params, Optimizer& optimizer) {
    params = state.params;
    for (std::size_t s = 0; s < optimizer.SlotNames().size(); ++s)
      for (std::size_t p = 0; p < params.size(); ++p)
        optimizer.slot(s, p) = state.optimizer->slot(s, p);
    optimizer.set_iterations(state.optimizer->iterations());
  };
  for (auto& replica : replicas_) load(replica.params, *replica.optimizer);
  for (auto& accuracy : accuracies_) accuracy.ResetState();
  if (central()) load(host_params_, *host_optimizer_);
  // The merged metric state lives on replica 0; summing states reads it back unchanged.
  accuracies_[0] = state.train_accuracy;
}

StatusOr<StepResult> Cluster::TrainStep(const ImageDataset& data,
                                        const std::vector<std::vector<std::int64_t>>& per_replica,
                                        std::int64_t global_batch_size, float learning_rate, std::int64_t step,
                                        ParameterList<float>* reduced_gradient) {
  const std::int32_t n = config_.replicas;
  if (static_cast<std::int32_t>(per_replica.size()) != n)
    return Status::InvalidArgument("the distributed batch has " + std::to_string(per_replica.size()) +
                                   " replica batches for " + std::to_string(n) + " replicas");
  // The step's examples in replica order: replica r owns [offset[r], offset[r+1]).
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(n) + 1, 0), batch_sizes(static_cast<std::size_t>(n));
  std::vector<std::int64_t> indices;
  for (std::int32_t r = 0; r < n; ++r) {
    const auto& mine = per_replica[static_cast<std::size_t>(r)];
    indices.insert(indices.end(), mine.begin(), mine.end());
    batch_sizes[static_cast<std::size_t>(r)] = static_cast<std::int64_t>(mine.size());
    offsets[static_cast<std::size_t>(r) + 1] = static_cast<std::int64_t>(indices.size());
  }
  const auto total = static_cast<std::int64_t>(indices.size());
  GatherBatch(data, indices, images_, labels_);
  losses_.assign(indices.size(), 0.0f);
  predictions_.assign(indices.size(), 0);
  coefficients_.assign(indices.size(), 0.0f);

  // Loss scaling: TF divides by the chosen denominator on each replica and SUMs;
  // DDP takes each replica's mean and MEANs the gradients.
  const bool ddp = config_.mean_across_replicas();
  std::vector<LossCode::LossScale> scales(static_cast<std::size_t>(n));
  for (std::int32_t r = 0; r < n; ++r) {
    const auto k = static_cast<std::size_t>(r);
    scales[k] = config_.ReplicaCoefficients(batch_sizes[k], global_batch_size, n,
                                            std::span(coefficients_).subspan(static_cast<std::size_t>(offsets[k]),
                                                                             static_cast<std::size_t>(batch_sizes[k])));
  }
  DTLAB_RETURN_IF_ERROR(config_.CheckEmptyReplicas(batch_sizes, step));

  StepResult result;
  result.replica_losses.assign(static_cast<std::size_t>(n), 0.0f);
  result.replica_batch_sizes = batch_sizes;
  result.examples = total;
  if (faults_active_) DTLAB_RETURN_IF_ERROR(group_ != nullptr ? RealFaults(step) : PrepareFaults(step, result));
  const std::int32_t first = first_, end = first_ + static_cast<std::int32_t>(replicas_.size());
  CollectiveOptions options;
  options.algorithm = config_.all_reduce;
  options.replicas_per_worker = config_.replicas_per_worker();
  options.step = step;
  options.log = &log_;
  options.faults = faults_active_ ? &message_faults_ : nullptr;
  std::vector<std::span<float>> buffers;
  for (auto& replica : replicas_) buffers.emplace_back(replica.flat);
  float reduced_loss = 0.0f;
  if (config_.math == MathMode::kExact) {
    DTLAB_ASSIGN_OR_RETURN(reduced_loss, ExactComputeAndReduce(offsets, batch_sizes, step, result));
  } else {
    // This process's replicas only (all of them in a single-process run).
    std::vector<BatchSegment> segments;
    for (std::int32_t r = first; r < end; ++r) {
      Replica& replica = *Local(r);
      segments.push_back({central() ? &host_params_ : &replica.params, offsets[static_cast<std::size_t>(r)],
                          batch_sizes[static_cast<std::size_t>(r)], &replica.grads, nullptr});
    }
    if (compute_ != nullptr)
      DTLAB_RETURN_IF_ERROR(compute_->Run(images_, labels_, coefficients_, losses_, predictions_, segments));
    else
      runner_.Run(images_, labels_, coefficients_, losses_, predictions_, segments);

    // Per replica: its loss (with its share of the regularization), the regularization
    // gradient, its metric, and its gradient packed for the collective.
    const RegularizationSplit split = config_.split();
    try {
    tbb::parallel_for(first, end, [&](std::int32_t r) {
      if (faults_active_) ThrowIfInjected(r, step);
      const auto k = static_cast<std::size_t>(r);
      Replica& replica = *Local(r);
      const ParameterList<float>& weights = central() ? host_params_ : replica.params;
      const auto begin = static_cast<std::size_t>(offsets[k]), count = static_cast<std::size_t>(batch_sizes[k]);
      const float data_loss = config_.ReplicaDataLoss(std::span(losses_).subspan(begin, count), scales[k]);
      const float regularization_scale = config_.RegularizationShare(1.0f, r, n, split);
      result.replica_losses[k] = data_loss;
      if (regularization_scale != 0.0f) {
        result.replica_losses[k] += config_.RegularizationShare(model_.RegularizationLoss(weights), r, n, split);
        model_.AddRegularizationGradient(weights, regularization_scale, replica.grads);
      }
      PackParameters(replica.grads, replica.flat);
    });
    } catch (const std::exception& e) {
      return Status::Runtime(std::string(e.what()) + "; the step was not applied");
    }
    if (faults_active_) InjectNonFinite(step);
    DTLAB_RETURN_IF_ERROR(CheckReplicaGradients(step, offsets));
    DTLAB_RETURN_IF_ERROR(ShareSlices(result.replica_losses, ReplicaSlices(n), "the replicas' losses", step));
    // strategy.reduce of the per-replica losses, in replica order.
    for (const float l : result.replica_losses) reduced_loss += l;
    if (ddp) reduced_loss /= static_cast<float>(n);

    // The collective.
    const ReduceOp op = ddp ? ReduceOp::kMean : ReduceOp::kSum;
    if (group_ != nullptr) {
      DTLAB_RETURN_IF_ERROR(group_->AllReduce(buffers, n, op, options));
    } else if (central()) {
      Reduce<float>(buffers, 0, op, options);
    } else {
      AllReduce<float>(buffers, op, options);
    }
    DTLAB_RETURN_IF_ERROR(
        CollectiveStatus(central() ? "reduce" : "all_reduce/" + std::string(AllReduceAlgorithmName(config_.all_reduce)),
                         step));
  }
  result.loss = reduced_loss;
  // Every worker sees every example's loss and prediction (the metrics and the
  // reference check read them).
  DTLAB_RETURN_IF_ERROR(ShareSlices(losses_, offsets, "the per-example losses", step));
  DTLAB_RETURN_IF_ERROR(ShareSlices(predictions_, offsets, "the predictions", step));
  for (std::int32_t r = 0; r < n; ++r) {
    const auto k = static_cast<std::size_t>(r);
    accuracies_[k].UpdateState(std::span(labels_).subspan(static_cast<std::size_t>(offsets[k]), static_cast<std::size_t>(batch_sizes[k])),
                                      std::span(predictions_).subspan(static_cast<std::size_t>(offsets[k]), static_cast<std::size_t>(batch_sizes[k])));
  }

  if (reduced_gradient) {
    *reduced_gradient = model_.ZeroParameters();
    UnpackParameters(replicas_[0].flat, *reduced_gradient);
  }
  if (config_.check_reference) {
    result.check = config_.math == MathMode::kExact
                       ? CheckExactAgainstReference(variables(), global_batch_size, replicas_[0].flat, reduced_loss, step)
                       : CheckAgainstReference(variables(), global_batch_size, batch_sizes, replicas_[0].flat,
                                               reduced_loss, step);
    result.check->distributed_norm = L2Norm(replicas_[0].flat);
    double squares = 0;
    for (const auto& variable : reference_grads_) squares += std::pow(L2Norm(variable.span()), 2);
    result.check->reference_norm = std::sqrt(squares);
  }

  // Apply the update.
  if (central()) {
    // The host applies the reduced gradient to its copy, then broadcasts the variables.
    ParameterList<float>& grads = replicas_[0].grads;
    UnpackParameters(replicas_[0].flat, grads);
    host_optimizer_->Apply(host_params_, grads, learning_rate);
    PackParameters(host_params_, replicas_[0].flat);
    options.algorithm = AllReduceAlgorithm::kRing;
    Broadcast<float>(buffers, 0, options);
    DTLAB_RETURN_IF_ERROR(CollectiveStatus("broadcast", step));
    tbb::parallel_for(std::size_t{0}, replicas_.size(), [&](std::size_t k) {
      Replica& replica = replicas_[k];
      UnpackParameters(replica.flat, replica.params);
    });
  } else {
    // Mirrored variables: every replica applies the same reduced gradient to its copy.
    tbb::parallel_for(std::size_t{0}, replicas_.size(), [&](std::size_t k) {
      Replica& replica = replicas_[k];
      UnpackParameters(replica.flat, replica.grads);
      replica.optimizer->Apply(replica.params, replica.grads, learning_rate);
    });
  }
  if (const std::string bad = NonFiniteVariables(model_, variables()); !bad.empty())
    return Status::Runtime("step " + std::to_string(step) + ": the optimizer update made " + bad +
                           " non-finite although the reduced gradient was finite; try a smaller --lr");
  return result;
}

std::int64_t Cluster::PrepareReference(std::int64_t global_batch_size) {
  const auto total = static_cast<std::int64_t>(labels_.size());
  reference_coefficients_.assign(labels_.size(), 0.0f);
  const std::int64_t denominator =
      config_.ReplicaCoefficients(total, global_batch_size, 1, reference_coefficients_).denominator;
  reference_losses_.assign(labels_.size(), 0.0f);
  reference_predictions_.assign(labels_.size(), 0);
  return denominator;
}

StepCheck Cluster::CheckAgainstReference(const ParameterList<float>& weights, std::int64_t global_batch_size,
                                         const std::vector<std::int64_t>& batch_sizes,
                                         const std::vector<float>& reduced, float reduced_loss, std::int64_t step) {
  // One device on the whole global batch, same weights, the same loss code with N = 1.
  const auto total = static_cast<std::int64_t>(labels_.size());
  const std::int64_t denominator = PrepareReference(global_batch_size);
  if (reference_grads_.empty()) {
    reference_grads_ = model_.ZeroParameters();
    reference_magnitudes_ = model_.ZeroParameters();
  }
  const BatchSegment whole{&weights, 0, total, &reference_grads_, &reference_magnitudes_};
  runner_.Run(images_, labels_, reference_coefficients_, reference_losses_, reference_predictions_,
              std::span(&whole, 1));
  model_.AddRegularizationGradient(weights, 1.0f, reference_grads_);
  float reference_loss = ComputeAverageLoss<float>(reference_losses_, {}, denominator) +
                         model_.RegularizationLoss(weights);
  if (compute_ != nullptr) {
    // A device backend sums over examples its own way (exact mode's per-example
    // terms, the same per-example values as the CPU's): the reference is then their
    // exact sum, rounded once, whose error is below any of the chains the bound
    // already counts. The magnitudes stay the CPU's (the bound is widened by 1% for
    // such differences).
    reference_loss = runner_.ExactGradient(weights, images_, labels_, reference_coefficients_, reference_losses_,
                                           reference_predictions_, reference_words_, reference_grads_);
  }

  StepCheck check;
  check.step = step;
  check.per_example_values_identical =
      std::memcmp(reference_losses_.data(), losses_.data(), sizeof(float) * losses_.size()) == 0;

  // Chain lengths (see reference_check.h): every padded term, the chunk sums, the
  // replica sums, and a few single operations (regularization, scaling).
  const std::int64_t chunk = runner_.chunk_size();
  auto padded = [&](std::int64_t b) { return (b + chunk - 1) / chunk * chunk; };
  std::int64_t distributed_rows = 0, distributed_chunks = 0;
  for (const std::int64_t b : batch_sizes) {
    distributed_rows += padded(b);
    distributed_chunks += (b + chunk - 1) / chunk;
  }
  const std::int64_t reference_rows = padded(total), reference_chunks = (total + chunk - 1) / chunk;
  const auto n = static_cast<std::int64_t>(batch_sizes.size());

  std::size_t offset = 0;
  std::vector<float> magnitudes;
  for (std::size_t p = 0; p < reference_grads_.size(); ++p) {
    const Tensor<float>& g = reference_grads_[p];
    const auto size = static_cast<std::size_t>(g.size());
    const std::int64_t terms = model_.GradientTermsPerExample(p);
    const double additions = static_cast<double>(distributed_rows * terms + distributed_chunks + n + 4 +
                                                 reference_rows * terms + reference_chunks + 4);
    magnitudes.assign(reference_magnitudes_[p].data(), reference_magnitudes_[p].data() + size);
    if (model_.parameters()[p].spec.is_kernel)  // the regularization term 2*l2*|w|
      for (std::size_t i = 0; i < size; ++i)
        magnitudes[i] += static_cast<float>(2.0 * model_.l2()) * std::abs(weights[p][static_cast<std::int64_t>(i)]);
    check.variables.push_back(CompareWithBound(model_.parameters()[p].name,
                                               std::span(reduced).subspan(offset, size),
                                               std::span(g.data(), size), magnitudes, additions));
    offset += size;
  }
  double loss_magnitude = std::abs(model_.RegularizationLoss(weights));
  for (std::size_t i = 0; i < labels_.size(); ++i)
    loss_magnitude += std::abs(static_cast<double>(reference_losses_[i]) * reference_coefficients_[i]);
  const float magnitude = static_cast<float>(loss_magnitude);
  check.loss = CompareWithBound("loss", std::span(&reduced_loss, 1), std::span(&reference_loss, 1),
                                std::span(&magnitude, 1), static_cast<double>(2 * (total + n + 8)));
  check.Summarize();
  // Name the classic causes when the gradients are off by the replica count.
  if (!check.within_bound) {
    double worst_scale = 1;
    for (const auto& v : check.variables)
      if (!v.within_bound && std::abs(v.scale - 1) > std::abs(worst_scale - 1)) worst_scale = v.scale;
    const bool n_times = std::abs(worst_scale - static_cast<double>(n)) < 0.05 * static_cast<double>(n);
    check.explanation += config_.FastMismatchCause(static_cast<std::int32_t>(n), n_times, model_.l2() != 0.0);
  }
  return check;
}

StatusOr<float> Cluster::ExactComputeAndReduce(const std::vector<std::int64_t>& offsets,
                                               const std::vector<std::int64_t>& batch_sizes, std::int64_t step,
                                               StepResult& result) {
  const std::int32_t n = config_.replicas;
  const bool ddp = config_.mean_across_replicas();
  const std::int32_t first = first_, end = first_ + static_cast<std::int32_t>(replicas_.size());
  std::vector<ExactSegment> segments;
  for (std::int32_t r = first; r < end; ++r) {
    const auto k = static_cast<std::size_t>(r);
    Replica& replica = *Local(r);
    segments.push_back({central() ? &host_params_ : &replica.params, offsets[k], batch_sizes[k], replica.words});
  }
  if (compute_ != nullptr)
    DTLAB_RETURN_IF_ERROR(compute_->RunExact(images_, labels_, coefficients_, losses_, predictions_, segments));
  else
    runner_.RunExact(images_, labels_, coefficients_, losses_, predictions_, segments);

  // Each replica's loss, exactly: sum of coefficient_i * loss_i (exact products)
  // plus its share of the regularization; its gradient words get the same share.
  const RegularizationSplit split = config_.split();
  std::vector<ExactSum> losses(static_cast<std::size_t>(n));
  try {
  tbb::parallel_for(first, end, [&](std::int32_t r) {
    if (faults_active_) ThrowIfInjected(r, step);
    const auto k = static_cast<std::size_t>(r);
    Replica& replica = *Local(r);
    const ParameterList<float>& weights = central() ? host_params_ : replica.params;
    for (std::int64_t i = offsets[k]; i < offsets[k + 1]; ++i)
      losses[k].AddProduct(coefficients_[static_cast<std::size_t>(i)], losses_[static_cast<std::size_t>(i)]);
    // DDP: every replica's loss holds the whole regularization and the MEAN divides
    // by N. Unscaled (the pitfall): the same, but the SUM keeps N times of it.
    if (const float scale = config_.RegularizationShare(1.0f, r, n, split); scale != 0.0f) {
      losses[k].Add(config_.RegularizationShare(model_.RegularizationLoss(weights), r, n, split));
      AddRegularizationWords(model_, weights, scale, replica.words);
    }
    result.replica_losses[k] = offsets[k + 1] == offsets[k] && config_.empty_replica_nan()
                                   ? std::numeric_limits<float>::quiet_NaN()
                                   : losses[k].ToFloat();
  });
  } catch (const std::exception& e) {
    return Status::Runtime(std::string(e.what()) + "; the step was not applied");
  }
  if (faults_active_) InjectNonFinite(step);
  DTLAB_RETURN_IF_ERROR(CheckReplicaGradients(step, offsets));
  const std::vector<std::int64_t> slices = ReplicaSlices(n);
  DTLAB_RETURN_IF_ERROR(ShareSlices(losses, slices, "the replicas' losses", step));
  DTLAB_RETURN_IF_ERROR(ShareSlices(result.replica_losses, slices, "the replicas' losses", step));
  // strategy.reduce of the losses: the exact sum, rounded once (DDP: then / N).
  ExactSum total;
  for (const ExactSum& l : losses) total.Merge(l);
  float reduced_loss = total.ToFloat();
  for (const float l : result.replica_losses)
    if (std::isnan(l)) reduced_loss = l;
  if (ddp) reduced_loss /= static_cast<float>(n);

  // The collective moves accumulator words; integer addition makes every algorithm
  // and every grouping give the same words.
  std::vector<std::span<std::int64_t>> word_buffers;
  for (auto& replica : replicas_) word_buffers.emplace_back(replica.words);
  CollectiveOptions options;
  options.algorithm = config_.all_reduce;
  options.replicas_per_worker = config_.replicas_per_worker();
  options.step = step;
  options.log = &log_;
  options.faults = faults_active_ ? &message_faults_ : nullptr;
  const auto holders = static_cast<std::int32_t>(central() ? 1 : replicas_.size());
  if (group_ != nullptr)
    DTLAB_RETURN_IF_ERROR(group_->AllReduce(word_buffers, n, ReduceOp::kSum, options));
  else if (central())
    Reduce<std::int64_t>(word_buffers, 0, ReduceOp::kSum, options);
  else
    AllReduce<std::int64_t>(word_buffers, ReduceOp::kSum, options);
  DTLAB_RETURN_IF_ERROR(
      CollectiveStatus(central() ? "reduce" : "all_reduce/" + std::string(AllReduceAlgorithmName(config_.all_reduce)),
                       step));
  tbb::parallel_for(0, holders, [&](std::int32_t r) {
    Replica& replica = replicas_[static_cast<std::size_t>(r)];
    RoundWords(replica.words, replica.flat);
    if (ddp)
      for (float& g : replica.flat) g /= static_cast<float>(n);
  });
  return reduced_loss;
}

StepCheck Cluster::CheckExactAgainstReference(const ParameterList<float>& weights, std::int64_t global_batch_size,
                                              const std::vector<float>& reduced, float reduced_loss,
                                              std::int64_t step) {
  // One device on the whole global batch, exact mode, the same loss code with N = 1.
  PrepareReference(global_batch_size);
  if (reference_grads_.empty()) reference_grads_ = model_.ZeroParameters();
  const float reference_loss =
      runner_.ExactGradient(weights, images_, labels_, reference_coefficients_, reference_losses_,
                            reference_predictions_, reference_words_, reference_grads_);
  std::vector<float> reference(reduced.size());
  PackParameters(reference_grads_, reference);

  StepCheck check;
  check.step = step;
  check.exact = true;
  check.per_example_values_identical =
      std::memcmp(reference_losses_.data(), losses_.data(), sizeof(float) * losses_.size()) == 0;
  std::size_t offset = 0;
  for (std::size_t p = 0; p < model_.parameters().size(); ++p) {
    const auto size = static_cast<std::size_t>(NumElements(model_.parameters()[p].spec.shape));
    check.variables.push_back(CompareBitwise(model_.parameters()[p].name, std::span(reduced).subspan(offset, size),
                                             std::span(reference).subspan(offset, size)));
    offset += size;
  }
  check.loss = CompareBitwise("loss", std::span(&reduced_loss, 1), std::span(&reference_loss, 1));
  check.Summarize();
  if (!check.within_bound)
    check.explanation += config_.ExactMismatchCause(config_.replicas, config_.split(), model_.l2() != 0.0);
  return check;
}

}  // namespace dtlab
