// Keras's activation layers: Activation('linear' | 'relu' | 'softmax'), ReLU() and
// Softmax(), any shape, the softmax over the last axis (Keras's axis=-1).
//
// Softmax, as TF's CPU kernel computes it (tensorflow/core/kernels/
// softmax_op_functor.h): per row, m = the row's maximum, e_i = exp(x_i - m), then
// y_i = e_i * (1 / sum_j e_j); the sum is a chain in index order from +0 and exp is
// core/portable_math.h's in float (the same bits on every machine). Its gradient is
// TF's (_SoftmaxGrad): dx_i = (dy_i - s) * y_i with s = sum_j dy_j * y_j, one FMA
// chain in index order from +0.
//
// ReLU: y = max(x, 0) and dx = dy where y > 0, as core/relu.h (the same values as
// the activation fused into Conv2D and Dense).
#pragma once

#include "core/layer.h"

namespace dtlab {

template <typename T>
class ActivationLayer final : public Layer<T> {
 public:
  enum class Function { kLinear, kRelu, kSoftmax };

  /// `kind` is the Keras class the layer came from ("Activation", "ReLU" or
  /// "Softmax"), for the model's summary. REQUIRES: a string with static storage.
  ActivationLayer(std::string name, Function function, std::string_view kind)
      : Layer<T>(std::move(name)), function_(function), kind_(kind) {}

  std::string_view kind() const override { return kind_; }
  Function function() const { return function_; }
  Shape OutputShape(const Shape& example_input) const override {
    if (function_ == Function::kSoftmax && example_input.empty()) return {};
    return example_input;
  }
  void Forward(std::span<const Tensor<T>* const> params, const Tensor<T>& x, Tensor<T>& y,
               LayerCache<T>& cache) const override;
  void Backward(std::span<const Tensor<T>* const> params, const Tensor<T>& x, const Tensor<T>& y, Tensor<T>& dy,
                Tensor<T>* dx, std::span<Tensor<T>* const> param_grads, LayerCache<T>& cache,
                std::span<Tensor<T>* const> param_grad_magnitudes = {}) const override;

 private:
  Function function_;
  std::string_view kind_;
};

}  // namespace dtlab
