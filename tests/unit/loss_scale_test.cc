// DynamicLossScale (core/loss_scale.h) with dtlab's optimizers against Keras 3's
// LossScaleOptimizer (tests/peers/tf_loss_scale.json, written by
// tests/peers/tf_loss_scale.py; cli.tf_rules_check proves the file): the same
// scale, counter, iterations and weight bits after every step of a scripted
// sequence with infinities and NaNs, for SGD and Adam. Plus the rule's edges.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/loss_scale.h"
#include "core/optimizer.h"

namespace dtlab {
namespace {

nlohmann::json Keras() {
  std::ifstream file(std::string(DTLAB_TEST_SOURCE_DIR) + "/tests/peers/tf_loss_scale.json");
  std::stringstream text;
  text << file.rdbuf();
  return nlohmann::json::parse(text.str());
}

float Decode(const nlohmann::json& v) {
  if (v.is_number()) return v.get<float>();
  const std::string s = v.get<std::string>();
  if (s == "nan") return std::numeric_limits<float>::quiet_NaN();
  return s == "-inf" ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
}

TEST(LossScale, TrajectoriesAreKerasBitForBit) {
  const nlohmann::json keras = Keras();
  for (const auto& trajectory : keras.at("trajectories")) {
    const std::string name = trajectory.at("optimizer").get<std::string>();
    auto made = MakeOptimizer(name, {});
    ASSERT_TRUE(made.ok());
    Optimizer& optimizer = **made;
    const auto initial = keras.at("initial").get<std::vector<float>>();
    std::vector<Tensor<float>> params{Tensor<float>({static_cast<std::int64_t>(initial.size())})};
    std::copy(initial.begin(), initial.end(), params[0].data());
    optimizer.Build(params);
    DynamicLossScale scale(keras.at("initial_scale").get<float>(), keras.at("growth_steps").get<std::int64_t>());
    const float learning_rate = name == "sgd" ? 0.5f : 1e-3f;
    for (std::size_t step = 0; step < keras.at("gradients").size(); ++step) {
      std::vector<Tensor<float>> grads{Tensor<float>({static_cast<std::int64_t>(initial.size())})};
      bool finite = true;
      for (std::size_t i = 0; i < initial.size(); ++i) {
        const float g = Decode(keras.at("gradients")[step][i]);
        finite = finite && std::isfinite(g);
        grads[0][static_cast<std::int64_t>(i)] = g / scale.scale();  // unscaled, as Keras divides
      }
      if (finite) optimizer.Apply(params, grads, learning_rate);
      EXPECT_EQ(scale.EndStep(finite), finite);
      const auto& want = trajectory.at("steps")[step];
      const std::string where = name + " step " + std::to_string(step + 1);
      EXPECT_EQ(scale.scale(), want.at("scale").get<float>()) << where;
      EXPECT_EQ(scale.counter(), want.at("counter").get<std::int64_t>()) << where;
      EXPECT_EQ(optimizer.iterations(), want.at("iterations").get<std::int64_t>()) << where;
      for (std::size_t i = 0; i < initial.size(); ++i)
        EXPECT_EQ(std::bit_cast<std::uint32_t>(params[0][static_cast<std::int64_t>(i)]),
                  want.at("weights_bits")[i].get<std::uint32_t>())
            << where << " weight " << i;
    }
  }
}

TEST(LossScale, KerasDefaultsAndEdges) {
  DynamicLossScale scale;
  EXPECT_EQ(scale.scale(), 32768.0f);
  EXPECT_EQ(scale.growth_steps(), 2000);
  for (int i = 0; i < 1999; ++i) EXPECT_TRUE(scale.EndStep(true));
  EXPECT_EQ(scale.scale(), 32768.0f);
  EXPECT_EQ(scale.counter(), 1999);
  EXPECT_TRUE(scale.EndStep(true));
  EXPECT_EQ(scale.scale(), 65536.0f);
  EXPECT_EQ(scale.counter(), 0);
  EXPECT_FALSE(scale.EndStep(false));
  EXPECT_EQ(scale.scale(), 32768.0f);
  EXPECT_FALSE(DynamicLossScale::Validate(0.0f, 10).ok());
  EXPECT_FALSE(DynamicLossScale::Validate(std::numeric_limits<float>::infinity(), 10).ok());
  EXPECT_FALSE(DynamicLossScale::Validate(8.0f, 0).ok());
  EXPECT_TRUE(DynamicLossScale::Validate(8.0f, 1).ok());
  EXPECT_FALSE(scale.Restore(-1.0f, 0).ok());
  EXPECT_FALSE(scale.Restore(std::numeric_limits<float>::quiet_NaN(), 0).ok());
  EXPECT_FALSE(scale.Restore(8.0f, 2000).ok());
  EXPECT_FALSE(scale.Restore(8.0f, -1).ok());
  ASSERT_TRUE(scale.Restore(8.0f, 5).ok());
  EXPECT_EQ(scale.scale(), 8.0f);
  EXPECT_EQ(scale.counter(), 5);
}

}  // namespace
}  // namespace dtlab
