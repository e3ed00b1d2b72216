#include "core/layer_kernels.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/ordered_gemm.h"

namespace dtlab {
namespace {

template <typename T>
using RowVector = Eigen::Matrix<T, 1, Eigen::Dynamic>;

void AbsoluteValues(const float* x, std::int64_t count, Tensor<float>& out) {
  out.Resize({count});
  float* o = out.data();
  for (std::int64_t i = 0; i < count; ++i) o[i] = std::fabs(x[i]);
}

}  // namespace

// Each lane of a vectorized loop is one column's chain, so the order is the same.
void ColumnSums(const float* x, std::int64_t rows, std::int64_t columns, float* sums) {
  std::fill(sums, sums + columns, 0.0f);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t u = 0; u < columns; ++u) sums[u] += x[r * columns + u];
}

template <typename T>
void DenseForward(const T* a, std::int64_t rows, std::int64_t inputs, const T* kernel, const T* bias,
                  std::int64_t units, Activation activation, T* out) {
  if constexpr (std::is_same_v<T, float>) {
    OrderedGemmWithEpilogue(rows, units, inputs, a, inputs, 1, kernel, units, out, units,
                            {bias, activation == Activation::kRelu});
  } else {
    MatrixMap<T> y(out, rows, units);
    y.noalias() = ConstMatrixMap<T>(a, rows, inputs) * ConstMatrixMap<T>(kernel, inputs, units);
    y.rowwise() += Eigen::Map<const RowVector<T>>(bias, units);
    if (activation == Activation::kRelu) y = y.cwiseMax(T(0));
  }
}

template <typename T>
void DenseParameterGradients(const T* a, const T* dz, std::int64_t rows, std::int64_t inputs, std::int64_t units,
                             T* dkernel, T* dbias, T* magnitudes_kernel, T* magnitudes_bias, Tensor<T>& abs_a,
                             Tensor<T>& abs_dz) {
  if constexpr (std::is_same_v<T, float>) {
    // A^T read in place: element (i, r) of A^T is a[r * inputs + i] (unit row stride).
    OrderedGemmSparseB(inputs, units, rows, a, 1, inputs, dz, units, dkernel, units);
    ColumnSums(dz, rows, units, dbias);
    if (magnitudes_kernel == nullptr) return;
    AbsoluteValues(a, rows * inputs, abs_a);
    AbsoluteValues(dz, rows * units, abs_dz);
    OrderedGemmSparseB(inputs, units, rows, abs_a.data(), 1, inputs, abs_dz.data(), units, magnitudes_kernel, units);
    ColumnSums(abs_dz.data(), rows, units, magnitudes_bias);
  } else {
    const ConstMatrixMap<T> x(a, rows, inputs), g(dz, rows, units);
    MatrixMap<T>(dkernel, inputs, units).noalias() = x.transpose() * g;
    Eigen::Map<RowVector<T>>(dbias, units) = g.colwise().sum();
    if (magnitudes_kernel == nullptr) return;
    MatrixMap<T>(magnitudes_kernel, inputs, units).noalias() = x.cwiseAbs().transpose() * g.cwiseAbs();
    Eigen::Map<RowVector<T>>(magnitudes_bias, units) = g.cwiseAbs().colwise().sum();
  }
}

template <typename T>
void DenseInputGradient(const T* dz, std::int64_t rows, std::int64_t units, const T* kernel, std::int64_t inputs,
                        Tensor<T>& transposed, T* da) {
  if constexpr (std::is_same_v<T, float>) {
    // The same chains either way (over u ascending, from +0): as dz * kernel^T with
    // the kernel transposed, or as (kernel * dz^T)^T with dz transposed and the
    // product transposed back. Whichever moves fewer floats.
    if (inputs * units <= rows * (units + inputs)) {
      transposed.Resize({units, inputs});
      for (std::int64_t i = 0; i < inputs; ++i)
        for (std::int64_t u = 0; u < units; ++u) transposed[u * inputs + i] = kernel[i * units + u];
      OrderedGemmSparseA(rows, inputs, units, dz, units, 1, transposed.data(), inputs, da, inputs);
    } else {
      transposed.Resize({units * rows + inputs * rows});
      float* dz_t = transposed.data();
      float* da_t = dz_t + units * rows;
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t u = 0; u < units; ++u) dz_t[u * rows + r] = dz[r * units + u];
      OrderedGemm(inputs, rows, units, kernel, units, 1, dz_t, rows, da_t, rows);
      for (std::int64_t i = 0; i < inputs; ++i)
        for (std::int64_t r = 0; r < rows; ++r) da[r * inputs + i] = da_t[i * rows + r];
    }
  } else {
    MatrixMap<T>(da, rows, inputs).noalias() =
        ConstMatrixMap<T>(dz, rows, units) * ConstMatrixMap<T>(kernel, inputs, units).transpose();
  }
}

#define DTLAB_INSTANTIATE_LAYER_KERNELS(T)                                                                           \
  template void DenseForward<T>(const T*, std::int64_t, std::int64_t, const T*, const T*, std::int64_t, Activation,  \
                                T*);                                                                                 \
  template void DenseParameterGradients<T>(const T*, const T*, std::int64_t, std::int64_t, std::int64_t, T*, T*, T*, \
                                           T*, Tensor<T>&, Tensor<T>&);                                              \
  template void DenseInputGradient<T>(const T*, std::int64_t, std::int64_t, const T*, std::int64_t, Tensor<T>&, T*);
DTLAB_INSTANTIATE_LAYER_KERNELS(float)
DTLAB_INSTANTIATE_LAYER_KERNELS(double)

}  // namespace dtlab
