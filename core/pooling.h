// MaxPooling2D and AveragePooling2D: windows of pool_size with strides and `valid`
// or `same` padding (TF's rule, core/sliding_window.h); the Keras defaults are 2x2
// windows, stride 2, valid. Input [B, H, W, C], output [B, OH, OW, C].
//
// Max: ties go to the first maximum in scan order (row, then column), as in TF's
// CPU kernel; after a ReLU all-zero windows are common, so this matters for matching
// TF bit for bit. Padding positions are never a window's maximum. The gradient goes
// to each window's maximum; an input that is the maximum of several (overlapping)
// windows gets their sum, in output order from +0.
//
// Average: the sum of the window's input positions (padding left out, as TF does for
// `same`), a chain in (row, column) order from +0, divided by how many there are.
// The gradient: each output's dy times the float of 1/count (TF's AvgPoolGrad
// multiplies by that coefficient), added to its window's inputs in output order
// from +0.
#pragma once

#include "core/layer.h"
#include "core/sliding_window.h"

namespace dtlab {

/// Window, strides and padding of a 2-D pooling (Keras's defaults).
struct PoolingOptions {
  std::int64_t pool_height = 2, pool_width = 2;
  std::int64_t stride_height = 2, stride_width = 2;
  Padding padding = Padding::kValid;
  /// 2x2 windows, stride 2, valid: the pooling the fast path and the device kernels implement.
  bool IsDefault() const {
    return pool_height == 2 && pool_width == 2 && stride_height == 2 && stride_width == 2 && padding == Padding::kValid;
  }
};

template <typename T>
class MaxPooling2D final : public Layer<T> {
 public:
  explicit MaxPooling2D(std::string name, PoolingOptions options = {}) : Layer<T>(std::move(name)), options_(options) {}

  std::string_view kind() const override { return "MaxPooling2D"; }
  const PoolingOptions& options() const { return options_; }
  Shape OutputShape(const Shape& example_input) const override;
  void Forward(std::span<const Tensor<T>* const> params, const Tensor<T>& x, Tensor<T>& y,
               LayerCache<T>& cache) const override;
  void Backward(std::span<const Tensor<T>* const> params, const Tensor<T>& x, const Tensor<T>& y, Tensor<T>& dy,
                Tensor<T>* dx, std::span<Tensor<T>* const> param_grads, LayerCache<T>& cache,
                std::span<Tensor<T>* const> param_grad_magnitudes = {}) const override;

 private:
  PoolingOptions options_;
};

template <typename T>
class AveragePooling2D final : public Layer<T> {
 public:
  explicit AveragePooling2D(std::string name, PoolingOptions options = {})
      : Layer<T>(std::move(name)), options_(options) {}

  std::string_view kind() const override { return "AveragePooling2D"; }
  const PoolingOptions& options() const { return options_; }
  Shape OutputShape(const Shape& example_input) const override;
  void Forward(std::span<const Tensor<T>* const> params, const Tensor<T>& x, Tensor<T>& y,
               LayerCache<T>& cache) const override;
  void Backward(std::span<const Tensor<T>* const> params, const Tensor<T>& x, const Tensor<T>& y, Tensor<T>& dy,
                Tensor<T>* dx, std::span<Tensor<T>* const> param_grads, LayerCache<T>& cache,
                std::span<Tensor<T>* const> param_grad_magnitudes = {}) const override;

 private:
  PoolingOptions options_;
};

}  // namespace dtlab
