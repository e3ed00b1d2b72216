// Conv2D: 2-D convolution, valid padding, stride 1 (Keras Conv2D defaults), with an
// optional fused activation. Input [B, H, W, C], kernel [KH, KW, C, O] (HWIO),
// bias [O], output [B, H-KH+1, W-KW+1, O].
//
// Computed as im2col + GEMM: each output pixel's receptive field is one row of a
// patch matrix [B*OH*OW, KH*KW*C] whose column order (kh, kw, c) matches the HWIO
// kernel read as a [KH*KW*C, O] matrix.
#pragma once

#include "core/layer.h"

namespace dtlab {

template <typename T>
class Conv2D final : public Layer<T> {
 public:
  Conv2D(std::string name, std::int64_t filters, std::int64_t kernel_height, std::int64_t kernel_width,
         Activation activation);

  std::string_view kind() const override { return "Conv2D"; }
  std::int64_t filters() const { return filters_; }
  std::int64_t kernel_height() const { return kernel_height_; }
  std::int64_t kernel_width() const { return kernel_width_; }
  Activation activation() const { return activation_; }
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
  std::int64_t filters_, kernel_height_, kernel_width_;
  Activation activation_;
};

}  // namespace dtlab
