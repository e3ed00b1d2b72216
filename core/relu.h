// ReLU as a layer of its own (Keras `layers.ReLU()`): y = max(x, 0), any shape.
// Conv2D and Dense also take `Activation::kRelu`, as Keras' `activation='relu'`;
// both compute the same values and gradients.
#pragma once

#include "core/layer.h"

namespace dtlab {

template <typename T>
class ReLU final : public Layer<T> {
 public:
  explicit ReLU(std::string name) : Layer<T>(std::move(name)) {}

  std::string_view kind() const override { return "ReLU"; }
  Shape OutputShape(const Shape& example_input) const override { return example_input; }
  void Forward(std::span<const Tensor<T>* const> params, const Tensor<T>& x, Tensor<T>& y,
               LayerCache<T>& cache) const override;
  void Backward(std::span<const Tensor<T>* const> params, const Tensor<T>& x, const Tensor<T>& y, Tensor<T>& dy,
                Tensor<T>* dx, std::span<Tensor<T>* const> param_grads, LayerCache<T>& cache,
                std::span<Tensor<T>* const> param_grad_magnitudes = {}) const override;
};

}  // namespace dtlab
