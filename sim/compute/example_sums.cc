#include "sim/compute/example_sums.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#if defined(__AVX512F__) || defined(__FMA__)
#include <immintrin.h>
#endif

#include "core/exact_sum.h"
#include "core/transpose.h"

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

// bin0 + bin1, two bins of units 2^(e0 - 52) and 2^(e0 - step - 52) that hold
// integers below 2^53 in those units, as one 128-bit value at a position of the
// words (ExactAddInt128's units).
struct BinsValue {
  ExactInt128 value;
  int position;
};
BinsValue BinsValueOf(double bin0, double bin1, int e0, int step) {
  const int e1 = e0 - step;
  const auto n0 = static_cast<std::int64_t>(bin0 * Pow2(52 - e0));
  const auto n1 = static_cast<std::int64_t>(bin1 * Pow2(52 - e1));
  return {(static_cast<ExactInt128>(n0) << step) + n1, e1 - 52 - kExactLsbExponent};
}

// The end of an element's sum on the words' path: the bins added to the words, which
// hold the terms outside them (or are set to the bins, `only_bins`: every term took
// them), normalized, then the regularization term t, and the rounded value where the
// caller wants it.
void FinishWords(std::int64_t* words, bool only_bins, double bin0, double bin1, int e0, int step, float t,
                 float* rounded) {
  const BinsValue bins = BinsValueOf(bin0, bin1, e0, step);
  if (only_bins) {
    ExactSetInt128(words, bins.value, bins.position);
  } else {
    ExactAddInt128(words, bins.value, bins.position);
    ExactNormalize(words);
  }
  if (t != 0.0f) ExactAddFloatNormalized(words, t);
  if (rounded != nullptr) *rounded = ExactToFloat(words);
}

// An element's rounded sum from the bins into *rounded, when it has one there: its
// terms all took the bins (not needs_words) and RoundBinsFast rounded them (fast_ok,
// fast). False: the element takes the words.
bool RoundedFromBins(float* rounded, bool needs_words, bool fast_ok, float fast) {
  if (rounded == nullptr || needs_words || !fast_ok) return false;
  *rounded = fast;
  return true;
}

// Elements [first, first + n)'s regularization terms into t (0 without one).
void TermsOf(const SumOutput& out, std::int64_t first, std::size_t n, float* t) {
  if (out.coefficient == 0.0f)
    std::fill_n(t, n, 0.0f);
  else
    for (std::size_t k = 0; k < n; ++k) t[k] = RegularizationTerm(out.coefficient, out.weights[first + k]);
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
// fma(a, b, c) lane by lane, each rounded once (IEEE fusedMultiplyAdd): the FMA
// instructions where the target has them (every x86-64-v3 CPU does), else std::fma.
Doubles Fma(const Doubles& a, const Doubles& b, const Doubles& c) {
#if defined(__AVX512F__)
  return reinterpret_cast<Doubles>(
      _mm512_fmadd_pd(reinterpret_cast<__m512d>(a), reinterpret_cast<__m512d>(b), reinterpret_cast<__m512d>(c)));
#elif defined(__FMA__)
  __m256d x[2], y[2], z[2];
  std::memcpy(x, &a, sizeof a), std::memcpy(y, &b, sizeof b), std::memcpy(z, &c, sizeof c);
  for (int h = 0; h < 2; ++h) x[h] = _mm256_fmadd_pd(x[h], y[h], z[h]);
  Doubles r;
  std::memcpy(&r, x, sizeof r);
  return r;
#else
  Doubles r;
  for (std::size_t l = 0; l < kLanes; ++l) r[l] = std::fma(a[l], b[l], c[l]);
  return r;
#endif
}
// |x| lane by lane.
Doubles Abs(const Doubles& x) { return reinterpret_cast<Doubles>(reinterpret_cast<Masks>(x) & 0x7fffffffffffffff); }
// x where `keep` is true (all ones), else +0.
Doubles Keep(const Doubles& x, const Masks& keep) {
  return reinterpret_cast<Doubles>(reinterpret_cast<Masks>(x) & keep);
}
using Floats = float __attribute__((vector_size(kLanes * sizeof(float))));
using Ints = std::int32_t __attribute__((vector_size(kLanes * sizeof(float))));

// x + y = s + e exactly (Knuth's TwoSum, six IEEE additions; exact barring overflow).
void TwoSum(const Doubles& x, const Doubles& y, Doubles& s, Doubles& e) {
  s = x + y;
  const Doubles yy = s - x;
  e = (x - (s - yy)) + (y - yy);
}

// x + y rounded to odd on 53 bits: s = x + y rounded to nearest, or, where that was
// inexact (e != 0), whichever of s and its neighbour towards x + y has its last bit
// set. (s is never 0 then: a sum that rounds to 0 is exactly 0.)
Doubles AddRoundToOdd(const Doubles& x, const Doubles& y) {
  Doubles s, e;
  TwoSum(x, y, s, e);
  const Masks bits = reinterpret_cast<Masks>(s);
  // Towards x + y: the magnitude's last bit set (x + y beyond s), or the magnitude one
  // lower with its last bit set (x + y short of s).
  const Masks beyond = (e > 0.0) == (s > 0.0);
  const Masks odd = (beyond & (bits | 1)) | (~beyond & ((bits - 1) | 1));
  const Masks inexact = e != 0.0;
  return reinterpret_cast<Doubles>((inexact & odd) | (~inexact & bits));
}

// x = bin0 + bin1 + t correctly rounded to float, for n elements at once (n a
// multiple of kLanes; callers pad with zero bins and t = 0), without branches:
//
//   (uh, ul) = TwoSum(bin0, bin1), (th, tl) = TwoSum(t, uh), so x = th + tl + ul
//   exactly; v = RO(tl + ul) and z = RO(th + v), RO rounding to odd on 53 bits.
//
// z is RO(x): if w = tl + ul is a double, v = w and z = RO(th + w) = RO(x). If not,
// tl is not 0, so t and uh are not within a factor 2 of each other (Sterbenz would
// make th exact), |th| >= |uh| / 2 and |w| <= ulp(th) / 2 + ulp(uh) / 2 <= 1.5 ulp(th):
// x is within one binade of th, and its 53-bit neighbours are multiples of at least
// ulp(th) / 2, far above v's last bit (ulp(v) <= 2^-52 |w| < 2^-50 ulp(th)). So
// th + w and th + v, with v the odd end of the 53-bit interval around w, lie strictly
// inside the same interval between x's neighbours: RO(th + v) = RO(th + w). Then float(z) = float(x)
// (round to nearest even): every float and float midpoint is a 53-bit double
// (24 + 2 <= 53, subnormal floats too), and rounding to odd keeps x on its side of
// each. Empty bins give t itself, +0 for -0, as the words do. ok[k]: out[k] is finite
// (an overflow, an infinite or NaN t take the words).
void RoundBinsFast(const double* bin0, const double* bin1, const float* t, float* out, std::uint8_t* ok,
                   std::size_t n) {
  for (std::size_t k = 0; k < n; k += kLanes) {
    Floats t_lanes;
    std::memcpy(&t_lanes, t + k, sizeof t_lanes);
    Doubles uh, ul, th, tl;
    TwoSum(Load(bin0 + k), Load(bin1 + k), uh, ul);
    TwoSum(__builtin_convertvector(t_lanes, Doubles), uh, th, tl);
    const Floats rounded = __builtin_convertvector(AddRoundToOdd(th, AddRoundToOdd(tl, ul)), Floats);
    const Ints finite = (reinterpret_cast<Ints>(rounded) & 0x7fffffff) < 0x7f800000;
    std::memcpy(out + k, &rounded, sizeof rounded);
    for (std::size_t l = 0; l < kLanes; ++l) ok[k + l] = finite[l] != 0;
  }
}

}  // namespace

// Element (i, j)'s products a[e][i] * b[e][j] are exact doubles (48-bit significands)
// below 2^T, T = a_max_i + b_max_j - 252 (the largest finite exponents, in
// DecodeFiniteFloat's units: a float is significand * 2^(exponent - 150)). Two
// double bins hold their sum exactly, and a product needs five vector flops (two of
// them FMAs, which compute a p + C and a p - q that is exact as the same real number
// rounded once):
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
                      std::int64_t begin, std::int64_t end, const SumOutput& out, OuterProductScratch& scratch) {
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
      std::uint32_t non_finite = 0;
      for (std::size_t j = 0; j < J; ++j) {
        non_finite |= (std::bit_cast<std::uint32_t>(b[j]) & 0x7f800000u) == 0x7f800000u ? 1u : 0u;
        scratch.b[r * Jp + j] = b[j];
      }
      scratch.row_finite[r] = non_finite == 0;
      if (non_finite != 0) continue;
      for (std::size_t j = 0; j < J; ++j)
        scratch.b_max[j] = std::max(scratch.b_max[j], b[j] != 0.0f ? ExponentOf(b[j]) : 0);
    }
  r = 0;
  for (std::size_t c = 0; c < terms.size(); ++c)
    for (std::int64_t e = 0; e < counts[c]; ++e, ++r) {
      if (!scratch.row_finite[r]) continue;
      const float* b = terms[c]->b.data() + e * units;
      std::int32_t worst = 0;
      for (std::size_t j = 0; j < J; ++j) {
        const std::int32_t d = b[j] != 0.0f ? scratch.b_max[j] - ExponentOf(b[j]) : 0;
        scratch.b_deficit[r * Jp + j] = d;
        worst = std::max(worst, d);
      }
      scratch.row_deficit[r] = worst;
    }

  // The task's inputs a[.][i], i in [begin, end), gathered row by row: input i's
  // values over the rows are then contiguous (a column of a is strided by `inputs`).
  const auto n = static_cast<std::size_t>(end - begin);
  scratch.a.resize(n * rows);
  scratch.a_rows.resize(rows);
  scratch.b_rows.resize(rows);
  r = 0;
  for (std::size_t c = 0; c < terms.size(); ++c)
    for (std::int64_t e = 0; e < counts[c]; ++e, ++r) {
      scratch.a_rows[r] = terms[c]->a.data() + e * inputs + begin;
      scratch.b_rows[r] = terms[c]->b.data() + e * units;
    }
  TransposeRows([&](std::int64_t row) { return scratch.a_rows[static_cast<std::size_t>(row)]; },
                static_cast<std::int64_t>(rows), static_cast<std::int64_t>(n), scratch.a.data(),
                static_cast<std::int64_t>(rows));

  scratch.bins.resize(3 * Jp);
  double* bin0 = scratch.bins.data();
  double* bin1 = bin0 + Jp;
  double* c0 = bin1 + Jp;
  std::fill(c0 + J, c0 + Jp, 1.5);
  scratch.needs_words.resize(J);
  scratch.t.assign(Jp, 0.0f);  // past J: padding lanes for RoundBinsFast (empty bins, t = 0)
  scratch.sums.resize(Jp);
  scratch.sums_ok.resize(Jp);
  scratch.plain.resize(rows);  // the first `plain` are one input row's
  for (std::int64_t i = begin; i < end; ++i) {
    const float* a_row = scratch.a.data() + static_cast<std::size_t>(i - begin) * rows;
    // The largest ExponentOf over the nonzero finite values (at least 1), without branches.
    std::int32_t a_max = 0;
    for (r = 0; r < rows; ++r) {
      const std::uint32_t bits = std::bit_cast<std::uint32_t>(a_row[r]) & 0x7fffffffu;
      const auto biased = static_cast<std::int32_t>(bits >> 23);
      a_max = std::max(a_max, bits != 0 && biased != 0xff ? std::max(biased, 1) : 0);
    }
    for (std::size_t j = 0; j < J; ++j) c0[j] = OneAndHalfPow2(a_max + scratch.b_max[j] - 252 + g);
    // The rows that take the bins, with every product (plain) or with the products
    // of b's values within reach of a's (masked); the others' (far) go to the words.
    // Plain rows are the rule: they are listed without branches (whether a is zero
    // follows the data), the rest in a second pass where there are any.
    std::size_t plain = 0;
    bool others = false;
    for (r = 0; r < rows; ++r) {
      const float a = a_row[r];
      const bool a_finite = std::isfinite(a);
      const bool finite = a_finite & (scratch.row_finite[r] != 0);
      const bool zero = finite & (a == 0.0f);
      const std::int32_t limit = reach - (a_max - ExponentOf(a));
      const bool takes = finite & !zero & (limit >= 0) & (scratch.row_deficit[r] <= limit);
      scratch.plain[plain] = {r, a, static_cast<double>(limit)};
      plain += takes ? 1 : 0;
      others |= !takes & !zero;
    }
    scratch.masked.clear();
    scratch.far.clear();
    for (r = 0; others && r < rows; ++r) {
      const float a = a_row[r];
      const bool finite = std::isfinite(a) && scratch.row_finite[r];
      if (finite && a == 0.0f) continue;
      const std::int32_t limit = reach - (a_max - ExponentOf(a));
      if (!finite || limit < 0)
        scratch.far.push_back({a, scratch.b_rows[r]});
      else if (scratch.row_deficit[r] > limit)
        scratch.masked.push_back({r, a, static_cast<double>(limit)});
    }
    // kColumns columns at a time, their bins in registers across all rows.
    for (std::size_t jb = 0; jb < Jp; jb += kColumns) {
      const Doubles c_lo = Load(c0 + jb), c_hi = Load(c0 + jb + kLanes);
      Doubles s0_lo{}, s0_hi{}, s1_lo{}, s1_hi{};
      // p = a b is exact, so fma(a, b, C) is p + C rounded once, and fma(a, b, -q)
      // is p - q exactly: the bins get the values the comment above names.
      const auto add = [&](double a_value, const Doubles& b_lo, const Doubles& b_hi) {
        const Doubles a = Doubles{} + a_value;
        const Doubles q_lo = Fma(a, b_lo, c_lo) - c_lo, q_hi = Fma(a, b_hi, c_hi) - c_hi;
        s0_lo += q_lo, s0_hi += q_hi;
        s1_lo += Fma(a, b_lo, -q_lo), s1_hi += Fma(a, b_hi, -q_hi);
      };
      for (std::size_t p = 0; p < plain; ++p) {
        const OuterProductScratch::Row& row = scratch.plain[p];
        const double* bd = scratch.b.data() + row.index * Jp + jb;
        add(row.a, Load(bd), Load(bd + kLanes));
      }
      for (const OuterProductScratch::Row& row : scratch.masked) {
        const double* bd = scratch.b.data() + row.index * Jp + jb;
        const double* deficit = scratch.b_deficit.data() + row.index * Jp + jb;
        // A lane whose b is further below its column's largest than the row allows
        // adds zero here (its product goes to the words below).
        add(row.a, Keep(Load(bd), Load(deficit) <= row.limit),
            Keep(Load(bd + kLanes), Load(deficit + kLanes) <= row.limit));
      }
      Store(bin0 + jb, s0_lo), Store(bin0 + jb + kLanes, s0_hi);
      Store(bin1 + jb, s1_lo), Store(bin1 + jb + kLanes, s1_hi);
    }
    TermsOf(out, i * units, J, scratch.t.data());
    if (out.rounded != nullptr) {
      RoundBinsFast(bin0, bin1, scratch.t.data(), scratch.sums.data(), scratch.sums_ok.data(), Jp);
      // The rule: every column's sum rounded from the bins.
      std::uint8_t all_ok = 1;
      for (std::size_t j = 0; j < J; ++j) all_ok &= scratch.sums_ok[j];
      if (all_ok != 0 && scratch.far.empty() && scratch.masked.empty()) {
        std::copy_n(scratch.sums.data(), J, out.rounded + i * units);
        continue;
      }
    }
    // The columns whose sums need their words: every one beside a far row, and those
    // of a masked row's lanes left out of the bins.
    std::fill(scratch.needs_words.begin(), scratch.needs_words.end(), !scratch.far.empty());
    for (const OuterProductScratch::Row& row : scratch.masked) {
      const double* deficit = scratch.b_deficit.data() + row.index * Jp;
      for (std::size_t j = 0; j < J; ++j) scratch.needs_words[j] |= deficit[j] > row.limit;
    }
    for (std::size_t j = 0; j < J; ++j) {
      const std::int64_t k = i * units + static_cast<std::int64_t>(j);
      const float t = scratch.t[j];
      const int e0 = a_max + scratch.b_max[j] - 252 + g;
      float* rounded = out.rounded != nullptr ? out.rounded + k : nullptr;
      if (RoundedFromBins(rounded, scratch.needs_words[j], scratch.sums_ok[j], scratch.sums[j])) continue;
      std::int64_t* words = out.words + k * kExactWords;
      if (scratch.needs_words[j]) {
        std::fill_n(words, kExactWords, 0);
        for (const OuterProductScratch::FarRow& row : scratch.far) ExactAddProduct(words, row.a, row.b[j]);
        for (const OuterProductScratch::Row& row : scratch.masked)
          if (scratch.b_deficit[row.index * Jp + j] > row.limit)
            ExactAddProduct(words, static_cast<float>(row.a), static_cast<float>(scratch.b[row.index * Jp + j]));
      }
      FinishWords(words, !scratch.needs_words[j], bin0[j], bin1[j], e0, step, t, rounded);
    }
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
               std::int64_t end, const SumOutput& out) {
  constexpr std::int64_t kBlock = 256;
  const std::int64_t size = terms[0]->values.dim(1);
  const auto [rows, g, step] = BinLayoutFor(counts);
  const int reach = step + 28 - g;
  alignas(64) std::int32_t x_max[kBlock];
  alignas(64) std::uint32_t special[kBlock];
  alignas(64) double c0[kBlock], threshold[kBlock], bin0[kBlock], bin1[kBlock], far[kBlock];
  alignas(64) float t[kBlock], sums[kBlock];
  alignas(64) std::uint8_t sums_ok[kBlock];
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
    // The bins of kColumns elements at a time stay in registers over all rows; the
    // elements past the last whole group take the same operations one at a time.
    // Each group also fetches one cache line of every row of the next block, which
    // the pass above would otherwise wait for (a block is a strided stream per row).
    const std::int64_t groups = n / static_cast<std::int64_t>(kColumns);
    const std::int64_t next = std::min(kBlock, end - first - n);
    for (std::int64_t group = 0; group < groups; ++group) {
      const std::int64_t k0 = group * static_cast<std::int64_t>(kColumns);
      const bool fetch = k0 < next;
      const Doubles c_lo = Load(c0 + k0), c_hi = Load(c0 + k0 + kLanes);
      const Doubles bound_lo = Load(threshold + k0), bound_hi = Load(threshold + k0 + kLanes);
      Doubles s0_lo{}, s0_hi{}, s1_lo{}, s1_hi{};
      Masks far_lo{}, far_hi{};
      const auto add = [](const float* v, const Doubles& c, const Doubles& bound, Doubles& s0, Doubles& s1,
                          Masks& far_lanes) {
        Floats f;
        std::memcpy(&f, v, sizeof f);
        const Doubles x = __builtin_convertvector(f, Doubles);
        const Masks keep = Abs(x) >= bound;  // false for NaN
        const Doubles p = Keep(x, keep), q = (p + c) - c;
        s0 += q, s1 += p - q;
        far_lanes |= ~keep & (x != 0.0);
      };
      for (std::size_t c = 0; c < terms.size(); ++c) {
        const float* v = terms[c]->values.data() + first + k0;
        for (std::int64_t e = 0; e < counts[c]; ++e, v += size) {
          if (fetch) __builtin_prefetch(v + kBlock);
          add(v, c_lo, bound_lo, s0_lo, s1_lo, far_lo);
          add(v + kLanes, c_hi, bound_hi, s0_hi, s1_hi, far_hi);
        }
      }
      Store(bin0 + k0, s0_lo), Store(bin0 + k0 + kLanes, s0_hi);
      Store(bin1 + k0, s1_lo), Store(bin1 + k0 + kLanes, s1_hi);
      Store(far + k0, Keep(Doubles{} + 1.0, far_lo)), Store(far + k0 + kLanes, Keep(Doubles{} + 1.0, far_hi));
    }
    for (std::size_t c = 0; c < terms.size(); ++c) {
      const float* v = terms[c]->values.data() + first;
      for (std::int64_t e = 0; e < counts[c]; ++e, v += size)
        for (std::int64_t k = groups * static_cast<std::int64_t>(kColumns); k < n; ++k) {
          const double x = v[k];
          const bool keep = std::fabs(x) >= threshold[k];
          const double p = keep ? x : 0.0;
          const double q = (p + c0[k]) - c0[k];
          bin0[k] += q;
          bin1[k] += p - q;
          far[k] = keep || x == 0.0 ? far[k] : 1.0;
        }
    }
    TermsOf(out, first, static_cast<std::size_t>(n), t);
    if (out.rounded != nullptr) {
      // Whole lanes for RoundBinsFast: padding elements with empty bins (kBlock is a
      // multiple of kLanes).
      const auto lanes = static_cast<std::int64_t>((static_cast<std::size_t>(n) + kLanes - 1) / kLanes * kLanes);
      std::fill(bin0 + n, bin0 + lanes, 0.0), std::fill(bin1 + n, bin1 + lanes, 0.0);
      std::fill(t + n, t + lanes, 0.0f);
      RoundBinsFast(bin0, bin1, t, sums, sums_ok, static_cast<std::size_t>(lanes));
    }
    for (std::int64_t k = 0; k < n; ++k) {
      // An element with an infinite or NaN value has every nonzero one far.
      const int e0 = x_max[k] - 126 + g;
      float* rounded = out.rounded != nullptr ? out.rounded + first + k : nullptr;
      if (RoundedFromBins(rounded, far[k] != 0.0, sums_ok[k], sums[k])) continue;
      std::int64_t* words = out.words + (first + k) * kExactWords;
      if (far[k] != 0.0) {
        std::fill_n(words, kExactWords, 0);
        for (std::size_t c = 0; c < terms.size(); ++c) {
          const float* v = terms[c]->values.data() + first + k;
          for (std::int64_t e = 0; e < counts[c]; ++e, v += size)
            if (!(std::fabs(static_cast<double>(*v)) >= threshold[k])) ExactAddFloat(words, *v);
        }
      }
      FinishWords(words, far[k] == 0.0, bin0[k], bin1[k], e0, step, t[k], rounded);
    }
  }
}

}  // namespace dtlab
