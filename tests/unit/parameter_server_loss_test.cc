// The parameter server's workers run the loss code they are given (sim/engines/loss_code.h)
// with num_replicas_in_sync = 1, as TF's ParameterServerStrategy does on CPU
// workers: a worker's step is one replica on a whole batch. On a full batch every
// denominator is the batch, so every code gives the same bits; on a short final
// batch the global denominator divides by the configured batch and the others by
// the batch itself. The options that only matter with several replicas in sync
// (the regularization split and scaling, DDP's mean, Keras 3's 1/N, the empty-replica
// rule) give exactly the numbers of N = 1.
#include <gtest/gtest.h>

#include <numeric>

#include "core/batch.h"
#include "sim/engines/parameter_server.h"

namespace dtlab {
namespace {

struct Outcome {
  std::vector<float> losses;
  ParameterList<float> variables;
};

class ParameterServerLoss : public ::testing::TestWithParam<MathMode> {
 protected:
  ImageDataset data_ = MakeSyntheticDataset(32, 10, 10, 10, 3);
  std::unique_ptr<Sequential<float>> model_ = std::move(MakeModel<float>("seed-cnn", {10, 10, 1}, 10)).value();

  // One worker (no staleness) on `sizes` batches of consecutive examples.
  Outcome Train(const LossCode& loss, std::vector<std::int64_t> sizes, std::int64_t batch_size) const {
    ParameterServerOptions options;
    options.math = GetParam();
    options.workers = 1;
    options.loss = loss;
    options.batch_size = batch_size;
    auto cluster =
        std::move(ParameterServerCluster::Create(*model_, options, "sgd", {}, model_->InitialParameters(5), 16))
            .value();
    std::vector<std::vector<std::vector<std::int64_t>>> batches(1);
    std::int64_t next = 0;
    for (const std::int64_t size : sizes) {
      batches[0].emplace_back(static_cast<std::size_t>(size));
      std::iota(batches[0].back().begin(), batches[0].back().end(), next);
      next += size;
    }
    Outcome run;
    const auto record = [&](const ParameterServerUpdate& u) {
      run.losses.push_back(u.loss);
      return Status::Ok();
    };
    EXPECT_TRUE(cluster->RunEpoch(data_, batches, 0, 0.1f, -1, record).ok());
    run.variables = cluster->variables();
    return run;
  }
};

// Each choice of the loss code, one at a time, from the default (global).
std::vector<std::pair<std::string, LossCode>> Codes() {
  std::vector<std::pair<std::string, LossCode>> codes;
  auto with = [&](std::string name, auto change) {
    LossCode code;
    change(code);
    codes.emplace_back(std::move(name), code);
  };
  with("global", [](LossCode&) {});
  with("default", [](LossCode& c) { c.denominator = LossDenominator::kDefault; });
  with("per-replica", [](LossCode& c) { c.denominator = LossDenominator::kPerReplica; });
  with("ddp", [](LossCode& c) { c.convention = Convention::kDdp; });
  with("sum_over_batch_size", [](LossCode& c) { c.reduction = LossReduction::kSumOverBatchSize; });
  with("sum", [](LossCode& c) { c.reduction = LossReduction::kSum; });
  with("keras2", [](LossCode& c) { c.keras = KerasVersion::k2; });
  with("unscaled", [](LossCode& c) { c.regularization_scaling = RegularizationScaling::kUnscaled; });
  with("split-tf", [](LossCode& c) { c.regularization_split = RegularizationSplit::kTf; });
  with("split-exact", [](LossCode& c) { c.regularization_split = RegularizationSplit::kExact; });
  with("empty-error", [](LossCode& c) {
    c.denominator = LossDenominator::kDefault;
    c.empty_replica = EmptyReplicaLoss::kError;
  });
  return codes;
}

TEST_P(ParameterServerLoss, OnFullBatchesEveryCodeGivesTheSameBits) {
  const Outcome global = Train(LossCode{}, {8, 8}, 8);
  for (const auto& [name, code] : Codes()) {
    const Outcome run = Train(code, {8, 8}, 8);
    EXPECT_EQ(run.losses, global.losses) << name;
    EXPECT_EQ(run.variables, global.variables) << name;
  }
}

TEST_P(ParameterServerLoss, OnAShortBatchTheGlobalDenominatorDividesByTheConfiguredBatch) {
  // A first step on a short batch of 3 with a configured batch of 8.
  const Outcome global = Train(LossCode{}, {3}, 8);
  const Outcome local = Train(Codes()[1].second, {3}, 8);  // compute_average_loss(l): 3 x 1
  const double regularization = model_->RegularizationLoss(model_->InitialParameters(5));
  ASSERT_EQ(global.losses.size(), 1u);
  EXPECT_NEAR((global.losses[0] - regularization) * 8, (local.losses[0] - regularization) * 3,
              1e-5 * std::abs(local.losses[0]));
  EXPECT_NE(global.variables, local.variables) << "the gradient scales as the loss does";
  // Every other code divides the short batch by itself, as compute_average_loss(l) does.
  for (const auto& [name, code] : Codes()) {
    const Outcome run = Train(code, {3}, 8);
    const bool divides_by_configured_batch =
        code.denominator == LossDenominator::kGlobal && !code.ddp() && !code.keras3_mean();
    const Outcome& expected = divides_by_configured_batch ? global : local;
    EXPECT_EQ(run.losses, expected.losses) << name;
    EXPECT_EQ(run.variables, expected.variables) << name;
  }
}

TEST_P(ParameterServerLoss, WithoutAConfiguredBatchEachBatchIsItsOwnGlobalBatch) {
  const Outcome global = Train(LossCode{}, {3}, 0);
  const Outcome local = Train(Codes()[1].second, {3}, 8);
  EXPECT_EQ(global.losses, local.losses);
  EXPECT_EQ(global.variables, local.variables);
}

INSTANTIATE_TEST_SUITE_P(BothMathModes, ParameterServerLoss, ::testing::Values(MathMode::kFast, MathMode::kExact),
                         [](const auto& info) { return std::string(MathModeName(info.param)); });

TEST(ParameterServerLossOptions, AReductionKerasRefusesIsRefused) {
  auto model = std::move(MakeModel<float>("seed-cnn", {10, 10, 1}, 10)).value();
  ParameterServerOptions options;
  options.loss.reduction = LossReduction::kSumOverBatchSize;
  options.loss.keras = KerasVersion::k2;
  const auto made = ParameterServerCluster::Create(*model, options, "sgd", {}, model->InitialParameters(5), 16);
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace dtlab
