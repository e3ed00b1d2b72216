// dtlab against TensorFlow's own answers (tests/peers/tf_rules.json, written by
// tests/peers/tf_rules.py running TF 2.21 / Keras 3; tests/cli/tf_rules_check.sh
// proves the file is still what TensorFlow says). This test needs no TensorFlow, so
// every machine holds dtlab to it:
// - how experimental_distribute_dataset deals range(n).batch(G) to R replicas under
//   each AutoShardPolicy, step by step (DistributedDataset);
// - each replica's compute_average_loss, with and without global_batch_size and
//   sample_weight, an empty replica included (ReplicaDenominator, ComputeAverageLoss);
// - Keras's Adam, RMSprop and SGD (with and without momentum), bit for bit, five steps;
// - the Mean-metric trap (MeanMetric against the SUM of the scaled losses).
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/loss.h"
#include "core/metrics.h"
#include "core/optimizer.h"
#include "sim/engines/loss_code.h"
#include "sim/input/distributed_input.h"

namespace dtlab {
namespace {

const nlohmann::json& TfAnswers() {
  static const nlohmann::json answers = [] {
    std::ifstream file(std::string(DTLAB_TEST_SOURCE_DIR) + "/tests/peers/tf_rules.json");
    std::stringstream text;
    text << file.rdbuf();
    return nlohmann::json::parse(text.str());
  }();
  return answers;
}

float FromBits(std::uint32_t bits) { return std::bit_cast<float>(bits); }

TEST(TfRules, FileIsTensorFlows) {
  const nlohmann::json& tf = TfAnswers();
  EXPECT_EQ(tf.at("tensorflow").get<std::string>(), "2.21.0");
  EXPECT_FALSE(tf.at("rebatch").empty());
}

TEST(TfRules, RebatchUnderEveryAutoShardPolicy) {
  int cases = 0;
  for (const auto& c : TfAnswers().at("rebatch")) {
    DistributedInputOptions options;
    options.num_elements = c.at("elements").get<std::int64_t>();
    options.global_batch_size = c.at("global_batch").get<std::int64_t>();
    options.drop_remainder = c.at("drop_remainder").get<bool>();
    options.replicas_per_worker = c.at("replicas").get<std::int32_t>();
    const StatusOr<AutoShardPolicy> policy = ParseAutoShardPolicy(c.at("policy").get<std::string>());
    ASSERT_TRUE(policy.ok());
    options.shard_policy = *policy;
    const StatusOr<DistributedDataset> dataset = DistributedDataset::DistributeDataset(options);
    ASSERT_TRUE(dataset.ok()) << dataset.status().ToString();
    const std::vector<DistributedDataset::Step> steps = dataset->Iterate(0);
    const auto want = c.at("steps").get<std::vector<DistributedDataset::Step>>();
    EXPECT_EQ(steps, want) << c.dump() << "\n" << dataset->Describe();
    ++cases;
  }
  EXPECT_EQ(cases, 120);
}

TEST(TfRules, ComputeAverageLossPerReplica) {
  for (const auto& c : TfAnswers().at("compute_average_loss")) {
    const auto losses = c.at("losses").get<std::vector<std::vector<float>>>();
    const auto replicas = c.at("replicas").get<std::int32_t>();
    const bool global = !c.at("global_batch_size").is_null();
    const std::int64_t global_batch = global ? c.at("global_batch_size").get<std::int64_t>() : 0;
    for (std::size_t r = 0; r < losses.size(); ++r) {
      const std::vector<float>& local = losses[r];
      std::vector<float> weights;
      if (!c.at("weights").is_null()) weights = c.at("weights")[r].get<std::vector<float>>();
      const std::int64_t denominator =
          ReplicaDenominator(global ? LossDenominator::kGlobal : LossDenominator::kDefault,
                             static_cast<std::int64_t>(local.size()), global_batch, replicas);
      const float got = ComputeAverageLoss<float>(local, weights, denominator);
      const float want = FromBits(c.at("bits")[r].get<std::uint32_t>());
      EXPECT_EQ(std::bit_cast<std::uint32_t>(got), std::bit_cast<std::uint32_t>(want))
          << c.dump() << " replica " << r << ": dtlab " << got << ", TF " << want;
    }
  }
}

TEST(TfRules, OptimizerStepsAreKerasBitForBit) {
  for (const auto& c : TfAnswers().at("optimizers")) {
    OptimizerOptions options;
    options.momentum = c.at("momentum").get<float>();
    auto made = MakeOptimizer(c.at("name").get<std::string>(), options);
    ASSERT_TRUE(made.ok());
    Optimizer& optimizer = **made;
    const auto initial = c.at("initial").get<std::vector<float>>();
    std::vector<Tensor<float>> params{Tensor<float>({static_cast<std::int64_t>(initial.size())})};
    std::copy(initial.begin(), initial.end(), params[0].data());
    optimizer.Build(params);
    const auto learning_rate = c.at("learning_rate").get<float>();
    const auto gradients = c.at("gradients").get<std::vector<std::vector<float>>>();
    const auto after = c.at("after_each_step_bits").get<std::vector<std::vector<std::uint32_t>>>();
    for (std::size_t step = 0; step < gradients.size(); ++step) {
      std::vector<Tensor<float>> grads{Tensor<float>({static_cast<std::int64_t>(initial.size())})};
      std::copy(gradients[step].begin(), gradients[step].end(), grads[0].data());
      optimizer.Apply(params, grads, learning_rate);
      for (std::size_t i = 0; i < initial.size(); ++i)
        EXPECT_EQ(std::bit_cast<std::uint32_t>(params[0][static_cast<std::int64_t>(i)]), after[step][i])
            << c.at("name") << " momentum " << options.momentum << " step " << step + 1 << " weight " << i << ": dtlab "
            << params[0][static_cast<std::int64_t>(i)] << ", Keras " << FromBits(after[step][i]);
    }
  }
}

TEST(TfRules, TheMeanMetricTrap) {
  const nlohmann::json& c = TfAnswers().at("mean_metric");
  const auto losses = c.at("losses").get<std::vector<std::vector<float>>>();
  const auto global_batch = c.at("global_batch_size").get<std::int64_t>();
  MeanMetric mean;
  float sum = 0.0f;
  for (const std::vector<float>& replica : losses) {
    const float scaled = ComputeAverageLoss<float>(replica, {}, global_batch);
    MeanMetric replica_state;
    replica_state.UpdateState(std::vector<float>{scaled});
    mean.Merge(replica_state);
    sum += scaled;
  }
  EXPECT_EQ(std::bit_cast<std::uint32_t>(mean.Result()), c.at("mean_result_bits").get<std::uint32_t>());  // 1.75
  EXPECT_EQ(std::bit_cast<std::uint32_t>(sum), c.at("sum_bits").get<std::uint32_t>());                    // 3.5
  EXPECT_EQ(mean.Result(), 1.75f);
  EXPECT_EQ(sum, 3.5f);
}

}  // namespace
}  // namespace dtlab
