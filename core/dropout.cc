#include "core/dropout.h"

#include <algorithm>
#include <array>

namespace dtlab {

std::uint64_t DropoutStreamKey(std::uint64_t seed, std::int64_t step, std::size_t layer) {
  const auto unsigned_step = static_cast<std::uint64_t>(step);
  const std::array<std::uint32_t, 4> block =
      Philox4x32({static_cast<std::uint32_t>(unsigned_step), static_cast<std::uint32_t>(unsigned_step >> 32),
                  static_cast<std::uint32_t>(layer), static_cast<std::uint32_t>(RngPurpose::kDropoutKey)},
                 {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
  return block[0] | (static_cast<std::uint64_t>(block[1]) << 32);
}

template <typename T>
void Dropout<T>::Forward(std::span<const Tensor<T>* const> /*params*/, const Tensor<T>& x, Tensor<T>& y,
                         LayerCache<T>& cache) const {
  y.Resize(x.shape());
  const ForwardContext* context = cache.context;
  cache.indices.clear();  // empty: the identity (no mask)
  if (context == nullptr || !context->training || rate_ == 0.0) {
    std::copy(x.data(), x.data() + x.size(), y.data());
    return;
  }
  const std::int64_t batch = x.dim(0), width = batch == 0 ? 0 : x.size() / batch;
  cache.indices.assign(static_cast<std::size_t>(x.size()), 0);
  if (rate_ >= 1.0) {  // Keras: everything dropped
    y.SetZero();
    return;
  }
  // TF's order: x * scale first, then the select (scale and rate rounded to T).
  const T scale = DropoutScale<T>(rate_);
  const std::uint64_t key = DropoutStreamKey(context->seed, context->step, cache.layer);
  for (std::int64_t e = 0; e < batch; ++e) {
    const auto row = static_cast<std::size_t>(e);
    const std::uint64_t stream =
        row < context->example_streams.size() ? context->example_streams[row] : static_cast<std::uint64_t>(e);
    std::int32_t* keep = cache.indices.data() + e * width;
    DrawDropoutMask(key, stream, rate_, width, keep);
    for (std::int64_t k = 0; k < width; ++k) {
      const std::int64_t i = e * width + k;
      const T scaled = x[i] * scale;
      y[i] = keep[k] != 0 ? scaled : T(0);
    }
  }
}

template <typename T>
void Dropout<T>::Backward(std::span<const Tensor<T>* const> /*params*/, const Tensor<T>& x, const Tensor<T>& /*y*/,
                          Tensor<T>& dy, Tensor<T>* dx, std::span<Tensor<T>* const> /*param_grads*/,
                          LayerCache<T>& cache, std::span<Tensor<T>* const> /*magnitudes*/) const {
  if (dx == nullptr) return;
  dx->Resize(x.shape());
  if (cache.indices.empty()) {
    std::copy(dy.data(), dy.data() + dy.size(), dx->data());
    return;
  }
  const T scale = DropoutScale<T>(rate_);
  for (std::int64_t i = 0; i < dy.size(); ++i)
    (*dx)[i] = cache.indices[static_cast<std::size_t>(i)] != 0 ? dy[i] * scale : T(0);
}

template class Dropout<float>;
template class Dropout<double>;

}  // namespace dtlab
