// The layers of dtlab's models as element kernels: one call computes one output
// element, so the same code runs as a CUDA thread (sim/cuda/) and in a loop on the
// CPU (sim/compute/device_runner.h's host device, which CI runs). Each kernel computes
// exactly what exact mode's CPU layers compute (core/conv2d.cc, core/dense.cc,
// core/pooling.cc, core/loss.cc): every dot product is one chain of fused
// multiply-adds in ascending index from 0 (core/ordered_gemm.h's definition),
// every other sum a fixed-order chain of float additions, the softmax is
// core/portable_math.h's, and the sums over examples go into exact accumulator
// words (core/exact_words.h). So a GPU running these kernels gets the CPU's bits
// (docs/gpu.md). Compile CUDA code that includes this header with -fmad=false.
//
// Layouts are those of the CPU layers: activations NHWC [examples, H, W, C] or
// [examples, features], convolution kernels HWIO, dense kernels [inputs, units].
//
// Fast mode uses the same per-example kernels and sums over examples in float, in
// example order (the *Gradient kernels with GradientOutput::words null).
//
// Thread safety: each call writes only its own output element.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/exact_words.h"
#include "core/host_device.h"
#include "core/portable_math.h"

namespace dtlab::kernels {

using Index = std::int64_t;

/// a * b + c rounded once (IEEE fusedMultiplyAdd), on the host and on the GPU.
inline DTLAB_HOST_DEVICE float Fma(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

/// The ordered dot product: fma(a[n-1] b[n-1], ... fma(a[0] b[0], 0)), one rounding
/// per step in ascending index (core/ordered_gemm.h's chain), with strides.
inline DTLAB_HOST_DEVICE float OrderedDot(const float* a, Index a_stride, const float* b, Index b_stride, Index n) {
  float acc = 0.0f;
  for (Index k = 0; k < n; ++k) acc = Fma(a[k * a_stride], b[k * b_stride], acc);
  return acc;
}

/// acc + bias, then the ReLU if any (the CPU's GemmEpilogue, core/ordered_gemm.h).
inline DTLAB_HOST_DEVICE float BiasAndActivation(float acc, float bias, bool relu) {
  acc += bias;
  return relu && !(acc > 0.0f) ? 0.0f : acc;
}

/// A valid (no padding), stride-1 convolution of `examples` NHWC images.
struct ConvShape {
  Index examples = 0, height = 0, width = 0, channels = 0;
  Index kernel_height = 0, kernel_width = 0, filters = 0;
  bool relu = false;
  DTLAB_HOST_DEVICE Index out_height() const { return height - kernel_height + 1; }
  DTLAB_HOST_DEVICE Index out_width() const { return width - kernel_width + 1; }
  DTLAB_HOST_DEVICE Index outputs() const { return examples * out_height() * out_width() * filters; }
  DTLAB_HOST_DEVICE Index inputs() const { return examples * height * width * channels; }
  DTLAB_HOST_DEVICE Index kernel_size() const { return kernel_height * kernel_width * channels * filters; }
};

/// Where a gradient kernel writes element k: exact mode's normalized words at
/// words[k * kExactWords], else the float sum at grads[k] and, if `magnitudes` is
/// not null, the float sum of |term| at magnitudes[k] (fast mode's bound).
struct GradientOutput {
  std::int64_t* words;
  float* grads;
  float* magnitudes;
};

/// One gradient element's sum over examples, as GradientOutput says.
class GradientSum {
 public:
  DTLAB_HOST_DEVICE explicit GradientSum(const GradientOutput& out) : out_(out) {}
  DTLAB_HOST_DEVICE bool exact() const { return out_.words != nullptr; }
  DTLAB_HOST_DEVICE bool wants_magnitude() const { return out_.magnitudes != nullptr; }
  /// Adds one example's term (and, in fast mode, the sum of its |parts|).
  DTLAB_HOST_DEVICE void Add(float term, float magnitude) {
    if (exact())
      ExactAddFloat(words_, term);
    else
      sum_ += term, magnitude_ += magnitude;
  }
  /// Adds the product a * b: exactly, or fused into the float sum.
  DTLAB_HOST_DEVICE void AddProduct(float a, float b) {
    if (exact()) {
      ExactAddProduct(words_, a, b);
    } else {
      sum_ = Fma(a, b, sum_);
      if (wants_magnitude()) magnitude_ = Fma(a < 0 ? -a : a, b < 0 ? -b : b, magnitude_);
    }
  }
  DTLAB_HOST_DEVICE void Store(Index k) {
    if (exact()) {
      ExactCarry(words_);
      for (int w = 0; w < kExactWords; ++w) out_.words[k * kExactWords + w] = words_[w];
    } else {
      out_.grads[k] = sum_;
      if (wants_magnitude()) out_.magnitudes[k] = magnitude_;
    }
  }

 private:
  GradientOutput out_;
  std::int64_t words_[kExactWords] = {};
  float sum_ = 0.0f, magnitude_ = 0.0f;
};

/// y[e][oh][ow][f] = act(sum over (kh, kw, c) of x[e][oh+kh][ow+kw][c] * kernel[kh][kw][c][f], + bias[f]):
/// the chain in (kh, kw, c) order is the im2col row order of Conv2D::Forward.
struct ConvForward {
  ConvShape s;
  const float* x;
  const float* kernel;
  const float* bias;
  float* y;
  DTLAB_HOST_DEVICE void operator()(Index i) const {
    const Index f = i % s.filters, position = i / s.filters;
    const Index ow = position % s.out_width(), oh = position / s.out_width() % s.out_height();
    const Index e = position / (s.out_width() * s.out_height());
    float acc = 0.0f;
    for (Index kh = 0; kh < s.kernel_height; ++kh)
      for (Index kw = 0; kw < s.kernel_width; ++kw) {
        const float* in = x + ((e * s.height + oh + kh) * s.width + ow + kw) * s.channels;
        const float* k = kernel + (kh * s.kernel_width + kw) * s.channels * s.filters + f;
        for (Index c = 0; c < s.channels; ++c) acc = Fma(in[c], k[c * s.filters], acc);
      }
    y[i] = BiasAndActivation(acc, bias[f], s.relu);
  }
};

/// dx[e][h][w][c]: the gradient of every patch that covers (h, w), each the chain
/// over filters of dz * kernel, added from 0 in ascending (oh, ow) order (col2im's
/// order in Conv2D::BackwardExact).
struct ConvInputGradient {
  ConvShape s;
  const float* dz;  // [examples, OH, OW, F], after the activation's gradient
  const float* kernel;
  float* dx;
  DTLAB_HOST_DEVICE void operator()(Index i) const {
    const Index c = i % s.channels, w = i / s.channels % s.width, h = i / (s.channels * s.width) % s.height;
    const Index e = i / (s.channels * s.width * s.height);
    const Index oh_first = h - s.kernel_height + 1 > 0 ? h - s.kernel_height + 1 : 0;
    const Index ow_first = w - s.kernel_width + 1 > 0 ? w - s.kernel_width + 1 : 0;
    const Index oh_last = h < s.out_height() - 1 ? h : s.out_height() - 1;
    const Index ow_last = w < s.out_width() - 1 ? w : s.out_width() - 1;
    float sum = 0.0f;
    for (Index oh = oh_first; oh <= oh_last; ++oh)
      for (Index ow = ow_first; ow <= ow_last; ++ow) {
        const float* g = dz + ((e * s.out_height() + oh) * s.out_width() + ow) * s.filters;
        const float* k = kernel + (((h - oh) * s.kernel_width + (w - ow)) * s.channels + c) * s.filters;
        sum += OrderedDot(g, 1, k, 1, s.filters);
      }
    dx[i] = sum;
  }
};

/// The exact sum (or the float sum in example order) over `examples` of each
/// example's kernel-gradient term: the chain over output positions of x * dz
/// (Conv2D::BackwardExact's per-example OrderedGemm). Element
/// k = ((kh * KW + kw) * C + c) * F + f.
struct ConvKernelGradient {
  ConvShape s;
  const float* x;
  const float* dz;
  GradientOutput out;
  DTLAB_HOST_DEVICE void operator()(Index k) const {
    const Index f = k % s.filters, c = k / s.filters % s.channels;
    const Index kw = k / (s.filters * s.channels) % s.kernel_width, kh = k / (s.filters * s.channels * s.kernel_width);
    GradientSum sum(out);
    const Index oh_count = s.out_height(), ow_count = s.out_width();
    for (Index e = 0; e < s.examples; ++e) {
      float term = 0.0f, magnitude = 0.0f;
      for (Index oh = 0; oh < oh_count; ++oh)
        for (Index ow = 0; ow < ow_count; ++ow) {
          const float a = x[((e * s.height + oh + kh) * s.width + ow + kw) * s.channels + c];
          const float b = dz[((e * oh_count + oh) * ow_count + ow) * s.filters + f];
          term = Fma(a, b, term);
          if (sum.wants_magnitude()) magnitude = Fma(a < 0 ? -a : a, b < 0 ? -b : b, magnitude);
        }
      sum.Add(term, magnitude);
    }
    sum.Store(k);
  }
};

/// A bias's gradient: per example, the float sum of dz over its `positions` output
/// positions in order (1 for a dense layer), then exactly (or in float) over examples.
struct BiasGradient {
  Index examples, positions, units;
  const float* dz;  // [examples, positions, units]
  GradientOutput out;
  DTLAB_HOST_DEVICE void operator()(Index u) const {
    GradientSum sum(out);
    for (Index e = 0; e < examples; ++e) {
      float term = 0.0f, magnitude = 0.0f;
      for (Index p = 0; p < positions; ++p) {
        const float g = dz[(e * positions + p) * units + u];
        term += g;
        magnitude += g < 0 ? -g : g;
      }
      sum.Add(term, magnitude);
    }
    sum.Store(u);
  }
};

/// y[e][u] = act(sum over i of x[e][i] * kernel[i][u], + bias[u]).
struct DenseForward {
  Index examples, inputs, units;
  bool relu;
  const float* x;
  const float* kernel;
  const float* bias;
  float* y;
  DTLAB_HOST_DEVICE void operator()(Index i) const {
    const Index u = i % units, e = i / units;
    y[i] = BiasAndActivation(OrderedDot(x + e * inputs, 1, kernel + u, units, inputs), bias[u], relu);
  }
};

/// dx[e][i] = sum over u of dz[e][u] * kernel[i][u].
struct DenseInputGradient {
  Index examples, inputs, units;
  const float* dz;
  const float* kernel;
  float* dx;
  DTLAB_HOST_DEVICE void operator()(Index i) const {
    const Index k = i % inputs, e = i / inputs;
    dx[i] = OrderedDot(dz + e * units, 1, kernel + k * units, 1, units);
  }
};

/// Element (i, u) of a dense kernel's gradient: the exact sum over examples of the
/// products x[e][i] * dz[e][u] (in fast mode their fused chain in example order).
struct DenseKernelGradient {
  Index examples, inputs, units;
  const float* x;
  const float* dz;
  GradientOutput out;
  DTLAB_HOST_DEVICE void operator()(Index k) const {
    const Index u = k % units, i = k / units;
    GradientSum sum(out);
    for (Index e = 0; e < examples; ++e) sum.AddProduct(x[e * inputs + i], dz[e * units + u]);
    sum.Store(k);
  }
};

/// 2x2 max pooling with stride 2 (odd edges dropped); argmax[i] is the index into x
/// of output i's maximum, the first of the four in (0,0), (0,1), (1,0), (1,1) order
/// on ties.
struct PoolForward {
  Index examples, height, width, channels;
  const float* x;
  float* y;
  Index* argmax;
  DTLAB_HOST_DEVICE Index outputs() const { return examples * (height / 2) * (width / 2) * channels; }
  DTLAB_HOST_DEVICE void operator()(Index i) const {
    const Index out_h = height / 2, out_w = width / 2;
    const Index c = i % channels, ow = i / channels % out_w, oh = i / (channels * out_w) % out_h;
    const Index e = i / (channels * out_w * out_h);
    const Index i00 = ((e * height + 2 * oh) * width + 2 * ow) * channels + c;
    const Index offsets[4] = {i00, i00 + channels, i00 + width * channels, i00 + (width + 1) * channels};
    Index best = offsets[0];
    for (int k = 1; k < 4; ++k)
      if (x[offsets[k]] > x[best]) best = offsets[k];
    y[i] = x[best];
    argmax[i] = best;
  }
};

/// dx[argmax[i]] += dy[i] into a zeroed dx: every input is the maximum of at most
/// one output, so no two calls write the same element.
struct PoolInputGradient {
  const float* dy;
  const Index* argmax;
  float* dx;
  DTLAB_HOST_DEVICE void operator()(Index i) const { dx[argmax[i]] += dy[i]; }
};

/// dy[i] = y[i] > 0 ? dy[i] : 0, the ReLU's gradient through its output.
struct ReluGradient {
  const float* y;
  float* dy;
  DTLAB_HOST_DEVICE void operator()(Index i) const { dy[i] = y[i] > 0.0f ? dy[i] : 0.0f; }
};

/// x[i] = value.
struct Fill {
  float* x;
  float value;
  DTLAB_HOST_DEVICE void operator()(Index i) const { x[i] = value; }
};

/// Dropout (core/dropout.h), forward and backward alike: out[i] = keep[i] ? in[i] *
/// scale : +0, the product rounded first as TF's kernel does. The mask comes from
/// the host, drawn by the Dropout layer's own code (DrawDropoutMask).
struct DropoutApply {
  const float* in;
  const std::uint8_t* keep;
  float scale;
  float* out;
  DTLAB_HOST_DEVICE void operator()(Index i) const {
    const float scaled = in[i] * scale;
    out[i] = keep[i] != 0 ? scaled : 0.0f;
  }
};

/// Per example: the sparse softmax cross-entropy of its logits (portable math),
/// the argmax (first on ties) and, if `dlogits` is not null, the loss's gradient
/// times coefficients[e] (coefficients may be null without dlogits).
struct SoftmaxCrossEntropy {
  Index classes;
  const float* logits;
  const std::int32_t* labels;
  const float* coefficients;
  float* losses;
  std::int32_t* predictions;
  float* dlogits;
  DTLAB_HOST_DEVICE void operator()(Index e) const {
    const float* z = logits + e * classes;
    std::int32_t best = 0;
    for (Index c = 1; c < classes; ++c)
      if (z[c] > z[best]) best = static_cast<std::int32_t>(c);
    predictions[e] = best;
    portable::SoftmaxCrossEntropyRow(z, static_cast<int>(classes), labels[e], dlogits ? coefficients[e] : 0.0f,
                                     &losses[e], dlogits ? dlogits + e * classes : nullptr);
  }
};

}  // namespace dtlab::kernels
