#include "core/loss.h"

#include "core/enum_names.h"
#include "core/portable_math.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <type_traits>

namespace dtlab {

namespace {
constexpr NameTable<LossReduction, 4> kReductions = {{
    {"none", LossReduction::kNone},
    {"sum", LossReduction::kSum},
    {"auto", LossReduction::kAuto},
    {"sum_over_batch_size", LossReduction::kSumOverBatchSize},
}};
constexpr NameTable<KerasVersion, 2> kKerasVersions = {{
    {"3", KerasVersion::k3},
    {"2", KerasVersion::k2},
}};
}  // namespace

StatusOr<LossReduction> ParseLossReduction(std::string_view name) {
  return ParseEnumName(name, kReductions, "loss reduction");
}

std::string_view LossReductionName(LossReduction reduction) { return EnumName(reduction, kReductions); }

StatusOr<KerasVersion> ParseKerasVersion(std::string_view name) {
  return ParseEnumName(name, kKerasVersions, "Keras version");
}

std::string_view KerasVersionName(KerasVersion version) { return EnumName(version, kKerasVersions); }

Status CheckReductionForCustomLoop(LossReduction reduction, KerasVersion keras) {
  if (reduction == LossReduction::kNone || reduction == LossReduction::kSum) return Status::Ok();
  if (keras == KerasVersion::k3) {
    if (reduction == LossReduction::kSumOverBatchSize) return Status::Ok();
    return Status::InvalidArgument(
        "Invalid value for argument `reduction`. Expected one of {'mean', 'mean_with_sample_weight', 'none', 'sum', "
        "'sum_over_batch_size', None}. Received: reduction=auto (Keras 3 has no AUTO reduction; Keras 2, "
        "--keras 2, had one and refused it under a strategy)");
  }
  return Status::InvalidArgument(
      "Please use `tf.keras.losses.Reduction.SUM` or `tf.keras.losses.Reduction.NONE` for loss reduction when "
      "losses are used with `tf.distribute.Strategy`, except for specifying losses in `Model.compile()` for use by "
      "the built-in training looop `Model.fit()` (Keras 2's ValueError, quoted as it is spelled). Reduction " +
      std::string(LossReductionName(reduction)) +
      " divides by the per-replica batch size. Use reduction none and compute_average_loss(per_example_loss, "
      "global_batch_size=...); Keras 3 (--keras 3) runs sum_over_batch_size instead.");
}

template <typename T>
void SparseCategoricalCrossentropyFromLogits(const Tensor<T>& logits, std::span<const std::int32_t> labels,
                                             std::span<T> losses, std::span<const T> coefficients, Tensor<T>* dlogits) {
  const std::int64_t batch = logits.dim(0), classes = logits.dim(1);
  if (dlogits) dlogits->Resize(logits.shape());
  if constexpr (std::is_same_v<T, float>) {
    for (std::int64_t i = 0; i < batch; ++i) {
      const auto k = static_cast<std::size_t>(i);
      portable::SoftmaxCrossEntropyRow(logits.data() + i * classes, static_cast<int>(classes), labels[k],
                                       dlogits ? coefficients[k] : 0.0f, &losses[k],
                                       dlogits ? dlogits->data() + i * classes : nullptr);
    }
    return;
  }
  for (std::int64_t i = 0; i < batch; ++i) {
    const T* z = logits.data() + i * classes;
    T max = z[0];
    for (std::int64_t c = 1; c < classes; ++c) max = std::max(max, z[c]);
    T sum = 0;
    for (std::int64_t c = 0; c < classes; ++c) sum += std::exp(z[c] - max);
    const std::int32_t label = labels[static_cast<std::size_t>(i)];
    losses[static_cast<std::size_t>(i)] = std::log(sum) - (z[label] - max);
    if (!dlogits) continue;
    T* g = dlogits->data() + i * classes;
    const T coefficient = coefficients[static_cast<std::size_t>(i)];
    for (std::int64_t c = 0; c < classes; ++c) {
      const T softmax = std::exp(z[c] - max) / sum;
      g[c] = coefficient * (c == label ? softmax - T(1) : softmax);
    }
  }
}

template <typename T>
std::vector<T> ApplyLossReduction(std::span<const T> per_example_loss, std::span<const T> sample_weight,
                                  LossReduction reduction) {
  std::vector<T> weighted(per_example_loss.begin(), per_example_loss.end());
  if (!sample_weight.empty())
    for (std::size_t i = 0; i < weighted.size(); ++i) weighted[i] *= sample_weight[i];
  if (reduction == LossReduction::kNone) return weighted;
  T sum = 0;
  for (const T v : weighted) sum += v;
  if (reduction == LossReduction::kSum) return {sum};
  return {DivNoNan(sum, static_cast<T>(weighted.size()))};
}

template <typename T>
void ArgmaxRows(const Tensor<T>& logits, std::span<std::int32_t> predictions) {
  const std::int64_t batch = logits.dim(0), classes = logits.dim(1);
  for (std::int64_t i = 0; i < batch; ++i) {
    const T* z = logits.data() + i * classes;
    std::int32_t best = 0;
    for (std::int64_t c = 1; c < classes; ++c)
      if (z[c] > z[best]) best = static_cast<std::int32_t>(c);
    predictions[static_cast<std::size_t>(i)] = best;
  }
}

template <typename T>
T ComputeAverageLoss(std::span<const T> per_example_loss, std::span<const T> sample_weight, std::int64_t denominator) {
  T sum = 0;
  for (std::size_t i = 0; i < per_example_loss.size(); ++i)
    sum += sample_weight.empty() ? per_example_loss[i] : per_example_loss[i] * sample_weight[i];
  return DivNoNan(sum, static_cast<T>(denominator));
}

template <typename T>
void AverageLossCoefficients(std::span<const T> sample_weight, std::int64_t batch, std::int64_t denominator, T upstream,
                             std::span<T> coefficients) {
  const T scale = DivNoNan(upstream, static_cast<T>(denominator));
  for (std::int64_t i = 0; i < batch; ++i) {
    const auto k = static_cast<std::size_t>(i);
    coefficients[k] = sample_weight.empty() ? scale : scale * sample_weight[k];
  }
}

#define DTLAB_INSTANTIATE_LOSS(T)                                                                           \
  template void SparseCategoricalCrossentropyFromLogits<T>(const Tensor<T>&, std::span<const std::int32_t>, \
                                                           std::span<T>, std::span<const T>, Tensor<T>*);   \
  template void ArgmaxRows<T>(const Tensor<T>&, std::span<std::int32_t>);                                   \
  template std::vector<T> ApplyLossReduction<T>(std::span<const T>, std::span<const T>, LossReduction);     \
  template T ComputeAverageLoss<T>(std::span<const T>, std::span<const T>, std::int64_t);                   \
  template void AverageLossCoefficients<T>(std::span<const T>, std::int64_t, std::int64_t, T, std::span<T>);
DTLAB_INSTANTIATE_LOSS(float)
DTLAB_INSTANTIATE_LOSS(double)

}  // namespace dtlab
