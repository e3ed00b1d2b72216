// Conv2D: 2-D convolution with strides and `valid` or `same` padding (TF's rule,
// core/sliding_window.h) and an optional fused activation. Input [B, H, W, C],
// kernel [KH, KW, C, O] (HWIO), bias [O], output [B, OH, OW, O]; with the Keras
// defaults (stride 1, valid) OH = H-KH+1 and OW = W-KW+1.
//
// Computed as im2col + GEMM: each output pixel's receptive field is one row of a
// patch matrix [B*OH*OW, KH*KW*C] whose column order (kh, kw, c) matches the HWIO
// kernel read as a [KH*KW*C, O] matrix. A padded position is a zero in that row, so
// every output's chain runs over all (kh, kw, c) in order, padding included
// (docs/models.md). Stride 1 with valid padding keeps the fast paths of
// docs/exact.md (the patch matrix read in place, col2im fused); other shapes build
// the patch matrix.
#pragma once

#include "core/layer.h"
#include "core/sliding_window.h"

namespace dtlab {

/// Conv2D's strides, padding and regularizers; the defaults are Keras's (1, 1, valid, none).
struct Conv2DOptions {
  std::int64_t stride_height = 1, stride_width = 1;
  Padding padding = Padding::kValid;
  L2Factors l2;
};

template <typename T>
class Conv2D final : public Layer<T> {
 public:
  using Options = Conv2DOptions;

  Conv2D(std::string name, std::int64_t filters, std::int64_t kernel_height, std::int64_t kernel_width,
         Activation activation, Options options = {});

  std::string_view kind() const override { return "Conv2D"; }
  std::int64_t filters() const { return filters_; }
  std::int64_t kernel_height() const { return kernel_height_; }
  std::int64_t kernel_width() const { return kernel_width_; }
  Activation activation() const { return activation_; }
  const Options& options() const { return options_; }
  /// Stride 1 and valid padding: the convolution the fast paths and the device
  /// kernels implement.
  bool unit_stride_valid() const {
    return options_.stride_height == 1 && options_.stride_width == 1 && options_.padding == Padding::kValid;
  }
  Shape OutputShape(const Shape& example_input) const override;
  std::vector<ParameterSpec> Parameters(const Shape& example_input) const override;
  void Forward(std::span<const Tensor<T>* const> params, const Tensor<T>& x, Tensor<T>& y,
               LayerCache<T>& cache) const override;
  void Backward(std::span<const Tensor<T>* const> params, const Tensor<T>& x, const Tensor<T>& y, Tensor<T>& dy,
                Tensor<T>* dx, std::span<Tensor<T>* const> param_grads, LayerCache<T>& cache,
                std::span<Tensor<T>* const> param_grad_magnitudes = {}) const override;
  void BackwardExact(std::span<const Tensor<T>* const> params, const Tensor<T>& x, const Tensor<T>& y, Tensor<T>& dy,
                     Tensor<T>* dx, std::span<ExampleTerms* const> terms, LayerCache<T>& cache) const override;

 private:
  // The windows along H and W of an input [.., H, W, ..] (one example or a batch).
  WindowAxis RowAxis(std::int64_t height) const;
  WindowAxis ColumnAxis(std::int64_t width) const;
  // dx from dz (both math modes compute it alike); in_place: the patch matrix is
  // read in place (ReadsPatchesInPlace), else cache.buffer holds it.
  void InputGradient(const Tensor<T>& kernel, const Tensor<T>& x, const Tensor<T>& y, const Tensor<T>& dy,
                     Tensor<T>& dx, LayerCache<T>& cache, bool in_place) const;

  std::int64_t filters_, kernel_height_, kernel_width_;
  Activation activation_;
  Options options_;
};

}  // namespace dtlab
