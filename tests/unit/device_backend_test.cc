// The device kernels (core/device_kernels.h) through the device runner
// (sim/compute/device_runner.h) on the emulated device, against the CPU's BatchRunner:
// exact mode must give the same accumulator words, losses and predictions bit for
// bit, for every model, any split of the batch (empty segments too) and non-finite
// inputs; fast mode the same per-example losses and float sums within their bound.
// The CUDA backend runs this very runner and these kernels (docs/gpu.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/conv2d.h"
#include "core/dense.h"
#include "core/dropout.h"
#include "core/exact_sum.h"
#include "core/model.h"
#include "core/relu.h"
#include "core/reshape.h"
#include "core/rng.h"
#include "sim/compute/batch_runner.h"
#include "sim/compute/device_backend.h"

namespace dtlab {
namespace {

struct Batch {
  Tensor<float> images;
  std::vector<std::int32_t> labels;
  std::vector<float> coefficients;
};

Batch RandomBatch(const Sequential<float>& model, std::int64_t count, std::uint64_t seed) {
  Batch b;
  Shape shape = model.example_shape();
  shape.insert(shape.begin(), count);
  b.images.Resize(shape);
  CounterRng rng(seed, RngPurpose::kWeightInit, 99);
  for (std::int64_t i = 0; i < b.images.size(); ++i) b.images[i] = rng.UniformFloat();
  for (std::int64_t i = 0; i < count; ++i) {
    b.labels.push_back(static_cast<std::int32_t>(rng.UniformFloat() * static_cast<float>(model.num_classes())) %
                       static_cast<std::int32_t>(model.num_classes()));
    b.coefficients.push_back(1.0f / static_cast<float>(count));
  }
  return b;
}

// Segments of the batch: uneven, one empty, one of a single example.
const std::vector<std::pair<std::int64_t, std::int64_t>> kSplits = {{0, 5}, {5, 0}, {5, 17}, {22, 1}};
constexpr std::int64_t kExamples = 23;

struct Case {
  const char* model;
  Shape image;
};

class DeviceBackendTest : public ::testing::TestWithParam<Case> {};

TEST_P(DeviceBackendTest, ExactModeGivesTheCpuWordsLossesAndPredictions) {
  auto model = MakeModel<float>(GetParam().model, GetParam().image, 10);
  ASSERT_TRUE(model.ok()) << model.status().message();
  const Sequential<float>& m = **model;
  const ParameterList<float> params = m.InitialParameters(7);
  Batch batch = RandomBatch(m, kExamples, 3);
  // Non-finite and extreme inputs travel through the words as on the CPU: a NaN
  // pixel (a ReLU turns it into 0, on both) and a NaN coefficient (NaN gradient terms).
  batch.images[3] = std::numeric_limits<float>::quiet_NaN();
  batch.coefficients[2] = std::numeric_limits<float>::quiet_NaN();
  batch.images[batch.images.size() / kExamples * 20 + 1] = 3e38f;

  const auto values = static_cast<std::size_t>(m.num_parameter_values() * kExactWords);
  std::vector<std::vector<std::int64_t>> cpu_words(kSplits.size(), std::vector<std::int64_t>(values, 7));
  std::vector<ExactSegment> cpu_segments;
  for (std::size_t s = 0; s < kSplits.size(); ++s)
    cpu_segments.push_back({&params, kSplits[s].first, kSplits[s].second, cpu_words[s]});
  std::vector<float> cpu_losses(kExamples);
  std::vector<std::int32_t> cpu_predictions(kExamples);
  BatchRunner runner(m);
  runner.RunExact(batch.images, batch.labels, batch.coefficients, cpu_losses, cpu_predictions, cpu_segments);

  auto plan = MakeDevicePlan(m);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  // One lane, and three (as three streams: the fourth segment reuses lane 0's buffers).
  std::vector<std::vector<std::int64_t>> device_words;
  std::unique_ptr<ComputeBackend> backend;
  for (const int lanes : {3, 1}) {
    device_words.assign(kSplits.size(), std::vector<std::int64_t>(values, 7));
    std::vector<ExactSegment> device_segments;
    for (std::size_t s = 0; s < kSplits.size(); ++s)
      device_segments.push_back({&params, kSplits[s].first, kSplits[s].second, device_words[s]});
    std::vector<float> device_losses(kExamples, -1.0f);
    std::vector<std::int32_t> device_predictions(kExamples, -1);
    backend = MakeDeviceBackend(m, MakeHostRunner(*plan, lanes));
    ASSERT_TRUE(backend
                    ->RunExact(batch.images, batch.labels, batch.coefficients, device_losses, device_predictions,
                               device_segments)
                    .ok());
    EXPECT_EQ(std::memcmp(cpu_losses.data(), device_losses.data(), sizeof(float) * kExamples), 0) << lanes << " lanes";
    EXPECT_EQ(cpu_predictions, device_predictions) << lanes << " lanes";
    for (std::size_t s = 0; s < kSplits.size(); ++s) {
      std::size_t differing = 0;
      for (std::size_t w = 0; w < values; ++w) differing += cpu_words[s][w] != device_words[s][w];
      EXPECT_EQ(differing, 0u) << "segment " << s << " of " << GetParam().model << ", " << lanes << " lanes";
    }
  }
  // The empty segment's words are zero; the NaN example's segment counts NaN terms.
  for (const std::int64_t w : device_words[1]) ASSERT_EQ(w, 0);
  EXPECT_NE(device_words[0][kExactDigitWords], 0);

  // The same runner runs twice with the same bits (buffers are reused).
  std::vector<std::int64_t> again(values);
  const ExactSegment whole{&params, 0, kExamples, again};
  std::vector<float> losses(kExamples);
  std::vector<std::int32_t> predictions(kExamples);
  ASSERT_TRUE(
      backend->RunExact(batch.images, batch.labels, batch.coefficients, losses, predictions, std::span(&whole, 1))
          .ok());
  // Merging the segments' words (integer addition) gives the whole batch's words.
  std::vector<std::int64_t> merged(values, 0);
  for (const auto& words : device_words)
    for (std::size_t i = 0; i < values; i += kExactWords) ExactMerge(merged.data() + i, words.data() + i);
  ExactNormalizeAll(merged);
  EXPECT_EQ(merged, again);

  // A replica's share of the regularization gradient (ExactSegment::regularization):
  // the CPU adds it inside its sums, the device backend after its launch; the same
  // words, and other words than without it where the model has an L2 term.
  std::vector<std::int64_t> cpu_share(values, 7), device_share(values, 7);
  const ExactSegment on_cpu{&params, 0, kExamples, cpu_share, 1.0f / 3};
  const ExactSegment on_device{&params, 0, kExamples, device_share, 1.0f / 3};
  runner.RunExact(batch.images, batch.labels, batch.coefficients, losses, predictions, std::span(&on_cpu, 1));
  ASSERT_TRUE(
      backend->RunExact(batch.images, batch.labels, batch.coefficients, losses, predictions, std::span(&on_device, 1))
          .ok());
  EXPECT_EQ(cpu_share, device_share);
  const auto& specs = m.parameters();
  if (std::any_of(specs.begin(), specs.end(), [](const auto& p) { return p.spec.l2 != 0.0; })) {
    EXPECT_NE(device_share, again);
  }

  // Rounded in the pass (ExactSegment::rounded), for examples 4 to 22 (after the NaN
  // ones, which make every element's sum NaN; example 20's 3e38 pixel stays): the CPU
  // rounds most elements from its bins, the device backend rounds its words; both
  // give RoundWords of the plain words, and those words wherever the float is not
  // finite.
  std::vector<std::int64_t> plain(values, 7);
  const ExactSegment tail{&params, 4, kExamples - 4, plain, 1.0f / 3};
  runner.RunExact(batch.images, batch.labels, batch.coefficients, losses, predictions, std::span(&tail, 1));
  std::vector<float> expected(static_cast<std::size_t>(m.num_parameter_values()));
  RoundWords(plain, expected);
  for (const bool on_device : {false, true}) {
    std::vector<std::int64_t> scratch(values, 7);
    std::vector<float> rounded(expected.size(), -1.0f);
    const ExactSegment segment{&params, 4, kExamples - 4, scratch, 1.0f / 3, rounded};
    if (on_device)
      ASSERT_TRUE(
          backend->RunExact(batch.images, batch.labels, batch.coefficients, losses, predictions, std::span(&segment, 1))
              .ok());
    else
      runner.RunExact(batch.images, batch.labels, batch.coefficients, losses, predictions, std::span(&segment, 1));
    std::size_t differing = 0, words_differing = 0;
    for (std::size_t k = 0; k < expected.size(); ++k) {
      differing += std::bit_cast<std::uint32_t>(rounded[k]) != std::bit_cast<std::uint32_t>(expected[k]);
      if (!std::isfinite(expected[k]))
        words_differing += !std::equal(plain.begin() + static_cast<std::ptrdiff_t>(k * kExactWords),
                                       plain.begin() + static_cast<std::ptrdiff_t>((k + 1) * kExactWords),
                                       scratch.begin() + static_cast<std::ptrdiff_t>(k * kExactWords));
    }
    EXPECT_EQ(differing, 0u) << GetParam().model << (on_device ? ", device" : ", CPU");
    EXPECT_EQ(words_differing, 0u) << GetParam().model << (on_device ? ", device" : ", CPU");
  }
}

TEST_P(DeviceBackendTest, FastModeHasTheExactPerExampleValuesAndFloatSumsWithinTheirBound) {
  auto model = MakeModel<float>(GetParam().model, GetParam().image, 10);
  ASSERT_TRUE(model.ok());
  const Sequential<float>& m = **model;
  const ParameterList<float> params = m.InitialParameters(11);
  const Batch batch = RandomBatch(m, kExamples, 5);

  BatchRunner runner(m);
  std::vector<std::int64_t> words;
  ParameterList<float> exact = m.ZeroParameters();
  std::vector<float> exact_losses(kExamples);
  std::vector<std::int32_t> exact_predictions(kExamples);
  runner.ExactGradient(params, batch.images, batch.labels, batch.coefficients, exact_losses, exact_predictions, words,
                       exact);

  auto plan = MakeDevicePlan(m);
  ASSERT_TRUE(plan.ok());
  auto backend = MakeDeviceBackend(m, MakeHostRunner(*plan));
  ParameterList<float> grads = m.ZeroParameters(), magnitudes = m.ZeroParameters();
  std::vector<float> losses(kExamples);
  std::vector<std::int32_t> predictions(kExamples);
  const BatchSegment whole{&params, 0, kExamples, &grads, &magnitudes};
  ASSERT_TRUE(
      backend->Run(batch.images, batch.labels, batch.coefficients, losses, predictions, std::span(&whole, 1)).ok());
  EXPECT_EQ(std::memcmp(losses.data(), exact_losses.data(), sizeof(float) * kExamples), 0);
  EXPECT_EQ(predictions, exact_predictions);
  // |fast - exact| <= h u sum|x| with h the longest chain (positions x examples + 2),
  // and the exact gradient includes the regularization the device leaves out.
  m.AddRegularizationGradient(params, -1.0f, exact);  // the data part alone (rounded once more)
  for (std::size_t p = 0; p < grads.size(); ++p) {
    const double h = static_cast<double>(m.GradientTermsPerExample(p) * kExamples + kExamples + 4);
    for (std::int64_t i = 0; i < grads[p].size(); ++i) {
      const double bound = h * 0x1p-24 * magnitudes[p][i] + 4 * std::abs(exact[p][i]) * 0x1p-24 + 1e-30;
      ASSERT_LE(std::abs(static_cast<double>(grads[p][i]) - exact[p][i]), bound)
          << m.parameters()[p].name << "[" << i << "]";
      ASSERT_GE(magnitudes[p][i] * 1.01f + 1e-30f, std::abs(grads[p][i]));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, DeviceBackendTest,
                         ::testing::Values(Case{"seed-cnn", {14, 14, 1}}, Case{"mnist-cnn", {9, 9, 1}},
                                           Case{"linear", {6, 5, 2}}),
                         [](const auto& info) {
                           std::string name = info.param.model;
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

// Dropout on the device: the host draws each example's masks with the CPU layer's
// code, the device applies them; a training step's words equal the CPU's under
// both mask keys (the example's index, or its replica and position), with Dropout
// first (no input gradient), after a convolution and between dense layers.
TEST(DeviceDropout, TrainingStepsGiveTheCpuWordsUnderEitherMaskKey) {
  std::vector<std::unique_ptr<Layer<float>>> layers;
  layers.push_back(std::make_unique<Dropout<float>>("dropout", 0.1));
  layers.push_back(std::make_unique<Conv2D<float>>("conv2d", 3, 3, 3, Activation::kRelu));
  layers.push_back(std::make_unique<Dropout<float>>("dropout_1", 0.25));
  layers.push_back(std::make_unique<Reshape<float>>("flatten", Shape{}));
  layers.push_back(std::make_unique<Dense<float>>("dense", 12, Activation::kRelu));
  layers.push_back(std::make_unique<Dropout<float>>("dropout_2", 0.5));
  layers.push_back(std::make_unique<Dropout<float>>("dropout_3", 0.0));
  layers.push_back(std::make_unique<Dense<float>>("dense_1", 10, Activation::kLinear));
  const Sequential<float> m("dropout-model", {7, 7, 1}, std::move(layers));
  const ParameterList<float> params = m.InitialParameters(5);
  const Batch batch = RandomBatch(m, kExamples, 9);
  std::vector<std::int64_t> ids(kExamples);
  for (std::int64_t i = 0; i < kExamples; ++i) ids[static_cast<std::size_t>(i)] = 1000 - 3 * i;
  auto plan = MakeDevicePlan(m);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const auto values = static_cast<std::size_t>(m.num_parameter_values() * kExactWords);

  std::vector<std::vector<std::int64_t>> first_step;
  for (const DropoutStep step :
       {DropoutStep{17, 3, DropoutRng::kKeyed, 0, ids}, DropoutStep{17, 4, DropoutRng::kKeyed, 0, {}},
        DropoutStep{17, 3, DropoutRng::kPerReplica, 2, {}}}) {
    std::vector<std::vector<std::int64_t>> words[2];
    std::vector<float> losses[2];
    for (int device = 0; device < 2; ++device) {
      words[device].assign(kSplits.size(), std::vector<std::int64_t>(values, 7));
      std::vector<ExactSegment> segments;
      for (std::size_t s = 0; s < kSplits.size(); ++s)
        segments.push_back({&params, kSplits[s].first, kSplits[s].second, words[device][s]});
      losses[device].assign(kExamples, -1.0f);
      std::vector<std::int32_t> predictions(kExamples);
      if (device == 0) {
        BatchRunner runner(m);
        runner.set_dropout_step(step);
        runner.RunExact(batch.images, batch.labels, batch.coefficients, losses[0], predictions, segments);
      } else {
        auto backend = MakeDeviceBackend(m, MakeHostRunner(*plan, 2));
        backend->SetDropoutStep(step);
        ASSERT_TRUE(
            backend->RunExact(batch.images, batch.labels, batch.coefficients, losses[1], predictions, segments).ok());
      }
    }
    EXPECT_EQ(std::memcmp(losses[0].data(), losses[1].data(), sizeof(float) * kExamples), 0)
        << DropoutRngName(step.rng) << " step " << step.step;
    EXPECT_EQ(words[0], words[1]) << DropoutRngName(step.rng) << " step " << step.step;
    if (first_step.empty()) {
      first_step = words[1];
    } else {
      EXPECT_NE(first_step, words[1]) << "the masks change with the step and the key";
    }
  }
}

TEST(DevicePlan, RefusesALayerWithoutADeviceKernel) {
  std::vector<std::unique_ptr<Layer<float>>> layers;
  layers.push_back(std::make_unique<Reshape<float>>("flatten", Shape{}));
  layers.push_back(std::make_unique<ReLU<float>>("re_lu"));
  const Sequential<float> model("relu", {4}, std::move(layers));
  auto plan = MakeDevicePlan(model);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("layer re_lu (ReLU) has no device kernel"), std::string::npos)
      << plan.status().message();
}

TEST(DevicePlan, RefusesAHalfPolicy) {
  // The device kernels compute in float32: a mixed policy's roundings would be lost.
  auto model = MakeModel<float>("seed-cnn", {28, 28, 1}, 10);
  ASSERT_TRUE(model.ok());
  ASSERT_TRUE(MakeDevicePlan(**model).ok());
  for (const ComputeType half : {ComputeType::kFloat16, ComputeType::kBFloat16}) {
    (*model)->set_compute_type(half);
    auto plan = MakeDevicePlan(**model);
    ASSERT_FALSE(plan.ok());
    EXPECT_NE(plan.status().message().find("--precision mixed_" + std::string(ComputeTypeName(half))),
              std::string::npos)
        << plan.status().message();
  }
}

TEST(ExactWords, CarryGivesOneFormPerValueWhateverTheOrderOfTheTerms) {
  // A device thread adds its terms in its own order and carries (ExactCarry); the
  // CPU in another order. The carried words must be equal, digits in [0, 2^32),
  // with the value unchanged and the nonzero mask right.
  CounterRng rng(5, RngPurpose::kWeightInit, 1);
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<std::pair<float, float>> terms;
    for (int k = 0; k < 40; ++k)
      terms.emplace_back(
          (rng.UniformFloat() - 0.5f) * std::ldexp(1.0f, static_cast<int>(rng.UniformFloat() * 200) - 100),
          rng.UniformFloat() - 0.25f);
    std::int64_t forward[kExactWords] = {}, backward[kExactWords] = {};
    for (const auto& [x, y] : terms) ExactAddFloat(forward, x), ExactAddProduct(forward, x, y);
    for (auto t = terms.rbegin(); t != terms.rend(); ++t)
      ExactAddProduct(backward, t->first, t->second), ExactAddFloat(backward, t->first);
    const double value = ExactToDouble(forward);
    const std::uint32_t mask = ExactCarry(forward);
    ExactCarry(backward);
    ASSERT_TRUE(std::equal(forward, forward + kExactWords, backward)) << "trial " << trial;
    ASSERT_EQ(ExactToDouble(forward), value);
    for (int w = 0; w < kExactDigitWords - 1; ++w) {
      ASSERT_GE(forward[w], 0);
      ASSERT_LT(forward[w], std::int64_t{1} << 32);
      ASSERT_EQ((mask >> w) & 1u, forward[w] != 0 ? 1u : 0u);
    }
  }
}

}  // namespace
}  // namespace dtlab
