// ApplyInParallel (sim/compute/parallel_update.h) gives Optimizer::Apply's bits for
// every optimizer, over parameters smaller and larger than a slice, step after step;
// and the split update (BeginStep, UpdateElements on any partition, EndStep) is
// Apply's too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "core/optimizer.h"
#include "sim/compute/parallel_update.h"

namespace dtlab {
namespace {

std::vector<Tensor<float>> RandomTensors(std::mt19937& rng, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<Tensor<float>> tensors;
  for (const std::int64_t size : {1, 10, 16384, 16385, 102400}) {
    Tensor<float> t({size});
    for (std::int64_t i = 0; i < size; ++i) t[i] = normal(rng);
    tensors.push_back(std::move(t));
  }
  return tensors;
}

bool SameBits(const std::vector<Tensor<float>>& a, const std::vector<Tensor<float>>& b) {
  for (std::size_t p = 0; p < a.size(); ++p)
    if (std::memcmp(a[p].data(), b[p].data(), sizeof(float) * static_cast<std::size_t>(a[p].size())) != 0) return false;
  return true;
}

std::unique_ptr<Optimizer> Make(const std::string& name) {
  OptimizerOptions options;
  if (name == "sgd-momentum") options.momentum = 0.9f;
  auto made = MakeOptimizer(name == "sgd-momentum" ? "sgd" : name, options);
  EXPECT_TRUE(made.ok());
  return std::move(made).value();
}

TEST(ApplyInParallel, SameBitsAsApplyForEveryOptimizer) {
  for (const std::string name : {"adam", "rmsprop", "sgd", "sgd-momentum"}) {
    std::mt19937 rng(7);
    std::vector<Tensor<float>> serial = RandomTensors(rng, 1.0f), parallel = serial, split = serial;
    auto one = Make(name), two = Make(name), three = Make(name);
    one->Build(serial);
    two->Build(parallel);
    three->Build(split);
    for (int step = 0; step < 4; ++step) {
      const std::vector<Tensor<float>> grads = RandomTensors(rng, step == 2 ? 1e-20f : 0.3f);
      one->Apply(serial, grads, 1e-3f);
      ApplyInParallel(*two, parallel, grads, 1e-3f);
      // Elements in reverse order, three at a time.
      const Optimizer::StepConstants constants = three->BeginStep(1e-3f);
      for (std::size_t p = split.size(); p-- > 0;)
        for (std::int64_t end = split[p].size(); end > 0; end -= 3)
          three->UpdateElements(constants, p, std::max<std::int64_t>(0, end - 3), end, split[p].data(),
                                grads[p].data());
      three->EndStep();
      ASSERT_TRUE(SameBits(serial, parallel)) << name << " step " << step;
      ASSERT_TRUE(SameBits(serial, split)) << name << " step " << step;
      for (std::size_t slot = 0; slot < one->SlotNames().size(); ++slot)
        for (std::size_t p = 0; p < serial.size(); ++p)
          ASSERT_EQ(std::memcmp(one->slot(slot, p).data(), two->slot(slot, p).data(),
                                sizeof(float) * static_cast<std::size_t>(serial[p].size())),
                    0)
              << name << " slot " << slot;
    }
    EXPECT_EQ(one->iterations(), 4);
    EXPECT_EQ(two->iterations(), 4);
    EXPECT_EQ(three->iterations(), 4);
  }
}

// The vectorized loops against Keras's formula written out one element at a time.
TEST(ApplyInParallel, AdamIsKerasFormulaOnEveryElement) {
  std::mt19937 rng(11);
  std::vector<Tensor<float>> params = RandomTensors(rng, 1.0f);
  const std::vector<Tensor<float>> grads = RandomTensors(rng, 0.3f);
  const std::vector<Tensor<float>> before = params;
  auto adam = Make("adam");
  adam->Build(params);
  ApplyInParallel(*adam, params, grads, 1e-3f);
  const float one_minus_b1 = static_cast<float>(1.0 - 0.9), one_minus_b2 = static_cast<float>(1.0 - 0.999);
  const float alpha = 1e-3f * std::sqrt(1.0f - std::pow(0.999f, 1.0f)) / (1.0f - std::pow(0.9f, 1.0f));
  for (std::size_t p = 0; p < params.size(); ++p)
    for (std::int64_t i = 0; i < params[p].size(); ++i) {
      volatile float g = grads[p][i];  // keeps this loop scalar
      const float m = (g - 0.0f) * one_minus_b1, v = (g * g - 0.0f) * one_minus_b2;
      ASSERT_EQ(params[p][i], before[p][i] - (m * alpha) / (std::sqrt(v) + 1e-7f)) << p << " " << i;
    }
}

}  // namespace
}  // namespace dtlab
