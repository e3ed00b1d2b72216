#include "core/activation_layer.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/portable_math.h"

namespace dtlab {
namespace {

template <typename T>
T Exp(T x) {
  if constexpr (std::is_same_v<T, float>)
    return portable::Exp(x);
  else
    return std::exp(x);
}

template <typename T>
T FusedMultiplyAdd(T a, T b, T c) {
  return std::fma(a, b, c);
}

}  // namespace

template <typename T>
void ActivationLayer<T>::Forward(std::span<const Tensor<T>* const> /*params*/, const Tensor<T>& x, Tensor<T>& y,
                                 LayerCache<T>& /*cache*/) const {
  y.Resize(x.shape());
  switch (function_) {
    case Function::kLinear:
      std::copy(x.data(), x.data() + x.size(), y.data());
      return;
    case Function::kRelu:
      y.flat() = x.flat().max(T(0));
      return;
    case Function::kSoftmax:
      break;
  }
  const std::int64_t width = x.shape().back(), rows = width == 0 ? 0 : x.size() / width;
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* in = x.data() + r * width;
    T* out = y.data() + r * width;
    T max = in[0];
    for (std::int64_t i = 1; i < width; ++i) max = in[i] > max ? in[i] : max;
    T sum = 0;
    for (std::int64_t i = 0; i < width; ++i) {
      out[i] = Exp<T>(in[i] - max);
      sum += out[i];
    }
    const T inverse = T(1) / sum;
    for (std::int64_t i = 0; i < width; ++i) out[i] *= inverse;
  }
}

template <typename T>
void ActivationLayer<T>::Backward(std::span<const Tensor<T>* const> /*params*/, const Tensor<T>& x, const Tensor<T>& y,
                                  Tensor<T>& dy, Tensor<T>* dx, std::span<Tensor<T>* const> /*param_grads*/,
                                  LayerCache<T>& /*cache*/, std::span<Tensor<T>* const> /*magnitudes*/) const {
  if (dx == nullptr) return;
  dx->Resize(x.shape());
  switch (function_) {
    case Function::kLinear:
      std::copy(dy.data(), dy.data() + dy.size(), dx->data());
      return;
    case Function::kRelu:
      ApplyReluGradient(y, dy);
      std::copy(dy.data(), dy.data() + dy.size(), dx->data());
      return;
    case Function::kSoftmax:
      break;
  }
  const std::int64_t width = x.shape().back(), rows = width == 0 ? 0 : x.size() / width;
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* grad = dy.data() + r * width;
    const T* out = y.data() + r * width;
    T* grad_in = dx->data() + r * width;
    T dot = 0;
    for (std::int64_t i = 0; i < width; ++i) dot = FusedMultiplyAdd(grad[i], out[i], dot);
    for (std::int64_t i = 0; i < width; ++i) grad_in[i] = (grad[i] - dot) * out[i];
  }
}

template class ActivationLayer<float>;
template class ActivationLayer<double>;

}  // namespace dtlab
