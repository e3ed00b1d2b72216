#include "core/reshape.h"

#include <algorithm>

namespace dtlab {

template <typename T>
Shape Reshape<T>::OutputShape(const Shape& in) const {
  if (target_.empty()) return {NumElements(in)};
  if (NumElements(target_) != NumElements(in)) return {};
  return target_;
}

template <typename T>
void Reshape<T>::Forward(std::span<const Tensor<T>* const> /*params*/, const Tensor<T>& x, Tensor<T>& y,
                         LayerCache<T>& /*cache*/) const {
  Shape example(x.shape().begin() + 1, x.shape().end());
  Shape out = OutputShape(example);
  out.insert(out.begin(), x.dim(0));
  y.Resize(std::move(out));
  std::copy(x.data(), x.data() + x.size(), y.data());
}

template <typename T>
void Reshape<T>::Backward(std::span<const Tensor<T>* const> /*params*/, const Tensor<T>& x, const Tensor<T>& /*y*/,
                          Tensor<T>& dy, Tensor<T>* dx, std::span<Tensor<T>* const> /*param_grads*/,
                          LayerCache<T>& /*cache*/, std::span<Tensor<T>* const> /*magnitudes*/) const {
  if (dx == nullptr) return;
  dx->Resize(x.shape());
  std::copy(dy.data(), dy.data() + dy.size(), dx->data());
}

template class Reshape<float>;
template class Reshape<double>;

}  // namespace dtlab
