// BatchNormalization: Keras's layer over the last axis (channels), with its
// training-mode batch statistics and its moving statistics.
//
// Parameters, in Keras's order: gamma (`scale`, ones), beta (`center`, zeros), then
// the non-trainable moving_mean (zeros) and moving_variance (ones). In training
// steps the layer normalizes with the batch's statistics; otherwise (evaluation,
// inference) with the moving ones. The output is TensorFlow's
// tf.nn.batch_normalization, in float:
//     inv = gamma * (1 / sqrt(variance + epsilon)),  y = x * inv + (beta - mean * inv).
//
// The statistics are order-free sums (docs/models.md, "BatchNormalization"): over the
// n values of a channel (examples x positions) of the examples the layer normalizes
// over, S1 = sum x and S2 = sum x^2, where each example's sum over its positions is a
// double chain in position order (a function of the example alone: x^2 is exact in
// double) and the sum over examples is an exact accumulator (core/exact_sum.h). So
// they do not depend on how those examples are split into chunks or replicas; mean =
// S1 / n and variance = max(S2 / n - mean^2, 0) are computed in double from them and
// rounded to float once. The backward pass needs two more such sums, B1 = sum dy and
// B2 = sum dy * (x - mean), and gives
//     dx = inv * (dy - B1 / n - (x - mean) * B2 / (n (variance + epsilon))),
// the gradient of the formula above through the mean and the variance. Because all
// four sums are order-free, an example's values depend only on the examples it is
// normalized with, never on their order: a synchronized layer (Keras's
// synchronized=True) whose sums are all-reduced across replicas gives every example
// the bits one device gives it on the global batch; an unsynchronized one (Keras's
// default) normalizes each replica's examples by that replica's statistics, so a
// distributed run differs from one device, as it does in TensorFlow.
//
// Who computes the statistics: a runner that splits a batch into chunks
// (sim/compute/batch_runner.h) sums the chunks' partial sums (AddForwardSums,
// AddBackwardSums), all-reduces them when the layer is synchronized, and hands the
// result to the layer through ForwardContext::batch_norm. Without it, the layer
// computes them over the batch it is given (the whole batch in one call).
//
// Thread safety: as Layer.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/layer.h"
#include "core/model.h"

namespace dtlab {

/// The configuration of a BatchNormalization layer (Keras's defaults).
struct BatchNormConfig {
  double momentum = 0.99;
  double epsilon = 1e-3;
  bool center = true;  // beta
  bool scale = true;   // gamma
  bool synchronized = false;
};

template <typename T>
class BatchNormalization final : public Layer<T> {
 public:
  BatchNormalization(std::string name, BatchNormConfig config) : Layer<T>(std::move(name)), config_(config) {}

  std::string_view kind() const override { return "BatchNormalization"; }
  const BatchNormConfig& config() const { return config_; }
  Shape OutputShape(const Shape& example_input) const override { return example_input; }
  std::vector<ParameterSpec> Parameters(const Shape& example_input) const override;
  /// Where moving_mean is among the layer's parameters (moving_variance follows it).
  std::size_t moving_mean_index() const { return (config_.scale ? 1 : 0) + (config_.center ? 1 : 0); }

  void Forward(std::span<const Tensor<T>* const> params, const Tensor<T>& x, Tensor<T>& y,
               LayerCache<T>& cache) const override;
  void Backward(std::span<const Tensor<T>* const> params, const Tensor<T>& x, const Tensor<T>& y, Tensor<T>& dy,
                Tensor<T>* dx, std::span<Tensor<T>* const> param_grads, LayerCache<T>& cache,
                std::span<Tensor<T>* const> param_grad_magnitudes = {}) const override;
  void BackwardExact(std::span<const Tensor<T>* const> params, const Tensor<T>& x, const Tensor<T>& y, Tensor<T>& dy,
                     Tensor<T>* dx, std::span<ExampleTerms* const> terms, LayerCache<T>& cache) const override;

 private:
  // The backward pass of both modes: dx, and per example and channel the terms of
  // gamma's and beta's gradients (dy * xhat and dy summed over the example's
  // positions, one chain each) into gamma_terms / beta_terms ([rows, C]).
  void BackwardTerms(std::span<const Tensor<T>* const> params, const Tensor<T>& x, Tensor<T>& dy, Tensor<T>* dx,
                     LayerCache<T>& cache, Tensor<T>& gamma_terms, Tensor<T>& beta_terms) const;

  BatchNormConfig config_;
};

/// The partial sums a runner adds up for a layer's statistics: per channel c,
/// kBatchNormSums accumulators of kExactWords words at words[(c * 2 + k) *
/// kExactWords], then one word counting the examples. Forward: S1 = sum x and S2 =
/// sum x^2; backward: B1 = sum dy and B2 = sum dy * (x - mean).
inline constexpr std::int64_t kBatchNormSums = 2;
std::int64_t BatchNormWords(std::int64_t channels);
/// Adds a chunk's input x [rows, ..., C] to `words` (BatchNormWords(C) of them).
void AddForwardSums(const Tensor<float>& x, std::span<std::int64_t> words);
/// Adds a chunk's dy and x [rows, ..., C], with the forward's mean, to `words`.
void AddBackwardSums(const Tensor<float>& x, const Tensor<float>& dy, std::span<const float> mean,
                     std::span<std::int64_t> words);
/// The statistics from the summed words (n = examples x positions per example).
void FinishForwardSums(std::span<const std::int64_t> words, std::int64_t positions, BatchNormStatistics& stats);
void FinishBackwardSums(std::span<const std::int64_t> words, std::int64_t positions, double epsilon,
                        BatchNormStatistics& stats);

/// The model's BatchNormalization layers' indices, in layer order (empty: none).
std::vector<std::size_t> BatchNormLayers(const Sequential<float>& model);
/// Whether one of them is synchronized (its sums cross the replicas mid-pass).
bool HasSynchronizedBatchNorm(const Sequential<float>& model);

/// Keras's moving statistics update, in float, for every BatchNormalization layer
/// whose statistics are ready: moving = moving * momentum + batch * (1 - momentum),
/// moving_mean from the batch's mean and moving_variance from its variance.
/// `statistics` is indexed by layer (ForwardContext::batch_norm).
void UpdateMovingStatistics(const Sequential<float>& model, std::span<const BatchNormStatistics> statistics,
                            ParameterList<float>& weights);

}  // namespace dtlab
