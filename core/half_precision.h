// Rounding float32 values to the half types of Keras's mixed-precision policies
// (mixed_float16, mixed_bfloat16), kept in float32: the value a cast to float16 or
// bfloat16 and back gives. IEEE 754 conversion: round to nearest, ties to even;
// beyond the largest finite half the result is an infinity of the same sign; NaN
// stays NaN (quiet); float16's subnormals (multiples of 2^-24) are kept, smaller
// values round to a signed zero. Built from integer and float operations that every
// IEEE platform does alike, so the bits are the same on every CPU and on a GPU.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "core/host_device.h"
#include "core/status.h"

namespace dtlab {

/// The type a layer computes in: float32, or the half type of a mixed policy.
enum class ComputeType { kFloat32, kFloat16, kBFloat16 };

/// "float32", "float16" or "bfloat16".
std::string_view ComputeTypeName(ComputeType type);

/// x rounded to binary16 (float16), as a float.
inline DTLAB_HOST_DEVICE float RoundToFloat16(float x) {
  const std::uint32_t bits = FloatToBits(x);
  const std::uint32_t magnitude = bits & 0x7fffffffu, sign = bits & 0x80000000u;
  if (magnitude > 0x7f800000u) return x;  // NaN
  // 65520 = 65504 + half an ulp: from there (ties to even: 65504's last bit is 1) up, +-inf.
  if (magnitude >= 0x477ff000u) return FloatFromBits(sign | 0x7f800000u);
  if (magnitude >= 0x38800000u) {  // 2^-14 and up: float16 normals, 10 fraction bits
    const std::uint32_t rounded = (magnitude + 0xfffu + ((magnitude >> 13) & 1u)) & ~0x1fffu;
    return FloatFromBits(sign | rounded);
  }
  // Below 2^-14: float16 subnormals, multiples of 2^-24. Adding 2^-24 * 2^23 = 0.5
  // puts the quantum at the float's last place, so the addition itself rounds (ties
  // to even); subtracting it back is exact.
  const float shifted = FloatFromBits(magnitude) + 0.5f;
  const float rounded = shifted - 0.5f;
  return FloatFromBits(sign | FloatToBits(rounded));
}

/// x rounded to bfloat16 (float32's exponent, 7 fraction bits), as a float.
inline DTLAB_HOST_DEVICE float RoundToBFloat16(float x) {
  const std::uint32_t bits = FloatToBits(x);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return FloatFromBits(bits | 0x00400000u);  // NaN, quiet
  // Ties to even on the upper 16 bits; a carry out of the largest finite value gives inf.
  return FloatFromBits((bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u);
}

/// x rounded to `type` (float32: x itself).
inline DTLAB_HOST_DEVICE float RoundToComputeType(float x, ComputeType type) {
  return type == ComputeType::kFloat16 ? RoundToFloat16(x) : type == ComputeType::kBFloat16 ? RoundToBFloat16(x) : x;
}

/// Every value of `values` rounded to `type`, in place.
void RoundToComputeType(std::span<float> values, ComputeType type);

}  // namespace dtlab
