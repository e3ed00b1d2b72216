// Every layer's backward pass against central finite differences, in double precision.
//
// For a layer y = f(x; params) and fixed random weights r, the scalar L = sum(r * y)
// has dL/dy = r. The analytic gradients from Backward(dy = r) must match
// (L(p + h) - L(p - h)) / 2h for every input and parameter element.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>

#include "core/activation_layer.h"
#include "core/batch_norm.h"
#include "core/conv2d.h"
#include "core/dense.h"
#include "core/loss.h"
#include "core/model.h"
#include "core/pooling.h"
#include "core/relu.h"
#include "core/reshape.h"
#include "core/rng.h"

namespace dtlab {
namespace {

using D = double;

Tensor<D> RandomTensor(const Shape& shape, std::uint64_t index, double scale = 1.0) {
  Tensor<D> t(shape);
  CounterRng rng(42, RngPurpose::kTest, index);
  for (std::int64_t i = 0; i < t.size(); ++i) t[i] = scale * (2.0 * rng.UniformDouble() - 1.0);
  return t;
}

// Central difference of `loss` with respect to every element of `value`.
void ExpectMatchesFiniteDifferences(Tensor<D>& value, const Tensor<D>& analytic, const std::function<D()>& loss,
                                    const std::string& what) {
  const D h = 1e-6;
  ASSERT_EQ(value.size(), analytic.size()) << what;
  double worst = 0.0;
  for (std::int64_t i = 0; i < value.size(); ++i) {
    const D saved = value[i];
    value[i] = saved + h;
    const D plus = loss();
    value[i] = saved - h;
    const D minus = loss();
    value[i] = saved;
    const D numeric = (plus - minus) / (2 * h);
    const double error = std::abs(numeric - analytic[i]) / std::max(1.0, std::abs(numeric));
    worst = std::max(worst, error);
    ASSERT_LT(error, 1e-6) << what << " element " << i << ": analytic " << analytic[i] << ", numeric " << numeric;
  }
  ::testing::Test::RecordProperty(what, std::to_string(worst));
}

void CheckLayer(const Layer<D>& layer, const Shape& batch_input_shape, const ForwardContext* context = nullptr) {
  Shape example(batch_input_shape.begin() + 1, batch_input_shape.end());
  std::vector<Tensor<D>> params;
  std::uint64_t index = 1;
  for (const auto& spec : layer.Parameters(example)) params.push_back(RandomTensor(spec.shape, index++, 0.5));
  std::vector<const Tensor<D>*> param_ptrs;
  for (auto& p : params) param_ptrs.push_back(&p);
  Tensor<D> x = RandomTensor(batch_input_shape, 100);

  LayerCache<D> cache;
  cache.context = context;
  Tensor<D> y;
  layer.Forward(param_ptrs, x, y, cache);
  const Tensor<D> r = RandomTensor(y.shape(), 200);
  auto loss = [&] {
    LayerCache<D> c;
    c.context = context;
    Tensor<D> out;
    layer.Forward(param_ptrs, x, out, c);
    D sum = 0;
    for (std::int64_t i = 0; i < out.size(); ++i) sum += r[i] * out[i];
    return sum;
  };

  Tensor<D> dy = r, dx;
  std::vector<Tensor<D>> grads;
  for (auto& p : params) grads.emplace_back(p.shape());
  std::vector<Tensor<D>*> grad_ptrs;
  for (auto& g : grads) grad_ptrs.push_back(&g);
  layer.Backward(param_ptrs, x, y, dy, &dx, grad_ptrs, cache);

  ExpectMatchesFiniteDifferences(x, dx, loss, layer.name() + " input");
  for (std::size_t p = 0; p < params.size(); ++p)
    ExpectMatchesFiniteDifferences(params[p], grads[p], loss, layer.name() + " parameter " + std::to_string(p));
}

TEST(GradientCheck, Conv2DLinear) { CheckLayer(Conv2D<D>("conv", 4, 3, 3, Activation::kLinear), {2, 6, 5, 3}); }
TEST(GradientCheck, Conv2DRelu) { CheckLayer(Conv2D<D>("conv", 5, 3, 2, Activation::kRelu), {3, 7, 6, 2}); }
TEST(GradientCheck, Conv2DSingleChannel) { CheckLayer(Conv2D<D>("conv", 8, 3, 3, Activation::kRelu), {2, 8, 8, 1}); }
TEST(GradientCheck, DenseLinear) { CheckLayer(Dense<D>("dense", 7, Activation::kLinear), {4, 9}); }
TEST(GradientCheck, DenseRelu) { CheckLayer(Dense<D>("dense", 6, Activation::kRelu), {5, 11}); }
TEST(GradientCheck, MaxPooling2DEven) { CheckLayer(MaxPooling2D<D>("pool"), {2, 6, 8, 3}); }
TEST(GradientCheck, MaxPooling2DOddSizesDropLastRowAndColumn) { CheckLayer(MaxPooling2D<D>("pool"), {2, 7, 5, 2}); }
TEST(GradientCheck, ReLULayer) { CheckLayer(ReLU<D>("re_lu"), {3, 4, 5, 2}); }
// The layers of model files: strides and same padding, other poolings, softmax.
Conv2D<D>::Options ConvOptions(std::int64_t stride_h, std::int64_t stride_w, Padding padding) {
  Conv2D<D>::Options options;
  options.stride_height = stride_h, options.stride_width = stride_w, options.padding = padding;
  return options;
}
TEST(GradientCheck, Conv2DStridedSame) {
  CheckLayer(Conv2D<D>("conv", 4, 3, 3, Activation::kRelu, ConvOptions(2, 2, Padding::kSame)), {2, 7, 6, 3});
}
TEST(GradientCheck, Conv2DStridedValid) {
  CheckLayer(Conv2D<D>("conv", 3, 3, 2, Activation::kLinear, ConvOptions(2, 3, Padding::kValid)), {2, 8, 9, 2});
}
TEST(GradientCheck, Conv2DSameKernelLargerThanInput) {
  CheckLayer(Conv2D<D>("conv", 2, 5, 4, Activation::kLinear, ConvOptions(1, 1, Padding::kSame)), {2, 3, 3, 2});
}
PoolingOptions Pool(std::int64_t size, std::int64_t stride, Padding padding) {
  return {size, size, stride, stride, padding};
}
TEST(GradientCheck, MaxPooling2DOverlappingSame) {
  CheckLayer(MaxPooling2D<D>("pool", Pool(3, 2, Padding::kSame)), {2, 7, 6, 3});
}
TEST(GradientCheck, AveragePooling2DDefault) { CheckLayer(AveragePooling2D<D>("avg"), {2, 6, 7, 3}); }
TEST(GradientCheck, AveragePooling2DOverlappingSame) {
  CheckLayer(AveragePooling2D<D>("avg", Pool(3, 2, Padding::kSame)), {2, 7, 6, 2});
}
TEST(GradientCheck, SoftmaxLayer) {
  CheckLayer(ActivationLayer<D>("softmax", ActivationLayer<D>::Function::kSoftmax, "Softmax"), {3, 7});
  CheckLayer(ActivationLayer<D>("softmax", ActivationLayer<D>::Function::kSoftmax, "Softmax"), {2, 3, 2, 4});
}
TEST(GradientCheck, ActivationLayers) {
  CheckLayer(ActivationLayer<D>("relu", ActivationLayer<D>::Function::kRelu, "Activation"), {3, 4, 5, 2});
  CheckLayer(ActivationLayer<D>("linear", ActivationLayer<D>::Function::kLinear, "Activation"), {3, 5});
}
// A training pass: the gradient through the batch's mean and variance (the moving
// statistics get none, and the output does not depend on them).
TEST(GradientCheck, BatchNormalizationTraining) {
  ForwardContext training;
  training.training = true;
  CheckLayer(BatchNormalization<D>("bn", {}), {3, 4, 5, 2}, &training);
  CheckLayer(BatchNormalization<D>("bn", {}), {5, 7}, &training);
  BatchNormConfig bare;
  bare.center = bare.scale = false;
  bare.epsilon = 0.5;
  CheckLayer(BatchNormalization<D>("bn", bare), {4, 3, 3, 3}, &training);
}
TEST(GradientCheck, Flatten) { CheckLayer(Reshape<D>("flatten", {}), {3, 4, 5, 2}); }
TEST(GradientCheck, Reshape) { CheckLayer(Reshape<D>("reshape", {5, 4, 1}), {3, 5, 4}); }

TEST(GradientCheck, SparseCategoricalCrossentropyFromLogits) {
  Tensor<D> logits = RandomTensor({5, 4}, 7, 3.0);
  const std::vector<std::int32_t> labels = {0, 3, 1, 2, 3};
  const std::vector<D> coefficients = {0.5, 1.0, 2.0, 0.0, 0.25};
  std::vector<D> losses(5);
  Tensor<D> dlogits;
  SparseCategoricalCrossentropyFromLogits<D>(logits, labels, losses, coefficients, &dlogits);
  auto loss = [&] {
    std::vector<D> l(5);
    SparseCategoricalCrossentropyFromLogits<D>(logits, labels, l, {}, nullptr);
    D sum = 0;
    for (int i = 0; i < 5; ++i) sum += coefficients[static_cast<std::size_t>(i)] * l[static_cast<std::size_t>(i)];
    return sum;
  };
  ExpectMatchesFiniteDifferences(logits, dlogits, loss, "logits");
}

TEST(GradientCheck, KnownCrossEntropyValue) {
  // Uniform logits over 4 classes: the loss is log(4) for any label.
  Tensor<D> logits({1, 4}, {0.5, 0.5, 0.5, 0.5});
  std::vector<D> losses(1);
  const std::vector<std::int32_t> labels = {2};
  SparseCategoricalCrossentropyFromLogits<D>(logits, labels, losses, {}, nullptr);
  EXPECT_NEAR(losses[0], std::log(4.0), 1e-15);
}

// The whole model, loss and L2 regularization together, as the training step uses them.
void CheckModel(const std::string& name, const Shape& image_shape) {
  auto model_or = MakeModel<D>(name, image_shape, 10);
  ASSERT_TRUE(model_or.ok()) << model_or.status().ToString();
  const Sequential<D>& model = **model_or;
  ParameterList<D> params = model.InitialParameters(7);
  // Non-zero biases so that every ReLU sees varied inputs.
  for (std::size_t i = 0; i < params.size(); ++i)
    if (!model.parameters()[i].spec.is_kernel) params[i] = RandomTensor(params[i].shape(), 300 + i, 0.1);
  Shape batch_shape = model.example_shape();
  batch_shape.insert(batch_shape.begin(), 3);
  const Tensor<D> x = RandomTensor(batch_shape, 400);
  const std::vector<std::int32_t> labels = {1, 7, 3};
  const D global_batch = 3;
  const std::vector<D> coefficients(3, 1.0 / global_batch);

  auto loss = [&] {
    typename Sequential<D>::Workspace ws;
    const Tensor<D>& logits = model.Forward(params, x, ws);
    std::vector<D> l(3);
    SparseCategoricalCrossentropyFromLogits<D>(logits, labels, l, {}, nullptr);
    return (l[0] + l[1] + l[2]) / global_batch + model.RegularizationLoss(params);
  };
  typename Sequential<D>::Workspace ws;
  const Tensor<D>& logits = model.Forward(params, x, ws);
  std::vector<D> losses(3);
  Tensor<D> dlogits;
  SparseCategoricalCrossentropyFromLogits<D>(logits, labels, losses, coefficients, &dlogits);
  ParameterList<D> grads = model.ZeroParameters();
  model.Backward(params, dlogits, ws, grads);
  model.AddRegularizationGradient(params, 1.0, grads);
  for (std::size_t p = 0; p < params.size(); ++p)
    ExpectMatchesFiniteDifferences(params[p], grads[p], loss, name + " " + model.parameters()[p].name);
}

TEST(GradientCheck, SeedCnnWholeModel) { CheckModel("seed-cnn", {10, 10, 1}); }
TEST(GradientCheck, MnistCnnWholeModel) { CheckModel("mnist-cnn", {4, 4, 1}); }
TEST(GradientCheck, LinearWholeModel) { CheckModel("linear", {4, 4, 1}); }

}  // namespace
}  // namespace dtlab
