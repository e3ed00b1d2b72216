#include "sim/engines/cluster.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <type_traits>

#include <tbb/parallel_for.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_invoke.h>
#include <tbb/parallel_reduce.h>
#include <tbb/task_arena.h>

#include "core/batch.h"
#include "core/batch_norm.h"
#include "core/loss.h"
#include "core/text.h"
#include "sim/compute/device_backend.h"
#include "sim/compute/parallel_update.h"
#include "sim/comm/combine.h"

namespace dtlab {

namespace {

// The CPU's BatchRunner as a compute backend.
class CpuCompute final : public ComputeBackend {
 public:
  explicit CpuCompute(BatchRunner& runner) : runner_(runner) {}
  std::string Description() const override { return "cpu"; }
  void SetDropoutStep(const DropoutStep& step) override { runner_.set_dropout_step(step); }
  Status Run(const Tensor<float>& images, std::span<const std::int32_t> labels, std::span<const float> coefficients,
             std::span<float> per_example_loss, std::span<std::int32_t> predictions,
             std::span<const BatchSegment> segments) override {
    runner_.Run(images, labels, coefficients, per_example_loss, predictions, segments);
    return Status::Ok();
  }
  Status RunExact(const Tensor<float>& images, std::span<const std::int32_t> labels,
                  std::span<const float> coefficients, std::span<float> per_example_loss,
                  std::span<std::int32_t> predictions, std::span<const ExactSegment> segments) override {
    runner_.RunExact(images, labels, coefficients, per_example_loss, predictions, segments);
    return Status::Ok();
  }

 private:
  BatchRunner& runner_;
};

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

// True if every value is finite: one branch-free pass that the compiler vectorizes.
bool AllFinite(std::span<const float> values) {
  std::uint32_t largest = 0;  // of the magnitudes' bits; infinities and NaNs are the largest
  for (const float v : values) largest = std::max(largest, std::bit_cast<std::uint32_t>(v) & 0x7fffffffu);
  return largest < 0x7f800000u;
}

std::string NonFiniteVariables(const Sequential<float>& model, const ParameterList<float>& values) {
  if (std::all_of(values.begin(), values.end(), [](const Tensor<float>& v) { return AllFinite(v.span()); })) return "";
  return NonFiniteNames(model, [&](std::size_t p) {
    bool nan = false, inf = false;
    for (const float v : values[p].span()) nan |= std::isnan(v), inf |= std::isinf(v);
    return std::pair(nan, inf);
  });
}

// True when two lists of variables hold the same bits.
bool SameBits(const ParameterList<float>& a, const ParameterList<float>& b) {
  for (std::size_t p = 0; p < a.size(); ++p)
    if (a[p].size() != b[p].size() ||
        std::memcmp(a[p].data(), b[p].data(), static_cast<std::size_t>(a[p].size()) * sizeof(float)) != 0)
      return false;
  return a.size() == b.size();
}

// The same for exact mode's gradient words: an accumulator's last word counts the
// non-finite terms added to it. With `rounded` (the gradient rounded in its pass,
// ExactSegment::rounded), only the elements whose rounded value is not finite are
// sure to have their words; a non-finite term rounds to inf or NaN, so the others
// had none. With `encoded` (the same words, encoded for the compact all-reduce), only
// the values of its whole blocks can have a non-finite term (CompactGradient's
// kWholeBlock), and only they are read.
std::string NonFiniteAccumulators(const Sequential<float>& model, std::span<const std::int64_t> words,
                                  std::span<const float> rounded, const CompactGradient* encoded) {
  // The common case, nothing non-finite, in parallel: the scan reads a word of every
  // accumulator, which touches all their cache lines (or the rounded floats, or the
  // encoding's block bounds).
  const auto elements = static_cast<std::int64_t>(words.size() / kExactWords);
  auto any_in_whole_blocks = [&] {
    for (std::size_t block = 0; block < encoded->bound.size(); ++block) {
      if (encoded->bound[block] != CompactGradient::kWholeBlock) continue;
      const auto begin = static_cast<std::int64_t>(block) * kCompactBlock;
      for (std::int64_t k = begin; k < std::min(elements, begin + kCompactBlock); ++k)
        if (words[static_cast<std::size_t>(k * kExactWords + kExactDigitWords)] != 0) return true;
    }
    return false;
  };
  const bool any = !rounded.empty() ? !AllFinite(rounded)
                   : encoded != nullptr
                       ? any_in_whole_blocks()
                       : tbb::parallel_reduce(
                             tbb::blocked_range<std::int64_t>(0, elements, 8192), false,
                             [&](const tbb::blocked_range<std::int64_t>& r, bool found) {
                               std::int64_t special = 0;
                               for (std::int64_t k = r.begin(); k < r.end(); ++k)
                                 special |= words[static_cast<std::size_t>(k * kExactWords + kExactDigitWords)];
                               return found || special != 0;
                             },
                             [](bool a, bool b) { return a || b; });
  if (!any) return "";
  std::int64_t element = 0;
  return NonFiniteNames(model, [&](std::size_t p) {
    bool nan = false, inf = false;
    for (const std::int64_t end = element + NumElements(model.parameters()[p].spec.shape); element < end; ++element) {
      if (!rounded.empty() && std::isfinite(rounded[static_cast<std::size_t>(element)])) continue;
      const std::int64_t special = words[static_cast<std::size_t>(element * kExactWords + kExactDigitWords)];
      nan |= special >= kExactNanUnit, inf |= special != 0;
    }
    return std::pair(nan, inf);
  });
}

}  // namespace

Status Cluster::CheckReplicaGradients(std::int64_t step, const std::vector<std::int64_t>& offsets, std::int32_t begin,
                                      std::int32_t end, const std::function<const GradientSlot&(std::int32_t)>& slot) {
  for (auto k = static_cast<std::size_t>(begin); k < static_cast<std::size_t>(end); ++k) {
    const GradientSlot& gradient = slot(static_cast<std::int32_t>(k));
    const std::string bad =
        config_.math == MathMode::kExact
            ? NonFiniteAccumulators(model_, gradient.words, rounds_in_pass_ ? gradient.flat : std::span<const float>(),
                                    compacted_ ? &replicas_[k].compact : nullptr)
            : NonFiniteVariables(model_, gradient.grads);
    if (bad.empty()) continue;
    const std::size_t r = k + static_cast<std::size_t>(first_);
    std::int64_t losses = 0;
    for (std::int64_t i = offsets[r]; i < offsets[r + 1]; ++i)
      losses += !std::isfinite(losses_[static_cast<std::size_t>(i)]);
    const std::string weights = NonFiniteVariables(model_, Weights(replicas_[k]));
    const std::string injected = faults_ != nullptr ? faults_->injected_nan() : "";
    return Status::Runtime(
        "step " + std::to_string(step) + ": replica " + std::to_string(r) + " of " + std::to_string(config_.replicas) +
        " computed a non-finite gradient for " + bad + "; " + std::to_string(losses) + " of its " +
        std::to_string(offsets[r + 1] - offsets[r]) + " examples have a non-finite loss; " +
        (weights.empty() ? "its weights were finite before the step"
                         : "its weights were already non-finite: " + weights) +
        (injected.empty() ? ". Try a smaller --lr" : "; the value was injected by the fault " + injected));
  }
  return Status::Ok();
}

template <typename T>
Status Cluster::ShareSlices(std::vector<T>& values, const std::vector<std::int64_t>& offsets, std::string_view what,
                            std::int64_t step) {
  if (group_ == nullptr) return Status::Ok();
  const std::int32_t workers = group_->size();
  const std::int32_t per_worker = config_.replicas / workers;
  std::vector<std::size_t> counts(static_cast<std::size_t>(workers));
  for (std::int32_t w = 0; w < workers; ++w)
    counts[static_cast<std::size_t>(w)] = static_cast<std::size_t>(
        offsets[static_cast<std::size_t>((w + 1) * per_worker)] - offsets[static_cast<std::size_t>(w * per_worker)]);
  const auto begin = values.begin() + offsets[static_cast<std::size_t>(first_)];
  const std::vector<T> mine(begin,
                            begin + static_cast<std::ptrdiff_t>(counts[static_cast<std::size_t>(group_->rank())]));
  return group_->AllGatherValues(std::span<const T>(mine), std::span<T>(values), counts, what, step);
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
  if (fold_above < 0)
    return Status::InvalidArgument("--fold-above must be 0 or more (replicas above it fold their gradients), got " +
                                   std::to_string(fold_above));
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
    return Status::InvalidArgument("--workers " + std::to_string(workers) +
                                   " needs the multi_worker_mirrored or "
                                   "parameter_server strategy (" +
                                   std::string(StrategyName(strategy)) + " runs on one worker)");
  DTLAB_RETURN_IF_ERROR(LossCode::Validate());
  DTLAB_RETURN_IF_ERROR(accumulation.Validate());
  if (accumulation.on() && strategy == StrategyKind::kParameterServer)
    return Status::InvalidArgument(
        "--accumulation-steps " + std::to_string(accumulation.steps) +
        ": parameter_server workers push every batch's gradient to the servers as soon as they compute it "
        "(asynchronous updates), so there is no optimizer step of several micro-batches to accumulate into; use a "
        "synchronous strategy (mirrored, multi_worker_mirrored, ...) or leave --accumulation-steps out");
  DTLAB_RETURN_IF_ERROR(precision.Validate());
  if (precision.half() || precision.dynamic_loss_scale) {
    const std::string what =
        precision.half() ? "--precision " + std::string(PrecisionName(precision.compute)) : "--loss-scale dynamic";
    if (math == MathMode::kExact)
      return Status::InvalidArgument(
          what +
          " with --math exact: Keras rounds each replica's gradient to the half type before the all-reduce, so "
          "the step depends on the replica count by design, which exact mode exists to rule out; use --math fast "
          "(--check-reference holds it to one device within its bound, the half roundings included)");
    if (strategy == StrategyKind::kParameterServer)
      return Status::InvalidArgument(what +
                                     " with parameter_server: each worker would need its own loss scale and its own "
                                     "verdict on every asynchronous push; use a synchronous strategy");
    if (accumulation.on())
      return Status::InvalidArgument(what + " with --accumulation-steps " + std::to_string(accumulation.steps) +
                                     ": a loss scale over accumulated micro-batches is not modelled; drop one of them");
  }
  if (precision.check != LossScaleCheck::kReduced && !precision.dynamic_loss_scale)
    return Status::InvalidArgument("--loss-scale-check " + std::string(LossScaleCheckName(precision.check)) +
                                   " needs --loss-scale dynamic (or --precision mixed_float16)");
  if (precision.check == LossScaleCheck::kEachReplica && strategy == StrategyKind::kCentralStorage)
    return Status::InvalidArgument(
        "--loss-scale-check each-replica with central_storage: the variables are one copy on the host, so there is "
        "no replica to skip alone; use mirrored");
  if (accumulation.on() && !faults.empty())
    return Status::InvalidArgument("--inject-fault with --accumulation-steps " + std::to_string(accumulation.steps) +
                                   ": injected faults are keyed by steps of one batch, and are not modelled inside an "
                                   "optimizer step of several micro-batches; drop one of them");
  for (const FaultSpec& fault : faults) {
    // Both fields index the replicas (FaultInjector::BeginStep, the transport): in range or refused.
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
    : model_(model), config_(config), runner_(model, chunk_size), cpu_(std::make_unique<CpuCompute>(runner_)) {}

bool Cluster::ComputesInWaves(const ClusterConfig& config, const Sequential<float>& model) {
  // Mirrored variables, or central_storage's on the host, which every replica reads.
  const bool mirrored = config.strategy == StrategyKind::kMirrored ||
                        config.strategy == StrategyKind::kMultiWorkerMirrored ||
                        config.strategy == StrategyKind::kTpu || config.strategy == StrategyKind::kCentralStorage;
  // An unsynchronized BatchNormalization layer normalizes each replica by its own
  // examples, so a wave's staged passes need no other replica; a synchronized one
  // sums every replica's statistics in the middle of the passes. A dynamic loss
  // scale reads each replica's own overflow verdict, which the replica keeps.
  return mirrored && !HasSynchronizedBatchNorm(model);
}

std::int32_t Cluster::FoldWave() {
  // Enough segments to keep every thread busy; the bits do not depend on it.
  return std::max(16, 4 * tbb::this_task_arena::max_concurrency());
}

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
  if (group != nullptr && config.precision.check != LossScaleCheck::kReduced)
    return Status::InvalidArgument("--loss-scale-check " + std::string(LossScaleCheckName(config.precision.check)) +
                                   " under MPI: a rank would need the other ranks' own gradients; use reduced");
  DTLAB_RETURN_IF_ERROR(FaultInjector::CheckAgainstModel(config.faults, model));
  std::unique_ptr<Cluster> cluster(new Cluster(model, config, chunk_size));
  if (!config.faults.empty())
    cluster->faults_ =
        std::make_unique<FaultInjector>(config.faults, model, config.replicas, config.collective_timeout_seconds);
  if (config.check_reference) cluster->reference_ = std::make_unique<ReferenceStep>(model, chunk_size);
  const auto flat_size = static_cast<std::size_t>(model.num_parameter_values());
  cluster->group_ = group;
  const std::int32_t local = group != nullptr ? config.replicas / group->size() : config.replicas;
  cluster->first_ = group != nullptr ? group->rank() * local : 0;
  cluster->replicas_.resize(static_cast<std::size_t>(local));
  cluster->accuracies_.resize(static_cast<std::size_t>(config.replicas));
  // Gradient buffers: every replica's, or, folded, a wave's slots and the sum.
  cluster->folded_ = FoldsReduction(config, model, group != nullptr);
  cluster->compacted_ = CompactsGradients(config, model, group != nullptr);
  cluster->rounds_in_pass_ = config.math == MathMode::kExact && config.replicas == 1 && group == nullptr &&
                             !cluster->folded_ && !cluster->compacted_ && cluster->faults_ == nullptr &&
                             !config.accumulation.on();
  const auto allocate = [&](GradientSlot& slot) {
    slot.grads = model.ZeroParameters();
    slot.flat.assign(flat_size, 0.0f);
    if (config.math == MathMode::kExact) slot.words.assign(flat_size * kExactWords, 0);
  };
  if (cluster->folded_ || cluster->compacted_) {
    // A slot holds what the wave writes: the gradients (fast mode) or the words (exact).
    cluster->slots_.resize(static_cast<std::size_t>(std::min(FoldWave(), local)));
    for (GradientSlot& slot : cluster->slots_) {
      if (config.math == MathMode::kExact)
        slot.words.assign(flat_size * kExactWords, 0);
      else
        slot.grads = model.ZeroParameters();
    }
  }
  if (cluster->folded_) {
    cluster->replicas_[0].flat.assign(flat_size, 0.0f);
    if (config.math == MathMode::kExact) cluster->folded_words_.assign(flat_size * kExactWords, 0);
    cluster->folded_grads_ = model.ZeroParameters();
  }
  for (auto& replica : cluster->replicas_) {
    if (!cluster->central()) {  // central_storage: the variables and slots are the host's alone
      replica.params = initial;
      DTLAB_ASSIGN_OR_RETURN(replica.optimizer, MakeOptimizer(optimizer, options));
      replica.optimizer->Build(replica.params);
    }
    if (cluster->compacted_) {
      // The reduced gradient and its unpacked form; the words stay in the slots.
      replica.grads = model.ZeroParameters();
      replica.flat.assign(flat_size, 0.0f);
    } else if (!cluster->folded_) {
      allocate(replica);
    }
    replica.loss_scale = DynamicLossScale(config.precision.initial_scale, config.precision.growth_steps);
  }
  if (cluster->central()) {
    cluster->host_params_ = initial;
    DTLAB_ASSIGN_OR_RETURN(cluster->host_optimizer_, MakeOptimizer(optimizer, options));
    cluster->host_optimizer_->Build(cluster->host_params_);
  }
  return cluster;
}

StatusOr<Cluster::StepLayout> Cluster::GatherStep(const ImageDataset& data,
                                                  const std::vector<std::vector<std::int64_t>>& per_replica) {
  const std::int32_t n = config_.replicas;
  if (static_cast<std::int32_t>(per_replica.size()) != n)
    return Status::InvalidArgument("the distributed batch has " + std::to_string(per_replica.size()) +
                                   " replica batches for " + std::to_string(n) + " replicas");
  // The step's examples in replica order: replica r owns [offset[r], offset[r+1]).
  StepLayout layout;
  layout.offsets.assign(static_cast<std::size_t>(n) + 1, 0);
  layout.batch_sizes.assign(static_cast<std::size_t>(n), 0);
  for (std::int32_t r = 0; r < n; ++r) {
    const auto& mine = per_replica[static_cast<std::size_t>(r)];
    layout.indices.insert(layout.indices.end(), mine.begin(), mine.end());
    layout.batch_sizes[static_cast<std::size_t>(r)] = static_cast<std::int64_t>(mine.size());
    layout.offsets[static_cast<std::size_t>(r) + 1] = static_cast<std::int64_t>(layout.indices.size());
  }
  GatherBatch(data, layout.indices, images_, labels_);
  losses_.assign(layout.indices.size(), 0.0f);
  predictions_.assign(layout.indices.size(), 0);
  coefficients_.assign(layout.indices.size(), 0.0f);
  return layout;
}

Status Cluster::ShareExamplesAndCount(const StepLayout& layout, std::int64_t step) {
  // Every worker sees every example's loss and prediction (the metrics and the
  // reference check read them).
  DTLAB_RETURN_IF_ERROR(ShareSlices(losses_, layout.offsets, "the per-example losses", step));
  DTLAB_RETURN_IF_ERROR(ShareSlices(predictions_, layout.offsets, "the predictions", step));
  for (std::size_t r = 0; r < layout.batch_sizes.size(); ++r) {
    const auto begin = static_cast<std::size_t>(layout.offsets[r]);
    const auto count = static_cast<std::size_t>(layout.batch_sizes[r]);
    accuracies_[r].UpdateState(std::span(labels_).subspan(begin, count), std::span(predictions_).subspan(begin, count));
  }
  return Status::Ok();
}

StatusOr<StepResult> Cluster::TrainStep(const ImageDataset& data,
                                        const std::vector<std::vector<std::int64_t>>& per_replica,
                                        std::int64_t global_batch_size, float learning_rate, std::int64_t step,
                                        ParameterList<float>* reduced_gradient) {
  const std::int32_t n = config_.replicas;
  DTLAB_ASSIGN_OR_RETURN(const StepLayout layout, GatherStep(data, per_replica));
  const std::vector<std::int64_t>& offsets = layout.offsets;
  const std::vector<std::int64_t>& batch_sizes = layout.batch_sizes;

  // Each example's coefficient, as the loss code says (sim/engines/loss_code.h).
  std::vector<LossCode::LossScale> scales(static_cast<std::size_t>(n));
  for (std::int32_t r = 0; r < n; ++r) {
    const auto k = static_cast<std::size_t>(r);
    scales[k] = config_.ReplicaCoefficients(
        batch_sizes[k], global_batch_size, n,
        std::span(coefficients_)
            .subspan(static_cast<std::size_t>(offsets[k]), static_cast<std::size_t>(batch_sizes[k])));
  }
  DTLAB_RETURN_IF_ERROR(config_.CheckEmptyReplicas(batch_sizes, step));
  // A dynamic loss scale multiplies the loss, so every example's coefficient, by
  // the scale (a power of two: exact, barring overflow), as optimizer.scale_loss does.
  const float loss_scale = LossScaleFactor();
  if (loss_scale != 1.0f)
    for (float& c : coefficients_) c *= loss_scale;

  StepResult result;
  if (config_.precision.dynamic_loss_scale) result.loss_scale = loss_scale;
  result.replica_losses.assign(static_cast<std::size_t>(n), 0.0f);
  result.replica_batch_sizes = batch_sizes;
  result.examples = static_cast<std::int64_t>(layout.indices.size());
  if (faults_ != nullptr) {
    if (group_ != nullptr)
      faults_->BeginRealStep(step, first_, first_ + static_cast<std::int32_t>(replicas_.size()), group_->rank());
    else
      DTLAB_RETURN_IF_ERROR(faults_->BeginStep(step, result.straggler_seconds));
  }
  DTLAB_ASSIGN_OR_RETURN(result.loss, config_.math == MathMode::kExact
                                          ? ComputeAndReduce<std::int64_t>(layout, scales, step, result)
                                          : ComputeAndReduce<float>(layout, scales, step, result));
  DTLAB_RETURN_IF_ERROR(ShareExamplesAndCount(layout, step));

  CopyReducedGradient(reduced_gradient);
  // A step the dynamic loss scale skips changes no variable: nothing to compare
  // (the epoch's report counts it among the skipped steps).
  if (reference_ != nullptr && !ReducedGradientOverflowed())
    result.check = reference_->Check(
        config_, config_.math, ReferenceInput(result, losses_, batch_sizes, layout.indices, global_batch_size, step));
  DTLAB_RETURN_IF_ERROR(ApplyUpdate(learning_rate, step, result));
  return result;
}

bool Cluster::ReducedGradientOverflowed() const {
  return config_.precision.dynamic_loss_scale && !AllFinite(replicas_[0].flat);
}

float Cluster::LossScaleFactor() const {
  return config_.precision.dynamic_loss_scale ? replicas_.front().loss_scale.scale() : 1.0f;
}

void Cluster::Unscale() {
  if (!config_.precision.dynamic_loss_scale) return;
  const auto holders = static_cast<std::size_t>(central() ? 1 : replicas_.size());
  tbb::parallel_for(std::size_t{0}, holders, [&](std::size_t k) {
    const float scale = replicas_[k].loss_scale.scale();
    for (float& g : replicas_[k].flat) g /= scale;  // a power of two: exact but for subnormals
  });
}

void Cluster::CopyReducedGradient(ParameterList<float>* reduced_gradient) const {
  if (reduced_gradient == nullptr) return;
  *reduced_gradient = model_.ZeroParameters();
  UnpackParameters(replicas_[0].flat, *reduced_gradient);
}

ReferenceStep::Distributed Cluster::ReferenceInput(const StepResult& result, std::span<const float> per_example_loss,
                                                   std::span<const std::int64_t> batch_sizes,
                                                   std::span<const std::int64_t> examples,
                                                   std::int64_t global_batch_size, std::int64_t step) const {
  ReferenceStep::Distributed distributed;
  distributed.weights = &variables();
  distributed.images = &images_;
  distributed.labels = labels_;
  distributed.per_example_loss = per_example_loss;
  distributed.batch_sizes = batch_sizes;
  distributed.reduced_gradient = replicas_[0].flat;
  distributed.reduced_loss = result.loss;
  distributed.global_batch_size = global_batch_size;
  distributed.step = step;
  distributed.device_backend = compute_ != nullptr;
  distributed.dropout = {config_.dropout_seed, step, config_.dropout_rng, 0, examples};
  distributed.loss_scale = result.loss_scale > 0 ? result.loss_scale : 1.0f;
  return distributed;
}

template <typename Word>
StatusOr<float> Cluster::ComputeAndReduce(const StepLayout& layout, const std::vector<LossCode::LossScale>& scales,
                                          std::int64_t step, StepResult& result) {
  DTLAB_ASSIGN_OR_RETURN(const auto sums,
                         ComputeReplicas<Word>(layout, layout.batch_sizes, scales, step, true, result));
  const float reduced_loss = ReducedLoss(sums, result.replica_losses);
  DTLAB_RETURN_IF_ERROR(ReduceGradients<Word>(step));
  Unscale();
  return reduced_loss;
}

template <typename Word>
StatusOr<std::vector<ReplicaLossSum<Word>>> Cluster::ComputeReplicas(const StepLayout& layout,
                                                                     const std::vector<std::int64_t>& loss_batches,
                                                                     const std::vector<LossCode::LossScale>& scales,
                                                                     std::int64_t step, bool regularize,
                                                                     StepResult& result, bool adds_to_held) {
  constexpr bool kExact = std::is_same_v<Word, std::int64_t>;
  const std::vector<std::int64_t>& offsets = layout.offsets;
  const std::vector<std::int64_t>& batch_sizes = layout.batch_sizes;
  // A replica's loss: the float sum the loss code's formula gives, or exactly the sum
  // of coefficient_i * loss_i (exact products), rounded once.
  using LossSum = ReplicaLossSum<Word>;
  const std::int32_t n = config_.replicas;
  const std::int32_t first = first_, end = first_ + static_cast<std::int32_t>(replicas_.size());

  // The forward and backward passes of this process's replicas (all of them in a
  // single-process run), with the injected faults around them.
  ComputeBackend& base = compute_ != nullptr ? *compute_ : *cpu_;
  // A synchronized BatchNormalization layer's sums cross the replicas through the
  // cluster's own all-reduce (the ring, or MPI across processes), as Keras's
  // synchronized moments all-reduce theirs (core/batch_norm.h).
  batch_norm_status_ = Status::Ok();
  runner_.set_batch_norm_reduce([this, step](std::span<const std::span<std::int64_t>> buffers) {
    const CollectiveOptions options = Options(step);
    if (group_ != nullptr) {
      const Status status = group_->AllReduce(buffers, config_.replicas, ReduceOp::kSum, options);
      if (!status.ok() && batch_norm_status_.ok()) batch_norm_status_ = status;
    } else {
      AllReduce<std::int64_t>(buffers, ReduceOp::kSum, options);
    }
  });
  // Each replica's gradient goes to its own buffers, or, folded or compacted, to a
  // slot of the wave it is computed in; the folded reduction then adds the wave to
  // the sum, and compaction encodes each slot for its replica.
  const bool waves = folded_ || compacted_;
  const std::int32_t wave = waves ? static_cast<std::int32_t>(slots_.size()) : end - first;
  const auto slot = [&](std::int32_t r) -> GradientSlot& {
    return waves ? slots_[static_cast<std::size_t>((r - first) % wave)] : *Local(r);
  };
  std::vector<LossSum> sums(static_cast<std::size_t>(n));
  std::vector<float> regularization(static_cast<std::size_t>(n), 0.0f);
  const RegularizationSplit split = config_.split();
  std::optional<float> first_regularization;
  if (regularize && end > first && config_.RegularizationShare(1.0f, first, n, split) != 0.0f) {
    first_regularization = model_.RegularizationLoss(Weights(*Local(first)));
    regularization[static_cast<std::size_t>(first)] = *first_regularization;
  }
  // With injected faults, the first replica's non-finite gradient is reported after
  // the last wave, unless a later wave's replica raised an exception: as when every
  // replica computes at once, whatever the wave size (which depends on the threads).
  Status non_finite;
  for (std::int32_t wave_begin = first; wave_begin < end; wave_begin += wave) {
    const std::int32_t wave_end = std::min(end, wave_begin + wave);
    // The injected faults of the wave's replicas (its segment k is replica wave_begin + k).
    const std::unique_ptr<ComputeBackend> faulty =
        faults_ != nullptr ? faults_->WrapCompute(base, wave_begin, step) : nullptr;
    ComputeBackend& compute = faulty != nullptr ? *faulty : base;
    compute.SetDropoutStep({config_.dropout_seed, step, config_.dropout_rng, wave_begin, layout.indices});
    std::vector<std::conditional_t<kExact, ExactSegment, BatchSegment>> segments;
    for (std::int32_t r = wave_begin; r < wave_end; ++r) {
      const auto k = static_cast<std::size_t>(r);
      GradientSlot& gradient = slot(r);
      // Exact mode: the replica's share of the regularization gradient goes into its
      // words in the same pass (ExactSegment::regularization).
      if constexpr (kExact)
        segments.push_back({&Weights(*Local(r)), offsets[k], batch_sizes[k], gradient.words,
                            regularize ? config_.RegularizationShare(1.0f, r, n, split) : 0.0f,
                            rounds_in_pass_ ? std::span<float>(gradient.flat) : std::span<float>()});
      else
        segments.push_back({&Weights(*Local(r)), offsets[k], batch_sizes[k], &gradient.grads, nullptr});
    }
    // Beside the passes, on whichever thread is free: the regularization loss of each
    // replica that adds a share of it (one ordered sum over the kernels, which no
    // thread would otherwise share).
    Status computed;
    auto passes = [&] {
      if constexpr (kExact)
        computed = compute.RunExact(images_, labels_, coefficients_, losses_, predictions_, segments);
      else
        computed = compute.Run(images_, labels_, coefficients_, losses_, predictions_, segments);
    };
    auto regularization_losses = [&] {
      tbb::parallel_for(wave_begin, wave_end, [&](std::int32_t r) {
        if (r == first || !regularize || config_.RegularizationShare(1.0f, r, n, split) == 0.0f) return;
        // Mirrored replicas' variables are bitwise equal, and so is the loss of equal
        // variables: the first replica's is taken instead of the same chain again.
        const ParameterList<float>& weights = Weights(*Local(r));
        regularization[static_cast<std::size_t>(r)] = first_regularization && SameBits(weights, Weights(*Local(first)))
                                                          ? *first_regularization
                                                          : model_.RegularizationLoss(weights);
      });
    };
    if (group_ != nullptr && runner_.has_batch_norm()) {
      // MPI is funneled through this thread, and the passes call it (a synchronized
      // BatchNormalization's all-reduces): they run here, not on a oneTBB worker.
      passes();
      regularization_losses();
    } else {
      tbb::parallel_invoke(passes, regularization_losses);
    }
    DTLAB_RETURN_IF_ERROR(computed);
    DTLAB_RETURN_IF_ERROR(batch_norm_status_);
    if (runner_.has_batch_norm()) {
      DTLAB_RETURN_IF_ERROR(CollectiveStatus("all_reduce/batch_norm", step));
      // The runner holds the last call's statistics, one segment per replica of the
      // wave: each replica keeps its own for the update.
      for (std::int32_t r = wave_begin; r < wave_end; ++r) {
        const std::span<const BatchNormStatistics> own =
            runner_.batch_norm_statistics(static_cast<std::size_t>(r - wave_begin));
        Local(r)->batch_norm.assign(own.begin(), own.end());
      }
    }

    // Per replica: its loss with its share of the regularization (the loss code's),
    // the same share of the regularization gradient, and its gradient ready for the
    // collective. A replica with no examples here but some in its loss batch (a
    // micro-batch of an accumulated step) adds a data loss of 0.
    tbb::parallel_for(wave_begin, wave_end, [&](std::int32_t r) {
      const auto k = static_cast<std::size_t>(r);
      Replica& replica = *Local(r);
      GradientSlot& gradient = slot(r);
      const ParameterList<float>& weights = Weights(replica);
      const auto begin = static_cast<std::size_t>(offsets[k]), count = static_cast<std::size_t>(batch_sizes[k]);
      if constexpr (kExact) {
        for (std::size_t i = begin; i < begin + count; ++i) sums[k].AddProduct(coefficients_[i], losses_[i]);
      } else {
        sums[k] = count == 0 && loss_batches[k] != 0
                      ? 0.0f
                      : config_.ReplicaDataLoss(std::span(losses_).subspan(begin, count), scales[k]);
      }
      // A half policy: the replica's gradient of the variables it cast is the half
      // type's (Keras's cast back to float32 is exact), before the regularization,
      // which acts on the float32 variables.
      if constexpr (!kExact)
        if (config_.precision.half())
          for (Tensor<float>& g : gradient.grads) RoundToComputeType(g.span(), config_.precision.compute);
      // DDP: every replica's loss holds the whole regularization and the MEAN divides
      // by N. Unscaled (the pitfall): the same, but the SUM keeps N times of it.
      if (const float scale = config_.RegularizationShare(1.0f, r, n, split); regularize && scale != 0.0f) {
        const float share = config_.RegularizationShare(regularization[k], r, n, split);
        if constexpr (kExact) {
          sums[k].Add(share);  // the gradient's share is in its words already
        } else {
          sums[k] += share;
          // The scaled loss holds the regularization too (scale_loss of the total);
          // times 1 without a loss scale, which changes no bit.
          const float loss_scale = config_.precision.dynamic_loss_scale ? replica.loss_scale.scale() : 1.0f;
          model_.AddRegularizationGradient(weights, scale * loss_scale, gradient.grads);
        }
      }
      if constexpr (kExact) {
        result.replica_losses[k] = loss_batches[k] == 0 && config_.empty_replica_nan()
                                       ? std::numeric_limits<float>::quiet_NaN()
                                       : sums[k].ToFloat();
      } else {
        result.replica_losses[k] = sums[k];
        if (!folded_) PackParameters(gradient.grads, gradient.flat);  // folded: added from `grads` directly
        // Its own verdict on overflow (--loss-scale-check first-replica, each-replica),
        // kept while its wave slot is reused.
        if (config_.precision.dynamic_loss_scale)
          replica.local_finite = std::all_of(gradient.grads.begin(), gradient.grads.end(),
                                             [](const Tensor<float>& g) { return AllFinite(g.span()); });
      }
    });
    // Encoded before the check, which then reads the encoding's block bounds instead
    // of every accumulator's last word. (Added to the encoding held: the same words
    // as an accumulated sum's, whose non-finite counts are this micro-batch's, as an
    // earlier one's stopped the step.)
    if constexpr (kExact)
      if (compacted_)
        tbb::parallel_for(wave_begin, wave_end, [&](std::int32_t r) {
          Replica& replica = *Local(r);
          if (adds_to_held) replica.compact.AddTo(slot(r).words);
          replica.compact.Encode(slot(r).words);
        });
    // With a dynamic loss scale a non-finite gradient is an overflow, which the
    // update step handles (ApplyUpdate), not a fault.
    if (!config_.precision.dynamic_loss_scale && non_finite.ok())
      non_finite = CheckReplicaGradients(step, offsets, wave_begin - first, wave_end - first,
                                         [&](std::int32_t k) -> const GradientSlot& { return slot(k + first); });
    if (faults_ == nullptr) DTLAB_RETURN_IF_ERROR(non_finite);
    if (folded_) FoldWaveInto<Word>(wave_begin - first, wave_end - first, adds_to_held);
  }
  DTLAB_RETURN_IF_ERROR(non_finite);
  result.folded = folded_;

  // Every worker needs every replica's loss for strategy.reduce.
  std::vector<std::int64_t> slices(static_cast<std::size_t>(n) + 1);
  std::iota(slices.begin(), slices.end(), 0);
  if constexpr (kExact) DTLAB_RETURN_IF_ERROR(ShareSlices(sums, slices, "the replicas' losses", step));
  DTLAB_RETURN_IF_ERROR(ShareSlices(result.replica_losses, slices, "the replicas' losses", step));
  return sums;
}

template <typename Word>
void Cluster::FoldWaveInto(std::int32_t begin, std::int32_t end, bool adds_to_held) {
  // Fast mode: naive's arithmetic ((g0 + g1) + g2) + ... in replica order, with
  // CombineRange as every transport runs it, so the sum has the naive all-reduce's
  // bits whatever the wave's size; exact mode: integer addition of the words, in any
  // order the same words (and an accumulated step's later micro-batches add to it).
  constexpr bool kExact = std::is_same_v<Word, std::int64_t>;
  Word* sum;
  if constexpr (kExact)
    sum = folded_words_.data();
  else
    sum = replicas_[0].flat.data();
  const bool starts = begin == 0 && !adds_to_held;
  const bool mean = !kExact && config_.mean_across_replicas() && end == static_cast<std::int32_t>(replicas_.size());
  const auto wave = static_cast<std::size_t>(slots_.size());
  // The sum and the wave's gradients as pieces of the flat parameter vector: one
  // piece of words in exact mode, one per variable in fast mode (added from the
  // replicas' unpacked gradients, without packing them first).
  struct Piece {
    Word* sum;
    std::vector<const Word*> sources;
    std::int64_t size;
  };
  std::vector<Piece> pieces;
  if constexpr (kExact) {
    pieces.push_back({sum, {}, static_cast<std::int64_t>(folded_words_.size())});
    for (std::int32_t k = begin; k < end; ++k)
      pieces[0].sources.push_back(slots_[static_cast<std::size_t>(k) % wave].words.data());
  } else {
    std::int64_t offset = 0;
    for (std::size_t p = 0; p < model_.parameters().size(); ++p) {
      const std::int64_t size = folded_grads_[p].size();
      pieces.push_back({sum + offset, {}, size});
      for (std::int32_t k = begin; k < end; ++k)
        pieces.back().sources.push_back(slots_[static_cast<std::size_t>(k) % wave].grads[p].data());
      offset += size;
    }
  }
  constexpr std::int64_t kBlock = 16384;  // elements per task; a multiple of CombineRange's step
  for (Piece& piece : pieces) {
    if (!starts) piece.sources.insert(piece.sources.begin(), piece.sum);
    tbb::parallel_for(std::int64_t{0}, (piece.size + kBlock - 1) / kBlock, [&](std::int64_t block) {
      CombineRange<Word>(
          piece.sources.size(), [&](std::size_t s) { return piece.sources[s]; }, 1,
          [&](std::size_t) { return piece.sum; }, block * kBlock, std::min(piece.size, (block + 1) * kBlock), mean,
          static_cast<Word>(config_.replicas));
    });
  }
}

template <typename LossSum>
float Cluster::ReducedLoss(const std::vector<LossSum>& sums, const std::vector<float>& replica_losses) const {
  // strategy.reduce of the per-replica losses: in replica order, or the exact sum
  // rounded once (a NaN replica loss stays NaN); DDP's MEAN then divides by N.
  float reduced_loss = 0.0f;
  if constexpr (std::is_same_v<LossSum, ExactSum>) {
    ExactSum total;
    for (const ExactSum& l : sums) total.Merge(l);
    reduced_loss = total.ToFloat();
    for (const float l : replica_losses)
      if (std::isnan(l)) reduced_loss = l;
  } else {
    for (const float l : replica_losses) reduced_loss += l;
  }
  if (config_.mean_across_replicas()) reduced_loss /= static_cast<float>(config_.replicas);
  return reduced_loss;
}

template <typename Word>
Status Cluster::ReduceGradients(std::int64_t step) {
  constexpr bool kExact = std::is_same_v<Word, std::int64_t>;
  const bool mean = config_.mean_across_replicas();
  if (folded_) {
    // The waves are already summed (FoldWaveInto): exact mode rounds the words once.
    if constexpr (kExact) {
      RoundWords(folded_words_, replicas_[0].flat);
      if (mean)
        for (float& g : replicas_[0].flat) g /= static_cast<float>(config_.replicas);
    }
    return Status::Ok();
  }
  // The collective. Exact mode moves accumulator words: integer addition makes every
  // algorithm and every grouping give the same words, which are then rounded once.
  // Compactly (the default; a single replica has nothing to send), the rounds hand
  // every replica that rounded sum.
  const bool compact =
      kExact && config_.exact_all_reduce == ExactAllReduce::kCompact && !central() && config_.replicas > 1;
  DTLAB_RETURN_IF_ERROR(compact ? ReduceCompactly(step)
                                : ReduceAcrossReplicas<Word>(mean && !kExact ? ReduceOp::kMean : ReduceOp::kSum, step));
  if constexpr (kExact) {
    const auto holders = static_cast<std::int32_t>(central() ? 1 : replicas_.size());
    tbb::parallel_for(0, holders, [&](std::int32_t r) {
      Replica& replica = replicas_[static_cast<std::size_t>(r)];
      if (!compact && !rounds_in_pass_) RoundWords(replica.words, replica.flat);
      if (mean)
        for (float& g : replica.flat) g /= static_cast<float>(config_.replicas);
    });
  }
  return Status::Ok();
}

template StatusOr<std::vector<float>> Cluster::ComputeReplicas<float>(const StepLayout&,
                                                                      const std::vector<std::int64_t>&,
                                                                      const std::vector<LossCode::LossScale>&,
                                                                      std::int64_t, bool, StepResult&, bool);
template StatusOr<std::vector<ExactSum>> Cluster::ComputeReplicas<std::int64_t>(const StepLayout&,
                                                                                const std::vector<std::int64_t>&,
                                                                                const std::vector<LossCode::LossScale>&,
                                                                                std::int64_t, bool, StepResult&, bool);
template float Cluster::ReducedLoss<float>(const std::vector<float>&, const std::vector<float>&) const;
template float Cluster::ReducedLoss<ExactSum>(const std::vector<ExactSum>&, const std::vector<float>&) const;
template Status Cluster::ReduceGradients<float>(std::int64_t);
template Status Cluster::ReduceGradients<std::int64_t>(std::int64_t);

CollectiveOptions Cluster::Options(std::int64_t step) {
  CollectiveOptions options;
  options.algorithm = config_.all_reduce;
  options.replicas_per_worker = config_.replicas_per_worker();
  options.step = step;
  options.log = &log_;
  options.faults = faults_ != nullptr ? faults_->message_faults() : nullptr;
  return options;
}

template <typename Word>
Status Cluster::ReduceAcrossReplicas(ReduceOp op, std::int64_t step) {
  std::vector<std::span<Word>> buffers;
  for (auto& replica : replicas_) {
    if constexpr (std::is_same_v<Word, float>)
      buffers.emplace_back(replica.flat);
    else
      buffers.emplace_back(replica.words);
  }
  const CollectiveOptions options = Options(step);
  if (group_ != nullptr)
    DTLAB_RETURN_IF_ERROR(group_->AllReduce(buffers, config_.replicas, op, options));
  else if (central())
    Reduce<Word>(buffers, 0, op, options);
  else
    AllReduce<Word>(buffers, op, options);
  const std::string name =
      central() ? "reduce" : "all_reduce/" + std::string(AllReduceAlgorithmName(config_.all_reduce));
  return CollectiveStatus(name, step);
}

Status Cluster::ReduceCompactly(std::int64_t step) {
  // The compact rounds (sim/comm/compact_exact.h) as SUM all-reduces of the chosen
  // algorithm, across the worker group where there is one; each is checked for
  // faults as it ends, so a failed one stops the rest.
  std::vector<std::span<float>> outputs;
  for (Replica& replica : replicas_) outputs.emplace_back(replica.flat);
  const CollectiveOptions options = Options(step);
  const std::string name = "all_reduce/" + std::string(AllReduceAlgorithmName(config_.all_reduce));
  auto sum = [&]<typename T>(std::span<const std::span<T>> buffers) -> Status {
    if (group_ != nullptr)
      DTLAB_RETURN_IF_ERROR(group_->AllReduce(buffers, config_.replicas, ReduceOp::kSum, options));
    else
      AllReduce<T>(buffers, ReduceOp::kSum, options);
    return CollectiveStatus(name, step);
  };
  ExactSumCollectives collectives = SumCollectivesOf(sum);
  if (group_ != nullptr && group_->size() > 1) {
    // Between processes, each decides only its slice of round 2 (ExactSumCollectives::Scattered).
    collectives.scattered = ScatteredOf(
        group_->size(), group_->rank(),
        [&](std::span<const std::span<std::int64_t>> buffers, std::span<const ElementRange> slices,
            OwnSlice own) -> Status {
          DTLAB_RETURN_IF_ERROR(group_->ReduceScatterSlices(buffers, config_.replicas, slices, own, options));
          return CollectiveStatus("reduce_scatter", step);
        },
        [&](auto buffers, std::span<const ElementRange> slices) -> Status {
          DTLAB_RETURN_IF_ERROR(group_->AllGatherSlices(buffers, config_.replicas, slices, options));
          return CollectiveStatus("all_gather", step);
        });
    // Two ranks of one replica each send their encoded high words as they lie.
    if (group_->size() == 2)
      collectives.scattered.high_words = [&](std::span<const std::int64_t> input, std::span<std::int64_t> output,
                                             std::span<const ElementRange> slices) -> Status {
        const std::span<const std::int64_t> inputs[] = {input};
        const std::span<std::int64_t> outputs[] = {output};
        DTLAB_RETURN_IF_ERROR(
            group_->ReduceScatterSlices(outputs, config_.replicas, slices, OwnSlice::kLeftOut, options, inputs));
        return CollectiveStatus("reduce_scatter", step);
      };
  }
  if (compacted_) {
    std::vector<const CompactGradient*> encoded;
    for (const Replica& replica : replicas_) encoded.push_back(&replica.compact);
    return CompactExactAllReduce(encoded, outputs, config_.replicas, collectives, &compact_workspace_).status();
  }
  std::vector<std::span<std::int64_t>> words;
  for (Replica& replica : replicas_) words.emplace_back(replica.words);
  return CompactExactAllReduce(words, outputs, config_.replicas, collectives, &compact_workspace_).status();
}

Status Cluster::CollectiveStatus(const std::string& collective, std::int64_t step) const {
  return faults_ != nullptr ? faults_->CollectiveStatus(collective, step) : Status::Ok();
}

Status Cluster::ApplyUpdate(float learning_rate, std::int64_t step, StepResult& result) {
  // With a dynamic loss scale, who applies the update (docs/mixed_precision.md): every
  // replica, if the gradients that decide (--loss-scale-check) are finite; else it
  // skips the step and halves its scale.
  std::vector<char> apply(replicas_.size(), 1);
  if (config_.precision.dynamic_loss_scale) {
    const bool reduced_finite = AllFinite(replicas_[0].flat);
    for (std::size_t k = 0; k < replicas_.size(); ++k) {
      switch (config_.precision.check) {
        case LossScaleCheck::kReduced:
          apply[k] = reduced_finite;
          break;
        case LossScaleCheck::kFirstReplica:  // TF 2.21: replica 0's own gradients (first_ is 0: no MPI)
          apply[k] = replicas_[0].local_finite;
          break;
        case LossScaleCheck::kEachReplica:
          apply[k] = replicas_[k].local_finite;
          break;
      }
    }
    result.skipped = !apply[0];
    for (std::size_t k = 0; k < replicas_.size(); ++k) replicas_[k].loss_scale.EndStep(apply[k] != 0);
  }
  if (central()) {
    // The host applies the reduced gradient to its copy (folded: the one sum), then
    // broadcasts the variables, where the replicas have buffers for them (folded:
    // none; they read the host's variables, as TensorFlow's do, and nothing is sent).
    if (apply[0]) {
      ParameterList<float>& grads = folded_ ? folded_grads_ : replicas_[0].grads;
      UnpackParameters(replicas_[0].flat, grads);
      ApplyInParallel(*host_optimizer_, host_params_, grads, learning_rate);
    }
    if (!folded_) {
      PackParameters(host_params_, replicas_[0].flat);
      std::vector<std::span<float>> buffers;
      for (auto& replica : replicas_) buffers.emplace_back(replica.flat);
      CollectiveOptions options = Options(step);
      options.algorithm = AllReduceAlgorithm::kRing;
      Broadcast<float>(buffers, 0, options);
      DTLAB_RETURN_IF_ERROR(CollectiveStatus("broadcast", step));
    }
  } else {
    // Mirrored variables: every replica applies the same reduced gradient to its copy
    // (folded: the one sum, unpacked once).
    if (folded_) UnpackParameters(replicas_[0].flat, folded_grads_);
    tbb::parallel_for(std::size_t{0}, replicas_.size(), [&](std::size_t k) {
      if (!apply[k]) return;
      Replica& replica = replicas_[k];
      if (!folded_) UnpackParameters(replica.flat, replica.grads);
      ApplyInParallel(*replica.optimizer, replica.params, folded_ ? folded_grads_ : replica.grads, learning_rate);
      // BatchNormalization's moving statistics: each replica assigns its own copy
      // from its own batch's statistics (Keras's variables are MirroredVariables with
      // aggregation NONE), so unsynchronized layers leave the copies different, and
      // replica 0's is the one read and checkpointed, as in TensorFlow.
      if (runner_.has_batch_norm()) UpdateMovingStatistics(model_, replica.batch_norm, replica.params);
    });
  }
  const std::string where = "step " + std::to_string(step) + ": ";
  if (std::any_of(apply.begin(), apply.end(), [&](char a) { return a != apply[0]; })) {
    std::vector<std::int32_t> skipped, applied;
    for (std::size_t k = 0; k < replicas_.size(); ++k)
      (apply[k] ? applied : skipped).push_back(static_cast<std::int32_t>(k) + first_);
    return Status::Runtime(
        where + "the replicas' mirrored variables diverged: replica(s) " + IdRangesText(skipped) +
        " found their own gradients non-finite and skipped the update (halving their loss scale), while replica(s) " +
        IdRangesText(applied) +
        " applied the all-reduced gradient, which holds that overflow; --loss-scale-check each-replica lets every "
        "replica decide alone, and reduced (every replica checks the all-reduced gradients) keeps them identical");
  }
  if (const std::string bad = NonFiniteVariables(model_, variables()); !bad.empty()) {
    if (config_.precision.dynamic_loss_scale && config_.precision.check == LossScaleCheck::kFirstReplica) {
      std::vector<std::int32_t> overflowed;
      for (std::size_t k = 1; k < replicas_.size(); ++k)
        if (!replicas_[k].local_finite) overflowed.push_back(static_cast<std::int32_t>(k));
      return Status::Runtime(where + "the optimizer update made " + bad +
                             " non-finite: replica 0's gradients were "
                             "finite, so the update applied (--loss-scale-check first-replica: only replica 0's own "
                             "gradients decide, as TF 2.21's LossScaleOptimizer does in a custom training loop), but "
                             "replica(s) " +
                             IdRangesText(overflowed) +
                             " overflowed and the all-reduced gradient holds it; "
                             "--loss-scale-check reduced skips such a step on every replica");
    }
    return Status::Runtime(where + "the optimizer update made " + bad +
                           " non-finite although the reduced gradient was finite; try a smaller --lr");
  }
  return Status::Ok();
}

}  // namespace dtlab
