// Where a convolution's or a pooling's windows sit along one spatial axis, with
// TensorFlow's padding rule (tensorflow/core/framework/kernel_shape_util.cc,
// GetWindowedOutputSizeVerbose, dilation 1):
//   valid: out = ceil((in - window + 1) / stride), no padding;
//   same:  out = ceil(in / stride),
//          pad_total = max((out - 1) * stride + window - in, 0),
//          pad_before = pad_total / 2 (rounded down), the rest after.
// Window o then covers input positions [o * stride - pad_before, ... + window), of
// which those outside [0, in) are padding: zeros for a convolution, left out by a
// pooling.
//
// Thread safety: values and pure functions.
#pragma once

#include <cstdint>
#include <string_view>

namespace dtlab {

/// Keras's `padding=` of Conv2D and the 2-D poolings.
enum class Padding { kValid, kSame };

/// "valid" or "same".
inline std::string_view PaddingName(Padding padding) { return padding == Padding::kValid ? "valid" : "same"; }

/// One spatial axis of a windowed layer.
struct WindowAxis {
  std::int64_t window = 1, stride = 1;
  std::int64_t pad_before = 0;  // padding positions before input position 0
  std::int64_t out = 0;         // windows (output positions); 0 if none fits

  /// The input position window `o`'s element `k` reads (may be outside [0, in)).
  std::int64_t Input(std::int64_t o, std::int64_t k) const { return o * stride - pad_before + k; }
};

/// The axis of `in` inputs under a window of `window` and `stride` (both >= 1).
/// out is 0 where a valid window does not fit (in < window).
inline WindowAxis MakeWindowAxis(std::int64_t in, std::int64_t window, std::int64_t stride, Padding padding) {
  WindowAxis axis{window, stride, 0, 0};
  if (padding == Padding::kValid) {
    axis.out = in < window ? 0 : (in - window) / stride + 1;
  } else {
    axis.out = (in + stride - 1) / stride;
    const std::int64_t total = (axis.out - 1) * stride + window - in;
    axis.pad_before = total > 0 ? total / 2 : 0;
  }
  return axis;
}

}  // namespace dtlab
