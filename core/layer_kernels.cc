#include "core/layer_kernels.h"

#include <algorithm>
#include <cmath>

#include "core/ordered_gemm.h"

namespace dtlab {
namespace {

void AbsoluteValues(const float* x, std::int64_t count, Tensor<float>& out) {
  out.Resize({count});
  float* o = out.data();
  for (std::int64_t i = 0; i < count; ++i) o[i] = std::fabs(x[i]);
}

// sums[u] = x[0][u] + x[1][u] + ... + x[rows-1][u], in row order from +0 (each
// lane of a vectorized loop is one column's chain, so the order is the same).
void ColumnSums(const float* x, std::int64_t rows, std::int64_t columns, float* sums) {
  std::fill(sums, sums + columns, 0.0f);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t u = 0; u < columns; ++u) sums[u] += x[r * columns + u];
}

}  // namespace

void DenseForward(const float* a, std::int64_t rows, std::int64_t inputs, const float* kernel, const float* bias,
                  std::int64_t units, Activation activation, float* out) {
  OrderedGemm(rows, units, inputs, a, inputs, 1, kernel, units, out, units);
  AddBiasAndActivation(out, rows, units, bias, activation);
}

void DenseParameterGradients(const float* a, const float* dz, std::int64_t rows, std::int64_t inputs,
                             std::int64_t units, float* dkernel, float* dbias, float* magnitudes_kernel,
                             float* magnitudes_bias, Tensor<float>& abs_a, Tensor<float>& abs_dz) {
  // A^T read in place: element (i, r) of A^T is a[r * inputs + i] (unit row stride).
  OrderedGemm(inputs, units, rows, a, 1, inputs, dz, units, dkernel, units);
  ColumnSums(dz, rows, units, dbias);
  if (magnitudes_kernel == nullptr) return;
  AbsoluteValues(a, rows * inputs, abs_a);
  AbsoluteValues(dz, rows * units, abs_dz);
  OrderedGemm(inputs, units, rows, abs_a.data(), 1, inputs, abs_dz.data(), units, magnitudes_kernel, units);
  ColumnSums(abs_dz.data(), rows, units, magnitudes_bias);
}

void DenseInputGradient(const float* dz, std::int64_t rows, std::int64_t units, const float* kernel,
                        std::int64_t inputs, Tensor<float>& transposed, float* da) {
  transposed.Resize({units, inputs});
  for (std::int64_t i = 0; i < inputs; ++i)
    for (std::int64_t u = 0; u < units; ++u) transposed[u * inputs + i] = kernel[i * units + u];
  OrderedGemm(rows, inputs, units, dz, units, 1, transposed.data(), inputs, da, inputs);
}

void AddBiasAndActivation(float* out, std::int64_t rows, std::int64_t units, const float* bias, Activation activation) {
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t u = 0; u < units; ++u) {
      float& v = out[r * units + u];
      v += bias[u];
      if (activation == Activation::kRelu) v = v > 0.0f ? v : 0.0f;
    }
}

}  // namespace dtlab
