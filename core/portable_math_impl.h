// Definitions for core/portable_math.h; include that header, not this one.
//
// Both functions work in double precision and round to float once at the end. The
// double result is within ~2^-52 of the exact value relative to it, 2^28 times less
// than a float ulp, so the rounding is wrong only where the exact value lies that
// close to a midpoint between two floats, and then by at most half an ulp plus a
// hair: within 1 ulp by a wide margin. In fact an exhaustive run over all 2^32
// inputs (by hand; too slow for CI) found every result of both functions
// correctly rounded; the closest calls are pinned in the golden test.
//
// Everything is a fixed sequence of IEEE double +, -, *, / (each correctly rounded
// on the CPU with -ffp-contract=off and in CUDA with -fmad=false), integer and bit
// operations, and one double -> float conversion; so the bits do not depend on the
// platform. The polynomials are plain Taylor series (coefficients 1/n! and
// 2/(2n+1), written as exact hex literals of their double roundings): longer than a
// minimax fit, but anyone can check them.
//
// Correct rounding with room to spare makes the bits robust: exhaustive comparisons
// found not one result changed by a build that contracts a*b+c into FMAs, or by an
// unsplit ln 2. Still, a change here can move bits that exact mode and the CUDA
// replay must reproduce; tests/unit/portable_math_test.cc pins golden bits where
// that would show first, and a change should be rechecked over all 2^32 inputs.
#pragma once

#include <cstdint>

namespace dtlab::portable {
namespace portable_math_detail {

// DoubleToBits and friends: core/host_device.h's bit casts, for host and device.

// sum + error (|error| <= half an ulp of sum, as Fast2Sum leaves it) rounded to a
// normal float. Rounding sum alone is correct unless sum lies exactly on a
// midpoint between two floats (29 low significand bits 1000...0), where the tie
// must go the way error points: then sum moves one double ulp that way first.
inline DTLAB_HOST_DEVICE float RoundToFloat(double sum, double error) {
  std::uint64_t bits = DoubleToBits(sum);
  if ((bits & 0x1fffffffull) == 0x10000000ull && error != 0.0) {
    if ((error > 0.0) == (sum > 0.0)) {
      bits = bits + 1;  // away from zero
    } else {
      bits = bits - 1;
    }
  }
  return static_cast<float>(DoubleFromBits(bits));
}

inline constexpr std::uint32_t kFloatPlusInfinityBits = 0x7f800000u;
inline constexpr std::uint32_t kFloatMinusInfinityBits = 0xff800000u;
inline constexpr std::uint32_t kFloatQuietNanBits = 0x7fc00000u;

// ln 2 split Cody-Waite style: kLn2High has its low 21 significand bits zero, so
// k * kLn2High is exact for |k| < 2^21, and kLn2High + kLn2Low is ln 2 to ~2^-86.
inline constexpr double kLn2High = 0x1.62e42feep-1;       // 6.93147180369123816490e-01
inline constexpr double kLn2Low = 0x1.a39ef35793c76p-33;  // 1.90821492927058770002e-10
inline constexpr double kInverseLn2 = 0x1.71547652b82fep+0;
inline constexpr double kSqrt2 = 0x1.6a09e667f3bcdp+0;

// Beyond these the float result is fixed: e^89 > 2^128 overflows, and
// e^-104 < 2^-150 (half the smallest subnormal) rounds to +0. Inside them every
// intermediate stays a normal double.
inline constexpr float kExpOverflowInput = 89.0f;
inline constexpr float kExpUnderflowInput = -104.0f;

}  // namespace portable_math_detail

inline DTLAB_HOST_DEVICE float Exp(float x) {
  using namespace portable_math_detail;
  if (!(x >= kExpUnderflowInput && x <= kExpOverflowInput)) {
    if (x != x) return x + x;  // NaN in, NaN out (quieted)
    return x > 0.0f ? FloatFromBits(kFloatPlusInfinityBits) : 0.0f;
  }
  // e^x = 2^k * e^r with x = k ln2 + r, |r| <= ln2/2 (plus a hair from rounding z).
  const double xd = static_cast<double>(x);
  const double z = xd * kInverseLn2;
  const int k = static_cast<int>(z < 0.0 ? z - 0.5 : z + 0.5);  // z rounded to nearest
  const double kd = static_cast<double>(k);
  // x - k*kLn2High is exact: k*kLn2High (|k| <= 150) is a multiple of 2^-32, and so
  // is x (a float of size >= 0.34 whenever k != 0); their difference is below 1 in
  // size, so it fits in 32 bits. Only the kLn2Low correction rounds, to ~2^-53 |r|.
  const double r = (xd - kd * kLn2High) - kd * kLn2Low;
  // e^r by Taylor to r^13: the first dropped term is < 2^-57 relative for |r| <= 0.35.
  double p = 0x1.6124613a86d09p-33;   // 1/13!
  p = 0x1.1eed8eff8d898p-29 + r * p;  // 1/12!
  p = 0x1.ae64567f544e4p-26 + r * p;  // 1/11!
  p = 0x1.27e4fb7789f5cp-22 + r * p;  // 1/10!
  p = 0x1.71de3a556c734p-19 + r * p;  // 1/9!
  p = 0x1.a01a01a01a01ap-16 + r * p;  // 1/8!
  p = 0x1.a01a01a01a01ap-13 + r * p;  // 1/7!
  p = 0x1.6c16c16c16c17p-10 + r * p;  // 1/6!
  p = 0x1.1111111111111p-7 + r * p;   // 1/5!
  p = 0x1.5555555555555p-5 + r * p;   // 1/4!
  p = 0x1.5555555555555p-3 + r * p;   // 1/3!
  p = 0.5 + r * p;
  p = 1.0 + r * p;
  p = 1.0 + r * p;
  // 2^k for k in [-150, 128] is a normal double, so this product is exact and the
  // conversion below is the only rounding to float: to nearest even, through
  // subnormals to 0 and to +inf past FLT_MAX (CUDA: cvt.rn.f32.f64, which keeps
  // subnormals unless the code is built with -ftz=true, e.g. by --use_fast_math).
  const double two_to_k = DoubleFromBits(static_cast<std::uint64_t>(k + 1023) << 52);
  return static_cast<float>(p * two_to_k);
}

inline DTLAB_HOST_DEVICE float Log(float x) {
  using namespace portable_math_detail;
  if (!(x > 0.0f && x <= 0x1.fffffep+127f)) {                      // not a positive finite float
    if (x != x) return x + x;                                      // NaN in, NaN out (quieted)
    if (x == 0.0f) return FloatFromBits(kFloatMinusInfinityBits);  // +0 and -0
    if (x > 0.0f) return x;                                        // +inf
    return FloatFromBits(kFloatQuietNanBits);
  }
  // In double even float subnormals are normal, so one decomposition serves all:
  // x = 2^e * m with m in [sqrt(2)/2, sqrt(2)), whose log is the small log1p(m - 1).
  const std::uint64_t bits = DoubleToBits(static_cast<double>(x));
  int e = static_cast<int>(bits >> 52) - 1023;
  double m = DoubleFromBits((bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull);  // in [1, 2)
  if (m > kSqrt2) {
    m = m * 0.5;
    e = e + 1;
  }
  // Exact (Sterbenz: m is within a factor 2 of 1); and f is a multiple of 2^-24
  // below 1 in size, so 2 + f (below 4) is exact too.
  const double f = m - 1.0;
  // log(1 + f) = 2 atanh(s) = 2 (s + s^3/3 + s^5/5 + ...) with s = f / (2 + f),
  // |s| <= 0.1716; through s^21 the first dropped term is < 2^-60 relative. The
  // division rounds s to 2^-53 relative, which passes to the result unchanged.
  const double s = f / (2.0 + f);
  const double s2 = s * s;
  double q = 0x1.8618618618618p-4;    // 2/21
  q = 0x1.af286bca1af28p-4 + s2 * q;  // 2/19
  q = 0x1.e1e1e1e1e1e1ep-4 + s2 * q;  // 2/17
  q = 0x1.1111111111111p-3 + s2 * q;  // 2/15
  q = 0x1.3b13b13b13b14p-3 + s2 * q;  // 2/13
  q = 0x1.745d1745d1746p-3 + s2 * q;  // 2/11
  q = 0x1.c71c71c71c71cp-3 + s2 * q;  // 2/9
  q = 0x1.2492492492492p-2 + s2 * q;  // 2/7
  q = 0x1.999999999999ap-2 + s2 * q;  // 2/5
  q = 0x1.5555555555555p-1 + s2 * q;  // 2/3
  const double log1p_f = s * (2.0 + s2 * q);
  // e ln2 + log1p(f). high = e * kLn2High is exact (|e| <= 149); for e = 0 the
  // result is log1p(f) itself, which keeps full relative accuracy for x near 1.
  // The result is 0 or a normal float (|log x| >= 2^-24 for x != 1), as
  // RoundToFloat requires.
  const double ed = static_cast<double>(e);
  const double high = ed * kLn2High;
  const double low = ed * kLn2Low + log1p_f;
  // For large |e| the last addition would be the largest error left, so it is done
  // exactly: |high| >= |low| (or high = 0), so by Fast2Sum sum + error == high + low.
  const double sum = high + low;
  const double error = (high - sum) + low;
  return RoundToFloat(sum, error);
}

inline DTLAB_HOST_DEVICE void SoftmaxCrossEntropyRow(const float* logits, int classes, int label, float coefficient,
                                                     float* loss, float* dlogits) {
  // The first maximum. A NaN logit needs no case of its own: its shifted value and
  // so the sum are NaN, which makes the loss and every gradient NaN.
  float max_logit = logits[0];
  for (int c = 1; c < classes; ++c)
    if (logits[c] > max_logit) max_logit = logits[c];
  // Shifting by the maximum makes every exponent <= 0, so no Exp overflows and the
  // largest term is exactly Exp(0) = 1: sum >= 1 and Log(sum) >= 0.
  float sum = 0.0f;
  for (int c = 0; c < classes; ++c) sum = sum + Exp(logits[c] - max_logit);
  *loss = Log(sum) - (logits[label] - max_logit);
  if (dlogits == nullptr) return;
  // Exp is recomputed rather than cached: it gives the same bits, needs no buffer
  // sized for the largest class count, and is cheap next to the layers around it.
  for (int c = 0; c < classes; ++c)
    dlogits[c] = coefficient * (Exp(logits[c] - max_logit) / sum - (c == label ? 1.0f : 0.0f));
}

}  // namespace dtlab::portable
