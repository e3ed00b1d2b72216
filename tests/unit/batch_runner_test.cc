// BatchRunner: bit-identical results for any thread count and any chunk an example
// lands in (chunks are not padded), and the chunked float32
// gradient agrees with the double-precision whole-batch gradient.
#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <cmath>
#include <cstring>

#include "core/loss.h"
#include "core/mnist.h"
#include "core/batch.h"
#include "sim/compute/batch_runner.h"

namespace dtlab {
namespace {

struct Batch {
  Tensor<float> images;
  std::vector<std::int32_t> labels;
};

Batch SyntheticBatch(std::int64_t n) {
  ImageDataset data = MakeSyntheticDataset(n, 12, 12, 10, 5);
  std::vector<std::int64_t> indices(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) indices[static_cast<std::size_t>(i)] = i;
  Batch batch;
  GatherBatch(data, indices, batch.images, batch.labels);
  return batch;
}

ParameterList<float> Gradients(const Sequential<float>& model, const ParameterList<float>& params, const Batch& b,
                               int threads, std::int64_t chunk) {
  tbb::global_control control(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
  BatchRunner runner(model, chunk);
  const std::size_t n = b.labels.size();
  std::vector<float> coefficients(n, 1.0f / static_cast<float>(n)), losses(n);
  std::vector<std::int32_t> predictions(n);
  ParameterList<float> grads = model.ZeroParameters();
  runner.ForwardBackward(params, b.images, b.labels, coefficients, losses, predictions, grads);
  return grads;
}

TEST(BatchRunner, ResultsDoNotDependOnThreadCount) {
  auto model = std::move(MakeModel<float>("seed-cnn", {12, 12, 1}, 10)).value();
  const ParameterList<float> params = model->InitialParameters(3);
  const Batch batch = SyntheticBatch(77);  // not a multiple of the chunk size
  const ParameterList<float> one = Gradients(*model, params, batch, 1, 16);
  for (int threads : {2, 3, 8}) {
    const ParameterList<float> many = Gradients(*model, params, batch, threads, 16);
    for (std::size_t p = 0; p < one.size(); ++p) EXPECT_EQ(one[p], many[p]) << threads << " threads, parameter " << p;
  }
}

// Chunks are not padded: a short chunk computes its own rows only. An example's
// loss is the same bits alone in a chunk of 1, in a short last chunk, or in a full
// chunk of 16 (the invariance the padding once gave); a one-example segment's
// gradient equals that example's gradient computed alone, and mnist-cnn's dense
// layers and the seed model's convolution agree likewise.
TEST(BatchRunner, AnExampleGivesTheSameBitsInAChunkOfAnySize) {
  for (const char* name : {"seed-cnn", "mnist-cnn"}) {
    auto model = std::move(MakeModel<float>(name, {12, 12, 1}, 10)).value();
    const ParameterList<float> params = model->InitialParameters(5);
    const Batch batch = SyntheticBatch(23);
    const std::size_t n = batch.labels.size();
    const std::vector<float> coefficients(n, 0.25f);
    BatchRunner runner(*model);
    auto losses_for = [&](const std::vector<std::pair<std::int64_t, std::int64_t>>& splits,
                          std::vector<ParameterList<float>>& grads) {
      std::vector<float> losses(n, -1.0f);
      std::vector<std::int32_t> predictions(n, -1);
      grads.assign(splits.size(), model->ZeroParameters());
      std::vector<BatchSegment> segments;
      for (std::size_t s = 0; s < splits.size(); ++s)
        segments.push_back({&params, splits[s].first, splits[s].second, &grads[s], nullptr});
      runner.Run(batch.images, batch.labels, coefficients, losses, predictions, segments);
      return losses;
    };
    std::vector<ParameterList<float>> whole_grads, split_grads;
    const std::vector<float> whole = losses_for({{0, 23}}, whole_grads);  // chunks of 16 and 7
    const std::vector<float> split = losses_for({{0, 1}, {1, 16}, {17, 5}, {22, 1}}, split_grads);
    EXPECT_EQ(std::memcmp(whole.data(), split.data(), sizeof(float) * n), 0) << name;
    // Example 22 in a one-example segment, and alone in a batch of its own.
    Batch alone;
    alone.images.Resize({1, 12, 12, 1});
    std::copy_n(batch.images.data() + 22 * 144, 144, alone.images.data());
    alone.labels = {batch.labels[22]};
    std::vector<float> loss(1), one_coefficient{0.25f};
    std::vector<std::int32_t> prediction(1);
    ParameterList<float> grads = model->ZeroParameters();
    runner.ForwardBackward(params, alone.images, alone.labels, one_coefficient, loss, prediction, grads);
    EXPECT_EQ(std::memcmp(&loss[0], &whole[22], sizeof(float)), 0) << name;
    for (std::size_t p = 0; p < grads.size(); ++p) EXPECT_EQ(grads[p], split_grads[3][p]) << name << " parameter " << p;
  }
}

TEST(BatchRunner, ChunkedGradientMatchesDoublePrecisionWholeBatch) {
  auto model = std::move(MakeModel<float>("seed-cnn", {12, 12, 1}, 10)).value();
  auto model64 = std::move(MakeModel<double>("seed-cnn", {12, 12, 1}, 10)).value();
  const ParameterList<float> params = model->InitialParameters(3);
  const ParameterList<double> params64 = model64->InitialParameters(3);
  const Batch batch = SyntheticBatch(40);
  Tensor<double> images64(batch.images.shape());
  for (std::int64_t i = 0; i < images64.size(); ++i) images64[i] = batch.images[i];

  typename Sequential<double>::Workspace ws;
  const Tensor<double>& logits = model64->Forward(params64, images64, ws);
  std::vector<double> losses(40), coefficients(40, 1.0 / 40);
  Tensor<double> dlogits;
  SparseCategoricalCrossentropyFromLogits<double>(logits, batch.labels, losses, coefficients, &dlogits);
  ParameterList<double> reference = model64->ZeroParameters();
  model64->Backward(params64, dlogits, ws, reference);

  for (std::int64_t chunk : {1, 7, 16, 64}) {
    const ParameterList<float> grads = Gradients(*model, params, batch, 2, chunk);
    for (std::size_t p = 0; p < grads.size(); ++p) {
      double worst = 0, scale = 0;
      for (std::int64_t i = 0; i < grads[p].size(); ++i) {
        worst = std::max(worst, std::abs(grads[p][i] - reference[p][i]));
        scale = std::max(scale, std::abs(reference[p][i]));
      }
      EXPECT_LE(worst, 1e-4 * scale + 1e-9) << "chunk " << chunk << ", parameter " << model->parameters()[p].name;
    }
  }
}

TEST(BatchRunner, EvaluateMatchesForwardBackwardLosses) {
  auto model = std::move(MakeModel<float>("linear", {12, 12, 1}, 10)).value();
  const ParameterList<float> params = model->InitialParameters(9);
  const Batch batch = SyntheticBatch(20);
  BatchRunner runner(*model, 8);
  std::vector<float> a(20), b(20), coefficients(20, 0.05f);
  std::vector<std::int32_t> pa(20), pb(20);
  ParameterList<float> grads = model->ZeroParameters();
  runner.Evaluate(params, batch.images, batch.labels, a, pa);
  runner.ForwardBackward(params, batch.images, batch.labels, coefficients, b, pb, grads);
  EXPECT_EQ(a, b);
  EXPECT_EQ(pa, pb);
  for (float l : a) EXPECT_NEAR(l, std::log(10.0f), 1.5f);
}

}  // namespace
}  // namespace dtlab
