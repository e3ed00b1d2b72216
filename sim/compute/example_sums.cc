#include "sim/compute/example_sums.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

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

// The two bins' layout for a sum over `counts` rows in all: rows < 2^g, and bin 1's
// unit `step` binades below bin 0's, as wide as bin 1's 53 bits allow (step = 54 - g,
// 52 for g = 1; see SumOuterProducts).
struct BinLayout {
  std::size_t rows;
  int g, step;
};
BinLayout BinLayoutFor(std::span<const std::int64_t> counts) {
  std::size_t rows = 0;
  for (const std::int64_t c : counts) rows += static_cast<std::size_t>(c);
  const int g = std::bit_width(rows);
  return {rows, g, 52 - std::max(0, g - 2)};
}

// words += bin0 + bin1, two bins of units 2^(e0 - 52) and 2^(e0 - step - 52) that
// hold integers below 2^53 in those units: one 128-bit value.
void AddBins(std::int64_t* words, double bin0, double bin1, int e0, int step) {
  const int e1 = e0 - step;
  const auto n0 = static_cast<std::int64_t>(bin0 * Pow2(52 - e0));
  const auto n1 = static_cast<std::int64_t>(bin1 * Pow2(52 - e1));
  ExactAddInt128(words, (static_cast<ExactInt128>(n0) << step) + n1, e1 - 52 - kExactLsbExponent);
}

// Eight doubles: GCC's and Clang's vector extension, one AVX-512 register or two
// AVX2 ones; the same IEEE operations lane by lane on either. These helpers are
// internal and inlined, so GCC's note that passing such vectors by value without
// AVX-512 changes the calling convention (-Wpsabi) does not concern them.
#if defined(__GNUC__)  // GCC and Clang
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
constexpr std::size_t kLanes = 8;
constexpr std::size_t kColumns = 2 * kLanes;  // SumOuterProducts' columns per block
using Doubles = double __attribute__((vector_size(kLanes * sizeof(double))));
using Masks = std::int64_t __attribute__((vector_size(kLanes * sizeof(double))));

Doubles Load(const double* p) {
  Doubles v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
void Store(double* p, const Doubles& v) { std::memcpy(p, &v, sizeof v); }
// x where `keep` is true (all ones), else +0.
Doubles Keep(const Doubles& x, const Masks& keep) {
  return reinterpret_cast<Doubles>(reinterpret_cast<Masks>(x) & keep);
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
  const auto [rows, g, step] = BinLayoutFor(counts);
  const int reach = step + 4 - g;

  // b decoded once for all rows i: as doubles, and each value's exponent deficit,
  // in rows of Jp columns (zero past J) so that every block of kColumns columns is whole.
  const std::size_t Jp = (J + kColumns - 1) / kColumns * kColumns;
  scratch.b.assign(rows * Jp, 0.0);
  scratch.b_deficit.assign(rows * Jp, 0.0);
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
        scratch.b[r * Jp + j] = b[j];
        if (finite && b[j] != 0.0f) scratch.b_max[j] = std::max(scratch.b_max[j], ExponentOf(b[j]));
      }
    }
  for (r = 0; r < rows; ++r) {
    if (!scratch.row_finite[r]) continue;
    std::int32_t worst = 0;
    for (std::size_t j = 0; j < J; ++j) {
      const double bj = scratch.b[r * Jp + j];
      const std::int32_t d = bj == 0.0 ? 0 : scratch.b_max[j] - ExponentOf(static_cast<float>(bj));
      scratch.b_deficit[r * Jp + j] = d;
      worst = std::max(worst, d);
    }
    scratch.row_deficit[r] = worst;
  }

  scratch.bins.resize(3 * Jp);
  double* bin0 = scratch.bins.data();
  double* bin1 = bin0 + Jp;
  double* c0 = bin1 + Jp;
  std::fill(c0 + J, c0 + Jp, 1.5);
  for (std::int64_t i = begin; i < end; ++i) {
    const std::span<std::int64_t> words(out + i * units * kExactWords, J * kExactWords);
    std::fill(words.begin(), words.end(), 0);
    std::int32_t a_max = 0;
    for (std::size_t c = 0; c < terms.size(); ++c)
      for (std::int64_t e = 0; e < counts[c]; ++e) {
        const float a = terms[c]->a[e * inputs + i];
        if (a != 0.0f && std::isfinite(a)) a_max = std::max(a_max, ExponentOf(a));
      }
    for (std::size_t j = 0; j < J; ++j) c0[j] = OneAndHalfPow2(a_max + scratch.b_max[j] - 252 + g);
    // The rows that take the bins, with every product (plain) or with the products
    // of b's values within reach of a's (masked); the others go to the words now.
    scratch.plain.clear();
    scratch.masked.clear();
    r = 0;
    for (std::size_t c = 0; c < terms.size(); ++c)
      for (std::int64_t e = 0; e < counts[c]; ++e, ++r) {
        const float a = terms[c]->a[e * inputs + i];
        const bool finite = std::isfinite(a) && scratch.row_finite[r];
        if (finite && a == 0.0f) continue;
        const std::int32_t limit = reach - (a_max - ExponentOf(a));
        if (!finite || limit < 0) {
          const float* b = terms[c]->b.data() + e * units;
          for (std::size_t j = 0; j < J; ++j) ExactAddProduct(words.data() + j * kExactWords, a, b[j]);
        } else if (scratch.row_deficit[r] <= limit) {
          scratch.plain.push_back({r, a, static_cast<double>(limit)});
        } else {
          scratch.masked.push_back({r, a, static_cast<double>(limit)});
        }
      }
    // kColumns columns at a time, their bins in registers across all rows.
    for (std::size_t jb = 0; jb < Jp; jb += kColumns) {
      const Doubles c_lo = Load(c0 + jb), c_hi = Load(c0 + jb + kLanes);
      Doubles s0_lo{}, s0_hi{}, s1_lo{}, s1_hi{};
      for (const OuterProductScratch::Row& row : scratch.plain) {
        const double* bd = scratch.b.data() + row.index * Jp + jb;
        const Doubles p_lo = row.a * Load(bd), p_hi = row.a * Load(bd + kLanes);
        const Doubles q_lo = (p_lo + c_lo) - c_lo, q_hi = (p_hi + c_hi) - c_hi;
        s0_lo += q_lo, s0_hi += q_hi;
        s1_lo += p_lo - q_lo, s1_hi += p_hi - q_hi;
      }
      for (const OuterProductScratch::Row& row : scratch.masked) {
        const double* bd = scratch.b.data() + row.index * Jp + jb;
        const double* deficit = scratch.b_deficit.data() + row.index * Jp + jb;
        // A lane whose b is further below its column's largest than the row allows
        // adds zero here (its product goes to the words below).
        const Doubles p_lo = Keep(row.a * Load(bd), Load(deficit) <= row.limit);
        const Doubles p_hi = Keep(row.a * Load(bd + kLanes), Load(deficit + kLanes) <= row.limit);
        const Doubles q_lo = (p_lo + c_lo) - c_lo, q_hi = (p_hi + c_hi) - c_hi;
        s0_lo += q_lo, s0_hi += q_hi;
        s1_lo += p_lo - q_lo, s1_hi += p_hi - q_hi;
      }
      Store(bin0 + jb, s0_lo), Store(bin0 + jb + kLanes, s0_hi);
      Store(bin1 + jb, s1_lo), Store(bin1 + jb + kLanes, s1_hi);
    }
    for (const OuterProductScratch::Row& row : scratch.masked) {
      const double* deficit = scratch.b_deficit.data() + row.index * Jp;
      const double* bd = scratch.b.data() + row.index * Jp;
      for (std::size_t j = 0; j < J; ++j)
        if (deficit[j] > row.limit) ExactAddProduct(words.data() + j * kExactWords, row.a, static_cast<float>(bd[j]));
    }
    for (std::size_t j = 0; j < J; ++j)
      AddBins(words.data() + j * kExactWords, bin0[j], bin1[j], a_max + scratch.b_max[j] - 252 + g, step);
    ExactNormalizeAll(words);
  }
}

// The same two double bins as SumOuterProducts, for single floats: element k's
// values are below 2^T, T = x_max_k - 126, so e0 = T + g and bin 1's unit is
// 2^(e0 - step - 52); a value's lsb, 2^(ex - 150), is at least that unit when
// x_max_k - ex <= step + 28 - g (68 binades for 64 rows). Values further below, and
// every value of an element with an infinite or NaN one, go to the words directly.
// Elements are taken in blocks of kBlock: one pass over the rows for each element's
// largest exponent, one for the bins.
void SumValues(std::span<const ExampleTerms* const> terms, std::span<const std::int64_t> counts, std::int64_t begin,
               std::int64_t end, std::int64_t* out) {
  constexpr std::int64_t kBlock = 256;
  const std::int64_t size = terms[0]->values.dim(1);
  const auto [rows, g, step] = BinLayoutFor(counts);
  const int reach = step + 28 - g;
  alignas(64) std::int32_t x_max[kBlock];
  alignas(64) std::uint32_t special[kBlock];
  alignas(64) double c0[kBlock], threshold[kBlock], bin0[kBlock], bin1[kBlock], far[kBlock];
  for (std::int64_t first = begin; first < end; first += kBlock) {
    const std::int64_t n = std::min(kBlock, end - first);
    std::fill_n(x_max, n, 0);
    std::fill_n(special, n, 0u);
    for (std::size_t c = 0; c < terms.size(); ++c) {
      const float* v = terms[c]->values.data() + first;
      for (std::int64_t e = 0; e < counts[c]; ++e, v += size)
        for (std::int64_t k = 0; k < n; ++k) {
          const std::uint32_t biased = (std::bit_cast<std::uint32_t>(v[k]) >> 23) & 0xff;
          special[k] |= biased == 0xff;
          x_max[k] = std::max(x_max[k], static_cast<std::int32_t>(biased));
        }
    }
    for (std::int64_t k = 0; k < n; ++k) {
      const int top = std::max(x_max[k], 1);  // DecodeFiniteFloat's exponent of the largest
      x_max[k] = top;
      c0[k] = OneAndHalfPow2(top - 126 + g);
      // A normal value is kept iff its exponent is at least top - reach, that is iff
      // |x| >= 2^(top - reach - 127); NaN keeps nothing (every comparison is false).
      threshold[k] = special[k] ? std::numeric_limits<double>::quiet_NaN() : Pow2(top - reach - 127);
      bin0[k] = bin1[k] = far[k] = 0.0;
    }
    for (std::size_t c = 0; c < terms.size(); ++c) {
      const float* v = terms[c]->values.data() + first;
      for (std::int64_t e = 0; e < counts[c]; ++e, v += size)
        for (std::int64_t k = 0; k < n; ++k) {
          const double x = v[k];
          const bool keep = std::fabs(x) >= threshold[k];
          const double p = keep ? x : 0.0;
          const double q = (p + c0[k]) - c0[k];
          bin0[k] += q;
          bin1[k] += p - q;
          far[k] = keep || x == 0.0 ? far[k] : 1.0;
        }
    }
    for (std::int64_t k = 0; k < n; ++k) {
      std::int64_t* words = out + (first + k) * kExactWords;
      std::fill_n(words, kExactWords, 0);
      AddBins(words, bin0[k], bin1[k], x_max[k] - 126 + g, step);
      if (far[k] != 0.0)
        for (std::size_t c = 0; c < terms.size(); ++c) {
          const float* v = terms[c]->values.data() + first + k;
          for (std::int64_t e = 0; e < counts[c]; ++e, v += size)
            if (!(std::fabs(static_cast<double>(*v)) >= threshold[k])) ExactAddFloat(words, *v);
        }
      ExactNormalize(words);
    }
  }
}

}  // namespace dtlab
