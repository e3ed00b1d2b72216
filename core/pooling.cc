#include "core/pooling.h"

#include <algorithm>

namespace dtlab {

namespace {

WindowAxis RowAxis(const PoolingOptions& options, std::int64_t height) {
  return MakeWindowAxis(height, options.pool_height, options.stride_height, options.padding);
}

WindowAxis ColumnAxis(const PoolingOptions& options, std::int64_t width) {
  return MakeWindowAxis(width, options.pool_width, options.stride_width, options.padding);
}

Shape PooledShape(const PoolingOptions& options, const Shape& in) {
  if (in.size() != 3) return {};
  const std::int64_t out_h = RowAxis(options, in[0]).out, out_w = ColumnAxis(options, in[1]).out;
  if (out_h <= 0 || out_w <= 0) return {};
  return {out_h, out_w, in[2]};
}

// Calls visit(offset) for the input positions of window (oh, ow) of example b, in
// (row, column) order, padding left out; `offset` is the position's first channel.
template <typename Visit>
void ForEachInWindow(const WindowAxis& rows, const WindowAxis& columns, std::int64_t b, std::int64_t oh,
                     std::int64_t ow, std::int64_t height, std::int64_t width, std::int64_t channels, Visit visit) {
  for (std::int64_t kh = 0; kh < rows.window; ++kh) {
    const std::int64_t ih = rows.Input(oh, kh);
    if (ih < 0 || ih >= height) continue;
    for (std::int64_t kw = 0; kw < columns.window; ++kw) {
      const std::int64_t iw = columns.Input(ow, kw);
      if (iw < 0 || iw >= width) continue;
      visit(((b * height + ih) * width + iw) * channels);
    }
  }
}

}  // namespace

template <typename T>
Shape MaxPooling2D<T>::OutputShape(const Shape& in) const {
  return PooledShape(options_, in);
}

template <typename T>
void MaxPooling2D<T>::Forward(std::span<const Tensor<T>* const> /*params*/, const Tensor<T>& x, Tensor<T>& y,
                              LayerCache<T>& cache) const {
  if (!options_.IsDefault()) {
    // Any window: each channel's first maximum in scan order.
    const std::int64_t batch = x.dim(0), height = x.dim(1), width = x.dim(2), channels = x.dim(3);
    const WindowAxis rows = RowAxis(options_, height), columns = ColumnAxis(options_, width);
    y.Resize({batch, rows.out, columns.out, channels});
    cache.indices.assign(static_cast<std::size_t>(y.size()), -1);
    const T* in = x.data();
    T* out = y.data();
    for (std::int64_t b = 0; b < batch; ++b)
      for (std::int64_t oh = 0; oh < rows.out; ++oh)
        for (std::int64_t ow = 0; ow < columns.out; ++ow) {
          const std::int64_t o = ((b * rows.out + oh) * columns.out + ow) * channels;
          std::int32_t* best = cache.indices.data() + o;
          ForEachInWindow(rows, columns, b, oh, ow, height, width, channels, [&](std::int64_t offset) {
            for (std::int64_t c = 0; c < channels; ++c)
              if (best[c] < 0 || in[offset + c] > in[best[c]]) best[c] = static_cast<std::int32_t>(offset + c);
          });
          for (std::int64_t c = 0; c < channels; ++c) out[o + c] = in[best[c]];
        }
    return;
  }
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
  if (!options_.IsDefault()) {
    // Windows may overlap: each output's gradient added to its maximum, in output order.
    dx->Resize(x.shape());
    dx->SetZero();
    T* grad_in = dx->data();
    const T* grad_out = dy.data();
    const std::int32_t* argmax = cache.indices.data();
    for (std::int64_t o = 0; o < dy.size(); ++o) grad_in[argmax[o]] += grad_out[o];
    return;
  }
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

template <typename T>
Shape AveragePooling2D<T>::OutputShape(const Shape& in) const {
  return PooledShape(options_, in);
}

template <typename T>
void AveragePooling2D<T>::Forward(std::span<const Tensor<T>* const> /*params*/, const Tensor<T>& x, Tensor<T>& y,
                                  LayerCache<T>& /*cache*/) const {
  const std::int64_t batch = x.dim(0), height = x.dim(1), width = x.dim(2), channels = x.dim(3);
  const WindowAxis rows = RowAxis(options_, height), columns = ColumnAxis(options_, width);
  y.Resize({batch, rows.out, columns.out, channels});
  const T* in = x.data();
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t oh = 0; oh < rows.out; ++oh)
      for (std::int64_t ow = 0; ow < columns.out; ++ow) {
        // Each channel's chain runs over the window in (row, column) order from +0.
        T* out = y.data() + ((b * rows.out + oh) * columns.out + ow) * channels;
        std::fill(out, out + channels, T(0));
        std::int64_t count = 0;
        ForEachInWindow(rows, columns, b, oh, ow, height, width, channels, [&](std::int64_t offset) {
          ++count;
          for (std::int64_t c = 0; c < channels; ++c) out[c] += in[offset + c];
        });
        const T divisor = static_cast<T>(count);
        for (std::int64_t c = 0; c < channels; ++c) out[c] /= divisor;
      }
}

template <typename T>
void AveragePooling2D<T>::Backward(std::span<const Tensor<T>* const> /*params*/, const Tensor<T>& x,
                                   const Tensor<T>& /*y*/, Tensor<T>& dy, Tensor<T>* dx,
                                   std::span<Tensor<T>* const> /*param_grads*/, LayerCache<T>& /*cache*/,
                                   std::span<Tensor<T>* const> /*magnitudes*/) const {
  if (dx == nullptr) return;
  const std::int64_t batch = x.dim(0), height = x.dim(1), width = x.dim(2), channels = x.dim(3);
  const WindowAxis rows = RowAxis(options_, height), columns = ColumnAxis(options_, width);
  dx->Resize(x.shape());
  dx->SetZero();
  T* grad_in = dx->data();
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t oh = 0; oh < rows.out; ++oh)
      for (std::int64_t ow = 0; ow < columns.out; ++ow) {
        const T* grad = dy.data() + ((b * rows.out + oh) * columns.out + ow) * channels;
        std::int64_t count = 0;
        ForEachInWindow(rows, columns, b, oh, ow, height, width, channels, [&](std::int64_t) { ++count; });
        // TF's coefficient: 1/count computed in double, then rounded to T.
        const T coefficient = static_cast<T>(1.0 / static_cast<double>(count));
        ForEachInWindow(rows, columns, b, oh, ow, height, width, channels, [&](std::int64_t offset) {
          for (std::int64_t c = 0; c < channels; ++c) grad_in[offset + c] += grad[c] * coefficient;
        });
      }
}

template class MaxPooling2D<float>;
template class MaxPooling2D<double>;
template class AveragePooling2D<float>;
template class AveragePooling2D<double>;

}  // namespace dtlab
