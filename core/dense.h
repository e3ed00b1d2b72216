// Dense: y = activation(x W + b). Input [B, in], kernel [in, out], bias [out].
#pragma once

#include "core/layer.h"

namespace dtlab {

template <typename T>
class Dense final : public Layer<T> {
 public:
  Dense(std::string name, std::int64_t units, Activation activation, L2Factors l2 = {});

  std::string_view kind() const override { return "Dense"; }
  std::int64_t units() const { return units_; }
  Activation activation() const { return activation_; }
  const L2Factors& l2() const { return l2_; }
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
  std::int64_t units_;
  Activation activation_;
  L2Factors l2_;
};

}  // namespace dtlab
