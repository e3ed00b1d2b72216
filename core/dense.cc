#include "core/dense.h"

#include <type_traits>

#include "core/ordered_gemm.h"

namespace dtlab {

template <typename T>
Dense<T>::Dense(std::string name, std::int64_t units, Activation activation)
    : Layer<T>(std::move(name)), units_(units), activation_(activation) {}

template <typename T>
Shape Dense<T>::OutputShape(const Shape& in) const {
  if (in.size() != 1) return {};
  return {units_};
}

template <typename T>
std::vector<ParameterSpec> Dense<T>::Parameters(const Shape& in) const {
  const std::int64_t inputs = in.size() == 1 ? in[0] : 0;
  return {{"kernel", {inputs, units_}, true, inputs, units_}, {"bias", {units_}, false, 0, 0}};
}

template <typename T>
void Dense<T>::Forward(std::span<const Tensor<T>* const> params, const Tensor<T>& x, Tensor<T>& y,
                       LayerCache<T>& /*cache*/) const {
  const std::int64_t batch = x.dim(0), inputs = x.size() / std::max<std::int64_t>(batch, 1);
  y.Resize({batch, units_});
  ConstMatrixMap<T> in(x.data(), batch, inputs);
  ConstMatrixMap<T> kernel(params[0]->data(), inputs, units_);
  MatrixMap<T> out(y.data(), batch, units_);
  out.noalias() = in * kernel;
  Eigen::Map<const Eigen::Matrix<T, 1, Eigen::Dynamic>> bias(params[1]->data(), units_);
  out.rowwise() += bias;
  if (activation_ == Activation::kRelu) y.flat() = y.flat().max(T(0));
}

template <typename T>
void Dense<T>::Backward(std::span<const Tensor<T>* const> params, const Tensor<T>& x, const Tensor<T>& y,
                        Tensor<T>& dy, Tensor<T>* dx, std::span<Tensor<T>* const> param_grads,
                        LayerCache<T>& /*cache*/, std::span<Tensor<T>* const> magnitudes) const {
  const std::int64_t batch = x.dim(0), inputs = x.size() / std::max<std::int64_t>(batch, 1);
  if (activation_ == Activation::kRelu) ApplyReluGradient(y, dy);
  ConstMatrixMap<T> dz(dy.data(), batch, units_);
  ConstMatrixMap<T> in(x.data(), batch, inputs);
  MatrixMap<T> dkernel(param_grads[0]->data(), inputs, units_);
  dkernel.noalias() = in.transpose() * dz;
  Eigen::Map<Eigen::Matrix<T, 1, Eigen::Dynamic>> dbias(param_grads[1]->data(), units_);
  dbias = dz.colwise().sum();
  if (!magnitudes.empty()) {
    MatrixMap<T>(magnitudes[0]->data(), inputs, units_).noalias() = in.cwiseAbs().transpose() * dz.cwiseAbs();
    Eigen::Map<Eigen::Matrix<T, 1, Eigen::Dynamic>>(magnitudes[1]->data(), units_) = dz.cwiseAbs().colwise().sum();
  }
  if (dx == nullptr) return;
  dx->Resize(x.shape());
  ConstMatrixMap<T> kernel(params[0]->data(), inputs, units_);
  MatrixMap<T> din(dx->data(), batch, inputs);
  din.noalias() = dz * kernel.transpose();
}

template <typename T>
void Dense<T>::ForwardExact(std::span<const Tensor<T>* const> params, const Tensor<T>& x, Tensor<T>& y,
                            LayerCache<T>& cache) const {
  if constexpr (!std::is_same_v<T, float>) {
    Forward(params, x, y, cache);
  } else {
    const std::int64_t batch = x.dim(0), inputs = x.size() / std::max<std::int64_t>(batch, 1);
    y.Resize({batch, units_});
    OrderedGemm(batch, units_, inputs, x.data(), inputs, 1, params[0]->data(), units_, y.data(), units_);
    AddBiasAndActivation(y.data(), batch, units_, params[1]->data(), activation_);
  }
}

template <typename T>
void Dense<T>::BackwardExact(std::span<const Tensor<T>* const> params, const Tensor<T>& x, const Tensor<T>& y,
                             Tensor<T>& dy, Tensor<T>* dx, std::span<ExampleTerms* const> terms,
                             LayerCache<T>& cache) const {
  if constexpr (!std::is_same_v<T, float>) {
    Backward(params, x, y, dy, dx, {}, cache);
  } else {
    const std::int64_t batch = x.dim(0), inputs = x.size() / std::max<std::int64_t>(batch, 1);
    if (activation_ == Activation::kRelu) ApplyReluGradient(y, dy);
    // The kernel's per-example terms are the exact products x[e][i] * dz[e][j]:
    // kept as their two factors, multiplied where they are summed.
    ExampleTerms& kernel_terms = *terms[0];
    kernel_terms.kind = ExampleTerms::Kind::kOuterProducts;
    kernel_terms.a.Resize({batch, inputs});
    std::copy(x.data(), x.data() + batch * inputs, kernel_terms.a.data());
    kernel_terms.b.Resize({batch, units_});
    std::copy(dy.data(), dy.data() + batch * units_, kernel_terms.b.data());
    ExampleTerms& bias_terms = *terms[1];
    bias_terms.kind = ExampleTerms::Kind::kValues;
    bias_terms.values.Resize({batch, units_});
    std::copy(dy.data(), dy.data() + batch * units_, bias_terms.values.data());
    if (dx == nullptr) return;
    const float* kernel = params[0]->data();
    cache.transposed.Resize({units_, inputs});
    for (std::int64_t i = 0; i < inputs; ++i)
      for (std::int64_t u = 0; u < units_; ++u) cache.transposed[u * inputs + i] = kernel[i * units_ + u];
    dx->Resize(x.shape());
    OrderedGemm(batch, inputs, units_, dy.data(), units_, 1, cache.transposed.data(), inputs, dx->data(), inputs);
  }
}

template class Dense<float>;
template class Dense<double>;

}  // namespace dtlab
