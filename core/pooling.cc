#include "core/pooling.h"

#include <algorithm>

namespace dtlab {

template <typename T>
Shape MaxPooling2D<T>::OutputShape(const Shape& in) const {
  if (in.size() != 3 || in[0] < 2 || in[1] < 2) return {};
  return {in[0] / 2, in[1] / 2, in[2]};
}

template <typename T>
void MaxPooling2D<T>::Forward(std::span<const Tensor<T>* const> /*params*/, const Tensor<T>& x, Tensor<T>& y,
                              LayerCache<T>& cache) const {
  const std::int64_t batch = x.dim(0), height = x.dim(1), width = x.dim(2), channels = x.dim(3);
  const std::int64_t out_h = height / 2, out_w = width / 2;
  y.Resize({batch, out_h, out_w, channels});
  cache.indices.resize(static_cast<std::size_t>(y.size()));
  const T* in = x.data();
  T* out = y.data();
  std::int32_t* argmax = cache.indices.data();
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t oh = 0; oh < out_h; ++oh)
      for (std::int64_t ow = 0; ow < out_w; ++ow) {
        const std::int64_t o = ((b * out_h + oh) * out_w + ow) * channels;
        const std::int64_t i00 = ((b * height + 2 * oh) * width + 2 * ow) * channels;
        const std::int64_t offsets[4] = {i00, i00 + channels, i00 + width * channels, i00 + (width + 1) * channels};
        for (std::int64_t c = 0; c < channels; ++c) {
          std::int64_t best = offsets[0] + c;
          for (int k = 1; k < 4; ++k)
            if (in[offsets[k] + c] > in[best]) best = offsets[k] + c;
          out[o + c] = in[best];
          argmax[o + c] = static_cast<std::int32_t>(best);
        }
      }
}

template <typename T>
void MaxPooling2D<T>::Backward(std::span<const Tensor<T>* const> /*params*/, const Tensor<T>& x, const Tensor<T>& /*y*/,
                               Tensor<T>& dy, Tensor<T>* dx, std::span<Tensor<T>* const> /*param_grads*/,
                               LayerCache<T>& cache, std::span<Tensor<T>* const> /*magnitudes*/) const {
  if (dx == nullptr) return;
  // Every input position gets its window's gradient if it was the window's maximum
  // and +0 otherwise, written once (windows do not overlap): the bits of adding each
  // gradient to a zeroed dx, without zeroing it first.
  const std::int64_t batch = x.dim(0), height = x.dim(1), width = x.dim(2), channels = x.dim(3);
  const std::int64_t out_h = height / 2, out_w = width / 2;
  dx->Resize(x.shape());
  T* grad_in = dx->data();
  const T* grad_out = dy.data();
  const std::int32_t* argmax = cache.indices.data();
  const T zero = T(0);
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t oh = 0; oh < out_h; ++oh) {
      for (std::int64_t ow = 0; ow < out_w; ++ow) {
        const std::int64_t o = ((b * out_h + oh) * out_w + ow) * channels;
        const std::int64_t i00 = ((b * height + 2 * oh) * width + 2 * ow) * channels;
        const std::int64_t offsets[4] = {i00, i00 + channels, i00 + width * channels, i00 + (width + 1) * channels};
        const std::int32_t* winner = argmax + o;
        const T* grad = grad_out + o;
        for (const std::int64_t offset : offsets) {
          T* to = grad_in + offset;
          const auto first = static_cast<std::int32_t>(offset);  // indices fit: they are stored as int32
          for (std::int32_t c = 0; c < static_cast<std::int32_t>(channels); ++c)
            to[c] = winner[c] - c == first ? zero + grad[c] : zero;
        }
      }
      if (width % 2 != 0)  // the last column, in no window
        for (const std::int64_t h : {2 * oh, 2 * oh + 1})
          std::fill_n(grad_in + ((b * height + h) * width + width - 1) * channels, channels, zero);
    }
    if (height % 2 != 0)  // the last row
      std::fill_n(grad_in + ((b * height + height - 1) * width) * channels, width * channels, zero);
  }
}

template class MaxPooling2D<float>;
template class MaxPooling2D<double>;

}  // namespace dtlab
