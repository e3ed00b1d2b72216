// The float kernels Dense and Conv2D share, in fast and exact mode alike. Every sum
// is a fixed-order chain (core/ordered_gemm.h, or a plain loop in ascending order),
// so the bits depend only on the inputs: not on the CPU's caches, its vector width,
// the thread count or the batch an example sits in (docs/exact.md, "Fast mode").
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

/// The epilogue of Dense and Conv2D: out[r][u] += bias[u], then the activation,
/// element by element (out is [rows, units]).
void AddBiasAndActivation(float* out, std::int64_t rows, std::int64_t units, const float* bias, Activation activation);

/// out[r][u] = chain over i of A[r][i] * kernel[i][u] (OrderedGemm), then += bias[u],
/// then the activation, element by element. `out` is [rows, units].
void DenseForward(const float* a, std::int64_t rows, std::int64_t inputs, const float* kernel, const float* bias,
                  std::int64_t units, Activation activation, float* out);

/// The parameter gradients of y = A kernel + bias given dz = dL/dy ([rows, units]):
///   dkernel[i][u] = chain over r of A[r][i] * dz[r][u]   (one chain over all rows)
///   dbias[u]      = dz[0][u] + dz[1][u] + ... in row order
/// If `magnitudes_kernel` is not null, the same sums of |A[r][i] * dz[r][u]| and
/// |dz[r][u]| go to magnitudes_kernel and magnitudes_bias (the sum|x_i| of the error
/// bound of those sums; `abs_a` and `abs_dz` are scratch).
void DenseParameterGradients(const float* a, const float* dz, std::int64_t rows, std::int64_t inputs,
                             std::int64_t units, float* dkernel, float* dbias, float* magnitudes_kernel,
                             float* magnitudes_bias, Tensor<float>& abs_a, Tensor<float>& abs_dz);

/// dA[r][i] = chain over u of dz[r][u] * kernel[i][u], for dz [rows, units] and a
/// kernel [inputs, units]; `transposed` is scratch (the kernel as [units, inputs]).
void DenseInputGradient(const float* dz, std::int64_t rows, std::int64_t units, const float* kernel,
                        std::int64_t inputs, Tensor<float>& transposed, float* da);

}  // namespace dtlab
