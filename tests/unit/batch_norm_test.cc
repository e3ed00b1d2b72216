// BatchNormalization (core/batch_norm.h) in the runner: the statistics are exact sums,
// so a synchronized layer gives every example the bits of one device on the whole
// batch however the batch is split into replicas and chunks, and an unsynchronized
// one normalizes each replica by its own batch.
#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <cmath>
#include <cstring>

#include "core/batch.h"
#include "core/batch_norm.h"
#include "core/loss.h"
#include "core/mnist.h"
#include "sim/compute/batch_runner.h"

namespace dtlab {
namespace {

std::string Fixture(const std::string& name) { return std::string(DTLAB_TEST_SOURCE_DIR) + "/tests/models/" + name; }

struct Batch {
  Tensor<float> images;
  std::vector<std::int32_t> labels;
  std::vector<float> coefficients;
};

Batch SyntheticBatch(std::int64_t n) {
  ImageDataset data = MakeSyntheticDataset(n, 28, 28, 10, 7);
  std::vector<std::int64_t> indices(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) indices[static_cast<std::size_t>(i)] = i;
  Batch batch;
  GatherBatch(data, indices, batch.images, batch.labels);
  batch.coefficients.assign(static_cast<std::size_t>(n), 1.0f / static_cast<float>(n));
  return batch;
}

std::unique_ptr<Sequential<float>> Model(const std::string& file) {
  auto made = MakeModel<float>(Fixture(file), {28, 28, 1}, 10);
  EXPECT_TRUE(made.ok()) << made.status().ToString();
  return std::move(made).value();
}

// A training step's exact pass over `sizes` (one segment per entry, in order): the
// per-example losses and the merged gradient words of all segments.
struct ExactStep {
  std::vector<float> losses;
  std::vector<std::int64_t> words;
  std::vector<std::vector<BatchNormStatistics>> statistics;  // [segment][layer]
};

ExactStep RunExactSegments(const Sequential<float>& model, const ParameterList<float>& params, const Batch& batch,
                           const std::vector<std::int64_t>& sizes, std::int64_t chunk, int threads = 2) {
  tbb::global_control control(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
  BatchRunner runner(model, chunk);
  const std::size_t n = batch.labels.size();
  const auto size = static_cast<std::size_t>(model.num_parameter_values() * kExactWords);
  std::vector<std::vector<std::int64_t>> words(sizes.size(), std::vector<std::int64_t>(size, 0));
  std::vector<ExactSegment> segments;
  std::int64_t begin = 0;
  for (std::size_t s = 0; s < sizes.size(); ++s) {
    segments.push_back({&params, begin, sizes[s], words[s]});
    begin += sizes[s];
  }
  ExactStep step;
  step.losses.assign(n, 0.0f);
  std::vector<std::int32_t> predictions(n);
  runner.RunExact(batch.images, batch.labels, batch.coefficients, step.losses, predictions, segments);
  step.words.assign(size, 0);
  for (const auto& w : words)
    for (std::size_t k = 0; k < size; k += kExactWords) ExactMerge(step.words.data() + k, w.data() + k);
  ExactNormalizeAll(step.words);
  for (std::size_t s = 0; s < sizes.size(); ++s) {
    auto stats = runner.batch_norm_statistics(s);
    step.statistics.emplace_back(stats.begin(), stats.end());
  }
  return step;
}

bool SameBits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(BatchNorm, SynchronizedLayersGiveOneDeviceBitsOnAnySplit) {
  const auto model = Model("batch_norm_cnn.json");
  const ParameterList<float> params = model->InitialParameters(3);
  const Batch batch = SyntheticBatch(21);
  const ExactStep one = RunExactSegments(*model, params, batch, {21}, 16);
  for (const auto& [sizes, chunk] : std::vector<std::pair<std::vector<std::int64_t>, std::int64_t>>{
           {{6, 6, 5, 4}, 16}, {{6, 6, 5, 4}, 1}, {{10, 0, 11, 0}, 3}, {{21}, 2}}) {
    const ExactStep split = RunExactSegments(*model, params, batch, sizes, chunk);
    EXPECT_TRUE(SameBits(split.losses, one.losses)) << sizes.size() << " segments, chunk " << chunk;
    EXPECT_EQ(split.words, one.words) << sizes.size() << " segments, chunk " << chunk;
    for (const auto& segment : split.statistics)  // every replica normalizes by the global batch
      for (const std::size_t l : BatchNormLayers(*model)) {
        EXPECT_TRUE(SameBits(segment[l].mean, one.statistics[0][l].mean));
        EXPECT_TRUE(SameBits(segment[l].variance, one.statistics[0][l].variance));
        EXPECT_TRUE(SameBits(segment[l].centered_dy, one.statistics[0][l].centered_dy));
      }
  }
  // The thread count changes nothing either.
  const ExactStep single = RunExactSegments(*model, params, batch, {6, 6, 5, 4}, 4, 1);
  EXPECT_EQ(single.words, one.words);
}

TEST(BatchNorm, UnsynchronizedLayersNormalizeEachReplicaByItsOwnBatch) {
  const auto model = Model("batch_norm_cnn_unsynchronized.json");
  const ParameterList<float> params = model->InitialParameters(3);
  const Batch batch = SyntheticBatch(21);
  const ExactStep one = RunExactSegments(*model, params, batch, {21}, 16);
  const ExactStep split = RunExactSegments(*model, params, batch, {6, 6, 5, 4}, 16);
  EXPECT_FALSE(SameBits(split.losses, one.losses));
  EXPECT_NE(split.words, one.words);
  // Each replica's statistics are those of its examples alone: one device on them.
  const ExactStep second = RunExactSegments(*model, params, batch, {6, 15}, 16);
  Batch alone;
  alone.images = Tensor<float>(Shape{6, 28, 28, 1});
  std::memcpy(alone.images.data(), batch.images.data(), sizeof(float) * static_cast<std::size_t>(alone.images.size()));
  alone.labels.assign(batch.labels.begin(), batch.labels.begin() + 6);
  alone.coefficients.assign(batch.coefficients.begin(), batch.coefficients.begin() + 6);
  const ExactStep first = RunExactSegments(*model, params, alone, {6}, 4);
  EXPECT_TRUE(SameBits(std::span(second.losses).first(6), first.losses));
  for (const std::size_t l : BatchNormLayers(*model)) {
    EXPECT_TRUE(SameBits(second.statistics[0][l].mean, first.statistics[0][l].mean));
    EXPECT_FALSE(SameBits(second.statistics[1][l].mean, first.statistics[0][l].mean));
  }
  // A replica without examples has no statistics: NaN, as a mean over nothing is.
  const ExactStep empty = RunExactSegments(*model, params, batch, {21, 0}, 16);
  EXPECT_TRUE(std::isnan(empty.statistics[1][BatchNormLayers(*model)[0]].mean[0]));
}

TEST(BatchNorm, TheLayerAloneEqualsTheRunnerOnOneChunk) {
  // Sequential::Forward without a runner: the layer computes the statistics over the
  // batch it is given, with the runner's arithmetic.
  const auto model = Model("batch_norm_cnn.json");
  const ParameterList<float> params = model->InitialParameters(5);
  const Batch batch = SyntheticBatch(9);
  Sequential<float>::Workspace ws;
  ws.context.training = true;
  const Tensor<float>& logits = model->Forward(params, batch.images, ws);
  std::vector<float> losses(9);
  SparseCategoricalCrossentropyFromLogits<float>(logits, batch.labels, losses, batch.coefficients, nullptr);
  const ExactStep runner = RunExactSegments(*model, params, batch, {9}, 2);
  EXPECT_TRUE(SameBits(losses, runner.losses));
}

TEST(BatchNorm, FastModeMatchesExactModesPerExampleValues) {
  const auto model = Model("batch_norm_cnn.json");
  const ParameterList<float> params = model->InitialParameters(3);
  const Batch batch = SyntheticBatch(13);
  const ExactStep exact = RunExactSegments(*model, params, batch, {4, 4, 5}, 16);
  BatchRunner runner(*model, 3);
  std::vector<ParameterList<float>> grads(3, model->ZeroParameters());
  std::vector<BatchSegment> segments;
  for (std::size_t s = 0; s < 3; ++s)
    segments.push_back({&params, static_cast<std::int64_t>(s) * 4, s == 2 ? 5 : 4, &grads[s], nullptr});
  std::vector<float> losses(13);
  std::vector<std::int32_t> predictions(13);
  runner.Run(batch.images, batch.labels, batch.coefficients, losses, predictions, segments);
  EXPECT_TRUE(SameBits(losses, exact.losses));
  // The moving statistics get no gradient.
  for (std::size_t p = 0; p < model->parameters().size(); ++p)
    if (!model->parameters()[p].spec.trainable) {
      for (const auto& g : grads)
        for (const float v : g[p].span()) EXPECT_EQ(v, 0.0f) << model->parameters()[p].name;
    }
}

TEST(BatchNorm, MovingStatisticsFollowKerasUpdate) {
  const auto model = Model("batch_norm_cnn.json");
  ParameterList<float> params = model->InitialParameters(3);
  const std::size_t layer = BatchNormLayers(*model)[0];
  const std::size_t moving = model->first_parameter(layer) + 2;  // after gamma and beta
  EXPECT_EQ(model->parameters()[moving].name, "batch_normalization/moving_mean");
  EXPECT_FALSE(model->parameters()[moving].spec.trainable);
  EXPECT_EQ(params[moving][0], 0.0f);
  EXPECT_EQ(params[moving + 1][0], 1.0f);  // moving_variance starts at ones
  EXPECT_EQ(params[moving - 2][0], 1.0f);  // gamma too
  const Batch batch = SyntheticBatch(8);
  const ExactStep step = RunExactSegments(*model, params, batch, {8}, 16);
  UpdateMovingStatistics(*model, step.statistics[0], params);
  const BatchNormStatistics& stats = step.statistics[0][layer];
  for (std::int64_t c = 0; c < params[moving].size(); ++c) {
    const auto k = static_cast<std::size_t>(c);
    EXPECT_EQ(params[moving][c], 0.0f * 0.99f + stats.mean[k] * static_cast<float>(1.0 - 0.99));
    EXPECT_EQ(params[moving + 1][c], 1.0f * 0.99f + stats.variance[k] * static_cast<float>(1.0 - 0.99));
    EXPECT_GT(stats.variance[k], 0.0f);
  }
}

}  // namespace
}  // namespace dtlab
