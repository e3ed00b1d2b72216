// MaxPooling2D: 2x2 windows, stride 2, valid padding (Keras defaults).
// Input [B, H, W, C], output [B, H/2, W/2, C] (rounded down).
//
// Ties go to the first maximum in scan order (row, then column), as in TF's CPU
// kernel; after a ReLU all-zero windows are common, so this matters for matching
// TF bit for bit.
#pragma once

#include "core/layer.h"

namespace dtlab {

template <typename T>
class MaxPooling2D final : public Layer<T> {
 public:
  explicit MaxPooling2D(std::string name) : Layer<T>(std::move(name)) {}

  std::string_view kind() const override { return "MaxPooling2D"; }
  Shape OutputShape(const Shape& example_input) const override;
  void Forward(std::span<const Tensor<T>* const> params, const Tensor<T>& x, Tensor<T>& y,
               LayerCache<T>& cache) const override;
  void Backward(std::span<const Tensor<T>* const> params, const Tensor<T>& x, const Tensor<T>& y, Tensor<T>& dy,
                Tensor<T>* dx, std::span<Tensor<T>* const> param_grads, LayerCache<T>& cache,
                std::span<Tensor<T>* const> param_grad_magnitudes = {}) const override;
};

}  // namespace dtlab
