// Gradient accumulation in the synchronous engine (sim/engines/accumulation.h): one
// optimizer step over K micro-batches, and the epoch that groups its micro-batches.
//
// Each micro-batch runs the plain step's compute (Cluster::ComputeReplicas) with the
// coefficients of the rule in force; each replica adds the micro-batch's gradient to
// its own sum, in micro-batch order (exact mode: its accumulator words, integer
// addition; where the replicas compute in waves, Cluster::CompactsGradients, its
// encoded gradient, added into the wave's slot and encoded again; where the exact
// cluster folds, one folded sum takes every replica's micro-batches), and the
// replicas reduce once per optimizer step, as Keras's TF backend does (its
// accumulators are per-replica variables, all-reduced only on the update step) and
// as DDP's no_sync does. The regularization joins once per step under the global
// rule (the weights do not change inside a step), with every micro-batch under keras
// (each micro-batch's loss holds it, and the update divides by K).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include <tbb/parallel_for.h>

#include "core/batch.h"
#include "core/loss.h"
#include "sim/engines/cluster.h"

namespace dtlab {
namespace {

// sum = part (first) or sum += part, element by element: float addition in
// micro-batch order, or integer addition of accumulator words.
template <typename T, typename Allocator>
void AddInto(const std::vector<T, Allocator>& part, bool first, std::vector<T, Allocator>& sum) {
  if (first) {
    sum.assign(part.begin(), part.end());
    return;
  }
  for (std::size_t i = 0; i < part.size(); ++i) sum[i] += part[i];
}

}  // namespace

template <typename Word>
StatusOr<float> Cluster::AccumulateGroup(const ImageDataset& data, std::span<const ReplicaBatches* const> group,
                                         std::int64_t global_batch_size, std::int64_t step, StepResult& result) {
  constexpr bool kExact = std::is_same_v<Word, std::int64_t>;
  const GradientAccumulation& accumulation = config_.accumulation;
  const bool keras = accumulation.keras();
  const std::int32_t n = config_.replicas;
  const auto replicas = static_cast<std::size_t>(n);
  const std::int64_t loss_global_batch = accumulation.LossGlobalBatch(global_batch_size);

  // Under the global rule each replica's loss code sees its examples of the whole
  // group as its local batch (one step of K x G); under keras, each micro-batch's own.
  std::vector<std::int64_t> totals(replicas, 0);
  for (const ReplicaBatches* micro : group) {
    if (micro->size() != replicas)
      return Status::InvalidArgument("the distributed batch has " + std::to_string(micro->size()) +
                                     " replica batches for " + std::to_string(n) + " replicas");
    for (std::size_t r = 0; r < replicas; ++r) totals[r] += static_cast<std::int64_t>((*micro)[r].size());
  }
  if (!keras) DTLAB_RETURN_IF_ERROR(config_.CheckEmptyReplicas(totals, step));
  result.replica_batch_sizes = totals;
  result.replica_losses.assign(replicas, 0.0f);
  for (const std::int64_t b : totals) result.examples += b;

  // How much an example weighs in one device's step on the whole group, and what
  // divides the update after the coefficients: K under keras, N for DDP's MEAN.
  const LossCode::LossScale reference = config_.ReplicaLossScale(result.examples, loss_global_batch, 1);
  const double reference_weight =
      reference.denominator > 0 ? static_cast<double>(reference.factor) / static_cast<double>(reference.denominator)
                                : 0;
  const double divisor =
      (keras ? static_cast<double>(accumulation.steps) : 1.0) * (config_.mean_across_replicas() ? n : 1);

  std::vector<ReplicaLossSum<Word>> loss_sums(replicas);
  std::vector<char> nan_loss(replicas, 0);
  group_indices_.clear(), group_sizes_.clear(), group_losses_.clear();
  for (std::size_t k = 0; k < group.size(); ++k) {
    DTLAB_ASSIGN_OR_RETURN(const StepLayout layout, GatherStep(data, *group[k]));
    const std::vector<std::int64_t>& loss_batches = keras ? layout.batch_sizes : totals;
    std::vector<LossCode::LossScale> scales(replicas);
    for (std::size_t r = 0; r < replicas; ++r) {
      scales[r] = config_.ReplicaLossScale(loss_batches[r], loss_global_batch, n);
      AverageLossCoefficients<float>(
          {}, layout.batch_sizes[r], scales[r].denominator, scales[r].factor,
          std::span(coefficients_)
              .subspan(static_cast<std::size_t>(layout.offsets[r]), static_cast<std::size_t>(layout.batch_sizes[r])));
    }
    if (keras) DTLAB_RETURN_IF_ERROR(config_.CheckEmptyReplicas(layout.batch_sizes, step));
    StepResult micro;
    micro.replica_losses.assign(replicas, 0.0f);
    // Each local replica adds this micro-batch's gradient to its sum: its words', or,
    // where the cluster compacts, its encoding's, and where it folds, the one sum
    // (ComputeReplicas adds to those two).
    DTLAB_ASSIGN_OR_RETURN(const auto sums,
                           ComputeReplicas<Word>(layout, loss_batches, scales, step, keras || k == 0, micro, k > 0));
    if (!compacted_ && !folded_)
      tbb::parallel_for(std::size_t{0}, replicas_.size(), [&](std::size_t local) {
        Replica& replica = replicas_[local];
        if constexpr (kExact)
          AddInto(replica.words, k == 0, replica.accumulated_words);
        else
          AddInto(replica.flat, k == 0, replica.accumulated);
      });
    for (std::size_t r = 0; r < replicas; ++r) {
      if constexpr (kExact) {
        loss_sums[r].Merge(sums[r]);
        nan_loss[r] |= std::isnan(micro.replica_losses[r]) ? 1 : 0;
      } else {
        loss_sums[r] = k == 0 ? micro.replica_losses[r] : loss_sums[r] + micro.replica_losses[r];
      }
    }
    DTLAB_RETURN_IF_ERROR(ShareExamplesAndCount(layout, step));
    if (reference_weight > 0)
      for (const float c : coefficients_)
        result.max_example_weight = std::max(result.max_example_weight, c / divisor / reference_weight);
    if (reference_ != nullptr) {
      group_indices_.insert(group_indices_.end(), layout.indices.begin(), layout.indices.end());
      group_sizes_.insert(group_sizes_.end(), layout.batch_sizes.begin(), layout.batch_sizes.end());
      group_losses_.insert(group_losses_.end(), losses_.begin(), losses_.end());
    }
  }

  // The group's gradient, ready for the collective. Fast mode under keras divides
  // each replica's sum by K before it, as Keras's _backend_apply_gradients computes
  // (g + acc_g) / steps in the replica context before _all_reduce_sum_gradients;
  // exact mode divides the words' one rounding afterwards.
  const auto steps = static_cast<float>(accumulation.steps);
  tbb::parallel_for(std::size_t{0}, replicas_.size(), [&](std::size_t local) {
    Replica& replica = replicas_[local];
    if constexpr (kExact) {
      if (compacted_ || folded_) return;  // the encodings, or the folded words, hold the sums
      replica.words.swap(replica.accumulated_words);
      ExactNormalizeAll(replica.words);  // K sums of normalized words: back to the form the collective takes
    } else {
      replica.flat.swap(replica.accumulated);
      if (keras)
        for (float& g : replica.flat) g /= steps;
    }
  });
  for (std::size_t r = 0; r < replicas; ++r) {
    if constexpr (kExact) {
      const bool nan = keras ? nan_loss[r] != 0 : totals[r] == 0 && config_.empty_replica_nan();
      result.replica_losses[r] = nan ? std::numeric_limits<float>::quiet_NaN() : loss_sums[r].ToFloat();
    } else {
      result.replica_losses[r] = loss_sums[r];
    }
  }
  result.folded = folded_;
  float loss = ReducedLoss(loss_sums, result.replica_losses);
  DTLAB_RETURN_IF_ERROR(ReduceGradients<Word>(step));
  if (keras) {
    loss /= steps;
    for (float& l : result.replica_losses) l /= steps;
    if constexpr (kExact) {
      const std::size_t holders = central() ? 1 : replicas_.size();
      tbb::parallel_for(std::size_t{0}, holders, [&](std::size_t local) {
        for (float& g : replicas_[local].flat) g /= steps;
      });
    }
  }
  return loss;
}

StatusOr<StepResult> Cluster::TrainAccumulatedStep(const ImageDataset& data,
                                                   std::span<const ReplicaBatches* const> group,
                                                   std::int64_t global_batch_size, float learning_rate,
                                                   std::int64_t step, ParameterList<float>* reduced_gradient) {
  const GradientAccumulation& accumulation = config_.accumulation;
  if (group.empty() || static_cast<std::int64_t>(group.size()) > accumulation.steps)
    return Status::InvalidArgument("an optimizer step of " + std::to_string(group.size()) +
                                   " micro-batches with --accumulation-steps " + std::to_string(accumulation.steps));
  StepResult result;
  DTLAB_ASSIGN_OR_RETURN(result.loss, config_.math == MathMode::kExact
                                          ? AccumulateGroup<std::int64_t>(data, group, global_batch_size, step, result)
                                          : AccumulateGroup<float>(data, group, global_batch_size, step, result));
  CopyReducedGradient(reduced_gradient);
  if (reference_ != nullptr) {
    // One device on every example of the step, with the step's global batch K x G.
    GatherBatch(data, group_indices_, images_, labels_);
    ReferenceStep::Distributed distributed = ReferenceInput(result, group_losses_, group_sizes_, group_indices_,
                                                            accumulation.steps * global_batch_size, step);
    distributed.micro_batches = static_cast<std::int64_t>(group.size());
    if (accumulation.keras()) {
      distributed.divided_by_micro_batches = true;
      char weight[32];
      std::snprintf(weight, sizeof weight, "%.3g", result.max_example_weight);
      distributed.mismatch_cause =
          ": Keras's gradient_accumulation_steps applies the mean of the " + std::to_string(accumulation.steps) +
          " micro-batches' gradients, each micro-batch's loss divided by its own batch: a mean of means, in which "
          "an example weighs up to " +
          weight + "x its share of one step on the whole group; --accumulation global divides by the whole step";
    }
    result.check = reference_->Check(config_, config_.math, distributed);
  }
  DTLAB_RETURN_IF_ERROR(ApplyUpdate(learning_rate, step, result));
  return result;
}

StatusOr<EpochOutcome> Cluster::TrainAccumulatedEpoch(const EpochRequest& request,
                                                      const std::function<Status(const EngineStep&)>& on_step) {
  const GradientAccumulation& accumulation = config_.accumulation;
  const EpochBatches& micro = *request.batches;
  const auto micro_batches = static_cast<std::int64_t>(micro.size());
  const std::int64_t k = accumulation.steps;
  // Under keras the epoch's first group completes the micro-batches the last one left.
  const auto carried = static_cast<std::int64_t>(carried_.size());
  const std::int64_t steps_in_epoch = accumulation.StepsInEpoch(micro_batches, carried, request.drop_remainder);
  auto micro_batch = [&](std::int64_t m) -> const ReplicaBatches* {  // m < 0: a carried one
    return m < 0 ? &carried_[static_cast<std::size_t>(m + carried)] : &micro[static_cast<std::size_t>(m)];
  };
  std::vector<const ReplicaBatches*> group;
  ReplicaBatches batch;  // the step's examples, per replica, over its micro-batches
  DTLAB_ASSIGN_OR_RETURN(const EpochOutcome outcome,
                         RunEpoch(
                             request, steps_in_epoch,
                             [&](std::int64_t index, std::int64_t step, ParameterList<float>* reduced_gradient,
                                 const ReplicaBatches** step_batch) -> StatusOr<StepResult> {
                               group.clear();
                               const std::int64_t begin = index * k - carried;
                               for (std::int64_t m = begin; m < std::min(begin + k, micro_batches); ++m)
                                 group.push_back(micro_batch(m));
                               batch.assign(static_cast<std::size_t>(config_.replicas), {});
                               for (const ReplicaBatches* part : group)
                                 for (std::size_t r = 0; r < batch.size(); ++r)
                                   batch[r].insert(batch[r].end(), (*part)[r].begin(), (*part)[r].end());
                               *step_batch = &batch;
                               return TrainAccumulatedStep(*request.data, group, request.global_batch,
                                                           request.learning_rate, step, reduced_gradient);
                             },
                             on_step));
  if (accumulation.keras() && !outcome.stopped && outcome.step_in_epoch == steps_in_epoch) {
    std::vector<ReplicaBatches> left;  // what the epoch's last group lacks: carried into the next
    for (std::int64_t m = steps_in_epoch * k - carried; m < micro_batches; ++m) left.push_back(*micro_batch(m));
    carried_ = std::move(left);
  }
  return outcome;
}

}  // namespace dtlab
