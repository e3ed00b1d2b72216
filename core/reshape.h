// Flatten and Reshape: change the per-example shape, keeping the data order.
#pragma once

#include "core/layer.h"

namespace dtlab {

/// Reshape to a fixed per-example shape (Keras Reshape), e.g. 784 -> 28x28x1.
/// Flatten is Reshape to one dimension.
template <typename T>
class Reshape final : public Layer<T> {
 public:
  /// An empty `target` means Flatten.
  Reshape(std::string name, Shape target) : Layer<T>(std::move(name)), target_(std::move(target)) {}

  std::string_view kind() const override { return target_.empty() ? "Flatten" : "Reshape"; }
  Shape OutputShape(const Shape& example_input) const override;
  void Forward(std::span<const Tensor<T>* const> params, const Tensor<T>& x, Tensor<T>& y,
               LayerCache<T>& cache) const override;
  void Backward(std::span<const Tensor<T>* const> params, const Tensor<T>& x, const Tensor<T>& y, Tensor<T>& dy,
                Tensor<T>* dx, std::span<Tensor<T>* const> param_grads, LayerCache<T>& cache,
                std::span<Tensor<T>* const> param_grad_magnitudes = {}) const override;

 private:
  Shape target_;
};

}  // namespace dtlab
