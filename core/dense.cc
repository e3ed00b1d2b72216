#include "core/dense.h"

#include <type_traits>

#include "core/layer_kernels.h"

namespace dtlab {

template <typename T>
Dense<T>::Dense(std::string name, std::int64_t units, Activation activation, L2Factors l2)
    : Layer<T>(std::move(name)), units_(units), activation_(activation), l2_(l2) {}

template <typename T>
Shape Dense<T>::OutputShape(const Shape& in) const {
  if (in.size() != 1) return {};
  return {units_};
}

template <typename T>
std::vector<ParameterSpec> Dense<T>::Parameters(const Shape& in) const {
  const std::int64_t inputs = in.size() == 1 ? in[0] : 0;
  return {{"kernel", {inputs, units_}, true, inputs, units_, l2_.kernel}, {"bias", {units_}, false, 0, 0, l2_.bias}};
}

template <typename T>
void Dense<T>::Forward(std::span<const Tensor<T>* const> params, const Tensor<T>& x, Tensor<T>& y,
                       LayerCache<T>& /*cache*/) const {
  const std::int64_t batch = x.dim(0), inputs = x.size() / std::max<std::int64_t>(batch, 1);
  y.Resize({batch, units_});
  DenseForward(x.data(), batch, inputs, params[0]->data(), params[1]->data(), units_, activation_, y.data());
}

template <typename T>
void Dense<T>::Backward(std::span<const Tensor<T>* const> params, const Tensor<T>& x, const Tensor<T>& y, Tensor<T>& dy,
                        Tensor<T>* dx, std::span<Tensor<T>* const> param_grads, LayerCache<T>& cache,
                        std::span<Tensor<T>* const> magnitudes) const {
  const std::int64_t batch = x.dim(0), inputs = x.size() / std::max<std::int64_t>(batch, 1);
  if (activation_ == Activation::kRelu) ApplyReluGradient(y, dy);
  DenseParameterGradients(x.data(), dy.data(), batch, inputs, units_, param_grads[0]->data(), param_grads[1]->data(),
                          magnitudes.empty() ? nullptr : magnitudes[0]->data(),
                          magnitudes.empty() ? nullptr : magnitudes[1]->data(), cache.abs_input, cache.abs_gradient);
  if (dx == nullptr) return;
  dx->Resize(x.shape());
  DenseInputGradient(dy.data(), batch, units_, params[0]->data(), inputs, cache.transposed, dx->data());
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
    dx->Resize(x.shape());
    DenseInputGradient(dy.data(), batch, units_, params[0]->data(), inputs, cache.transposed, dx->data());
  }
}

template class Dense<float>;
template class Dense<double>;

}  // namespace dtlab
