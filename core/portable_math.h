// Elementwise math written once for the CPU and CUDA: exp, log and the softmax
// cross-entropy of one row, built only from IEEE 754 +, -, *, / and bit operations,
// so that every platform that rounds those correctly and does not contract a*b+c
// into a fused multiply-add gets the same bits. The CPU build passes
// -ffp-contract=off; CUDA code that includes this header must be compiled with
// nvcc -fmad=false (docs/exact.md).
//
// Exact mode (docs/exact.md) uses these instead of the C library's expf/logf, whose
// results differ between libm versions and from CUDA's.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace dtlab::portable {

/// e^x, within 1 ulp of the exact value for every float x; exp(-inf) = 0,
/// exp(+inf) = +inf, NaN gives NaN; overflow to +inf and underflow to 0 (through
/// subnormals) as expf.
DTLAB_HOST_DEVICE float Exp(float x);

/// Natural logarithm, within 1 ulp for every float x > 0 (subnormals included);
/// log(0) = -inf, log(x < 0) = NaN, log(+inf) = +inf, NaN gives NaN.
DTLAB_HOST_DEVICE float Log(float x);

/// Sparse softmax cross-entropy of one row of `classes` logits, as TF's kernel:
/// m = max logit, shifted = z - m, sum = sum of Exp(shifted) in class order,
/// *loss = Log(sum) - shifted[label]. If `dlogits` is not null, writes
///     dlogits[c] = coefficient * (Exp(shifted[c]) / sum - (c == label)).
/// REQUIRES: 0 <= label < classes.
DTLAB_HOST_DEVICE void SoftmaxCrossEntropyRow(const float* logits, int classes, int label, float coefficient,
                                              float* loss, float* dlogits);

}  // namespace dtlab::portable

#include "core/portable_math_impl.h"
