// LossCode: the loss a training loop's replica computes, as one value. Every engine
// reads it (Cluster in fast and exact mode, the one-device reference, the parameter
// server's workers), `dtlab check` and scenario loss_case checks turn its built-in
// codes into property tests, and the names of its choices are the ones `dtlab train`
// flags and scenario files' [loss] keys take.
//
// For each replica it says:
//  - the coefficient of each per-example loss: div_no_nan(factor, denominator), from
//    the convention (TF or PyTorch DDP), the denominator compute_average_loss uses,
//    the loss object's reduction and Keras version (Keras 3's sum_over_batch_size
//    scales by 1/num_replicas_in_sync) and what an empty replica's loss is;
//  - its share of the regularization loss (scale_regularization_loss's 1/N, the
//    exact split, or the whole of it);
//  - how the replicas' gradients and losses combine (SUM, or MEAN for DDP);
//  - the loss as TF code, and, beside it, why a step that used it failed the
//    reference check (the pitfalls the lessons teach).
//
// Adding a denominator rule means a LossDenominator value, its name in
// loss_code.cc's table and its case in ReplicaDenominator (and the docs).
//
// Thread safety: a value; const methods may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/loss.h"
#include "core/math_mode.h"
#include "core/status.h"

namespace dtlab {

/// How replicas combine their losses.
enum class Convention {
  kTf,   // each replica scales its loss (compute_average_loss); gradients SUM all-reduced
  kDdp,  // each replica takes its local mean (PyTorch DDP); gradients MEAN all-reduced
};
StatusOr<Convention> ParseConvention(std::string_view name);
std::string_view ConventionName(Convention convention);

/// The denominator a replica divides its summed per-example losses by (TF convention).
enum class LossDenominator {
  kDefault,     // compute_average_loss(l): local batch x num_replicas_in_sync
  kGlobal,      // compute_average_loss(l, global_batch_size=G): the configured global batch
  kPerReplica,  // tf.reduce_mean(l): the local batch (the classic pitfall)
};
StatusOr<LossDenominator> ParseLossDenominator(std::string_view name);
std::string_view LossDenominatorName(LossDenominator denominator);

/// How the regularization loss is shared among the replicas (docs/exact.md).
enum class RegularizationSplit {
  kTf,     // scale_regularization_loss: every replica adds r / N (inexact when N is not a power of two)
  kExact,  // replica 0 adds r, the others nothing: the total is exactly r for any N
};
StatusOr<RegularizationSplit> ParseRegularizationSplit(std::string_view name);
std::string_view RegularizationSplitName(RegularizationSplit split);

/// Whether each replica scales the regularization loss by 1/N (scale_regularization_loss).
enum class RegularizationScaling {
  kScaled,    // scale_regularization_loss(r) = r / N on each replica; the SUM gives r
  kUnscaled,  // each replica adds r itself (the pitfall): the SUM gives N x r, N times the weight decay
};
StatusOr<RegularizationScaling> ParseRegularizationScaling(std::string_view name);
std::string_view RegularizationScalingName(RegularizationScaling scaling);

/// What compute_average_loss does for a replica with no examples under the default
/// denominator (local batch x N = 0).
enum class EmptyReplicaLoss {
  kZero,   // TF 2.13 and later: assert_non_negative, then div_no_nan: the replica's loss is 0
  kError,  // TF 2.12 and before: assert_positive raises InvalidArgumentError "global_batch_size must be positive."
};
StatusOr<EmptyReplicaLoss> ParseEmptyReplicaLoss(std::string_view name);
std::string_view EmptyReplicaLossName(EmptyReplicaLoss behaviour);

/// The denominator replica r uses: `local_batch` examples on this replica,
/// `global_batch_size` the configured global batch, `num_replicas` in sync.
std::int64_t ReplicaDenominator(LossDenominator rule, std::int64_t local_batch, std::int64_t global_batch_size,
                                std::int32_t num_replicas);

struct LossCode {
  Convention convention = Convention::kTf;
  LossDenominator denominator = LossDenominator::kGlobal;  // the tutorial passes global_batch_size
  /// Unset: kExact in exact mode (so N replicas equal one device), kTf in fast mode.
  std::optional<RegularizationSplit> regularization_split;
  RegularizationScaling regularization_scaling = RegularizationScaling::kScaled;
  EmptyReplicaLoss empty_replica = EmptyReplicaLoss::kZero;
  LossReduction reduction = LossReduction::kNone;
  KerasVersion keras = KerasVersion::k3;

  /// InvalidArgument for a reduction the chosen Keras refuses in custom loops
  /// (CheckReductionForCustomLoop).
  Status Validate() const;

  bool ddp() const { return convention == Convention::kDdp; }
  /// Keras 3's sum_over_batch_size loss object replaces compute_average_loss.
  bool keras3_mean() const {
    return convention == Convention::kTf && reduction == LossReduction::kSumOverBatchSize && keras == KerasVersion::k3;
  }
  /// An empty replica's loss is NaN: tf.reduce_mean of no values is 0/0.
  bool empty_replica_nan() const {
    return convention == Convention::kTf && !keras3_mean() && denominator == LossDenominator::kPerReplica;
  }
  RegularizationSplit split(MathMode math) const {
    return regularization_split.value_or(math == MathMode::kExact ? RegularizationSplit::kExact
                                                                  : RegularizationSplit::kTf);
  }

  /// How a replica with `local_batch` examples turns the sum of its per-example
  /// losses into its loss: div_no_nan(sum, denominator) * factor, and so each
  /// example's coefficient is div_no_nan(factor, denominator) (TF's autodiff).
  struct LossScale {
    std::int64_t denominator = 1;
    float factor = 1.0f;  // 1/N for Keras 3's sum_over_batch_size (scale_loss_for_distribution)
  };
  /// `num_replicas` is num_replicas_in_sync: the cluster's N, or 1 for the
  /// one-device reference and for a parameter-server worker.
  LossScale ReplicaLossScale(std::int64_t local_batch, std::int64_t global_batch_size, std::int32_t num_replicas) const;
  /// Writes each of the replica's examples' coefficient (dL/dloss_i) into `coefficients`
  /// (local_batch values) and returns the scale.
  LossScale ReplicaCoefficients(std::int64_t local_batch, std::int64_t global_batch_size, std::int32_t num_replicas,
                                std::span<float> coefficients) const;
  /// The replica's data loss from its per-example losses, as float math computes it:
  /// NaN for an empty replica when empty_replica_nan().
  float ReplicaDataLoss(std::span<const float> per_example_loss, const LossScale& scale) const;

  /// Replica `replica`'s share of the regularization loss `r` with `num_replicas`
  /// in sync and the regularization split `split`: r (DDP and the unscaled pitfall
  /// add the whole of it on every replica), r / N (scale_regularization_loss), or r
  /// on replica 0 and 0 on the others (the exact split). Its share of the
  /// regularization gradient is RegularizationShare(1, ...).
  template <typename T>
  T RegularizationShare(T r, std::int32_t replica, std::int32_t num_replicas, RegularizationSplit split) const {
    if (ddp() || regularization_scaling == RegularizationScaling::kUnscaled) return r;
    if (split == RegularizationSplit::kTf) return ScaleRegularizationLoss(r, num_replicas);
    return replica == 0 ? r : T(0);
  }

  /// True when the replicas' gradients and losses are averaged (DDP's MEAN) rather
  /// than summed (strategy.reduce(SUM)).
  bool mean_across_replicas() const { return ddp(); }

  /// Before TF 2.13, compute_average_loss without global_batch_size asserted that
  /// local batch x N was positive: Runtime with TF's error if a replica of
  /// `batch_sizes` is empty under that code.
  Status CheckEmptyReplicas(std::span<const std::int64_t> batch_sizes, std::int64_t step) const;

  /// A few words for a table's "loss code" column: "ddp mean", or the denominator's
  /// name and the choices that differ from the tutorial's ("per-replica, unscaled reg.").
  std::string ShortName() const;

  /// Why the loss became NaN when replica `replica` had no examples under
  /// tf.reduce_mean (empty_replica_nan()), as a clause starting with ": ".
  static std::string EmptyReplicaNanCause(std::size_t replica);

  /// The per-replica loss as TF code, e.g. "compute_average_loss(per_example_loss,
  /// global_batch_size=256) + scale_regularization_loss(l2 * sum(kernel^2))".
  std::string LossCodeText(std::int64_t global_batch_size) const;

  /// Why a fast-mode step with `n` replicas failed the reference check, as a clause
  /// starting with ": " (empty when no known pitfall explains it). `n_times`: the
  /// gradients are about n times the reference's; `regularized`: the model's l2 is not 0.
  std::string FastMismatchCause(std::int32_t n, bool n_times, bool regularized) const;
  /// The same for exact mode, whose check is bitwise; `split` is the split in force.
  std::string ExactMismatchCause(std::int32_t n, RegularizationSplit split, bool regularized) const;
};

/// A loss code `dtlab check` and scenario loss_case checks know by name.
struct NamedLossCode {
  std::string_view name;
  LossCode code;
  /// Per-pixel losses (H*W per example) are divided by H*W before the denominator,
  /// as their mean over pixels; false: only the denominator divides (the pitfall).
  bool divides_by_pixels = true;
  /// Per-pixel label shapes are part of the check's random cases.
  bool per_pixel_cases = false;
};

/// The built-in codes: correct, per-replica-mean, default-denominator,
/// unscaled-regularization, per-pixel-without-hw.
const std::vector<NamedLossCode>& NamedLossCodes();
/// The named code, or InvalidArgument listing the names.
StatusOr<NamedLossCode> FindNamedLossCode(std::string_view name);

}  // namespace dtlab
