// The kernels Dense and Conv2D share, in fast and exact mode alike. In float every
// sum is a fixed-order chain (core/ordered_gemm.h, or a plain loop in ascending
// order), so the bits depend only on the inputs: not on the CPU's caches, its vector
// width, the thread count or the batch an example sits in (docs/exact.md, "Fast
// mode"). In double (the tests' finite-difference and high-precision references)
// they are Eigen's products, whose order does not matter there.
//
// Shapes: matrices are row-major; `rows` counts examples (Dense) or output pixels of
// all examples (Conv2D, one im2col row each); `inputs` is the width of a row of the
// layer's input matrix A (features, or the im2col patch size), `units` the layer's
// outputs (units or filters). The kernel is [inputs, units].
//
// Thread safety: pure functions of their arguments; scratch belongs to the caller.
#pragma once

#include <cstdint>

#include "core/layer.h"
#include "core/tensor.h"

namespace dtlab {

/// sums[u] = x[0][u] + x[1][u] + ... + x[rows-1][u], in row order from +0 (a bias
/// gradient; x is [rows, columns]).
void ColumnSums(const float* x, std::int64_t rows, std::int64_t columns, float* sums);

/// out[r][u] = chain over i of A[r][i] * kernel[i][u] (OrderedGemm), then += bias[u],
/// then the activation, element by element (one pass: GemmEpilogue). `out` is
/// [rows, units].
template <typename T>
void DenseForward(const T* a, std::int64_t rows, std::int64_t inputs, const T* kernel, const T* bias,
                  std::int64_t units, Activation activation, T* out);

/// The parameter gradients of y = A kernel + bias given dz = dL/dy ([rows, units]):
///   dkernel[i][u] = chain over r of A[r][i] * dz[r][u]   (one chain over all rows)
///   dbias[u]      = dz[0][u] + dz[1][u] + ... in row order
/// If `magnitudes_kernel` is not null, the same sums of |A[r][i] * dz[r][u]| and
/// |dz[r][u]| go to magnitudes_kernel and magnitudes_bias (the sum|x_i| of the error
/// bound of those sums; `abs_a` and `abs_dz` are scratch).
template <typename T>
void DenseParameterGradients(const T* a, const T* dz, std::int64_t rows, std::int64_t inputs, std::int64_t units,
                             T* dkernel, T* dbias, T* magnitudes_kernel, T* magnitudes_bias, Tensor<T>& abs_a,
                             Tensor<T>& abs_dz);

/// dA[r][i] = chain over u of dz[r][u] * kernel[i][u], for dz [rows, units] and a
/// kernel [inputs, units]; `transposed` is scratch (the kernel, or dz and dA, transposed).
template <typename T>
void DenseInputGradient(const T* dz, std::int64_t rows, std::int64_t units, const T* kernel, std::int64_t inputs,
                        Tensor<T>& transposed, T* da);

}  // namespace dtlab
