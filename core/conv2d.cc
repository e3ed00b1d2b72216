#include "core/conv2d.h"

#include <cstring>
#include <vector>
#include <type_traits>

#include "core/layer_kernels.h"
#include "core/ordered_gemm.h"

namespace dtlab {
namespace {

// im2col: row (b, oh, ow) of `patches` holds x[b, oh+kh, ow+kw, c] for (kh, kw, c) in order.
template <typename T>
void Im2Col(const Tensor<T>& x, std::int64_t kernel_height, std::int64_t kernel_width, Tensor<T>& patches) {
  const std::int64_t batch = x.dim(0), height = x.dim(1), width = x.dim(2), channels = x.dim(3);
  const std::int64_t out_h = height - kernel_height + 1, out_w = width - kernel_width + 1;
  const std::int64_t patch = kernel_height * kernel_width * channels;
  const std::int64_t segment = kernel_width * channels;  // contiguous in NHWC
  patches.Resize({batch * out_h * out_w, patch});
  T* out = patches.data();
  const T* in = x.data();
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t oh = 0; oh < out_h; ++oh)
      for (std::int64_t ow = 0; ow < out_w; ++ow) {
        T* row = out + ((b * out_h + oh) * out_w + ow) * patch;
        for (std::int64_t kh = 0; kh < kernel_height; ++kh) {
          const T* from = in + ((b * height + oh + kh) * width + ow) * channels;
          if (segment == 3)  // a 3-wide kernel over one channel: a call per 12 bytes would cost more than the copy
            std::memcpy(row + kh * segment, from, sizeof(T) * 3);
          else
            std::memcpy(row + kh * segment, from, sizeof(T) * static_cast<std::size_t>(segment));
        }
      }
}

// col2im: dx = the sum of every patch row's gradient scattered back to its input
// positions, in a fixed order (row by row, then kh, then kw and c).
template <typename T>
void Col2Im(const T* grad_patches, std::int64_t kernel_height, std::int64_t kernel_width, std::int64_t out_h,
            std::int64_t out_w, Tensor<T>& dx) {
  const std::int64_t batch = dx.dim(0), height = dx.dim(1), width = dx.dim(2), channels = dx.dim(3);
  const std::int64_t patch = kernel_height * kernel_width * channels;
  const std::int64_t segment = kernel_width * channels;
  dx.SetZero();
  T* grad_in = dx.data();
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t oh = 0; oh < out_h; ++oh)
      for (std::int64_t ow = 0; ow < out_w; ++ow) {
        const T* row = grad_patches + ((b * out_h + oh) * out_w + ow) * patch;
        for (std::int64_t kh = 0; kh < kernel_height; ++kh) {
          T* dst = grad_in + ((b * height + oh + kh) * width + ow) * channels;
          const T* src = row + kh * segment;
          for (std::int64_t i = 0; i < segment; ++i) dst[i] += src[i];
        }
      }
}

// im2col for any strides and padding: row (b, oh, ow) of `patches` holds
// x[b, rows.Input(oh, kh), columns.Input(ow, kw), c] for (kh, kw, c) in order, and +0
// where that position is padding. With stride 1 and valid padding, Im2Col's matrix.
template <typename T>
void Im2ColWindows(const Tensor<T>& x, const WindowAxis& rows, const WindowAxis& columns, Tensor<T>& patches) {
  const std::int64_t batch = x.dim(0), height = x.dim(1), width = x.dim(2), channels = x.dim(3);
  const std::int64_t patch = rows.window * columns.window * channels;
  patches.Resize({batch * rows.out * columns.out, patch});
  T* out = patches.data();
  const T* in = x.data();
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t oh = 0; oh < rows.out; ++oh)
      for (std::int64_t ow = 0; ow < columns.out; ++ow) {
        T* row = out + ((b * rows.out + oh) * columns.out + ow) * patch;
        for (std::int64_t kh = 0; kh < rows.window; ++kh) {
          const std::int64_t ih = rows.Input(oh, kh);
          for (std::int64_t kw = 0; kw < columns.window; ++kw, row += channels) {
            const std::int64_t iw = columns.Input(ow, kw);
            if (ih < 0 || ih >= height || iw < 0 || iw >= width)
              std::fill(row, row + channels, T(0));
            else
              std::copy_n(in + ((b * height + ih) * width + iw) * channels, channels, row);
          }
        }
      }
}

// col2im's adjoint of Im2ColWindows: dx = +0, then every patch row's gradient added
// to the input positions it read, row by row (then kh, kw, c), padding left out.
// An input element gets at most one term per row, so its sum runs over the rows in
// ascending order: Col2Im's order where both apply.
template <typename T>
void Col2ImWindows(const T* grad_patches, const WindowAxis& rows, const WindowAxis& columns, Tensor<T>& dx) {
  const std::int64_t batch = dx.dim(0), height = dx.dim(1), width = dx.dim(2), channels = dx.dim(3);
  const std::int64_t patch = rows.window * columns.window * channels;
  dx.SetZero();
  T* grad_in = dx.data();
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t oh = 0; oh < rows.out; ++oh)
      for (std::int64_t ow = 0; ow < columns.out; ++ow) {
        const T* row = grad_patches + ((b * rows.out + oh) * columns.out + ow) * patch;
        for (std::int64_t kh = 0; kh < rows.window; ++kh) {
          const std::int64_t ih = rows.Input(oh, kh);
          for (std::int64_t kw = 0; kw < columns.window; ++kw, row += channels) {
            const std::int64_t iw = columns.Input(ow, kw);
            if (ih < 0 || ih >= height || iw < 0 || iw >= width) continue;
            T* dst = grad_in + ((b * height + ih) * width + iw) * channels;
            for (std::int64_t c = 0; c < channels; ++c) dst[c] += row[c];
          }
        }
      }
}

// The patch matrix read in place (core/ordered_gemm.h, SegmentedRows) rather than
// built by im2col, where a kernel row's inputs (KW*C of them, contiguous in NHWC) are
// many enough: the chains' k blocks are cut at every segment, which costs a store and
// a load of C each time (a 3-wide kernel over one channel keeps im2col).
constexpr std::int64_t kMinSegmentInPlace = 32;

bool ReadsPatchesInPlace(const Tensor<float>& x, std::int64_t kernel_width) {
  return kernel_width * x.dim(3) >= kMinSegmentInPlace;
}

// rows[i] = where output pixel i's patch starts in x (its first kernel row).
void PatchRows(const Tensor<float>& x, std::int64_t kernel_height, std::int64_t kernel_width,
               std::vector<const float*>& rows) {
  const std::int64_t batch = x.dim(0), height = x.dim(1), width = x.dim(2), channels = x.dim(3);
  const std::int64_t out_h = height - kernel_height + 1, out_w = width - kernel_width + 1;
  rows.resize(static_cast<std::size_t>(batch * out_h * out_w));
  std::size_t i = 0;
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t oh = 0; oh < out_h; ++oh)
      for (std::int64_t ow = 0; ow < out_w; ++ow) rows[i++] = x.data() + ((b * height + oh) * width + ow) * channels;
}

SegmentedRows PatchMatrix(const Tensor<float>& x, std::int64_t kernel_width, const std::vector<const float*>& rows) {
  return {rows.data(), kernel_width * x.dim(3), x.dim(2) * x.dim(3)};
}

}  // namespace

template <typename T>
void ApplyReluGradient(const Tensor<T>& y, Tensor<T>& dy) {
  const T* out = y.data();
  T* grad = dy.data();
  const std::int64_t n = dy.size();
  for (std::int64_t i = 0; i < n; ++i) grad[i] = out[i] > T(0) ? grad[i] : T(0);
}

template <typename T>
Conv2D<T>::Conv2D(std::string name, std::int64_t filters, std::int64_t kernel_height, std::int64_t kernel_width,
                  Activation activation, Options options)
    : Layer<T>(std::move(name)),
      filters_(filters),
      kernel_height_(kernel_height),
      kernel_width_(kernel_width),
      activation_(activation),
      options_(options) {}

template <typename T>
WindowAxis Conv2D<T>::RowAxis(std::int64_t height) const {
  return MakeWindowAxis(height, kernel_height_, options_.stride_height, options_.padding);
}

template <typename T>
WindowAxis Conv2D<T>::ColumnAxis(std::int64_t width) const {
  return MakeWindowAxis(width, kernel_width_, options_.stride_width, options_.padding);
}

template <typename T>
Shape Conv2D<T>::OutputShape(const Shape& in) const {
  if (in.size() != 3) return {};
  const std::int64_t out_h = RowAxis(in[0]).out, out_w = ColumnAxis(in[1]).out;
  if (out_h <= 0 || out_w <= 0) return {};
  return {out_h, out_w, filters_};
}

template <typename T>
std::vector<ParameterSpec> Conv2D<T>::Parameters(const Shape& in) const {
  const std::int64_t channels = in.size() == 3 ? in[2] : 0;
  const std::int64_t receptive = kernel_height_ * kernel_width_;
  return {
      {"kernel",
       {kernel_height_, kernel_width_, channels, filters_},
       true,
       receptive * channels,
       receptive * filters_,
       options_.l2.kernel},
      {"bias", {filters_}, false, 0, 0, options_.l2.bias},
  };
}

template <typename T>
void Conv2D<T>::Forward(std::span<const Tensor<T>* const> params, const Tensor<T>& x, Tensor<T>& y,
                        LayerCache<T>& cache) const {
  const std::int64_t batch = x.dim(0);
  const WindowAxis row_axis = RowAxis(x.dim(1)), column_axis = ColumnAxis(x.dim(2));
  const std::int64_t out_h = row_axis.out, out_w = column_axis.out;
  const std::int64_t rows = batch * out_h * out_w;
  const std::int64_t patch = kernel_height_ * kernel_width_ * x.dim(3);
  y.Resize({batch, out_h, out_w, filters_});
  if (!unit_stride_valid()) {
    Im2ColWindows(x, row_axis, column_axis, cache.buffer);
    DenseForward(cache.buffer.data(), rows, patch, params[0]->data(), params[1]->data(), filters_, activation_,
                 y.data());
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    if (ReadsPatchesInPlace(x, kernel_width_)) {
      PatchRows(x, kernel_height_, kernel_width_, cache.rows);
      OrderedGemmSegmentedA(rows, filters_, patch, PatchMatrix(x, kernel_width_, cache.rows), params[0]->data(),
                            filters_, y.data(), filters_, {params[1]->data(), activation_ == Activation::kRelu});
      return;
    }
  }
  Im2Col(x, kernel_height_, kernel_width_, cache.buffer);
  DenseForward(cache.buffer.data(), rows, patch, params[0]->data(), params[1]->data(), filters_, activation_, y.data());
}

template <typename T>
void Conv2D<T>::InputGradient(const Tensor<T>& kernel, const Tensor<T>& x, const Tensor<T>& y, const Tensor<T>& dy,
                              Tensor<T>& dx, LayerCache<T>& cache, bool in_place) const {
  const std::int64_t out_h = y.dim(1), out_w = y.dim(2), rows = x.dim(0) * out_h * out_w;
  const std::int64_t patch = kernel_height_ * kernel_width_ * x.dim(3);
  dx.Resize(x.shape());
  if constexpr (std::is_same_v<T, float>) {
    if (in_place) {
      // d(patches) = dz kernel^T added straight into dx in col2im's order (no patch
      // gradient matrix): the kernel transposed is the product's B.
      cache.transposed.Resize({filters_, patch});
      for (std::int64_t i = 0; i < patch; ++i)
        for (std::int64_t f = 0; f < filters_; ++f) cache.transposed[f * patch + i] = kernel[i * filters_ + f];
      dx.SetZero();
      PatchRows(x, kernel_height_, kernel_width_, cache.rows);
      std::vector<float*>& dx_rows = cache.mutable_rows;
      dx_rows.resize(cache.rows.size());
      for (std::size_t i = 0; i < dx_rows.size(); ++i) dx_rows[i] = dx.data() + (cache.rows[i] - x.data());
      if (OrderedGemmSparseAAddToSegmentedRows(rows, patch, filters_, dy.data(), filters_, cache.transposed.data(),
                                               patch, {dx_rows.data(), kernel_width_ * x.dim(3), x.dim(2) * x.dim(3)}))
        return;
    }
  }
  // d(patches) into the patch buffer (no longer needed), then col2im.
  if (in_place) cache.buffer.Resize({rows, patch});
  DenseInputGradient(dy.data(), rows, filters_, kernel.data(), patch, cache.transposed, cache.buffer.data());
  if (unit_stride_valid())
    Col2Im(cache.buffer.data(), kernel_height_, kernel_width_, out_h, out_w, dx);
  else
    Col2ImWindows(cache.buffer.data(), RowAxis(x.dim(1)), ColumnAxis(x.dim(2)), dx);
}

template <typename T>
void Conv2D<T>::Backward(std::span<const Tensor<T>* const> params, const Tensor<T>& x, const Tensor<T>& y,
                         Tensor<T>& dy, Tensor<T>* dx, std::span<Tensor<T>* const> param_grads, LayerCache<T>& cache,
                         std::span<Tensor<T>* const> magnitudes) const {
  const std::int64_t batch = x.dim(0), out_h = y.dim(1), out_w = y.dim(2);
  const std::int64_t rows = batch * out_h * out_w;
  const std::int64_t patch = kernel_height_ * kernel_width_ * x.dim(3);
  if (activation_ == Activation::kRelu) ApplyReluGradient(y, dy);
  bool in_place = false;  // the forward pass read the patch matrix in place
  if constexpr (std::is_same_v<T, float>) in_place = unit_stride_valid() && ReadsPatchesInPlace(x, kernel_width_);
  // The patch matrix is the layer's A: each kernel element is one chain over every
  // output pixel of the batch. Read in place where the zero-skipping kernel takes it,
  // else built (im2col) as the forward pass would have.
  bool kernel_done = false;
  if constexpr (std::is_same_v<T, float>) {
    if (in_place && magnitudes.empty()) {
      PatchRows(x, kernel_height_, kernel_width_, cache.rows);
      kernel_done = OrderedGemmSparseBSegmentedColumns(patch, filters_, rows, PatchMatrix(x, kernel_width_, cache.rows),
                                                       dy.data(), filters_, param_grads[0]->data(), filters_);
      if (kernel_done) ColumnSums(dy.data(), rows, filters_, param_grads[1]->data());
    }
  }
  if (!kernel_done) {
    if (in_place) Im2Col(x, kernel_height_, kernel_width_, cache.buffer);
    DenseParameterGradients(cache.buffer.data(), dy.data(), rows, patch, filters_, param_grads[0]->data(),
                            param_grads[1]->data(), magnitudes.empty() ? nullptr : magnitudes[0]->data(),
                            magnitudes.empty() ? nullptr : magnitudes[1]->data(), cache.abs_input, cache.abs_gradient);
  }
  if (dx != nullptr) InputGradient(*params[0], x, y, dy, *dx, cache, in_place);
}

template <typename T>
void Conv2D<T>::BackwardExact(std::span<const Tensor<T>* const> params, const Tensor<T>& x, const Tensor<T>& y,
                              Tensor<T>& dy, Tensor<T>* dx, std::span<ExampleTerms* const> terms,
                              LayerCache<T>& cache) const {
  if constexpr (!std::is_same_v<T, float>) {
    Backward(params, x, y, dy, dx, {}, cache);
  } else {
    const std::int64_t batch = x.dim(0), positions = y.dim(1) * y.dim(2);
    const std::int64_t patch = kernel_height_ * kernel_width_ * x.dim(3);
    if (activation_ == Activation::kRelu) ApplyReluGradient(y, dy);
    // Per example: dkernel_e = patches_e^T dz_e, one chain over the example's
    // positions per element; dbias_e = the sum of dz_e over positions, in order. The
    // zero-skipping kernels give OrderedGemm's bits (core/ordered_gemm.h) and read the
    // patch matrix in place where Backward does.
    const bool in_place = unit_stride_valid() && ReadsPatchesInPlace(x, kernel_width_);
    if (in_place) PatchRows(x, kernel_height_, kernel_width_, cache.rows);
    bool patches_built = !in_place;  // the forward pass built them (im2col)
    const float* dz = dy.data();
    ExampleTerms& kernel_terms = *terms[0];
    kernel_terms.kind = ExampleTerms::Kind::kValues;
    kernel_terms.values.Resize({batch, patch * filters_});
    ExampleTerms& bias_terms = *terms[1];
    bias_terms.kind = ExampleTerms::Kind::kValues;
    bias_terms.values.Resize({batch, filters_});
    for (std::int64_t e = 0; e < batch; ++e) {
      const float* dz_e = dz + e * positions * filters_;
      float* dk = kernel_terms.values.data() + e * patch * filters_;
      const bool done = in_place && OrderedGemmSparseBSegmentedColumns(patch, filters_, positions,
                                                                       {cache.rows.data() + e * positions,
                                                                        kernel_width_ * x.dim(3), x.dim(2) * x.dim(3)},
                                                                       dz_e, filters_, dk, filters_);
      if (!done) {
        if (!patches_built) Im2Col(x, kernel_height_, kernel_width_, cache.buffer);
        patches_built = true;
        OrderedGemmSparseB(patch, filters_, positions, cache.buffer.data() + e * positions * patch, 1, patch, dz_e,
                           filters_, dk, filters_);
      }
      float* db = bias_terms.values.data() + e * filters_;
      std::fill(db, db + filters_, 0.0f);
      for (std::int64_t p = 0; p < positions; ++p)
        for (std::int64_t f = 0; f < filters_; ++f) db[f] += dz_e[p * filters_ + f];
    }
    if (dx != nullptr) InputGradient(*params[0], x, y, dy, *dx, cache, in_place);
  }
}

template class Conv2D<float>;
template class Conv2D<double>;
template void ApplyReluGradient(const Tensor<float>&, Tensor<float>&);
template void ApplyReluGradient(const Tensor<double>&, Tensor<double>&);

}  // namespace dtlab
