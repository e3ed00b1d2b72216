// Layer: one stateless stage of a sequential model, with forward and backward passes.
//
// A layer holds only its configuration. Parameters live outside it (one copy per
// replica in sim/), so the same Layer object serves every replica and thread.
// Layers are templates over the scalar type: float for training, double for the
// finite-difference checks in tests.
//
// Shapes follow Keras: activations are NHWC [batch, height, width, channels] or
// [batch, features]; convolution kernels are HWIO, dense kernels [in, out].
//
// Thread safety: all methods are const and may run concurrently on distinct caches.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"

namespace dtlab {

/// Describes one trainable parameter of a layer.
struct ParameterSpec {
  std::string name;  // "kernel" or "bias" (the model prefixes the layer name)
  Shape shape;
  bool is_kernel = false;                // kernels are glorot_uniform-initialised, other parameters zeros
  std::int64_t fan_in = 0, fan_out = 0;  // Keras fan computation, for glorot_uniform
  double l2 = 0;                         // Keras L2(l2) regularizer: l2 * sum(w^2) joins the loss (0: none)
  float initial_value = 0;               // a non-kernel parameter's every element starts here (Keras zeros or ones)
  /// False for a Keras non-trainable weight (BatchNormalization's moving statistics):
  /// its gradient is always zero, so no optimizer moves it; its layer's runner
  /// assigns it (core/batch_norm.h).
  bool trainable = true;
};

/// The Keras L2 regularizer factors of a layer's kernel and bias (0: none).
struct L2Factors {
  double kernel = 0, bias = 0;
};

/// Activation applied inside Conv2D and Dense, as Keras' `activation=` argument.
enum class Activation { kLinear, kRelu };

/// One BatchNormalization layer's statistics in one training step, per channel
/// (core/batch_norm.h): the forward pass's mean and variance, and the backward
/// pass's two sums through them.
struct BatchNormStatistics {
  bool forward_ready = false, backward_ready = false;
  std::vector<float> mean, variance;        // of the layer's input over the examples it normalizes over
  std::vector<float> mean_dy, centered_dy;  // the backward's: sum dy / n, sum dy (x - mean) / (n (variance + eps))
};

/// What a forward pass knows about the examples it runs on, beyond their values:
/// only layers that draw random numbers (Dropout, core/dropout.h) or normalize over
/// the batch (BatchNormalization, core/batch_norm.h) read it. The
/// runner fills it per chunk (sim/compute/batch_runner.h); Sequential hands it to
/// every layer through its cache. The default is inference (no training step).
struct ForwardContext {
  bool training = false;   // a training step: Dropout drops; otherwise it is the identity
  std::uint64_t seed = 0;  // the run's seed
  std::int64_t step = 0;   // the optimizer step
  /// One per example of the batch: the stream its random numbers come from (the
  /// example's data set index (or position in the step's global batch), or its replica and position
  /// there: core/dropout.h). Null, or fewer than the batch: the row index.
  std::span<const std::uint64_t> example_streams;
  /// A training step's BatchNormalization statistics (core/batch_norm.h), indexed by
  /// the layer's index in its model: what the runner computed over the examples the
  /// layer normalizes over (the replica's batch, or every replica's). Empty, or not
  /// ready for a layer: the layer computes them over the batch it is given.
  std::span<const BatchNormStatistics> batch_norm;
};

/// What a layer's forward pass keeps for its backward pass (per chunk of examples).
template <typename T>
struct LayerCache {
  const ForwardContext* context = nullptr;  // set by Sequential::Forward; null: inference
  std::size_t layer = 0;                    // the layer's index in its model (set by Sequential::Forward)
  Tensor<T> buffer;                         // e.g. the im2col patch matrix of a convolution
  std::vector<const T*> rows;               // e.g. where each patch starts (the patch matrix read in place)
  std::vector<T*> mutable_rows;             // the same in the input gradient
  std::vector<std::int32_t> indices;        // e.g. the argmax positions of a max pooling
  Tensor<T> transposed;                     // a transposed kernel for the input gradient
  Tensor<T> abs_input, abs_gradient;        // |A| and |dz|, for the gradient magnitudes (the reference check)
};

/// Exact mode (docs/exact.md): what one chunk of examples contributes to one
/// parameter's gradient, kept per example so that the sum over examples can be
/// taken exactly (core/exact_sum.h) by whoever owns the examples.
struct ExampleTerms {
  enum class Kind {
    kValues,         // values[e][k]: example e's contribution to element k, a float
    kOuterProducts,  // element (i, j) of an [I, J] parameter gets a[e][i] * b[e][j], the exact product
  };
  Kind kind = Kind::kValues;
  Tensor<float> values;  // kValues: [examples, parameter size]
  Tensor<float> a, b;    // kOuterProducts: [examples, I] and [examples, J]
};

template <typename T>
class Layer {
 public:
  explicit Layer(std::string name) : name_(std::move(name)) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  /// The Keras-style unique name, e.g. "conv2d_1"; parameter names are "<name>/kernel".
  const std::string& name() const { return name_; }
  /// The layer type, e.g. "Conv2D".
  virtual std::string_view kind() const = 0;
  /// The shape of one example's output given one example's input shape (no batch
  /// dimension). Returns an empty Shape if the input shape does not fit the layer.
  virtual Shape OutputShape(const Shape& example_input) const = 0;
  /// This layer's parameters for the given input shape, in a fixed order.
  virtual std::vector<ParameterSpec> Parameters(const Shape& /*example_input*/) const { return {}; }

  /// y = f(x; params) for a batch x of shape [B, example_input...].
  /// `params` holds this layer's parameters in Parameters() order. Resizes y.
  /// In float every sum is a fixed-order chain (core/layer_kernels.h), the same in
  /// fast and exact mode: an example's output does not depend on its batch, and the
  /// bits do not depend on the machine.
  virtual void Forward(std::span<const Tensor<T>* const> params, const Tensor<T>& x, Tensor<T>& y,
                       LayerCache<T>& cache) const = 0;

  /// Given dy = dL/dy, writes dL/dparams into `param_grads` (overwriting) and, if
  /// `dx` is not null, dL/dx into *dx (resized to x's shape). `x`, `y` and `cache`
  /// are as the last Forward left them. `dy` may be modified (used as scratch).
  ///
  /// If `param_grad_magnitudes` is not empty, also writes, for every parameter
  /// element, the sum of the absolute values of the terms its gradient sums over
  /// the batch (|A|^T |dz| for a kernel, sum |dz| for a bias): the sum|x_i| of the
  /// floating-point error bound of that reduction (docs/architecture.md, "Exact reference math").
  /// In float each gradient element is one fixed-order chain over the batch's rows.
  virtual void Backward(std::span<const Tensor<T>* const> params, const Tensor<T>& x, const Tensor<T>& y, Tensor<T>& dy,
                        Tensor<T>* dx, std::span<Tensor<T>* const> param_grads, LayerCache<T>& cache,
                        std::span<Tensor<T>* const> param_grad_magnitudes = {}) const = 0;

  /// Exact mode: writes dL/dx as Backward does (with fixed-order sums), and for each
  /// parameter, in Parameters() order, its per-example gradient terms into
  /// *terms[p]. The default suits layers without parameters.
  virtual void BackwardExact(std::span<const Tensor<T>* const> params, const Tensor<T>& x, const Tensor<T>& y,
                             Tensor<T>& dy, Tensor<T>* dx, std::span<ExampleTerms* const> /*terms*/,
                             LayerCache<T>& cache) const {
    Backward(params, x, y, dy, dx, {}, cache);
  }

 private:
  std::string name_;
};

/// dy *= (y > 0): the ReLU derivative applied through its output (TF's ReluGrad).
template <typename T>
void ApplyReluGradient(const Tensor<T>& y, Tensor<T>& dy);

}  // namespace dtlab
