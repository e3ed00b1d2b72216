// Losses and the tf.distribute loss-scaling helpers, with TensorFlow's semantics.
//
// Sources (docs/semantics.md has the details):
// - SparseCategoricalCrossentropy(from_logits=True): TF's
//   SparseSoftmaxCrossEntropyWithLogits kernel: shift by the row max, loss =
//   log(sum(exp(shifted))) - shifted[label], gradient (softmax - onehot) * upstream.
// - compute_average_loss (tensorflow/python/ops/nn_impl_distribute.py):
//   div_no_nan(sum(loss * w), d), d = global_batch_size if given, else
//   local_batch * num_replicas_in_sync.
// - scale_regularization_loss: sum(r) / num_replicas_in_sync.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace dtlab {

/// Keras loss reductions (tf.keras.losses.Reduction).
enum class LossReduction { kNone, kSum, kAuto, kSumOverBatchSize };

/// Parses "none", "sum", "auto", "sum_over_batch_size" (case-insensitive).
StatusOr<LossReduction> ParseLossReduction(std::string_view name);
std::string_view LossReductionName(LossReduction reduction);

/// Which Keras the loss object comes from: Keras 3 (tf.keras since TF 2.16, the
/// default) or Keras 2 (tf.keras up to TF 2.15; tf_keras with TF_USE_LEGACY_KERAS=1).
enum class KerasVersion { k2, k3 };
/// Parses "2" or "3".
StatusOr<KerasVersion> ParseKerasVersion(std::string_view name);
std::string_view KerasVersionName(KerasVersion version);

/// Whether a loss object with `reduction` may be called inside strategy.run, with
/// each Keras's own words when it may not:
/// - Keras 3 (keras/src/losses/loss.py): NONE, SUM and SUM_OVER_BATCH_SIZE run;
///   AUTO is not a reduction at all ("Invalid value for argument `reduction`").
///   SUM_OVER_BATCH_SIZE then divides by the local batch and scales by
///   1/num_replicas_in_sync (scale_loss_for_distribution): see LossCode::LossScale (sim/engines/loss_code.h).
/// - Keras 2 (losses_utils): AUTO and SUM_OVER_BATCH_SIZE raise the ValueError
///   "Please use `tf.keras.losses.Reduction.SUM` or ... NONE" outside fit().
Status CheckReductionForCustomLoop(LossReduction reduction, KerasVersion keras);

/// Per-example sparse categorical cross-entropy from logits [B, C].
/// Writes losses[i] = logsumexp(z_i) - z_i[label_i]. If `dlogits` is not null,
/// also writes dL/dz_i = coefficients[i] * (softmax(z_i) - onehot(label_i)), where
/// coefficients[i] = dL/dlosses[i] (e.g. w_i / global_batch_size).
/// In float, row by row with core/portable_math.h's Exp and Log, so the bits are
/// the same on every platform, in fast and exact mode alike (docs/exact.md); in
/// double (the tests' references) with the C library's exp and log.
/// REQUIRES: labels in [0, C); losses.size() == B; coefficients.size() == B if dlogits.
template <typename T>
void SparseCategoricalCrossentropyFromLogits(const Tensor<T>& logits, std::span<const std::int32_t> labels,
                                             std::span<T> losses, std::span<const T> coefficients, Tensor<T>* dlogits);

/// Applies a Keras reduction to per-example losses (weighted by `sample_weight`
/// when not empty): NONE returns the weighted losses, SUM their sum (one value),
/// AUTO and SUM_OVER_BATCH_SIZE the sum divided by the number of examples (one
/// value; div_no_nan), which is what Keras' fit() uses and custom loops must not
/// (see CheckReductionForCustomLoop).
template <typename T>
std::vector<T> ApplyLossReduction(std::span<const T> per_example_loss, std::span<const T> sample_weight,
                                  LossReduction reduction);

/// Index of the largest logit of each row (first on ties, as tf.argmax).
template <typename T>
void ArgmaxRows(const Tensor<T>& logits, std::span<std::int32_t> predictions);

/// The denominator compute_average_loss divides by: `global_batch_size` if given,
/// else local_batch * num_replicas_in_sync (TF's default, a per-replica quantity).
/// The loss code's denominator rules (sim/engines/loss_code.h, ReplicaDenominator) use it.
inline std::int64_t AverageLossDenominator(std::int64_t local_batch, std::optional<std::int64_t> global_batch_size,
                                           int num_replicas_in_sync) {
  return global_batch_size ? *global_batch_size : local_batch * num_replicas_in_sync;
}

/// TF's div_no_nan: x / y, or 0 when y == 0.
template <typename T>
T DivNoNan(T x, T y) {
  return y == T(0) ? T(0) : x / y;
}

/// compute_average_loss: div_no_nan(sum_i loss_i * w_i, d), summed in index order.
/// `sample_weight` may be empty (all ones).
template <typename T>
T ComputeAverageLoss(std::span<const T> per_example_loss, std::span<const T> sample_weight, std::int64_t denominator);

/// dL/dloss_i of ComputeAverageLoss, as TF's autodiff computes it:
/// div_no_nan(upstream, d) * w_i.
template <typename T>
void AverageLossCoefficients(std::span<const T> sample_weight, std::int64_t batch, std::int64_t denominator, T upstream,
                             std::span<T> coefficients);

/// scale_regularization_loss: r / num_replicas_in_sync.
template <typename T>
T ScaleRegularizationLoss(T regularization_loss, int num_replicas_in_sync) {
  return regularization_loss / static_cast<T>(num_replicas_in_sync);
}

}  // namespace dtlab
