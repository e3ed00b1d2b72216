// compute_average_loss, scale_regularization_loss, reductions and Keras metrics,
// with the worked examples of docs/semantics.md.
#include <gtest/gtest.h>

#include <cmath>

#include "core/loss.h"
#include "core/metrics.h"

namespace dtlab {
namespace {

TEST(ComputeAverageLoss, DividesByTheGlobalBatchNotTheLocalOne) {
  // The seed's worked example: replicas hold losses [2, 3] and [4, 5], global batch 4.
  const std::vector<float> replica0 = {2, 3}, replica1 = {4, 5};
  const float scaled0 = ComputeAverageLoss<float>(replica0, {}, AverageLossDenominator(2, std::nullopt, 2));
  const float scaled1 = ComputeAverageLoss<float>(replica1, {}, AverageLossDenominator(2, std::nullopt, 2));
  EXPECT_EQ(scaled0, 1.25f);
  EXPECT_EQ(scaled1, 2.25f);
  EXPECT_EQ(scaled0 + scaled1, 3.5f);  // SUM across replicas: the true mean of 2, 3, 4, 5
  // The Mean-metric trap: averaging the two scaled values reads 1.75.
  MeanMetric mean;
  const std::vector<float> scaled = {scaled0, scaled1};
  mean.UpdateState(scaled);
  EXPECT_EQ(mean.Result(), 1.75f);
}

TEST(ComputeAverageLoss, DefaultDenominatorIsLocalBatchTimesReplicas) {
  EXPECT_EQ(AverageLossDenominator(3, std::nullopt, 4), 12);
  EXPECT_EQ(AverageLossDenominator(3, 10, 4), 10);
  // A short replica batch with the default denominator upweights its examples.
  const std::vector<float> short_replica = {6};
  EXPECT_EQ(ComputeAverageLoss<float>(short_replica, {}, AverageLossDenominator(1, std::nullopt, 2)), 3.0f);
  EXPECT_EQ(ComputeAverageLoss<float>(short_replica, {}, AverageLossDenominator(1, 3, 2)), 2.0f);
}

TEST(ComputeAverageLoss, SampleWeightsAndEmptyReplicas) {
  const std::vector<float> losses = {1, 2, 3}, weights = {1, 0, 2};
  EXPECT_EQ(ComputeAverageLoss<float>(losses, weights, 4), 7.0f / 4.0f);
  // An empty replica: div_no_nan(0, 0) is 0 (TF >= 2.13), never NaN.
  EXPECT_EQ(ComputeAverageLoss<float>({}, {}, 0), 0.0f);
  std::vector<float> coefficients(3);
  AverageLossCoefficients<float>(weights, 3, 4, 1.0f, coefficients);
  EXPECT_EQ(coefficients, (std::vector<float>{0.25f, 0.0f, 0.5f}));
  AverageLossCoefficients<float>({}, 3, 0, 1.0f, coefficients);
  EXPECT_EQ(coefficients, (std::vector<float>{0, 0, 0}));
}

TEST(ScaleRegularizationLoss, DividesByReplicas) {
  EXPECT_EQ(ScaleRegularizationLoss(6.0f, 3), 2.0f);
  EXPECT_EQ(ScaleRegularizationLoss(6.0f, 1), 6.0f);
}

TEST(LossReduction, Keras2RefusesAutoAndSumOverBatchSize) {
  EXPECT_TRUE(CheckReductionForCustomLoop(LossReduction::kNone, KerasVersion::k2).ok());
  EXPECT_TRUE(CheckReductionForCustomLoop(LossReduction::kSum, KerasVersion::k2).ok());
  for (auto r : {LossReduction::kAuto, LossReduction::kSumOverBatchSize}) {
    Status s = CheckReductionForCustomLoop(r, KerasVersion::k2);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
    // Keras 2's ValueError (TF 2.12.1's words, typo included).
    EXPECT_NE(s.message().find("Please use `tf.keras.losses.Reduction.SUM` or `tf.keras.losses.Reduction.NONE` for "
                               "loss reduction when losses are used with `tf.distribute.Strategy`, except for "
                               "specifying losses in `Model.compile()` for use by the built-in training looop "
                               "`Model.fit()`"),
              std::string::npos)
        << s.message();
  }
  EXPECT_EQ(*ParseLossReduction("SUM_OVER_BATCH_SIZE"), LossReduction::kSumOverBatchSize);
  EXPECT_FALSE(ParseLossReduction("mean").ok());
}

TEST(LossReduction, Keras3RunsSumOverBatchSizeAndHasNoAuto) {
  for (auto r : {LossReduction::kNone, LossReduction::kSum, LossReduction::kSumOverBatchSize})
    EXPECT_TRUE(CheckReductionForCustomLoop(r, KerasVersion::k3).ok()) << LossReductionName(r);
  Status s = CheckReductionForCustomLoop(LossReduction::kAuto, KerasVersion::k3);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  // Keras 3.15's ValueError from standardize_reduction.
  EXPECT_NE(s.message().find("Invalid value for argument `reduction`. Expected one of {'mean', "
                             "'mean_with_sample_weight', 'none', 'sum', 'sum_over_batch_size', None}. Received: "
                             "reduction=auto"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(*ParseKerasVersion("2"), KerasVersion::k2);
  EXPECT_EQ(*ParseKerasVersion("3"), KerasVersion::k3);
  EXPECT_FALSE(ParseKerasVersion("4").ok());
}

TEST(LossReduction, ApplyNoneSumAndSumOverBatchSize) {
  const std::vector<float> losses = {1, 2, 3, 6}, weights = {1, 1, 0, 0.5f};
  EXPECT_EQ(ApplyLossReduction<float>(losses, {}, LossReduction::kNone), losses);
  EXPECT_EQ(ApplyLossReduction<float>(losses, weights, LossReduction::kNone), (std::vector<float>{1, 2, 0, 3}));
  EXPECT_EQ(ApplyLossReduction<float>(losses, {}, LossReduction::kSum), (std::vector<float>{12}));
  EXPECT_EQ(ApplyLossReduction<float>(losses, weights, LossReduction::kSum), (std::vector<float>{6}));
  EXPECT_EQ(ApplyLossReduction<float>(losses, {}, LossReduction::kSumOverBatchSize), (std::vector<float>{3}));
  EXPECT_EQ(ApplyLossReduction<float>(losses, {}, LossReduction::kAuto), (std::vector<float>{3}));
  EXPECT_EQ(ApplyLossReduction<float>({}, {}, LossReduction::kSumOverBatchSize), (std::vector<float>{0}));
}

TEST(Metrics, MeanSumAccuracyAndMerge) {
  MeanMetric a, b;
  const std::vector<float> x = {1, 2, 3}, y = {10};
  a.UpdateState(x);
  b.UpdateState(y);
  a.Merge(b);  // the cross-replica read sums states
  EXPECT_EQ(a.total(), 16.0f);
  EXPECT_EQ(a.count(), 4.0f);
  EXPECT_EQ(a.Result(), 4.0f);
  const std::vector<float> w = {0, 1, 1};
  MeanMetric weighted;
  weighted.UpdateState(x, w);
  EXPECT_EQ(weighted.Result(), 2.5f);
  a.ResetState();
  EXPECT_EQ(a.Result(), 0.0f);  // div_no_nan

  SumMetric sum;
  sum.UpdateState(x);
  EXPECT_EQ(sum.Result(), 6.0f);

  SparseCategoricalAccuracy accuracy, other;
  const std::vector<std::int32_t> labels = {0, 1, 2, 3}, predictions = {0, 1, 0, 0};
  accuracy.UpdateState(labels, predictions);
  EXPECT_EQ(accuracy.Result(), 0.5f);
  const std::vector<std::int32_t> l2 = {5}, p2 = {5};
  other.UpdateState(l2, p2);
  accuracy.Merge(other);
  EXPECT_EQ(accuracy.Result(), 0.6f);
}

TEST(Argmax, FirstMaximumWinsTies) {
  Tensor<float> logits({2, 4}, {1, 3, 3, 0, -1, -1, -1, -1});
  std::vector<std::int32_t> predictions(2);
  ArgmaxRows(logits, predictions);
  EXPECT_EQ(predictions, (std::vector<std::int32_t>{1, 0}));
}

}  // namespace
}  // namespace dtlab
