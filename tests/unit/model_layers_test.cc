// The layers model files bring (docs/models.md) against their scalar definitions,
// bit for bit: Conv2D with strides and same padding (the chain over every (kh, kw,
// c), padding zeros included), MaxPooling2D and AveragePooling2D with any window,
// the Softmax layer and Dropout, written here as plain std::fma loops and additions
// in the documented order. Exact mode's per-example terms of a strided convolution
// are checked the same way, and a model with every layer gives one device's exact
// gradient words on any split of its batch, Dropout included.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/activation_layer.h"
#include "core/conv2d.h"
#include "core/dropout.h"
#include "core/keras_model.h"
#include "core/pooling.h"
#include "core/portable_math.h"
#include "core/rng.h"
#include "sim/compute/batch_runner.h"
#include "tests/unit/test_util.h"

namespace dtlab {
namespace {

Tensor<float> Random(Shape shape, std::uint64_t index, float scale = 1.0f) {
  return testing::RandomFloats(std::move(shape), 21, index, scale);
}

using testing::SameBits;

// Tensor::flat() tells Eigen the data is 64-byte aligned: true for every size and
// every build (the fuzzers' build, without -march, once broke it).
TEST(TensorTest, StorageIsAlignedTo64BytesForEverySize) {
  std::vector<Tensor<float>> tensors;
  for (std::int64_t n = 1; n <= 300; ++n) {
    tensors.emplace_back(Shape{n});
    tensors.back().Resize({n + 7});
  }
  for (const Tensor<float>& t : tensors)
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data()) % 64, 0u) << t.size() << " floats";
  Tensor<double> d(Shape{3});
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(d.data()) % 64, 0u);
}

// TF's padding rule, written out again: (out, pad_before).
std::pair<std::int64_t, std::int64_t> Axis(std::int64_t in, std::int64_t k, std::int64_t s, bool same) {
  if (!same) return {(in - k) / s + 1, 0};
  const std::int64_t out = (in + s - 1) / s;
  return {out, std::max<std::int64_t>((out - 1) * s + k - in, 0) / 2};
}

struct StridedConvCase {
  std::int64_t batch, height, width, channels, filters, kh, kw, sh, sw;
  bool same, relu;
};

void ExpectStridedConv2DIsItsScalarDefinition(const StridedConvCase& t) {
  const auto [oh_count, pad_top] = Axis(t.height, t.kh, t.sh, t.same);
  const auto [ow_count, pad_left] = Axis(t.width, t.kw, t.sw, t.same);
  const std::int64_t H = t.height, W = t.width, C = t.channels, F = t.filters;
  const Tensor<float> x = Random({t.batch, H, W, C}, 1), kernel = Random({t.kh, t.kw, C, F}, 2),
                      bias = Random({F}, 3, 0.1f), dy = Random({t.batch, oh_count, ow_count, F}, 4, 0.01f);
  Conv2D<float>::Options options;
  options.stride_height = t.sh, options.stride_width = t.sw;
  options.padding = t.same ? Padding::kSame : Padding::kValid;
  const Conv2D<float> layer("conv2d", F, t.kh, t.kw, t.relu ? Activation::kRelu : Activation::kLinear, options);
  ASSERT_EQ(layer.OutputShape({H, W, C}), (Shape{oh_count, ow_count, F}));
  const Tensor<float>* params[] = {&kernel, &bias};
  LayerCache<float> cache;
  Tensor<float> y, dx, dkernel({t.kh, t.kw, C, F}), dbias({F});
  layer.Forward(params, x, y, cache);
  Tensor<float>* grads[] = {&dkernel, &dbias};
  Tensor<float> dz = dy;
  layer.Backward(params, x, y, dz, &dx, grads, cache);

  // The patch value of output (b, oh, ow) at (kh, kw, c): the input, or +0 in the padding.
  auto patch = [&](std::int64_t b, std::int64_t oh, std::int64_t ow, std::int64_t kh, std::int64_t kw, std::int64_t c) {
    const std::int64_t ih = oh * t.sh - pad_top + kh, iw = ow * t.sw - pad_left + kw;
    if (ih < 0 || ih >= H || iw < 0 || iw >= W) return 0.0f;
    return x[((b * H + ih) * W + iw) * C + c];
  };
  const std::int64_t rows = t.batch * oh_count * ow_count;
  std::vector<float> want_y(static_cast<std::size_t>(rows * F)), want_dz(want_y.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t b = r / (oh_count * ow_count), oh = r / ow_count % oh_count, ow = r % ow_count;
    for (std::int64_t f = 0; f < F; ++f) {
      float acc = 0.0f;
      for (std::int64_t kh = 0; kh < t.kh; ++kh)
        for (std::int64_t kw = 0; kw < t.kw; ++kw)
          for (std::int64_t c = 0; c < C; ++c)
            acc = std::fma(patch(b, oh, ow, kh, kw, c), kernel[((kh * t.kw + kw) * C + c) * F + f], acc);
      acc += bias[f];
      const auto i = static_cast<std::size_t>(r * F + f);
      want_y[i] = t.relu && !(acc > 0.0f) ? 0.0f : acc;
      want_dz[i] = t.relu && !(acc > 0.0f) ? 0.0f : dy[r * F + f];
    }
  }
  std::vector<float> want_dkernel(static_cast<std::size_t>(dkernel.size())), want_dbias(static_cast<std::size_t>(F));
  for (std::int64_t kh = 0; kh < t.kh; ++kh)
    for (std::int64_t kw = 0; kw < t.kw; ++kw)
      for (std::int64_t c = 0; c < C; ++c)
        for (std::int64_t f = 0; f < F; ++f) {
          float acc = 0.0f;
          for (std::int64_t r = 0; r < rows; ++r) {
            const std::int64_t b = r / (oh_count * ow_count), oh = r / ow_count % oh_count, ow = r % ow_count;
            acc = std::fma(patch(b, oh, ow, kh, kw, c), want_dz[static_cast<std::size_t>(r * F + f)], acc);
          }
          want_dkernel[static_cast<std::size_t>(((kh * t.kw + kw) * C + c) * F + f)] = acc;
        }
  for (std::int64_t f = 0; f < F; ++f) {
    float sum = 0.0f;
    for (std::int64_t r = 0; r < rows; ++r) sum += want_dz[static_cast<std::size_t>(r * F + f)];
    want_dbias[static_cast<std::size_t>(f)] = sum;
  }
  // dx: +0, then each row's patch gradient (a chain over the filters) added in row order.
  std::vector<float> want_dx(static_cast<std::size_t>(x.size()), 0.0f);
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t b = r / (oh_count * ow_count), oh = r / ow_count % oh_count, ow = r % ow_count;
    for (std::int64_t kh = 0; kh < t.kh; ++kh)
      for (std::int64_t kw = 0; kw < t.kw; ++kw) {
        const std::int64_t ih = oh * t.sh - pad_top + kh, iw = ow * t.sw - pad_left + kw;
        if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
        for (std::int64_t c = 0; c < C; ++c) {
          float acc = 0.0f;
          for (std::int64_t f = 0; f < F; ++f)
            acc =
                std::fma(want_dz[static_cast<std::size_t>(r * F + f)], kernel[((kh * t.kw + kw) * C + c) * F + f], acc);
          want_dx[static_cast<std::size_t>(((b * H + ih) * W + iw) * C + c)] += acc;
        }
      }
  }
  EXPECT_TRUE(SameBits(y, want_y));
  EXPECT_TRUE(SameBits(dkernel, want_dkernel));
  EXPECT_TRUE(SameBits(dbias, want_dbias));
  EXPECT_TRUE(SameBits(dx, want_dx));

  // Exact mode: each example's kernel terms are one chain over its own positions.
  Tensor<float> dz_exact = dy;
  LayerCache<float> exact_cache;
  Tensor<float> y_exact, dx_exact;
  layer.Forward(params, x, y_exact, exact_cache);
  ExampleTerms kernel_terms, bias_terms;
  ExampleTerms* terms[] = {&kernel_terms, &bias_terms};
  layer.BackwardExact(params, x, y_exact, dz_exact, &dx_exact, terms, exact_cache);
  EXPECT_TRUE(SameBits(dx_exact, want_dx));
  const std::int64_t positions = oh_count * ow_count;
  std::vector<float> want_terms(static_cast<std::size_t>(t.batch * dkernel.size()));
  for (std::int64_t b = 0; b < t.batch; ++b)
    for (std::int64_t k = 0; k < dkernel.size(); ++k) {
      const std::int64_t f = k % F, c = k / F % C, kw = k / F / C % t.kw, kh = k / F / C / t.kw;
      float acc = 0.0f;
      for (std::int64_t p = 0; p < positions; ++p)
        acc = std::fma(patch(b, p / ow_count, p % ow_count, kh, kw, c),
                       want_dz[static_cast<std::size_t>((b * positions + p) * F + f)], acc);
      want_terms[static_cast<std::size_t>(b * dkernel.size() + k)] = acc;
    }
  EXPECT_TRUE(SameBits(kernel_terms.values, want_terms));
}

TEST(ModelLayers, StridedAndSamePaddedConv2DIsItsScalarDefinition) {
  ExpectStridedConv2DIsItsScalarDefinition({2, 9, 8, 3, 5, 3, 3, 2, 2, true, true});
  ExpectStridedConv2DIsItsScalarDefinition({2, 9, 8, 3, 5, 3, 3, 1, 1, true, false});    // same, stride 1
  ExpectStridedConv2DIsItsScalarDefinition({3, 11, 10, 2, 4, 2, 3, 3, 2, false, true});  // valid, strided
  ExpectStridedConv2DIsItsScalarDefinition({2, 3, 4, 2, 3, 5, 4, 1, 2, true, false});    // kernel beyond the input
  ExpectStridedConv2DIsItsScalarDefinition({2, 8, 8, 16, 8, 3, 3, 2, 2, true, true});    // rows of 48 inputs
}

TEST(ModelLayers, SamePaddingFollowsTensorFlowsRule) {
  // 28 -> 14 with a 3x3 kernel and stride 2: pad_total = 13*2 + 3 - 28 = 1, none before.
  const WindowAxis a = MakeWindowAxis(28, 3, 2, Padding::kSame);
  EXPECT_EQ(a.out, 14);
  EXPECT_EQ(a.pad_before, 0);
  // 7 with 4 and stride 1: pad_total 3, 1 before and 2 after.
  const WindowAxis b = MakeWindowAxis(7, 4, 1, Padding::kSame);
  EXPECT_EQ(b.out, 7);
  EXPECT_EQ(b.pad_before, 1);
  EXPECT_EQ(MakeWindowAxis(7, 3, 2, Padding::kValid).out, 3);
  EXPECT_EQ(MakeWindowAxis(2, 3, 1, Padding::kValid).out, 0);
}

struct PoolCase {
  std::int64_t batch, height, width, channels, pool, stride;
  bool same;
};

void ExpectPoolingIsItsScalarDefinition(const PoolCase& t, bool ties) {
  const auto [oh_count, pad_top] = Axis(t.height, t.pool, t.stride, t.same);
  const auto [ow_count, pad_left] = Axis(t.width, t.pool, t.stride, t.same);
  const std::int64_t H = t.height, W = t.width, C = t.channels;
  Tensor<float> x = Random({t.batch, H, W, C}, 5);
  if (ties)  // all-zero windows, as after a ReLU: the first position wins
    for (std::int64_t i = 0; i < x.size(); ++i) x[i] = x[i] > 0.3f ? x[i] : 0.0f;
  const Tensor<float> dy = Random({t.batch, oh_count, ow_count, C}, 6);
  const PoolingOptions options{t.pool, t.pool, t.stride, t.stride, t.same ? Padding::kSame : Padding::kValid};
  const MaxPooling2D<float> max_pool("max", options);
  const AveragePooling2D<float> average_pool("average", options);
  LayerCache<float> max_cache, average_cache;
  Tensor<float> max_y, max_dx, average_y, average_dx, dz = dy;
  max_pool.Forward({}, x, max_y, max_cache);
  max_pool.Backward({}, x, max_y, dz, &max_dx, {}, max_cache);
  dz = dy;
  average_pool.Forward({}, x, average_y, average_cache);
  average_pool.Backward({}, x, average_y, dz, &average_dx, {}, average_cache);

  std::vector<float> want_max(static_cast<std::size_t>(max_y.size())), want_average(want_max.size());
  std::vector<float> want_max_dx(static_cast<std::size_t>(x.size()), 0.0f), want_average_dx(want_max_dx.size(), 0.0f);
  for (std::int64_t b = 0; b < t.batch; ++b)
    for (std::int64_t oh = 0; oh < oh_count; ++oh)
      for (std::int64_t ow = 0; ow < ow_count; ++ow)
        for (std::int64_t c = 0; c < C; ++c) {
          const std::int64_t o = ((b * oh_count + oh) * ow_count + ow) * C + c;
          std::int64_t best = -1, count = 0;
          float sum = 0.0f;
          for (std::int64_t kh = 0; kh < t.pool; ++kh)
            for (std::int64_t kw = 0; kw < t.pool; ++kw) {
              const std::int64_t ih = oh * t.stride - pad_top + kh, iw = ow * t.stride - pad_left + kw;
              if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
              const std::int64_t i = ((b * H + ih) * W + iw) * C + c;
              if (best < 0 || x[i] > x[best]) best = i;
              sum += x[i];
              ++count;
            }
          want_max[static_cast<std::size_t>(o)] = x[best];
          want_max_dx[static_cast<std::size_t>(best)] += dy[o];
          want_average[static_cast<std::size_t>(o)] = sum / static_cast<float>(count);
          const auto coefficient = static_cast<float>(1.0 / static_cast<double>(count));
          for (std::int64_t kh = 0; kh < t.pool; ++kh)
            for (std::int64_t kw = 0; kw < t.pool; ++kw) {
              const std::int64_t ih = oh * t.stride - pad_top + kh, iw = ow * t.stride - pad_left + kw;
              if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
              want_average_dx[static_cast<std::size_t>(((b * H + ih) * W + iw) * C + c)] += dy[o] * coefficient;
            }
        }
  EXPECT_TRUE(SameBits(max_y, want_max));
  EXPECT_TRUE(SameBits(max_dx, want_max_dx));
  EXPECT_TRUE(SameBits(average_y, want_average));
  EXPECT_TRUE(SameBits(average_dx, want_average_dx));
}

TEST(ModelLayers, PoolingsAreTheirScalarDefinition) {
  for (const bool ties : {false, true}) {
    SCOPED_TRACE(ties);
    ExpectPoolingIsItsScalarDefinition({2, 7, 6, 3, 3, 2, true}, ties);   // overlapping, same
    ExpectPoolingIsItsScalarDefinition({2, 7, 6, 3, 2, 1, false}, ties);  // overlapping, valid
    ExpectPoolingIsItsScalarDefinition({2, 8, 7, 4, 2, 2, false}, ties);  // the defaults (the fast path)
    ExpectPoolingIsItsScalarDefinition({1, 5, 5, 2, 2, 2, true}, ties);   // same, a half window at the edge
    ExpectPoolingIsItsScalarDefinition({1, 6, 6, 1, 3, 3, false}, ties);
  }
}

TEST(ModelLayers, SoftmaxIsItsScalarDefinition) {
  const Tensor<float> x = Random({5, 2, 7}, 7, 8.0f), dy = Random({5, 2, 7}, 8);
  const ActivationLayer<float> layer("softmax", ActivationLayer<float>::Function::kSoftmax, "Softmax");
  LayerCache<float> cache;
  Tensor<float> y, dx, dz = dy;
  layer.Forward({}, x, y, cache);
  layer.Backward({}, x, y, dz, &dx, {}, cache);
  std::vector<float> want_y(static_cast<std::size_t>(x.size())), want_dx(want_y.size());
  for (std::int64_t r = 0; r < 10; ++r) {
    float max = x[r * 7];
    for (int i = 1; i < 7; ++i) max = x[r * 7 + i] > max ? x[r * 7 + i] : max;
    float sum = 0.0f;
    std::vector<float> e(7);
    for (int i = 0; i < 7; ++i) {
      e[static_cast<std::size_t>(i)] = portable::Exp(x[r * 7 + i] - max);
      sum += e[static_cast<std::size_t>(i)];
    }
    const float inverse = 1.0f / sum;
    for (int i = 0; i < 7; ++i) want_y[static_cast<std::size_t>(r * 7 + i)] = e[static_cast<std::size_t>(i)] * inverse;
    float dot = 0.0f;
    for (int i = 0; i < 7; ++i) dot = std::fma(dy[r * 7 + i], want_y[static_cast<std::size_t>(r * 7 + i)], dot);
    for (int i = 0; i < 7; ++i)
      want_dx[static_cast<std::size_t>(r * 7 + i)] =
          (dy[r * 7 + i] - dot) * want_y[static_cast<std::size_t>(r * 7 + i)];
  }
  EXPECT_TRUE(SameBits(y, want_y));
  EXPECT_TRUE(SameBits(dx, want_dx));
}

TEST(ModelLayers, DropoutIsKerasInvertedDropoutWithKeyedMasks) {
  const Tensor<float> x = Random({4, 30}, 9), dy = Random({4, 30}, 10);
  const Dropout<float> layer("dropout", 0.3);
  const std::vector<std::uint64_t> streams = {17, 3, 99, 4};
  ForwardContext context{true, 5, 12, streams, {}};
  LayerCache<float> cache;
  cache.context = &context;
  cache.layer = 2;
  Tensor<float> y, dx, dz = dy;
  layer.Forward({}, x, y, cache);
  layer.Backward({}, x, y, dz, &dx, {}, cache);
  const float scale = static_cast<float>(1.0 / (1.0 - 0.3));
  std::vector<float> want_y(120), want_dx(120);
  int dropped = 0;
  for (std::int64_t e = 0; e < 4; ++e) {
    CounterRng rng(DropoutStreamKey(5, 12, 2), RngPurpose::kDropout, streams[static_cast<std::size_t>(e)]);
    for (std::int64_t k = 0; k < 30; ++k) {
      const bool keep = rng.UniformFloat() >= 0.3f;
      dropped += !keep;
      want_y[static_cast<std::size_t>(e * 30 + k)] = keep ? x[e * 30 + k] * scale : 0.0f;
      want_dx[static_cast<std::size_t>(e * 30 + k)] = keep ? dy[e * 30 + k] * scale : 0.0f;
    }
  }
  EXPECT_GT(dropped, 20);
  EXPECT_LT(dropped, 60);
  EXPECT_TRUE(SameBits(y, want_y));
  EXPECT_TRUE(SameBits(dx, want_dx));
  // An example's mask is its stream's: the same rows in another batch order get the same values.
  const std::vector<std::uint64_t> reversed = {4, 99, 3, 17};
  ForwardContext other{true, 5, 12, reversed, {}};
  Tensor<float> x_reversed({4, 30}), y_reversed;
  for (std::int64_t e = 0; e < 4; ++e) std::copy_n(x.data() + e * 30, 30, x_reversed.data() + (3 - e) * 30);
  LayerCache<float> other_cache;
  other_cache.context = &other;
  other_cache.layer = 2;
  layer.Forward({}, x_reversed, y_reversed, other_cache);
  for (std::int64_t e = 0; e < 4; ++e)
    EXPECT_EQ(0, std::memcmp(y.data() + e * 30, y_reversed.data() + (3 - e) * 30, 30 * sizeof(float)));
  // Another step, layer or seed: other masks. Inference: the identity.
  EXPECT_NE(DropoutStreamKey(5, 12, 2), DropoutStreamKey(5, 13, 2));
  EXPECT_NE(DropoutStreamKey(5, 12, 2), DropoutStreamKey(5, 12, 3));
  EXPECT_NE(DropoutStreamKey(5, 12, 2), DropoutStreamKey(6, 12, 2));
  LayerCache<float> inference;
  Tensor<float> y_inference;
  layer.Forward({}, x, y_inference, inference);
  EXPECT_EQ(y_inference, x);
  EXPECT_EQ(DropoutStream(DropoutRng::kKeyed, 7, 3, 2), 7u);
  EXPECT_EQ(DropoutStream(DropoutRng::kPerReplica, 7, 3, 2), (std::uint64_t{4} << 32) + 2);
}

// A model with every layer, Dropout included, through BatchRunner: exact mode's
// gradient words of any split of the batch add up to one device's, and so do
// fast mode's per-example losses.
constexpr const char* kEveryLayer = R"({"class_name": "Sequential", "config": {"name": "small", "layers": [
  {"class_name": "InputLayer", "config": {"name": "in", "batch_shape": [null, 12, 12, 1]}},
  {"class_name": "Conv2D", "config": {"name": "c1", "filters": 4, "kernel_size": [3, 3], "strides": [2, 2],
    "padding": "same", "activation": "relu",
    "kernel_regularizer": {"class_name": "L2", "config": {"l2": 0.001}},
    "bias_regularizer": {"class_name": "L2", "config": {"l2": 0.01}}}},
  {"class_name": "MaxPooling2D", "config": {"name": "p1", "pool_size": [3, 3], "strides": [1, 1], "padding": "same"}},
  {"class_name": "Dropout", "config": {"name": "d1", "rate": 0.3}},
  {"class_name": "Conv2D", "config": {"name": "c2", "filters": 5, "kernel_size": [2, 2], "padding": "same"}},
  {"class_name": "Activation", "config": {"name": "a1", "activation": "relu"}},
  {"class_name": "AveragePooling2D", "config": {"name": "p2", "pool_size": [2, 2], "strides": [1, 1]}},
  {"class_name": "Flatten", "config": {"name": "f"}},
  {"class_name": "Dense", "config": {"name": "h", "units": 12, "activation": "softmax"}},
  {"class_name": "Dropout", "config": {"name": "d2", "rate": 0.5}},
  {"class_name": "Dense", "config": {"name": "out", "units": 5, "activation": "softmax"}}]}})";

TEST(ModelLayers, ExactModeSplitsEqualOneDeviceWithEveryLayer) {
  auto made = LoadKerasModel<float>(kEveryLayer, "every layer", {12, 12, 1}, 5);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  const Sequential<float>& model = **made;
  EXPECT_TRUE(model.softmax_output());
  const ParameterList<float> params = model.InitialParameters(4);
  constexpr std::int64_t kBatch = 37;
  const Tensor<float> images = Random({kBatch, 12, 12, 1}, 11);
  std::vector<std::int32_t> labels(kBatch);
  for (std::int64_t i = 0; i < kBatch; ++i) labels[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i % 5);
  const std::vector<float> coefficients(kBatch, 1.0f / kBatch);
  const auto values = static_cast<std::size_t>(model.num_parameter_values() * kExactWords);
  std::vector<float> losses(kBatch), split_losses(kBatch);
  std::vector<std::int32_t> predictions(kBatch);
  for (const DropoutRng rng : {DropoutRng::kKeyed, DropoutRng::kPerReplica}) {
    SCOPED_TRACE(DropoutRngName(rng));
    BatchRunner one(model), many(model, 5);
    one.set_dropout_step({9, 3, rng, 0, {}});
    many.set_dropout_step({9, 3, rng, 0, {}});
    std::vector<std::int64_t> whole(values);
    const ExactSegment all{&params, 0, kBatch, whole};
    one.RunExact(images, labels, coefficients, losses, predictions, std::span(&all, 1));
    std::vector<std::vector<std::int64_t>> parts(3, std::vector<std::int64_t>(values));
    const std::vector<ExactSegment> segments = {
        {&params, 0, 10, parts[0]}, {&params, 10, 15, parts[1]}, {&params, 25, 12, parts[2]}};
    many.RunExact(images, labels, coefficients, split_losses, predictions, segments);
    for (std::size_t i = 0; i < values; ++i) parts[0][i] += parts[1][i] + parts[2][i];
    ExactNormalizeAll(parts[0]);
    ExactNormalizeAll(whole);
    if (rng == DropoutRng::kKeyed) {
      EXPECT_EQ(parts[0], whole);
      EXPECT_EQ(split_losses, losses);
    } else {  // per-replica streams: the split changes the masks
      EXPECT_NE(parts[0], whole);
      EXPECT_NE(split_losses, losses);
    }
  }
  // Fast mode: per-example losses do not depend on the split either (keyed masks).
  BatchRunner one(model), many(model, 3);
  one.set_dropout_step({9, 3, DropoutRng::kKeyed, 0, {}});
  many.set_dropout_step({9, 3, DropoutRng::kKeyed, 0, {}});
  ParameterList<float> g1 = model.ZeroParameters(), g2 = model.ZeroParameters(), g3 = model.ZeroParameters();
  const BatchSegment all{&params, 0, kBatch, &g1, nullptr};
  one.Run(images, labels, coefficients, losses, predictions, std::span(&all, 1));
  const std::vector<BatchSegment> segments = {{&params, 0, 20, &g2, nullptr}, {&params, 20, 17, &g3, nullptr}};
  many.Run(images, labels, coefficients, split_losses, predictions, segments);
  EXPECT_EQ(split_losses, losses);
  // Inference (no gradients): Dropout is the identity, so the losses differ from training's.
  std::vector<float> inference(kBatch);
  one.Evaluate(params, images, labels, inference, predictions);
  EXPECT_NE(inference, losses);
}

}  // namespace
}  // namespace dtlab
