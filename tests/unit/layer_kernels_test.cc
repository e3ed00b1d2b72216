// Fast mode's float kernels are their scalar definition, bit for bit: every sum a
// chain of std::fma (or of additions) in a fixed order, written here as plain loops
// with no blocking, no vectors and nothing read from the CPU. So the bits cannot
// depend on the machine's caches or vector width (docs/exact.md, "Fast mode"); a
// pinned digest of a whole fast-mode gradient shows it on every CPU the suite runs on.
#include <gtest/gtest.h>

#include <Eigen/Core>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "core/batch.h"
#include "core/conv2d.h"
#include "core/dense.h"
#include "core/mnist.h"
#include "core/rng.h"
#include "sim/compute/batch_runner.h"
#include "tests/unit/test_util.h"
#include "sim/training/trainer.h"

namespace dtlab {
namespace {

Tensor<float> Random(Shape shape, std::uint64_t index, float scale = 1.0f) {
  return testing::RandomFloats(std::move(shape), 11, index, scale);
}

using testing::SameBits;

TEST(LayerKernels, DenseIsItsScalarDefinition) {
  constexpr std::int64_t kRows = 19, kIn = 37, kUnits = 21;  // no size a multiple of a vector width
  const Tensor<float> x = Random({kRows, kIn}, 1), kernel = Random({kIn, kUnits}, 2), bias = Random({kUnits}, 3);
  Tensor<float> dy = Random({kRows, kUnits}, 4, 0.01f);
  const Dense<float> layer("dense", kUnits, Activation::kRelu);
  const Tensor<float>* params[] = {&kernel, &bias};
  LayerCache<float> cache;
  Tensor<float> y, dx, dkernel({kIn, kUnits}), dbias({kUnits}), mkernel({kIn, kUnits}), mbias({kUnits});
  layer.Forward(params, x, y, cache);
  Tensor<float>* grads[] = {&dkernel, &dbias};
  Tensor<float>* magnitudes[] = {&mkernel, &mbias};
  Tensor<float> dz = dy;
  layer.Backward(params, x, y, dz, &dx, grads, cache, magnitudes);

  std::vector<float> want_y(kRows * kUnits), want_dz(kRows * kUnits);
  for (std::int64_t r = 0; r < kRows; ++r)
    for (std::int64_t u = 0; u < kUnits; ++u) {
      float acc = 0.0f;
      for (std::int64_t i = 0; i < kIn; ++i) acc = std::fma(x[r * kIn + i], kernel[i * kUnits + u], acc);
      acc += bias[u];
      want_y[r * kUnits + u] = acc > 0.0f ? acc : 0.0f;
      want_dz[r * kUnits + u] = acc > 0.0f ? dy[r * kUnits + u] : 0.0f;
    }
  std::vector<float> want_dkernel(kIn * kUnits), want_mkernel(kIn * kUnits), want_dbias(kUnits), want_mbias(kUnits),
      want_dx(kRows * kIn);
  for (std::int64_t i = 0; i < kIn; ++i)
    for (std::int64_t u = 0; u < kUnits; ++u) {
      float acc = 0.0f, magnitude = 0.0f;
      for (std::int64_t r = 0; r < kRows; ++r) {
        acc = std::fma(x[r * kIn + i], want_dz[r * kUnits + u], acc);
        magnitude = std::fma(std::fabs(x[r * kIn + i]), std::fabs(want_dz[r * kUnits + u]), magnitude);
      }
      want_dkernel[i * kUnits + u] = acc;
      want_mkernel[i * kUnits + u] = magnitude;
    }
  for (std::int64_t u = 0; u < kUnits; ++u) {
    float sum = 0.0f, magnitude = 0.0f;
    for (std::int64_t r = 0; r < kRows; ++r) {
      sum += want_dz[r * kUnits + u];
      magnitude += std::fabs(want_dz[r * kUnits + u]);
    }
    want_dbias[u] = sum;
    want_mbias[u] = magnitude;
  }
  for (std::int64_t r = 0; r < kRows; ++r)
    for (std::int64_t i = 0; i < kIn; ++i) {
      float acc = 0.0f;
      for (std::int64_t u = 0; u < kUnits; ++u) acc = std::fma(want_dz[r * kUnits + u], kernel[i * kUnits + u], acc);
      want_dx[r * kIn + i] = acc;
    }
  EXPECT_TRUE(SameBits(y, want_y));
  EXPECT_TRUE(SameBits(dkernel, want_dkernel));
  EXPECT_TRUE(SameBits(dbias, want_dbias));
  EXPECT_TRUE(SameBits(mkernel, want_mkernel));
  EXPECT_TRUE(SameBits(mbias, want_mbias));
  EXPECT_TRUE(SameBits(dx, want_dx));
}

// Equal bits, or both NaN (a NaN's payload depends on the operand order of the
// instruction that made it).
::testing::AssertionResult SameValues(const Tensor<float>& got, const std::vector<float>& want) {
  if (static_cast<std::size_t>(got.size()) != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " vs " << want.size();
  for (std::size_t i = 0; i < want.size(); ++i)
    if (!(std::isnan(got.data()[i]) && std::isnan(want[i])) &&
        std::memcmp(&got.data()[i], &want[i], sizeof(float)) != 0)
      return ::testing::AssertionFailure() << "element " << i << ": " << got.data()[i] << " vs " << want[i];
  return ::testing::AssertionSuccess();
}

struct ConvCase {
  std::int64_t batch, height, width, channels, filters, kernel;
  int zero_percent;  // of dy: the gradient behind max pooling is mostly zeros
  bool infinity;     // an infinite input (the zero-skipping kernels must give the full chains' NaNs)
};

// Conv2D's fast forward and backward against plain std::fma loops. Shapes with a
// kernel row of 32 inputs or more read the patch matrix in place (core/conv2d.cc);
// a sparse dy takes the zero-skipping kernels, a dense one the full chains.
void ExpectConv2DIsItsScalarDefinition(const ConvCase& t) {
  const std::int64_t kH = t.height, kW = t.width, kC = t.channels, kF = t.filters, kK = t.kernel;
  const std::int64_t kOH = kH - kK + 1, kOW = kW - kK + 1;
  Tensor<float> x = Random({t.batch, kH, kW, kC}, 5);
  const Tensor<float> kernel = Random({kK, kK, kC, kF}, 6), bias = Random({kF}, 7, 0.1f);
  Tensor<float> dy = Random({t.batch, kOH, kOW, kF}, 8, 0.01f);
  CounterRng zeros(12, RngPurpose::kTest, 1);
  for (std::int64_t i = 0; i < dy.size(); ++i)
    if (zeros.UniformFloat() * 100.0f < static_cast<float>(t.zero_percent)) dy[i] = i % 3 == 0 ? -0.0f : 0.0f;
  if (t.infinity) x[x.size() / 2] = std::numeric_limits<float>::infinity();
  const Conv2D<float> layer("conv2d", kF, kK, kK, Activation::kRelu);
  const Tensor<float>* params[] = {&kernel, &bias};
  LayerCache<float> cache;
  Tensor<float> y, dx, dkernel({kK, kK, kC, kF}), dbias({kF});
  layer.Forward(params, x, y, cache);
  Tensor<float>* grads[] = {&dkernel, &dbias};
  Tensor<float> dz = dy;
  layer.Backward(params, x, y, dz, &dx, grads, cache);

  auto X = [&](std::int64_t b, std::int64_t h, std::int64_t w, std::int64_t c) {
    return x[((b * kH + h) * kW + w) * kC + c];
  };
  auto K = [&](std::int64_t kh, std::int64_t kw, std::int64_t c, std::int64_t f) {
    return kernel[((kh * kK + kw) * kC + c) * kF + f];
  };
  auto out = [&](std::int64_t b, std::int64_t oh, std::int64_t ow, std::int64_t f) {
    return ((b * kOH + oh) * kOW + ow) * kF + f;
  };
  std::vector<float> want_y(static_cast<std::size_t>(t.batch * kOH * kOW * kF)), want_dz(want_y.size());
  for (std::int64_t b = 0; b < t.batch; ++b)
    for (std::int64_t oh = 0; oh < kOH; ++oh)
      for (std::int64_t ow = 0; ow < kOW; ++ow)
        for (std::int64_t f = 0; f < kF; ++f) {
          float acc = 0.0f;  // the chain in (kh, kw, c) order
          for (std::int64_t kh = 0; kh < kK; ++kh)
            for (std::int64_t kw = 0; kw < kK; ++kw)
              for (std::int64_t c = 0; c < kC; ++c) acc = std::fma(X(b, oh + kh, ow + kw, c), K(kh, kw, c, f), acc);
          acc += bias[f];
          want_y[out(b, oh, ow, f)] = acc > 0.0f ? acc : 0.0f;
          want_dz[out(b, oh, ow, f)] = acc > 0.0f ? dy[out(b, oh, ow, f)] : 0.0f;
        }
  std::vector<float> want_dkernel(static_cast<std::size_t>(kK * kK * kC * kF)), want_dbias(kF, 0.0f),
      want_dx(static_cast<std::size_t>(t.batch * kH * kW * kC), 0.0f);
  for (std::int64_t kh = 0; kh < kK; ++kh)
    for (std::int64_t kw = 0; kw < kK; ++kw)
      for (std::int64_t c = 0; c < kC; ++c)
        for (std::int64_t f = 0; f < kF; ++f) {
          float acc = 0.0f;  // one chain over every output pixel of the batch
          for (std::int64_t b = 0; b < t.batch; ++b)
            for (std::int64_t oh = 0; oh < kOH; ++oh)
              for (std::int64_t ow = 0; ow < kOW; ++ow)
                acc = std::fma(X(b, oh + kh, ow + kw, c), want_dz[out(b, oh, ow, f)], acc);
          want_dkernel[((kh * kK + kw) * kC + c) * kF + f] = acc;
        }
  for (std::int64_t r = 0; r < t.batch * kOH * kOW; ++r)
    for (std::int64_t f = 0; f < kF; ++f) want_dbias[f] += want_dz[r * kF + f];
  // dx: each pixel's patch gradient (a chain over filters), scattered in row, kh, kw, c order.
  for (std::int64_t b = 0; b < t.batch; ++b)
    for (std::int64_t oh = 0; oh < kOH; ++oh)
      for (std::int64_t ow = 0; ow < kOW; ++ow)
        for (std::int64_t kh = 0; kh < kK; ++kh)
          for (std::int64_t kw = 0; kw < kK; ++kw)
            for (std::int64_t c = 0; c < kC; ++c) {
              float acc = 0.0f;
              for (std::int64_t f = 0; f < kF; ++f) acc = std::fma(want_dz[out(b, oh, ow, f)], K(kh, kw, c, f), acc);
              want_dx[((b * kH + oh + kh) * kW + ow + kw) * kC + c] += acc;
            }
  EXPECT_TRUE(SameValues(y, want_y));
  EXPECT_TRUE(SameValues(dkernel, want_dkernel));
  EXPECT_TRUE(SameValues(dbias, want_dbias));
  EXPECT_TRUE(SameValues(dx, want_dx));
}

TEST(LayerKernels, Conv2DIsItsScalarDefinition) {
  // im2col (a kernel row of 9 inputs).
  ExpectConv2DIsItsScalarDefinition({3, 7, 6, 3, 5, 3, 0, false});
  // The patch matrix read in place (rows of 48 and 96 inputs, whole vectors), with
  // a sparse dy (zero-skipping kernels, the input gradient added into dx in place)
  // and a dense one (full chains).
  for (const int zero_percent : {0, 80, 100}) {
    SCOPED_TRACE(zero_percent);
    ExpectConv2DIsItsScalarDefinition({2, 9, 8, 16, 20, 3, zero_percent, false});
    ExpectConv2DIsItsScalarDefinition({3, 13, 13, 32, 64, 3, zero_percent, false});  // seed-cnn's conv2d_1
    // A row of 33 inputs: in place forward, not whole vectors for the backward kernels.
    ExpectConv2DIsItsScalarDefinition({2, 8, 7, 11, 17, 3, zero_percent, false});
    // An infinite input: NaNs where the full chains make them.
    ExpectConv2DIsItsScalarDefinition({2, 9, 8, 16, 20, 3, zero_percent, true});
  }
}

// A fast-mode step of seed-cnn on 40 synthetic examples (three chunks, the last
// short): losses, predictions and gradients.
struct FastStep {
  std::vector<float> losses;
  std::vector<std::int32_t> predictions;
  ParameterList<float> grads;
};

FastStep RunFastStep() {
  auto model = std::move(MakeModel<float>("seed-cnn", {28, 28, 1}, 10)).value();
  const ParameterList<float> params = model->InitialParameters(3);
  const ImageDataset data = MakeSyntheticDataset(40, 28, 28, 10, 5);
  std::vector<std::int64_t> indices(40);
  for (std::int64_t i = 0; i < 40; ++i) indices[static_cast<std::size_t>(i)] = i;
  Tensor<float> images;
  std::vector<std::int32_t> labels;
  GatherBatch(data, indices, images, labels);
  BatchRunner runner(*model);
  FastStep step{std::vector<float>(40), std::vector<std::int32_t>(40), model->ZeroParameters()};
  const std::vector<float> coefficients(40, 1.0f / 40.0f);
  runner.ForwardBackward(params, images, labels, coefficients, step.losses, step.predictions, step.grads);
  return step;
}

TEST(LayerKernels, FastModeIgnoresEigensCacheSizes) {
  // Eigen picks its GEMM blocking from the cache sizes it reads off the CPU. Fast
  // mode must not use it: the same step with caches no CPU has gives the same bits.
  std::ptrdiff_t l1 = 0, l2 = 0, l3 = 0;
  Eigen::internal::manage_caching_sizes(Eigen::GetAction, &l1, &l2, &l3);
  const FastStep native = RunFastStep();
  Eigen::setCpuCacheSizes(4 * 1024, 16 * 1024, 64 * 1024);
  const FastStep tiny = RunFastStep();
  Eigen::setCpuCacheSizes(l1, l2, l3);
  EXPECT_EQ(native.losses, tiny.losses);
  EXPECT_EQ(native.predictions, tiny.predictions);
  for (std::size_t p = 0; p < native.grads.size(); ++p) EXPECT_EQ(native.grads[p], tiny.grads[p]) << p;
}

TEST(LayerKernels, FastModeGradientBitsArePinned) {
  // The same bits on every x86-64 CPU (and any machine with IEEE float and FMA).
  // This digest was computed once; if it changes on some machine, fast mode
  // depends on that machine: find the cause, do not update the digest. It changes
  // only with fast mode's definition (the chains, the loss or the initial weights).
  const FastStep step = RunFastStep();
  std::uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a over the losses, then the gradients
  auto mix = [&](const void* data, std::size_t bytes) {
    for (std::size_t i = 0; i < bytes; ++i)
      hash = (hash ^ static_cast<const unsigned char*>(data)[i]) * 0x100000001b3ull;
  };
  mix(step.losses.data(), step.losses.size() * sizeof(float));
  std::ostringstream digest;
  digest << std::hex << hash << "/" << WeightsDigest(step.grads);
  EXPECT_EQ(digest.str(), "b469df728bb46ae6/4d2e3c4363c3ff95");
}

}  // namespace
}  // namespace dtlab
