#include "sim/compute/example_sums.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "core/exact_sum.h"

namespace dtlab {
namespace {

using exact_internal::DecodeFiniteFloat;

// 2^e and 1.5 * 2^e as doubles, for e in double's normal range.
double Pow2(int e) { return std::bit_cast<double>(static_cast<std::uint64_t>(e + 1023) << 52); }
// A finite float's exponent in DecodeFiniteFloat's units (1 for zero and subnormals).
std::int32_t ExponentOf(float x) {
  return static_cast<std::int32_t>(DecodeFiniteFloat(std::bit_cast<std::uint32_t>(x)).lsb_exponent);
}
double OneAndHalfPow2(int e) {
  return std::bit_cast<double>((static_cast<std::uint64_t>(e + 1023) << 52) | (std::uint64_t{1} << 51));
}

}  // namespace

// Element (i, j)'s products a[e][i] * b[e][j] are exact doubles (48-bit significands)
// below 2^T, T = a_max_i + b_max_j - 252 (the largest finite exponents, in
// DecodeFiniteFloat's units: a float is significand * 2^(exponent - 150)). Two
// double bins hold their sum exactly, and a product needs five vector flops:
//
//   bin 0: q = (p + C) - C with C = 1.5 * 2^e0, e0 = T + g (rows < 2^g), rounds p to
//          a multiple of u0 = 2^(e0 - 52) exactly (p + C stays in [2^e0, 2^(e0+1)],
//          and the subtraction is exact by Sterbenz); |q| <= 2^T, so the sum of all
//          rows' q stays below 2^52 u0: every partial sum is exact;
//   bin 1: r = p - q, exact, |r| <= u0 / 2, added as it stands. The rows' r stay
//          below 2^(e0 - 53 + g) = 2^53 u1 for u1 = 2^(e0 - step - 52),
//          step = 54 - g (52 for g = 1), so bin 1 is exact as long as every r is a
//          multiple of u1: when p's lsb, 2^(ea + eb - 300), is at least u1, that is
//          when (a_max - ea) + (b_max - eb) <= reach = step + 4 - g.
//
// Products further below their element's largest (rare: a tiny factor beside a
// large one) are masked out of the bins and added to the words by ExactAddProduct,
// as are rows with an infinite or NaN factor (inf * 0 is NaN). At the end the two
// bins are integers in units u0 and u1, added to the words as one 128-bit value.
// All of it is exact, so which path a product took never shows in the words, and
// the flops are the same IEEE operations on every x86-64 CPU.
void SumOuterProducts(std::span<const ExampleTerms* const> terms, std::span<const std::int64_t> counts,
                      std::int64_t begin, std::int64_t end, std::int64_t* out, OuterProductScratch& scratch) {
  const std::int64_t inputs = terms[0]->a.dim(1), units = terms[0]->b.dim(1);
  const auto J = static_cast<std::size_t>(units);
  std::size_t rows = 0;
  for (const std::int64_t c : counts) rows += static_cast<std::size_t>(c);
  const int g = std::bit_width(rows);
  const int step = 52 - std::max(0, g - 2);
  const int reach = step + 4 - g;

  // b decoded once for all rows i: as doubles, and each value's exponent deficit.
  scratch.b.resize(rows * J);
  scratch.b_deficit.resize(rows * J);
  scratch.row_deficit.assign(rows, 0);
  scratch.row_finite.resize(rows);
  scratch.b_max.assign(J, 0);
  std::size_t r = 0;
  for (std::size_t c = 0; c < terms.size(); ++c)
    for (std::int64_t e = 0; e < counts[c]; ++e, ++r) {
      const float* b = terms[c]->b.data() + e * units;
      bool finite = true;
      for (std::size_t j = 0; j < J; ++j) finite &= std::isfinite(b[j]);
      scratch.row_finite[r] = finite;
      for (std::size_t j = 0; j < J; ++j) {
        scratch.b[r * J + j] = b[j];
        const std::int32_t exponent = ExponentOf(b[j]);
        scratch.b_deficit[r * J + j] = exponent;
        if (finite && b[j] != 0.0f) scratch.b_max[j] = std::max(scratch.b_max[j], exponent);
      }
    }
  for (r = 0; r < rows; ++r) {
    std::int32_t worst = 0;
    for (std::size_t j = 0; j < J; ++j) {
      double& deficit = scratch.b_deficit[r * J + j];
      const std::int32_t d =
          scratch.b[r * J + j] == 0.0 || !scratch.row_finite[r] ? 0 : scratch.b_max[j] - static_cast<std::int32_t>(deficit);
      deficit = d;
      worst = std::max(worst, d);
    }
    scratch.row_deficit[r] = worst;
  }

  scratch.bins.resize(4 * J);
  double* __restrict bin0 = scratch.bins.data();
  double* __restrict bin1 = bin0 + J;
  double* __restrict c0 = bin1 + J;
  for (std::int64_t i = begin; i < end; ++i) {
    const std::span<std::int64_t> words(out + i * units * kExactWords, J * kExactWords);
    std::fill(words.begin(), words.end(), 0);
    std::int32_t a_max = 0;
    for (std::size_t c = 0; c < terms.size(); ++c)
      for (std::int64_t e = 0; e < counts[c]; ++e) {
        const float a = terms[c]->a[e * inputs + i];
        if (a != 0.0f && std::isfinite(a))
          a_max = std::max(a_max, ExponentOf(a));
      }
    for (std::size_t j = 0; j < J; ++j) {
      bin0[j] = bin1[j] = 0.0;
      c0[j] = OneAndHalfPow2(a_max + scratch.b_max[j] - 252 + g);
    }
    r = 0;
    for (std::size_t c = 0; c < terms.size(); ++c)
      for (std::int64_t e = 0; e < counts[c]; ++e, ++r) {
        const float a = terms[c]->a[e * inputs + i];
        const float* b = terms[c]->b.data() + e * units;
        const bool finite = std::isfinite(a) && scratch.row_finite[r];
        if (finite && a == 0.0f) continue;
        const std::int32_t limit =
            reach - (a_max - ExponentOf(a));
        if (!finite || limit < 0) {
          for (std::size_t j = 0; j < J; ++j) ExactAddProduct(words.data() + j * kExactWords, a, b[j]);
          continue;
        }
        const double da = a;
        const double* __restrict bd = scratch.b.data() + r * J;
        if (scratch.row_deficit[r] <= limit) {
          for (std::size_t j = 0; j < J; ++j) {
            const double p = da * bd[j];
            const double q = (p + c0[j]) - c0[j];
            bin0[j] += q;
            bin1[j] += p - q;
          }
        } else {
          const double* __restrict deficit = scratch.b_deficit.data() + r * J;
          const auto far = static_cast<double>(limit);
          for (std::size_t j = 0; j < J; ++j) {
            const double p = deficit[j] > far ? 0.0 : da * bd[j];
            const double q = (p + c0[j]) - c0[j];
            bin0[j] += q;
            bin1[j] += p - q;
          }
          for (std::size_t j = 0; j < J; ++j)
            if (deficit[j] > far) ExactAddProduct(words.data() + j * kExactWords, a, b[j]);
        }
      }
    for (std::size_t j = 0; j < J; ++j) {
      const int e0 = a_max + scratch.b_max[j] - 252 + g, e1 = e0 - step;
      const auto n0 = static_cast<std::int64_t>(bin0[j] * Pow2(52 - e0));
      const auto n1 = static_cast<std::int64_t>(bin1[j] * Pow2(52 - e1));
      ExactAddInt128(words.data() + j * kExactWords, (static_cast<ExactInt128>(n0) << step) + n1,
                     e1 - 52 - kExactLsbExponent);
    }
    ExactNormalizeAll(words);
  }
}

// Four elements at a time, so that four independent accumulators keep the core busy.
void SumValues(std::span<const ExampleTerms* const> terms, std::span<const std::int64_t> counts, std::int64_t begin,
               std::int64_t end, std::int64_t* out) {
  constexpr std::int64_t kLanes = 4;
  const std::int64_t size = terms[0]->values.dim(1);
  for (std::int64_t k = begin; k < end; k += kLanes) {
    const std::int64_t lanes = std::min(kLanes, end - k);
    std::int64_t acc[kLanes][kExactWords] = {};
    for (std::size_t c = 0; c < terms.size(); ++c) {
      const float* v = terms[c]->values.data() + k;
      for (std::int64_t e = 0; e < counts[c]; ++e, v += size) {
        if (lanes == kLanes) {
          ExactAddFloat(acc[0], v[0]);
          ExactAddFloat(acc[1], v[1]);
          ExactAddFloat(acc[2], v[2]);
          ExactAddFloat(acc[3], v[3]);
        } else {
          for (std::int64_t l = 0; l < lanes; ++l) ExactAddFloat(acc[l], v[l]);
        }
      }
    }
    for (std::int64_t l = 0; l < lanes; ++l) {
      ExactNormalize(acc[l]);
      std::copy_n(acc[l], kExactWords, out + (k + l) * kExactWords);
    }
  }
}

}  // namespace dtlab
