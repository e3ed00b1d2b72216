// Keras metrics with Keras state: float32 `total` and `count` variables.
//
// Across replicas a metric is read by summing its state variables (Merge), never by
// averaging per-replica results: that is the Mean-metric trap (docs/semantics.md).
//
// Thread safety: a metric is a value; one writer at a time.
#pragma once

#include <cstdint>
#include <span>

#include "core/exact_sum.h"

namespace dtlab {

/// tf.keras.metrics.Mean: total += sum(values * w), count += sum(w), or the number of values.
class MeanMetric {
 public:
  /// `sample_weight` may be empty (all ones). Values are summed in index order.
  void UpdateState(std::span<const float> values, std::span<const float> sample_weight = {});
  /// div_no_nan(total, count).
  float Result() const { return count_ == 0.0f ? 0.0f : total_ / count_; }
  void ResetState() { total_ = count_ = 0.0f; }
  /// Adds another replica's state into this one (the cross-replica read).
  void Merge(const MeanMetric& other) {
    total_ += other.total_;
    count_ += other.count_;
  }
  float total() const { return total_; }
  float count() const { return count_; }
  /// Restores a saved state.
  void SetState(float total, float count) { total_ = total, count_ = count; }

 private:
  float total_ = 0.0f, count_ = 0.0f;
};

/// Exact mode's Mean (docs/exact.md): `total` and `count` are exact accumulators,
/// so merging replicas' states gives the state one device would have, bit for bit,
/// whatever the split; Result() rounds each once and divides.
class ExactMeanMetric {
 public:
  void UpdateState(std::span<const float> values, std::span<const float> sample_weight = {}) {
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (sample_weight.empty()) {
        total_.Add(values[i]);
        count_.Add(1.0f);
      } else {
        total_.AddProduct(values[i], sample_weight[i]);
        count_.Add(sample_weight[i]);
      }
    }
  }
  float Result() const {
    const float count = count_.ToFloat();
    return count == 0.0f ? 0.0f : total_.ToFloat() / count;
  }
  void ResetState() { total_.Reset(), count_.Reset(); }
  void Merge(const ExactMeanMetric& other) { total_.Merge(other.total_), count_.Merge(other.count_); }
  const ExactSum& total() const { return total_; }
  const ExactSum& count() const { return count_; }

 private:
  ExactSum total_, count_;
};

/// tf.keras.metrics.Sum: total += sum(values * w).
class SumMetric {
 public:
  void UpdateState(std::span<const float> values, std::span<const float> sample_weight = {});
  float Result() const { return total_; }
  void ResetState() { total_ = 0.0f; }
  void Merge(const SumMetric& other) { total_ += other.total_; }
  float total() const { return total_; }

 private:
  float total_ = 0.0f;
};

/// tf.keras.metrics.SparseCategoricalAccuracy: the Mean of (argmax(logits) == label).
class SparseCategoricalAccuracy {
 public:
  /// `predictions` are argmax indices (see ArgmaxRows in loss.h).
  void UpdateState(std::span<const std::int32_t> labels, std::span<const std::int32_t> predictions,
                   std::span<const float> sample_weight = {});
  float Result() const { return mean_.Result(); }
  void ResetState() { mean_.ResetState(); }
  void Merge(const SparseCategoricalAccuracy& other) { mean_.Merge(other.mean_); }
  const MeanMetric& state() const { return mean_; }
  MeanMetric& state() { return mean_; }

 private:
  MeanMetric mean_;
};

}  // namespace dtlab
