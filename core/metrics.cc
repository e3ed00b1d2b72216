#include "core/metrics.h"

#include <vector>

namespace dtlab {

void MeanMetric::UpdateState(std::span<const float> values, std::span<const float> sample_weight) {
  float sum = 0.0f, weight = 0.0f;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (sample_weight.empty()) {
      sum += values[i];
    } else {
      sum += values[i] * sample_weight[i];
      weight += sample_weight[i];
    }
  }
  total_ += sum;
  count_ += sample_weight.empty() ? static_cast<float>(values.size()) : weight;
}

void SumMetric::UpdateState(std::span<const float> values, std::span<const float> sample_weight) {
  float sum = 0.0f;
  for (std::size_t i = 0; i < values.size(); ++i)
    sum += sample_weight.empty() ? values[i] : values[i] * sample_weight[i];
  total_ += sum;
}

void SparseCategoricalAccuracy::UpdateState(std::span<const std::int32_t> labels,
                                            std::span<const std::int32_t> predictions,
                                            std::span<const float> sample_weight) {
  std::vector<float> matches(labels.size());
  for (std::size_t i = 0; i < labels.size(); ++i) matches[i] = labels[i] == predictions[i] ? 1.0f : 0.0f;
  mean_.UpdateState(matches, sample_weight);
}

}  // namespace dtlab
