#include "sim/comm/compact_exact.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cassert>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

#include "core/enum_names.h"
#include "core/exact_sum.h"

namespace dtlab {
namespace {

using exact_internal::RoundFloatFast;

constexpr NameTable<ExactAllReduce, 2> kKinds = {
    {{"words", ExactAllReduce::kWords}, {"compact", ExactAllReduce::kCompact}}};

__extension__ typedef unsigned __int128 Uint128;

constexpr int kTopDigit = kExactDigitWords - 1;
constexpr std::int16_t kNoBits = std::numeric_limits<std::int16_t>::max();  // the lsb of zero
// Block scales are 2^(bound - kScaleBias) floats: bounds [171, 447] map to
// [2^-149, 2^127], the smallest subnormal to the largest power of two.
constexpr int kScaleBias = 320;
constexpr int kMinScaleBound = 171;
constexpr int kMaxScaleBound = 447;
constexpr std::int64_t kGrain = 4096;  // values per task; a multiple of Int448::kFields
// A window field's sum stays below 2^kFieldTop (plus the counts) in magnitude: a
// signed 56-bit field, with a bit to spare for the counts.
constexpr int kFieldTop = 54;

// ScaleSumTop (compact_exact.h) in two parts, the first once per call. With e =
// ilogb(s) and s = M 2^(e - 23), M its 24-bit significand, the sum of the N scales
// lies below s (1 + (N + 1) 2^-23), and that is below 2^(e + 1) where M (2^23 + N +
// 1) < 2^47 (a product of two 24-bit integers: the same test in doubles is exact), so
// where M is at most this.
std::int32_t ScaleSumSignificands(std::int32_t replicas) {
  return static_cast<std::int32_t>(((std::int64_t{1} << 47) - 1) / ((std::int64_t{1} << 23) + replicas + 1));
}
// Then per scale, in integers with no branch, so that a loop over blocks is made
// into vectors (ilogb and ldexp, library calls, were most of a 16 MiB call's block
// loop: 6 ns a block). A subnormal s is read from s 2^64 (exact, and normal). For 0
// and infinity it returns a top that its callers do not use.
int ScaleSumTopBelow(float s, std::int32_t significands) {
  const bool subnormal = std::bit_cast<std::uint32_t>(s) >> 23 == 0;
  const auto bits = std::bit_cast<std::uint32_t>(subnormal ? s * 0x1p64f : s);
  const int e = static_cast<int>(bits >> 23) - (subnormal ? 127 + 64 : 127);
  const auto significand = static_cast<std::int32_t>((bits & 0x7fffff) | 0x800000);
  return e + (significand <= significands ? 1 : 2);
}

// Digit i of a normalized accumulator read as an infinite two's complement integer:
// digits 0..16 as stored, then the signed top word's 32-bit pieces, then its sign.
std::uint32_t Digit(const std::int64_t* words, int i) {
  if (i < kTopDigit) return static_cast<std::uint32_t>(words[i]);
  const int shift = 32 * (i - kTopDigit);
  if (shift >= 64) return words[kTopDigit] < 0 ? ~std::uint32_t{0} : 0;
  return static_cast<std::uint32_t>(words[kTopDigit] >> shift);
}

// Bits [lsb, lsb + 64) of a normalized accumulator (two's complement).
std::uint64_t Bits64(const std::int64_t* words, int lsb) {
  const int first = lsb >> 5;
  const int shift = lsb & 31;
  const std::uint64_t low = Digit(words, first) | std::uint64_t{Digit(words, first + 1)} << 32;
  if (shift == 0) return low;
  return (low >> shift) | std::uint64_t{Digit(words, first + 2)} << (64 - shift);
}

// For a normalized accumulator V: `bound` with |V| < 2^bound in units (0 only for
// V = 0), and the lowest set bit (kNoBits for V = 0).
struct Shape {
  int bound;
  std::int16_t lsb;
};

Shape ShapeOf(const std::int64_t* words) {
  const std::int64_t top = words[kTopDigit];
  const bool negative = top < 0;
  Shape shape{negative ? 1 : 0, kNoBits};
  const auto top_magnitude = static_cast<std::uint64_t>(negative ? ~top : top);
  if (top_magnitude != 0) {
    shape.bound = 32 * kTopDigit + std::bit_width(top_magnitude) + 1;
  } else {
    for (int i = kTopDigit - 1; i >= 0; --i) {
      const auto digit = static_cast<std::uint32_t>(words[i]);
      const std::uint32_t magnitude = negative ? ~digit : digit;
      if (magnitude != 0) {
        shape.bound = 32 * i + std::bit_width(magnitude) + 1;
        break;
      }
    }
  }
  for (int i = 0; i < kTopDigit; ++i)
    if (words[i] != 0)
      return {shape.bound, static_cast<std::int16_t>(32 * i + std::countr_zero(std::uint64_t(words[i])))};
  if (top != 0)
    shape.lsb = static_cast<std::int16_t>(32 * kTopDigit + std::countr_zero(static_cast<std::uint64_t>(top)));
  return shape;
}

using Words = std::array<std::int64_t, kExactWords>;

float RoundWords(const Words& known, std::int64_t add_high, int lsb, std::int64_t add_low) {
  Words words = known;
  ExactAddInt128(words.data(), add_high, lsb);
  ExactAddInt128(words.data(), add_low, 0);
  return ExactToFloat(words.data());
}

// 2^e as a double, for e in [-1022, 1023].
double PowerOfTwoDouble(int e) { return std::bit_cast<double>(static_cast<std::uint64_t>(e + 1023) << 52); }

// Round 2's common case, by the hardware's conversions. A value is q 2^L where it
// has no fraction (n = 0); with one, it lies in the open interval (q 2^L, (q + n)
// 2^L), whose ends' neighbourhoods are (m 2^L, (m + 1) 2^L) for m = q and q + n -
// 1. Where |m| > 2^24, the float midpoints there are multiples of 2^L units, so
// every point of (m 2^L, (m + 1) 2^L) rounds as (2m + 1) 2^(L - 1) does: an integer
// t = 2m + 1 (t = 2q without a fraction) times `unit` = 2^(L - 1) units, which the
// int64 to double conversion takes exactly where |t| < 2^53 and the double to float
// one rounds once, to nearest. Where both give the same float, every point between
// does (round to nearest is monotone): that is the result. (dtlab keeps the default
// floating-point environment, as ExactToFloat needs too.) Left to Decide: ends of
// 2^53 or more, and fractions beside fewer than 25 bits.
[[gnu::always_inline]] inline bool DecideConverted(std::int64_t q, std::int64_t n, double unit, float& out) {
  const std::int64_t f = n != 0;
  const double d1 = static_cast<double>(2 * q + f), d2 = static_cast<double>(2 * (q + n) - f);
  out = static_cast<float>(d1 * unit);
  const float high = static_cast<float>(d2 * unit);
  const double a1 = std::fabs(d1), a2 = std::fabs(d2);
  return std::bit_cast<std::uint32_t>(out) == std::bit_cast<std::uint32_t>(high) && std::max(a1, a2) < 0x1p53 &&
         (f == 0 || std::min(a1, a2) > 0x1p25);
}

#if defined(__AVX2__)
// x >> count in each 64-bit lane, arithmetic. AVX2 shifts 64-bit lanes logically
// only: there, a logical shift between two flips of the sign.
__m256i ShiftRightArithmetic(__m256i x, __m128i count) {
#if defined(__AVX512F__) && defined(__AVX512VL__)
  return _mm256_sra_epi64(x, count);
#else
  const __m256i flip = _mm256_cmpgt_epi64(_mm256_setzero_si256(), x);
  return _mm256_xor_si256(_mm256_srl_epi64(_mm256_xor_si256(x, flip), count), flip);
#endif
}

// int64 to double, four at a time, exact where |t| < 2^53 (the callers use no
// other). AVX-512 has the conversion; AVX2 does not: t = h 2^32 + l, each half read
// from a double's fraction bits.
__m256d ToDoubles(__m256i t) {
#if defined(__AVX512DQ__) && defined(__AVX512VL__)
  return _mm256_cvtepi64_pd(t);
#else
  const __m256i two52 = _mm256_set1_epi64x(0x4330000000000000);  // 2^52's bits
  const __m256i low = _mm256_or_si256(_mm256_and_si256(t, _mm256_set1_epi64x(0xffffffff)), two52);
  // The high half, signed: its 32 bits with the sign bit flipped are h + 2^31.
  const __m256i high =
      _mm256_or_si256(_mm256_xor_si256(_mm256_srli_epi64(t, 32), _mm256_set1_epi64x(0x80000000)), two52);
  const __m256d h = _mm256_sub_pd(_mm256_castsi256_pd(high), _mm256_set1_pd(0x1p52 + 0x1p31));
  const __m256d l = _mm256_sub_pd(_mm256_castsi256_pd(low), _mm256_set1_pd(0x1p52));
  return _mm256_add_pd(_mm256_mul_pd(h, _mm256_set1_pd(0x1p32)), l);  // one rounding, none where |t| < 2^53
#endif
}
#endif

// Decides value from a window's sum: S = known + s with s in [q 2^lsb + n,
// (q + n) 2^lsb - n] (s = q 2^lsb if n = 0), `known` the earlier rounds' sum (null:
// zero). True, with `out` the correctly rounded S, if both ends round alike.
bool Decide(std::int64_t q, std::int64_t n, int lsb, const Words* known, float& out) {
  if (known == nullptr) {
    // Both ends as m 2^lsb + f, 0 < f < 2^lsb: m = q and q + n - 1.
    if (n == 0) {
      if (RoundFloatFast(q, false, lsb, out)) return true;
    } else if ((n >> std::min(lsb, 62)) == 0) {
      float high;
      if (RoundFloatFast(q, true, lsb, out) && RoundFloatFast(q + n - 1, true, lsb, high))
        return std::bit_cast<std::uint32_t>(out) == std::bit_cast<std::uint32_t>(high);
    }
  }
  static const Words kZero{};
  const Words& below = known != nullptr ? *known : kZero;
  out = RoundWords(below, q, lsb, n);
  return n == 0 || std::bit_cast<std::uint32_t>(out) == std::bit_cast<std::uint32_t>(RoundWords(below, q + n, lsb, -n));
}

// Round 2's decision for the values of one window lsb, from their field sums
// (compact_internal::DecideWindowSums), a value at a time or in vectors.
class WindowSumDecider {
 public:
  WindowSumDecider(int count_bits, int lsb)
      : count_bits_(count_bits),
        lsb_(lsb),
        count_mask_((std::int64_t{1} << count_bits) - 1),
        unit_(PowerOfTwoDouble(lsb - 1 + kExactLsbExponent)) {
    // Decided8's bounds on a float's magnitude bits |t|: exponents e_t with e_t + e
    // in [1, 254] (scaled, still normal), above 2^25 where t has a fraction.
    const int e = lsb - 1 + kExactLsbExponent;
    exponent_bits_ = static_cast<std::int32_t>(static_cast<std::uint32_t>(e) << 23);
    exact_least_ = std::clamp(1 - e, 1, 255) << 23;
    fraction_least_ = std::max(exact_least_, 0x4c000001);  // 2^25's bits, and 1
    magnitude_past_ = std::clamp(255 - e, 1, 255) << 23;
  }

  // Whether the value of field sum `sum` is left undecided; if not, `out` is it.
  bool Undecided(std::int64_t sum, float& out) const {
    const std::int64_t q = sum >> count_bits_;  // arithmetic: floor
    const std::int64_t n = sum & count_mask_;
    return !DecideConverted(q, n, unit_, out) && !Decide(q, n, lsb_, nullptr, out);
  }

#if defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
  // DecideConverted's test, eight sums at a time, without doubles: AVX-512 converts
  // an int64 to a float with one rounding, whatever its size, so t1 and t2 round
  // alike exactly where their floats are equal; the float of t 2^(L - 1) units is
  // then t's float with e = L - 1 + kExactLsbExponent added to its exponent, exactly,
  // where that exponent stays a normal float's. A zero sum is +0. Their floats to
  // out[0, 8), where decided (the returned mask's lanes); the others go to Undecided.
  [[gnu::always_inline]] unsigned Decided8(__m512i s, float* out) const {
    const __m512i q = _mm512_sra_epi64(s, _mm_cvtsi32_si128(count_bits_));
    const __m512i n = _mm512_and_si512(s, _mm512_set1_epi64(count_mask_));
    const __mmask8 fraction = _mm512_test_epi64_mask(n, n);
    const __m512i one = _mm512_set1_epi64(1);
    const __m512i q_n = _mm512_add_epi64(q, n);
    const __m512i q2 = _mm512_add_epi64(q, q), qn2 = _mm512_add_epi64(q_n, q_n);
    return DecidedEnds8(_mm512_mask_add_epi64(q2, fraction, q2, one), _mm512_mask_sub_epi64(qn2, fraction, qn2, one),
                        fraction, out);
  }
  // The same from the ends' t1 = 2q + f and t2 = 2(q + n) - f, f = `fraction` (n !=
  // 0). t1 = 0 exactly where the sum is 0 (2q + 1 is odd).
  [[gnu::always_inline]] unsigned DecidedEnds8(__m512i t1, __m512i t2, __mmask8 fraction, float* out) const {
    const __m256i low = _mm256_castps_si256(_mm512_cvtepi64_ps(t1));
    const __m256i high = _mm256_castps_si256(_mm512_cvtepi64_ps(t2));
    const __m256i magnitude = _mm256_and_si256(low, _mm256_set1_epi32(0x7fffffff));
    const __m256i least =
        _mm256_mask_blend_epi32(fraction, _mm256_set1_epi32(exact_least_), _mm256_set1_epi32(fraction_least_));
    const __mmask8 normal = _mm256_cmpge_epu32_mask(magnitude, least) &
                            _mm256_cmplt_epu32_mask(magnitude, _mm256_set1_epi32(magnitude_past_));
    const __mmask8 nonzero = _mm512_test_epi64_mask(t1, t1);
    const __mmask8 same = _mm256_cmpeq_epi32_mask(low, high);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out),
                        _mm256_maskz_add_epi32(nonzero, low, _mm256_set1_epi32(exponent_bits_)));
    return (same & normal) | static_cast<__mmask8>(~nonzero);
  }
#endif
#if defined(__AVX2__)
  // DecideConverted, four sums at a time (Decided8's AVX2 form).
  [[gnu::always_inline]] int Decided4(__m256i s, float* out) const {
    const __m256i one = _mm256_set1_epi64x(1);
    const __m256i q = ShiftRightArithmetic(s, _mm_cvtsi32_si128(count_bits_));
    const __m256i n = _mm256_and_si256(s, _mm256_set1_epi64x(count_mask_));
    const __m256i no_fraction = _mm256_cmpeq_epi64(n, _mm256_setzero_si256());
    const __m256i f = _mm256_add_epi64(no_fraction, one);
    const __m256i q_n = _mm256_add_epi64(q, n);
    return DecidedEnds4(_mm256_add_epi64(_mm256_add_epi64(q, q), f), _mm256_sub_epi64(_mm256_add_epi64(q_n, q_n), f),
                        no_fraction, out);
  }
  // The same from the ends t1 = 2q + f and t2 = 2(q + n) - f, and where n = 0 (-1
  // in those lanes, else 0).
  [[gnu::always_inline]] int DecidedEnds4(__m256i t1, __m256i t2, __m256i no_fraction, float* out) const {
    const __m256d d1 = ToDoubles(t1), d2 = ToDoubles(t2);
    const __m256d units = _mm256_set1_pd(unit_);
    const __m128 low = _mm256_cvtpd_ps(_mm256_mul_pd(d1, units));
    const __m128 high = _mm256_cvtpd_ps(_mm256_mul_pd(d2, units));
    const __m256d magnitude = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffff));
    const __m256d a1 = _mm256_and_pd(d1, magnitude), a2 = _mm256_and_pd(d2, magnitude);
    const __m256d exact = _mm256_cmp_pd(_mm256_max_pd(a1, a2), _mm256_set1_pd(0x1p53), _CMP_LT_OQ);
    const __m256d grid = _mm256_or_pd(_mm256_castsi256_pd(no_fraction),
                                      _mm256_cmp_pd(_mm256_min_pd(a1, a2), _mm256_set1_pd(0x1p25), _CMP_GT_OQ));
    _mm_storeu_ps(out, low);
    return _mm256_movemask_pd(_mm256_and_pd(exact, grid)) &
           _mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(_mm_castps_si128(low), _mm_castps_si128(high))));
  }
#endif

  // The `lanes` sums of a vector `s`, of which `decided` (a mask) were: undecided[k]
  // for each, and the others decided one at a time.
  template <int kLanes, typename Vector>
  [[gnu::always_inline]] void Finish(Vector s, unsigned decided, float* out, char* undecided) const {
    std::memset(undecided, 0, kLanes);
    if (decided == (1u << kLanes) - 1) return;
    alignas(64) std::int64_t sums[kLanes];
    std::memcpy(sums, &s, sizeof(sums));
    for (int lane = 0; lane < kLanes; ++lane)
      if ((decided >> lane & 1) == 0) undecided[lane] = Undecided(sums[lane], out[lane]);
  }

  // out[k] and undecided[k] for sums[k], k < size.
  void DecideSums(const std::int64_t* sums, std::int64_t size, float* out, char* undecided) const {
    std::int64_t k = 0;
#if defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
    for (; k + 8 <= size; k += 8) {
      const __m512i s = _mm512_loadu_si512(sums + k);
      Finish<8>(s, Decided8(s, out + k), out + k, undecided + k);
    }
#endif
#if defined(__AVX2__)
    for (; k + 4 <= size; k += 4) {
      const __m256i s = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sums + k));
      Finish<4>(s, static_cast<unsigned>(Decided4(s, out + k)), out + k, undecided + k);
    }
#endif
    for (; k < size; ++k) undecided[k] = Undecided(sums[k], out[k]);
  }

 private:
  int count_bits_, lsb_;
  std::int64_t count_mask_;
  double unit_;
  std::int32_t exponent_bits_ = 0, exact_least_ = 0, fraction_least_ = 0, magnitude_past_ = 0;
};

// A value still undecided: what the rounds so far summed, and its window's lsb.
struct Pending {
  std::int64_t index;
  int lsb;
  Words known;
};

template <typename T>
Status SameOnEveryReplica(std::span<const std::span<T>> buffers, const char* what) {
  std::atomic<bool> same = true;
  tbb::parallel_for(std::size_t{1}, buffers.size(), [&](std::size_t r) {
    if (std::memcmp(buffers[r].data(), buffers[0].data(), buffers[0].size_bytes()) != 0) same = false;
  });
  if (!same) return Status::Runtime(std::string("compact exact all-reduce: the replicas read different ") + what);
  return Status::Ok();
}

const std::int64_t* DeepWords(const CompactGradient& g, std::int64_t i) {
  const auto it = std::lower_bound(g.deep_index.begin(), g.deep_index.end(), i);
  assert(it != g.deep_index.end() && *it == i);
  return g.deep_words.data() + (it - g.deep_index.begin()) * kExactWords;
}

// Value i of a CompactGradient that is not deep: floor(V / 2^base), exact.
ExactInt128 Window(const CompactGradient& g, std::int64_t i) {
  const auto j = static_cast<std::size_t>(i);
  return static_cast<ExactInt128>(static_cast<Uint128>(g.window_high[j]) << 64 | g.window_low[j]);
}

int BaseOf(const CompactGradient& g, std::int64_t i) {
  return CompactGradient::Base(g.bound[static_cast<std::size_t>(i / kCompactBlock)]);
}

// Bits [p, p + 64) of value i of g (two's complement).
std::uint64_t BitsAt(const CompactGradient& g, std::int64_t i, int p) {
  if (g.IsDeep(i)) return Bits64(DeepWords(g, i), p);
  // V = window 2^base exactly (Encode keeps a window only where no bit lies below
  // base). Both shifts, then a select: the sign of p - base varies from value to
  // value, and a branch on it is mispredicted about half the time.
  const ExactInt128 window = Window(g, i);
  const int shift = p - BaseOf(g, i);
  const auto right = static_cast<std::uint64_t>(window >> std::clamp(shift, 0, 127));
  const auto left = static_cast<std::uint64_t>(static_cast<Uint128>(window) << std::clamp(-shift, 0, 127));
  return shift >= 0 ? right : left;
}

// Whether value i of g has a set bit below p: the window's bits below p - base (none
// lie below base), or the words'.
bool HasBitsBelow(const CompactGradient& g, std::int64_t i, int p) {
  if (g.IsDeep(i)) return ShapeOf(DeepWords(g, i)).lsb < p;
  const int shift = p - BaseOf(g, i);
  if (shift <= 0) return false;
  const auto window = static_cast<Uint128>(Window(g, i));
  return shift >= 128 ? window != 0 : window << (128 - shift) != 0;
}

// Round 2's fields of one block of g: each value's field is bits [L, L + 64) of it,
// L the block's window lsb, shifted up by count_bits, plus the sticky bit (bits
// below L). BitsAt's and HasBitsBelow's work on plain arrays (the common case; it
// reads each replica's whole encoding, so it reads the least it can). A block's L is
// at least its bound + count_bits - kFieldTop (its scale sum is at least the
// replica's own scale), so where base = bound - 126, L - base >= 72: the field's
// bits lie in the window's high word alone (`high_only`), and the sticky bit is the
// low word's (its bit in low_set) and the high word's bits below L: the low words
// are not read (a quarter of a 2-rank MPI call's extraction). A block that is zero
// on this replica has zero fields; only blocks below 2^126 units (base 0), or with a
// deep value, take the general path.
class BlockFields {
 public:
  BlockFields(const CompactGradient& g, std::int64_t block, int lsb, int count_bits)
      : g_(&g),
        high_(g.window_high.data() + block * kCompactBlock),
        first_(block * kCompactBlock),
        lsb_(lsb),
        count_bits_(count_bits),
        low_set_(g.low_set[static_cast<std::size_t>(block)]) {
    const int bound = g.bound[static_cast<std::size_t>(block)];
    const int above = Above(bound, lsb);
    // A block of zeros has high words (and low_set) of zeros: shifted by nothing, they
    // give its fields, 0, in vectors too.
    zero_ = bound == 0;
    high_only_ = HighOnly(bound, g.deep[static_cast<std::size_t>(block)], above);
    SetAbove(zero_ ? 0 : above);
  }
  // Another worker's block, from its high words as they lie and its Header.
  // REQUIRES: the header is not kSentAsFields.
  BlockFields(const std::int64_t* high, std::int64_t header, int count_bits)
      : high_(reinterpret_cast<const std::uint64_t*>(high)),
        count_bits_(count_bits),
        low_set_(static_cast<std::uint32_t>(header)),
        high_only_(true) {
    assert(header != kSentAsFields);
    SetAbove(static_cast<int>(header >> 32));
  }
  bool high_only() const { return high_only_; }  // (a zero block's too)
  bool zero() const { return zero_; }            // every field 0
  // What another worker needs to build the fields of a block of this worker (its
  // bound, deep and low_set masks, and window lsb) from its high words (the
  // constructor above): the low_set mask and the window's lsb above the high word (a
  // zero block: 0, with high words of zero); or kSentAsFields. From the block's
  // masks alone, with no BlockFields made (a loop over half the blocks: 0.13 ms a
  // 16 MiB call with one made).
  static constexpr std::int64_t kSentAsFields = std::int64_t{1} << 40;
  static std::int64_t Header(int bound, std::uint32_t deep, std::uint32_t low_set, int lsb) {
    const int above = Above(bound, lsb);
    const std::int64_t header = HighOnly(bound, deep, above) ? static_cast<std::int64_t>(low_set) |
                                                                   static_cast<std::int64_t>(std::min(above, 64)) << 32
                                                             : kSentAsFields;
    return bound == 0 ? 0 : header;
  }
  // The field of value k of the block.
  std::int64_t Field(std::int64_t k) const {
    if (zero_) return 0;
    const std::uint64_t high = high_[k];
    if (high_only_)
      return static_cast<std::int64_t>(static_cast<std::uint64_t>(static_cast<std::int64_t>(high) >> shift_)
                                       << count_bits_) +
             (((low_set_ >> k & 1) != 0) | ((high & below_) != 0));
    return static_cast<std::int64_t>(BitsAt(*g_, first_ + k, lsb_) << count_bits_) +
           HasBitsBelow(*g_, first_ + k, lsb_);
  }
#if defined(__AVX2__)
  // The fields of values k to k + 3 of a high_only block.
  [[gnu::always_inline]] __m256i Fields(std::int64_t k) const {
    const Parts4 parts = PartsOf4(k);
    return _mm256_add_epi64(_mm256_sll_epi64(parts.bits, _mm_cvtsi32_si128(count_bits_)), parts.sticky);
  }
  // Their two parts: the bits from L up, and the sticky bits (0 or 1 a lane).
  struct Parts4 {
    __m256i bits, sticky;
  };
  [[gnu::always_inline]] Parts4 PartsOf4(std::int64_t k) const {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(high_ + k));
    // 0 where the high word has bits below L, else -1; so the sticky bit is that
    // plus one, or the value's bit in low_set.
    const __m256i one = _mm256_set1_epi64x(1);
    const __m256i exact = _mm256_cmpeq_epi64(_mm256_and_si256(h, _mm256_set1_epi64x(static_cast<long long>(below_))),
                                             _mm256_setzero_si256());
    const __m256i low_bit = _mm256_and_si256(
        _mm256_srlv_epi64(_mm256_set1_epi64x(low_set_), _mm256_setr_epi64x(k, k + 1, k + 2, k + 3)), one);
    return {ShiftRightArithmetic(h, _mm_cvtsi32_si128(shift_)), _mm256_or_si256(_mm256_add_epi64(exact, one), low_bit)};
  }
#endif
#if defined(__AVX512F__)
  // The fields of values k to k + 7 of a high_only block (Fields, eight at a time).
  [[gnu::always_inline]] __m512i Fields8(std::int64_t k) const {
    const Parts8 parts = PartsOf8(k);
    const __m512i sticky = _mm512_maskz_mov_epi64(parts.sticky, _mm512_set1_epi64(1));
    return _mm512_add_epi64(_mm512_sll_epi64(parts.bits, _mm_cvtsi32_si128(count_bits_)), sticky);
  }
  // Their two parts: the bits from L up (the field >> count_bits), and the sticky bits.
  struct Parts8 {
    __m512i bits;
    __mmask8 sticky;
  };
  [[gnu::always_inline]] Parts8 PartsOf8(std::int64_t k) const {
    const __m512i h = _mm512_loadu_si512(high_ + k);
    const __mmask8 inexact = _mm512_test_epi64_mask(h, _mm512_set1_epi64(static_cast<long long>(below_)));
    // (All lanes kept by a mask: GCC 12 warns of the unmasked form's undefined source
    // where this is inlined into compact_internal::DecideHighWordBlocks.)
    return {_mm512_maskz_sra_epi64(0xff, h, _mm_cvtsi32_si128(shift_)), static_cast<__mmask8>(inexact | low_set_ >> k)};
  }
#endif

 private:
  // The window lsb's height above the high word's lsb (of a block of bound `bound`).
  static int Above(int bound, int lsb) { return lsb - CompactGradient::Base(bound) - 64; }
  // Whether a block's fields lie in its high words: where its window lsb is at or
  // above them and no value is deep (a zero block's are 0).
  static bool HighOnly(int bound, std::uint32_t deep, int above) { return bound == 0 || (above >= 0 && deep == 0); }
  // 64 or more: none of the high word's bits.
  void SetAbove(int above) {
    above_ = above;
    shift_ = std::clamp(above, 0, 63);
    below_ = above >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << shift_) - 1;
  }
  const CompactGradient* g_ = nullptr;  // null for another worker's block
  const std::uint64_t* high_;
  std::int64_t first_ = 0;
  int lsb_ = 0, count_bits_, shift_ = 0, above_ = 0;
  std::uint32_t low_set_;
  bool zero_ = false, high_only_ = false;
  std::uint64_t below_ = 0;
};

// Round 2's groups for values [begin, end) of g (begin at a block), where every block
// is windowed (no value is sent whole), into out[0, ...), packed biased; a short last
// block's missing fields are zero.
void FirstWindowGroups(const CompactGradient& g, const int* block_lsb, int count_bits, std::int64_t begin,
                       std::int64_t end, Int448* out) {
  assert(begin % kCompactBlock == 0);
  static_assert(kCompactBlock % Int448::kFields == 0);
  for (std::int64_t first = begin; first < end; first += kCompactBlock) {
    const std::int64_t block = first / kCompactBlock, size = std::min(end - first, kCompactBlock);
    const BlockFields fields(g, block, block_lsb[block], count_bits);
    Int448* groups = out + (first - begin) / Int448::kFields;
#if defined(__AVX512F__)
    if (fields.high_only() && size == kCompactBlock) {  // four groups, eight fields at a time
      for (std::int64_t k = 0; k < kCompactBlock; k += Int448::kFields)
        PackBiasedFieldsVector(fields.Fields8(k), groups[k / Int448::kFields]);
      continue;
    }
#elif defined(__AVX2__)
    if (fields.high_only() && size == kCompactBlock) {  // four groups, from vectors moved up by 2^55
      const __m256i offset = _mm256_set1_epi64x(int448_internal::kFieldOffset);
      for (std::int64_t k = 0; k < kCompactBlock; k += Int448::kFields)
        PackDigits(_mm256_add_epi64(fields.Fields(k), offset), _mm256_add_epi64(fields.Fields(k + 4), offset),
                   groups[k / Int448::kFields]);
      continue;
    }
#endif
    std::array<std::int64_t, kCompactBlock> values{};  // zero past a short block's end
    for (std::int64_t k = 0; k < size; ++k) values[static_cast<std::size_t>(k)] = fields.Field(k);
    PackBiasedFields(values.data(), static_cast<std::size_t>((size + Int448::kFields - 1) / Int448::kFields), groups);
  }
}

// The whole words of value i of g: kept, or rebuilt from its window (a replica whose
// own block is finite, where another replica's is not).
void WholeWords(const CompactGradient& g, std::int64_t i, std::int64_t* out) {
  if (g.IsDeep(i)) {
    std::copy_n(DeepWords(g, i), kExactWords, out);
    return;
  }
  std::fill_n(out, kExactWords, 0);
  ExactAddInt128(out, Window(g, i), BaseOf(g, i));
}

// The first `size` elements of `v`, grown to hold them where it is smaller. A
// workspace's buffers are never shrunk: a refinement round's few values would
// otherwise leave the next call to allocate and clear round 2's again (29 MB for a
// 16 MiB gradient's groups: the extraction stage of a 2-rank call took 3.5-3.7 ms
// with it, 1.7-2.1 without).
template <typename T, typename Allocator>
std::span<T> Grown(std::vector<T, Allocator>& v, std::int64_t size) {
  if (v.size() < static_cast<std::size_t>(size)) v.resize(static_cast<std::size_t>(size));
  return std::span<T>(v.data(), static_cast<std::size_t>(size));
}

// Each worker's `mine` (int64s) to every worker, concatenated in worker order, in
// two all-gathers of words: one count from each worker, then the words.
StatusOr<std::vector<std::int64_t>> GatherFromWorkers(const std::vector<std::int64_t>& mine,
                                                      const ExactSumCollectives::Scattered& scattered,
                                                      std::size_t local, CompactExactStats& stats) {
  const auto workers = static_cast<std::size_t>(scattered.workers);
  const auto worker = static_cast<std::size_t>(scattered.worker);
  // The words of every local replica's buffer, `mine` at slices[worker] of the first.
  auto gather = [&](std::span<const std::int64_t> words, const std::vector<ElementRange>& slices,
                    std::int64_t size) -> StatusOr<std::vector<std::int64_t>> {
    std::vector<std::vector<std::int64_t>> all(local, std::vector<std::int64_t>(static_cast<std::size_t>(size)));
    std::copy(words.begin(), words.end(), all[0].begin() + slices[worker].begin);
    std::vector<std::span<std::int64_t>> spans(all.begin(), all.end());
    DTLAB_RETURN_IF_ERROR(scattered.all_gather_words(spans, slices));
    stats.gathered_words += size;
    return std::move(all[0]);
  };
  std::vector<ElementRange> one;
  for (std::size_t w = 0; w < workers; ++w) one.push_back({static_cast<std::int64_t>(w), 1});
  const auto size = static_cast<std::int64_t>(mine.size());
  DTLAB_ASSIGN_OR_RETURN(const std::vector<std::int64_t> counts,
                         gather(std::span(&size, 1), one, static_cast<std::int64_t>(workers)));
  std::vector<ElementRange> slices;
  std::int64_t total = 0;
  for (const std::int64_t c : counts) {
    if (c < 0 || c > (std::int64_t{1} << 40) - total)
      return Status::Runtime("the compact all-reduce read a worker's undecided count of " + std::to_string(c) +
                             ": a collective broke its contract");
    slices.push_back({total, c});
    total += c;
  }
  if (total == 0) return std::vector<std::int64_t>{};
  return gather(mine, slices, total);
}

// (index, sum) pairs, sorted by index (an odd last word stays last).
void SortPairs(std::vector<std::int64_t>& pairs) {
  if (pairs.size() < 4) return;  // (memcpy takes no null pointer, which an empty vector may hold)
  std::vector<std::array<std::int64_t, 2>> sorted(pairs.size() / 2);
  std::memcpy(sorted.data(), pairs.data(), sorted.size() * sizeof(sorted[0]));
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a[0] < b[0]; });
  std::memcpy(pairs.data(), sorted.data(), sorted.size() * sizeof(sorted[0]));
}

// Round 2's fields for values [begin, end) of g (begin at a block), where every block
// is windowed, into out[0, end - begin), one to an int64 word (the scattered round's:
// unpacked, they need no packing). Where `out` is aligned to a cache line, whole
// blocks' fields are stored past the cache (non-temporal): another process reads
// them next, by MPI's single copy, and an ordinary store to a line that process's
// core read in the piece before waits for that core to give the line up (the
// extraction of a 2-rank call took 3 to 7 ms instead of 1.3 in many runs,
// docs/performance.md). Fenced before returning, so they are written before the
// collective sends them.
void FirstWindowFields(const CompactGradient& g, const int* block_lsb, int count_bits, std::int64_t begin,
                       std::int64_t end, std::int64_t* out) {
  assert(begin % kCompactBlock == 0);
  [[maybe_unused]] const bool stream = reinterpret_cast<std::uintptr_t>(out) % 64 == 0;
  for (std::int64_t first = begin; first < end; first += kCompactBlock) {
    const std::int64_t block = first / kCompactBlock, size = std::min(end - first, kCompactBlock);
    const BlockFields fields(g, block, block_lsb[block], count_bits);
    std::int64_t* at = out + (first - begin);
#if defined(__AVX512F__)
    if (fields.high_only() && size == kCompactBlock) {
      for (std::int64_t k = 0; k < kCompactBlock; k += 8) {
        auto* line = reinterpret_cast<__m512i*>(at + k);
        if (stream)
          _mm512_stream_si512(line, fields.Fields8(k));
        else
          _mm512_storeu_si512(line, fields.Fields8(k));
      }
      continue;
    }
#elif defined(__AVX2__)
    if (fields.high_only() && size == kCompactBlock) {
      for (std::int64_t k = 0; k < kCompactBlock; k += 4) {
        auto* half_line = reinterpret_cast<__m256i*>(at + k);
        if (stream)
          _mm256_stream_si256(half_line, fields.Fields(k));
        else
          _mm256_storeu_si256(half_line, fields.Fields(k));
      }
      continue;
    }
#endif
    for (std::int64_t k = 0; k < size; ++k) at[k] = fields.Field(k);
  }
#if defined(__AVX2__)
  _mm_sfence();
#endif
}

// The field sums of one block's values as round 2's decision reads them: `received`
// (the other workers' sums, or the other worker's fields where it sent them
// whole), plus the fields of `own` (this worker's, where they were left out of the
// sums) and of `other` (the other worker's, from its high words as they lie), each
// where present.
struct BlockSums {
  const std::int64_t* received = nullptr;
  std::optional<BlockFields> own, other;

  std::int64_t Sum(std::int64_t k) const {
    return (received != nullptr ? received[k] : 0) + (own ? own->Field(k) : 0) + (other ? other->Field(k) : 0);
  }
};

// DecideBlock's vectors: the received sums, plus the own fields where kOwn (the
// test made once a block, not once a vector).
template <bool kOwn>
[[gnu::always_inline]] inline void DecideInVectors(const BlockSums& sums, const WindowSumDecider& decider, float* out,
                                                   char* undecided) {
#if defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
  for (std::int64_t k = 0; k < kCompactBlock; k += 8) {
    __m512i s = _mm512_loadu_si512(sums.received + k);
    if constexpr (kOwn) s = _mm512_add_epi64(s, sums.own->Fields8(k));
    decider.Finish<8>(s, decider.Decided8(s, out + k), out + k, undecided + k);
  }
#elif defined(__AVX2__)
  for (std::int64_t k = 0; k < kCompactBlock; k += 4) {
    __m256i s = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sums.received + k));
    if constexpr (kOwn) s = _mm256_add_epi64(s, sums.own->Fields(k));
    decider.Finish<4>(s, static_cast<unsigned>(decider.Decided4(s, out + k)), out + k, undecided + k);
  }
#endif
}

// Decides the `size` values of a block whose window lsb is `lsb` from their sums:
// in registers, a vector at a time, where the block is whole, its sums were
// received and its own fields (if any) lie in the high words. (A block with
// another worker's high words is decided in vectors by DecideHighWordsBlock; it
// comes here only where it is short or its own fields are not in the high words.)
void DecideBlock(const BlockSums& sums, int lsb, std::int64_t size, int count_bits, float* out, char* undecided) {
  const WindowSumDecider decider(count_bits, lsb);
#if defined(__AVX2__)
  // (An own block of zeros adds nothing.)
  if (size == kCompactBlock && sums.received != nullptr && !sums.other && (!sums.own || sums.own->high_only()))
    return sums.own && !sums.own->zero() ? DecideInVectors<true>(sums, decider, out, undecided)
                                         : DecideInVectors<false>(sums, decider, out, undecided);
#endif
  std::array<std::int64_t, kCompactBlock> values;
  for (std::int64_t k = 0; k < size; ++k) values[static_cast<std::size_t>(k)] = sums.Sum(k);
  decider.DecideSums(values.data(), size, out, undecided);
}

// The decision's own high words, 8 blocks past value i: it waited on memory for
// them (the deciding stage of a 2-rank call took 2.69-2.79 ms without, 2.33-2.50
// with; docs/performance.md).
[[gnu::always_inline]] inline void PrefetchAhead(const CompactGradient& g, std::int64_t i) {
  if (i + 9 * kCompactBlock <= g.values)
    for (int line = 0; line < 4; ++line)
      _mm_prefetch(reinterpret_cast<const char*>(g.window_high.data() + i + 8 * kCompactBlock) + 64 * line,
                   _MM_HINT_T0);
}

#if defined(__AVX2__)
// The values of a block in mask `left`, one at a time (out of line: the common case
// leaves none).
[[gnu::noinline]] void DecideLeft(const BlockFields& own, const BlockFields& other, int lsb, int count_bits,
                                  std::uint32_t left, float* out, char* undecided) {
  const WindowSumDecider decider(count_bits, lsb);
  for (; left != 0; left &= left - 1) {
    const int k = std::countr_zero(left);
    undecided[k] = decider.Undecided(own.Field(k) + other.Field(k), out[k]);
  }
}

// DecideBlock for a whole block whose two parts are both fields in high words (an
// own block that is high_only, and another worker's from its high words), in
// vectors of eight (AVX-512) or four (AVX2): their
// bits from L up are added into q, and their sticky bits into n, with no field
// built (q and n are the sum's, as n <= 2 < 2^count_bits). The values the vectors leave
// are decided one at a time, from their sums: the same bits as DecideBlock.
[[gnu::always_inline]] inline void DecideHighWordsBlock(const BlockFields& own, const BlockFields& other, int lsb,
                                                        int count_bits, float* out, char* undecided) {
  const WindowSumDecider decider(count_bits, lsb);
  std::uint32_t decided = 0;
  // n = the two sticky bits' sum: f = n != 0, and t2 = 2(q + n) - f is t1 + 2 where n = 2.
#if defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
  for (int k = 0; k < kCompactBlock; k += 8) {
    const BlockFields::Parts8 a = own.PartsOf8(k), b = other.PartsOf8(k);
    const __m512i q = _mm512_add_epi64(a.bits, b.bits);
    const __m512i q2 = _mm512_add_epi64(q, q);
    const auto fraction = static_cast<__mmask8>(a.sticky | b.sticky);
    const __m512i t1 = _mm512_mask_add_epi64(q2, fraction, q2, _mm512_set1_epi64(1));
    const __m512i t2 = _mm512_mask_add_epi64(t1, a.sticky & b.sticky, t1, _mm512_set1_epi64(2));
    decided |= decider.DecidedEnds8(t1, t2, fraction, out + k) << k;
  }
#else
  for (int k = 0; k < kCompactBlock; k += 4) {
    const BlockFields::Parts4 a = own.PartsOf4(k), b = other.PartsOf4(k);
    const __m256i q = _mm256_add_epi64(a.bits, b.bits);
    const __m256i f = _mm256_or_si256(a.sticky, b.sticky);
    const __m256i t1 = _mm256_add_epi64(_mm256_add_epi64(q, q), f);
    const __m256i both = _mm256_and_si256(a.sticky, b.sticky);
    const __m256i t2 = _mm256_add_epi64(t1, _mm256_add_epi64(both, both));
    const __m256i no_fraction = _mm256_cmpeq_epi64(f, _mm256_setzero_si256());
    decided |= static_cast<std::uint32_t>(decider.DecidedEnds4(t1, t2, no_fraction, out + k)) << k;
  }
#endif
  std::memset(undecided, 0, kCompactBlock);
  if (decided != ~std::uint32_t{0}) [[unlikely]]
    DecideLeft(own, other, lsb, count_bits, ~decided, out, undecided);
}

// The high-words path's decision for values [begin, end) of this worker's slice
// (begin at a block; `other_high` and `headers` are the other worker's high words
// and headers from there on): DecideHighWordsBlock where both parts lie in high
// words, general(i) for the block at value i otherwise. A loop of its own, its
// pointers in registers: within the slice's loop, whose captures the compiler
// reloaded after every store to the flags, the deciding stage of a 16 MiB call took
// 2.03 ms, here 1.64 (docs/performance.md).
template <typename General>
void DecideHighWords(const CompactGradient& g, const std::int64_t* other_high, const std::int64_t* headers,
                     const int* block_lsb, int count_bits, std::int64_t begin, std::int64_t end, float* out,
                     char* undecided, General general) {
  for (std::int64_t i = begin; i < end; i += kCompactBlock) {
    PrefetchAhead(g, i);
    const std::int64_t block = i / kCompactBlock, header = headers[(i - begin) / kCompactBlock];
    const int lsb = block_lsb[block];
    if (end - i >= kCompactBlock && header != BlockFields::kSentAsFields) {
      const BlockFields own(g, block, lsb, count_bits);
      if (own.high_only()) {
        DecideHighWordsBlock(own, BlockFields(other_high + (i - begin), header, count_bits), lsb, count_bits, out + i,
                             undecided + i);
        continue;
      }
    }
    general(i);
  }
}
#endif

using Clock = std::chrono::steady_clock;

// The stages' clock: each Lap adds the time since the last to one of
// CompactExactStats::seconds.
class StageClock {
 public:
  void Lap(double& stage) {
    const Clock::time_point now = Clock::now();
    stage += std::chrono::duration<double>(now - last_).count();
    last_ = now;
  }

 private:
  Clock::time_point last_ = Clock::now();
};

// The undecided flags' positions in flags[0, size) (few: found by memchr, as a byte at
// a time was 7% of a 2-replica call), each as (offset + its position, sum(position)).
template <typename Sum>
void AppendUndecided(const char* flags, std::int64_t size, std::int64_t offset, Sum sum,
                     std::vector<std::int64_t>& left) {
  for (const char* at = flags; (at = static_cast<const char*>(std::memchr(at, 1, size - (at - flags)))); ++at) {
    left.push_back(offset + (at - flags));
    left.push_back(sum(at - flags));
  }
}

// Round 2's blocks, slice by slice: per piece and worker, the blocks of its slice
// of the piece and where their headers (ExchangeHeaders) lie. Worker w's headers
// are one run, piece after piece, after those of the workers before it.
struct PieceBlocks {
  struct Slice {
    std::int64_t first, end;  // blocks
    std::int64_t at;          // the first one's header
  };
  std::vector<Slice> slices;       // piece p's slice of worker w at p * workers + w
  std::vector<ElementRange> runs;  // per worker: its headers
};

PieceBlocks BlocksOfPieces(std::int64_t count, std::int64_t piece_values, std::int32_t workers) {
  PieceBlocks blocks;
  std::vector<std::int64_t> per_worker(static_cast<std::size_t>(workers), 0);
  for (std::int64_t piece = 0; piece < count; piece += piece_values) {
    const std::vector<ElementRange> slices = CompactScatterSlices(std::min(piece_values, count - piece), workers);
    for (std::size_t w = 0; w < slices.size(); ++w) {
      // A slice begins at a block (a grain), and an empty one has no blocks.
      const std::int64_t first = (piece + slices[w].begin) / kCompactBlock;
      const std::int64_t end = slices[w].count == 0
                                   ? first
                                   : (piece + slices[w].begin + slices[w].count + kCompactBlock - 1) / kCompactBlock;
      blocks.slices.push_back({first, end, per_worker[w]});
      per_worker[w] += end - first;
    }
  }
  std::int64_t total = 0;
  for (const std::int64_t n : per_worker) {
    blocks.runs.push_back({total, n});
    total += n;
  }
  for (std::size_t k = 0; k < blocks.slices.size(); ++k)
    blocks.slices[k].at += blocks.runs[k % static_cast<std::size_t>(workers)].begin;
  return blocks;
}

// Where two workers hold one replica each (Scattered::high_words): what the other
// worker needs to build this worker's fields of its slices from the high words as
// they lie. Each block's BlockFields::Header, and the fields of the blocks that are
// kSentAsFields, each reduce-scattered across the two workers once a call. Returns
// this worker's received headers (blocks.runs[worker]) and fields, with `sent_before`
// (per received header: the received fields' blocks before it).
struct ReceivedHeaders {
  std::span<const std::int64_t> headers;
  std::vector<std::int32_t> sent_before;
  std::span<const std::int64_t> fields;
};

StatusOr<ReceivedHeaders> ExchangeHeaders(const CompactGradient& g, const PieceBlocks& blocks, const int* block_lsb,
                                          int count_bits, const ExactSumCollectives::Scattered& scattered,
                                          CompactExactWorkspace& workspace, CompactExactStats& stats,
                                          StageClock& clock) {
  const auto worker = static_cast<std::size_t>(scattered.worker), other = 1 - worker;
  const std::int64_t total = blocks.runs[1].begin + blocks.runs[1].count;
  const std::span<std::int64_t> headers = Grown(workspace.headers, total);
  std::vector<std::int64_t>& fields = workspace.header_fields;
  fields.clear();
  // The other worker's blocks, piece by piece, in order.
  std::int64_t sent_blocks = 0;
  const std::int16_t* bound = g.bound.data();
  const std::uint32_t *deep = g.deep.data(), *low_set = g.low_set.data();
  for (std::size_t k = other; k < blocks.slices.size(); k += 2) {
    const PieceBlocks::Slice slice = blocks.slices[k];
    std::int64_t* at = headers.data() + slice.at;  // block slice.first's
    bool some_sent = false;
    for (std::int64_t block = slice.first; block < slice.end; ++block) {
      const auto b = static_cast<std::size_t>(block);
      at[block - slice.first] = BlockFields::Header(bound[b], deep[b], low_set[b], block_lsb[block]);
      some_sent |= at[block - slice.first] == BlockFields::kSentAsFields;
    }
    for (std::int64_t block = slice.first; some_sent && block < slice.end; ++block) {
      if (at[block - slice.first] != BlockFields::kSentAsFields) continue;
      ++sent_blocks;
      const BlockFields f(g, block, block_lsb[block], count_bits);
      for (std::int64_t k = 0; k < kCompactBlock; ++k)
        fields.push_back(block * kCompactBlock + k < g.values ? f.Field(k) : 0);
    }
  }
  clock.Lap(stats.seconds.extraction);
  const std::vector<std::span<std::int64_t>> header_spans = {headers};
  DTLAB_RETURN_IF_ERROR(scattered.reduce_scatter(header_spans, blocks.runs, OwnSlice::kLeftOut));
  ReceivedHeaders received;
  const ElementRange mine = blocks.runs[worker];
  received.headers = headers.subspan(static_cast<std::size_t>(mine.begin), static_cast<std::size_t>(mine.count));
  // (Counted first: nearly always none, and then no prefix is made.)
  const auto before = static_cast<std::int32_t>(
      std::count(received.headers.begin(), received.headers.end(), BlockFields::kSentAsFields));
  if (before > 0) {
    received.sent_before.resize(static_cast<std::size_t>(mine.count));
    std::int32_t sent = 0;
    for (std::size_t j = 0; j < received.headers.size(); ++j) {
      received.sent_before[j] = sent;
      sent += received.headers[j] == BlockFields::kSentAsFields;
    }
  }
  stats.scattered_words += total;
  // The blocks sent as fields, each way: worker w's run holds those of its slices.
  std::array<ElementRange, 2> runs;
  runs[worker] = {0, std::int64_t{before} * kCompactBlock};
  runs[other] = {0, sent_blocks * kCompactBlock};
  runs[1].begin = runs[0].count;
  if (runs[0].count + runs[1].count == 0) return received;
  const std::span<std::int64_t> all = Grown(workspace.header_fields_sum, runs[0].count + runs[1].count);
  std::copy(fields.begin(), fields.end(), all.begin() + runs[other].begin);
  const std::vector<std::span<std::int64_t>> field_spans = {all};
  DTLAB_RETURN_IF_ERROR(scattered.reduce_scatter(field_spans, runs, OwnSlice::kLeftOut));
  received.fields =
      all.subspan(static_cast<std::size_t>(runs[worker].begin), static_cast<std::size_t>(runs[worker].count));
  stats.scattered_words += runs[0].count + runs[1].count;
  return received;
}

// Round 2 between workers (ExactSumCollectives::Scattered), where every block is
// windowed: in pieces of scattered.piece values, each worker's fields of the
// piece reach the worker whose slice they fall in, this worker decides its slice of
// the piece into outputs[0], and the decided floats are all-gathered into every
// replica's outputs. Piece by piece, what one stage writes, the next reads from the
// cache. The fields travel one of two ways:
//  - Two workers of one replica each, with Scattered::high_words: each sends its
//    encoded high words of the other's slice as they lie (nothing extracted), once a
//    call the blocks' headers (ExchangeHeaders), and the receiver builds both
//    workers' fields as it decides.
//  - Otherwise each worker extracts its replicas' fields (one to an int64 word) and
//    they are reduce-scattered. With one replica here (OwnSlice::kLeftOut), its own
//    slice is not extracted: its fields are added to the other workers' sum as they
//    are decided.
// Either way the same integers are summed (the sums of fewer replicas fit their
// fields too). Returns this worker's undecided values as (index, field sum) pairs,
// ascending.
StatusOr<std::vector<std::int64_t>> ScatteredWindowRound(std::span<const CompactGradient* const> inputs,
                                                         std::span<const std::span<float>> outputs,
                                                         const int* block_lsb, int count_bits,
                                                         const ExactSumCollectives::Scattered& scattered,
                                                         CompactExactWorkspace& workspace, CompactExactStats& stats,
                                                         StageClock& clock) {
  const std::int64_t piece_values = scattered.piece;
  static_assert(kCompactScatterGrain % kGrain == 0 && kCompactScatterPiece % kCompactScatterGrain == 0);
  if (piece_values <= 0 || piece_values % kCompactScatterGrain != 0)
    return Status::InvalidArgument("the compact all-reduce's pieces must be a positive multiple of " +
                                   std::to_string(kCompactScatterGrain) + " values, not " +
                                   std::to_string(piece_values));
  const auto local = inputs.size();
  const auto count = static_cast<std::int64_t>(outputs[0].size());
  const bool own_left_out = local == 1;
  const bool high_words = own_left_out && scattered.workers == 2 && scattered.high_words != nullptr;
  const OwnSlice own = own_left_out ? OwnSlice::kLeftOut : OwnSlice::kSummed;
  const auto worker = static_cast<std::size_t>(scattered.worker);
  const CompactGradient& g = *inputs[0];
  workspace.fields.resize(local);
  std::vector<std::span<std::int64_t>> fields(local);
  for (std::size_t r = 0; r < local; ++r) fields[r] = Grown(workspace.fields[r], std::min(count, piece_values));
  const std::span<char> undecided = Grown(workspace.undecided, count);  // every flag read below is written first
  PieceBlocks blocks;
  ReceivedHeaders received;
  if (high_words) {
    blocks = BlocksOfPieces(count, piece_values, 2);
    DTLAB_ASSIGN_OR_RETURN(received,
                           ExchangeHeaders(g, blocks, block_lsb, count_bits, scattered, workspace, stats, clock));
    clock.Lap(stats.seconds.sum);
  }
  std::vector<std::int64_t> left;
  std::vector<std::span<std::int64_t>> piece_fields(local);
  std::vector<std::span<float>> piece_outputs(local);
  for (std::int64_t piece = 0; piece < count; piece += piece_values) {
    const std::int64_t size = std::min(piece_values, count - piece);
    const std::vector<ElementRange> slices = CompactScatterSlices(size, scattered.workers);
    const ElementRange mine = slices[worker];
    for (std::size_t r = 0; r < local; ++r) {
      piece_fields[r] = fields[r].first(static_cast<std::size_t>(size));
      piece_outputs[r] = outputs[r].subspan(static_cast<std::size_t>(piece), static_cast<std::size_t>(size));
    }
    if (high_words) {
      DTLAB_RETURN_IF_ERROR(scattered.high_words(
          std::span<const std::int64_t>(reinterpret_cast<const std::int64_t*>(g.window_high.data()) + piece,
                                        static_cast<std::size_t>(size)),
          piece_fields[0], slices));
      clock.Lap(stats.seconds.sum);
    } else {
      // Extraction: kGrain values a task (slices are multiples of it).
      tbb::parallel_for(
          std::int64_t{0}, static_cast<std::int64_t>(local) * ((size + kGrain - 1) / kGrain), [&](std::int64_t task) {
            const auto tasks = (size + kGrain - 1) / kGrain;
            const auto r = static_cast<std::size_t>(task / tasks);
            const std::int64_t begin = task % tasks * kGrain, end = std::min(size, begin + kGrain);
            if (own_left_out && begin >= mine.begin && begin < mine.begin + mine.count) return;
            FirstWindowFields(*inputs[r], block_lsb, count_bits, piece + begin, piece + end, fields[r].data() + begin);
          });
      clock.Lap(stats.seconds.extraction);
      DTLAB_RETURN_IF_ERROR(scattered.reduce_scatter(piece_fields, slices, own));
      clock.Lap(stats.seconds.sum);
    }
    // This worker's slice, a block at a time: its sums, decided with the block's
    // window lsb.
    const std::int64_t* sums = fields[0].data();
    const std::int64_t piece_index = piece / piece_values;
    auto block_sums = [&](std::int64_t i) {  // value i begins a block of this worker's slice
      const std::int64_t block = i / kCompactBlock;
      BlockSums b;
      if (own_left_out) b.own.emplace(g, block, block_lsb[block], count_bits);
      if (!high_words) {
        b.received = sums + (i - piece);
        return b;
      }
      const PieceBlocks::Slice slice = blocks.slices[static_cast<std::size_t>(2 * piece_index) + worker];
      const auto j = static_cast<std::size_t>(slice.at - blocks.runs[worker].begin + block - slice.first);
      if (const std::int64_t header = received.headers[j]; header != BlockFields::kSentAsFields)
        b.other.emplace(sums + (i - piece), header, count_bits);
      else
        b.received = received.fields.data() + std::int64_t{received.sent_before[j]} * kCompactBlock;
      return b;
    };
    tbb::parallel_for(std::int64_t{0}, (mine.count + kGrain - 1) / kGrain, [&](std::int64_t task) {
      const std::int64_t begin = mine.begin + task * kGrain, end = std::min(mine.begin + mine.count, begin + kGrain);
#if defined(__AVX2__)
      if (high_words) {
        const PieceBlocks::Slice slice = blocks.slices[static_cast<std::size_t>(2 * piece_index) + worker];
        const std::int64_t first = slice.at - blocks.runs[worker].begin + (piece + begin) / kCompactBlock - slice.first;
        return DecideHighWords(g, sums + begin, received.headers.data() + first, block_lsb, count_bits, piece + begin,
                               piece + end, outputs[0].data(), undecided.data(), [&](std::int64_t i) {
                                 DecideBlock(block_sums(i), block_lsb[i / kCompactBlock],
                                             std::min(kCompactBlock, piece + end - i), count_bits,
                                             outputs[0].data() + i, undecided.data() + i);
                               });
      }
#endif
      for (std::int64_t k = begin; k < end; k += kCompactBlock) {
        const std::int64_t i = piece + k;
        if (own_left_out) PrefetchAhead(g, i);
        DecideBlock(block_sums(i), block_lsb[i / kCompactBlock], std::min(kCompactBlock, end - k), count_bits,
                    outputs[0].data() + i, undecided.data() + i);
      }
    });
    AppendUndecided(
        undecided.data() + piece + mine.begin, mine.count, piece + mine.begin,
        [&](std::int64_t k) {  // (undecided values are rare: their block's sums, again)
          const std::int64_t i = piece + mine.begin + k;
          return block_sums(i / kCompactBlock * kCompactBlock).Sum(i % kCompactBlock);
        },
        left);
    clock.Lap(stats.seconds.decision);
    DTLAB_RETURN_IF_ERROR(scattered.all_gather(piece_outputs, slices));
    clock.Lap(stats.seconds.gather);
  }
  stats.scattered_words += count;
  stats.gathered_floats += count;
  return left;
}

}  // namespace

void compact_internal::DecideWindowSums(std::span<const std::int64_t> sums, int count_bits, int lsb,
                                        std::span<float> out, std::span<char> undecided) {
  assert(out.size() == sums.size() && undecided.size() == sums.size() && lsb >= 0);
  WindowSumDecider(count_bits, lsb)
      .DecideSums(sums.data(), static_cast<std::int64_t>(sums.size()), out.data(), undecided.data());
}

std::vector<std::int64_t> compact_internal::HighWordFields(std::span<const std::int64_t> high, std::int64_t header,
                                                           int count_bits) {
  assert(high.size() == kCompactBlock);
  const BlockFields fields(high.data(), header, count_bits);
  std::vector<std::int64_t> out(kCompactBlock);
  for (std::int64_t k = 0; k < kCompactBlock; ++k) out[static_cast<std::size_t>(k)] = fields.Field(k);
  return out;
}

void compact_internal::DecideHighWordBlocks(std::span<const std::int64_t> own, std::int64_t own_header,
                                            std::span<const std::int64_t> other, std::int64_t other_header,
                                            int count_bits, int lsb, std::span<float> out, std::span<char> undecided) {
  assert(own.size() == kCompactBlock && other.size() == kCompactBlock && out.size() == kCompactBlock &&
         undecided.size() == kCompactBlock && count_bits >= 2);
  const BlockFields a(own.data(), own_header, count_bits), b(other.data(), other_header, count_bits);
#if defined(__AVX2__)
  DecideHighWordsBlock(a, b, lsb, count_bits, out.data(), undecided.data());
#else
  BlockSums sums;
  sums.own.emplace(a);
  sums.other.emplace(b);
  DecideBlock(sums, lsb, kCompactBlock, count_bits, out.data(), undecided.data());
#endif
}

// For s, a float sum (in any order) of `replicas` non-negative floats: a `top` with
// their exact sum s' < 2^top. The float sum of N such terms is within a factor 1 +
// (N - 1) u / (1 - 2 (N - 1) u) <= 1 + N 2^-23 of the exact one (u = 2^-24, N <
// 2^20), so s' < 2^(ilogb(s) + 1) wherever s (1 + N 2^-23) is (the double product's
// rounding is covered by one more N), and s' < 2^(ilogb(s) + 2) always.
int compact_internal::ScaleSumTop(float s, std::int32_t replicas) {
  return ScaleSumTopBelow(s, ScaleSumSignificands(replicas));
}

StatusOr<ExactAllReduce> ParseExactAllReduce(std::string_view name) {
  return ParseEnumName(name, kKinds, "exact all-reduce");
}

std::string_view ExactAllReduceName(ExactAllReduce kind) { return EnumName(kind, kKinds); }

std::vector<ElementRange> CompactScatterSlices(std::int64_t values, std::int32_t workers) {
  const std::int64_t grains = (values + kCompactScatterGrain - 1) / kCompactScatterGrain;
  std::vector<ElementRange> slices;
  for (std::int32_t w = 0; w < workers; ++w) {
    const ElementRange g = Chunk(grains, workers, w);
    const std::int64_t begin = std::min(values, g.begin * kCompactScatterGrain);
    slices.push_back({begin, std::min(values, (g.begin + g.count) * kCompactScatterGrain) - begin});
  }
  return slices;
}

double CompactExactStats::BytesPerValue() const {
  if (values == 0) return 0.0;
  // A reduce-scatter, or an all-gather, moves half an all-reduce's bytes.
  return (static_cast<double>(scale_floats * 4 + words * 8) +
          static_cast<double>(scattered_words * 8 + gathered_floats * 4 + gathered_words * 8) / 2.0) /
         static_cast<double>(values);
}

void CompactGradient::Encode(std::span<std::int64_t> words) {
  assert(words.size() % kExactWords == 0);
  values = static_cast<std::int64_t>(words.size() / kExactWords);
  const std::int64_t blocks = (values + kCompactBlock - 1) / kCompactBlock;
  bound.assign(static_cast<std::size_t>(blocks), 0);
  deep.assign(static_cast<std::size_t>(blocks), 0);
  low_set.assign(static_cast<std::size_t>(blocks), 0);
  window_low.resize(static_cast<std::size_t>(values));
  window_high.resize(static_cast<std::size_t>(values));
  tbb::parallel_for(std::int64_t{0}, blocks, [&](std::int64_t block) {
    const std::int64_t begin = block * kCompactBlock, end = std::min(values, begin + kCompactBlock);
    std::array<std::int16_t, kCompactBlock> lsb;
    int top = 0;
    bool whole = false;
    for (std::int64_t i = begin; i < end; ++i) {
      std::int64_t* w = words.data() + i * kExactWords;
      ExactNormalize(w);
      whole |= w[kExactDigitWords] != 0;
      const Shape shape = ShapeOf(w);
      top = std::max(top, shape.bound);
      lsb[static_cast<std::size_t>(i - begin)] = shape.lsb;
    }
    whole |= top > kMaxScaleBound;
    bound[static_cast<std::size_t>(block)] = static_cast<std::int16_t>(whole ? kWholeBlock : top);
    const int base = Base(top);
    std::uint32_t mask = 0, low_mask = 0;
    for (std::int64_t i = begin; i < end; ++i) {
      const std::int64_t* w = words.data() + i * kExactWords;
      const auto j = static_cast<std::size_t>(i);
      if (whole || lsb[static_cast<std::size_t>(i - begin)] < base) {
        mask |= std::uint32_t{1} << (i - begin);
        window_low[j] = window_high[j] = 0;
      } else {
        window_low[j] = Bits64(w, base);
        window_high[j] = Bits64(w, base + 64);
        low_mask |= std::uint32_t{window_low[j] != 0} << (i - begin);
      }
    }
    deep[static_cast<std::size_t>(block)] = mask;
    low_set[static_cast<std::size_t>(block)] = low_mask;
  });
  deep_index.clear();
  deep_words.clear();
  for (std::int64_t block = 0; block < blocks; ++block)
    for (std::uint32_t mask = deep[static_cast<std::size_t>(block)]; mask != 0; mask &= mask - 1) {
      const std::int64_t i = block * kCompactBlock + std::countr_zero(mask);
      deep_index.push_back(i);
      deep_words.insert(deep_words.end(), words.begin() + i * kExactWords, words.begin() + (i + 1) * kExactWords);
    }
}

void CompactGradient::AddTo(std::span<std::int64_t> words) const {
  assert(static_cast<std::int64_t>(words.size()) == values * kExactWords);
  tbb::parallel_for(std::int64_t{0}, values, [&](std::int64_t i) {
    std::int64_t* w = words.data() + i * kExactWords;
    if (IsDeep(i))
      ExactMerge(w, DeepWords(*this, i));
    else
      ExactAddInt128(w, Window(*this, i), BaseOf(*this, i));
  });
}

std::int64_t CompactGradient::bytes() const {
  return static_cast<std::int64_t>(bound.size() * sizeof(std::int16_t) +
                                   (deep.size() + low_set.size()) * sizeof(std::uint32_t) +
                                   (window_low.size() + window_high.size()) * sizeof(std::uint64_t) +
                                   deep_index.size() * sizeof(std::int64_t) + deep_words.size() * sizeof(std::int64_t));
}

StatusOr<CompactExactStats> CompactExactAllReduce(std::span<const std::span<std::int64_t>> inputs,
                                                  std::span<const std::span<float>> outputs, std::int32_t replicas,
                                                  const ExactSumCollectives& collectives,
                                                  CompactExactWorkspace* workspace) {
  CompactExactWorkspace local_workspace;
  if (workspace == nullptr) workspace = &local_workspace;
  std::vector<CompactGradient>& encoded = workspace->encoded;
  encoded.resize(inputs.size());
  tbb::parallel_for(std::size_t{0}, inputs.size(), [&](std::size_t r) { encoded[r].Encode(inputs[r]); });
  std::vector<const CompactGradient*> pointers;
  for (const CompactGradient& g : encoded) pointers.push_back(&g);
  return CompactExactAllReduce(pointers, outputs, replicas, collectives, workspace);
}

StatusOr<CompactExactStats> CompactExactAllReduce(std::span<const CompactGradient* const> inputs,
                                                  std::span<const std::span<float>> outputs, std::int32_t replicas,
                                                  const ExactSumCollectives& collectives,
                                                  CompactExactWorkspace* workspace) {
  CompactExactWorkspace local_workspace;
  if (workspace == nullptr) workspace = &local_workspace;
  assert(inputs.size() == outputs.size() && !inputs.empty() && replicas >= 1 && replicas < (1 << 20));
  const auto local = inputs.size();
  const auto count = static_cast<std::int64_t>(outputs[0].size());
  assert(inputs[0]->values == count);
  const std::int64_t blocks = (count + kCompactBlock - 1) / kCompactBlock;
  // b bits hold K <= N; c = ceil(log2 N) bits of headroom for the sum of N quotients:
  // a refinement window carries `step` bits of each value, and its field sum stays
  // below 2^(kFieldTop + 1) <= 2^55.
  const int count_bits = std::bit_width(static_cast<std::uint32_t>(replicas));
  const int headroom = std::bit_width(static_cast<std::uint32_t>(replicas - 1));
  const int step = kFieldTop - headroom - count_bits;
  const Int448 bias = SumBias(replicas);  // the window rounds' groups are packed biased
  CompactExactStats stats;
  stats.values = count;
  const Clock::time_point call_start = Clock::now();
  StageClock clock;
  auto lap = [&clock](double& stage) { clock.Lap(stage); };

  // Round 1: each block's scale.
  std::vector<std::vector<float>>& scales = workspace->scales;
  scales.resize(local);
  for (std::vector<float>& s : scales) s.resize(static_cast<std::size_t>(blocks));
  constexpr float kInfinity = std::numeric_limits<float>::infinity();
  tbb::parallel_for(std::size_t{0}, local, [&](std::size_t r) {
    // A loop over plain arrays, with no branch (a task per block, and its index
    // divided into replica and block, took 0.3 ms of a 16 MiB call).
    tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, blocks, kGrain), [&](const auto& range) {
      const std::int16_t* bound = inputs[r]->bound.data();
      float* out = scales[r].data();
      for (std::int64_t block = range.begin(); block != range.end(); ++block) {
        const int b = bound[block];
        // 2^e as a float, e in [-149, 127], from its bits (subnormal below -126):
        // both forms with their shifts in range, then one chosen.
        const int e = std::max(b, kMinScaleBound) - kScaleBias;
        const std::uint32_t normal = static_cast<std::uint32_t>(std::max(e + 127, 0)) << 23;
        const std::uint32_t subnormal = std::uint32_t{1} << std::clamp(e + 149, 0, 31);
        const std::uint32_t power = e >= -126 ? normal : subnormal;
        out[block] = std::bit_cast<float>(b == CompactGradient::kWholeBlock ? std::bit_cast<std::uint32_t>(kInfinity)
                                          : b == 0                          ? 0u
                                                                            : power);
      }
    });
  });
  {
    std::vector<std::span<float>> spans(scales.begin(), scales.end());
    DTLAB_RETURN_IF_ERROR(collectives.sum_floats(spans));
    DTLAB_RETURN_IF_ERROR(SameOnEveryReplica<float>(spans, "block scales"));
  }
  lap(stats.seconds.scales);
  stats.scale_floats = replicas > 1 ? blocks : 0;

  // The windows, from the scales every replica read: a zero block sends zero words, a
  // block with a non-finite or huge term whole accumulators.
  const std::vector<float>& scale = scales[0];
  constexpr int kWholeLsb = -1;
  std::vector<int>& block_lsb = workspace->block_lsb;  // the window's lsb, or kWholeLsb
  block_lsb.resize(static_cast<std::size_t>(blocks));
  // Each replica's |V| < 2^bound, so its quotient is at most 2^(bound - L) in
  // magnitude, or 1; the N quotients sum to at most s' 2^(kScaleBias - L) + N, with
  // s' the exact sum of the scales, below 2^top. So |Q| 2^b < 2^54 + N 2^b, and
  // |Q 2^b + K| < 2^55: the field sum fits its 56 bits. The sum of the scales, rather
  // than the largest one times N, saves log2(N) bits where the replicas are unalike.
  // A block zero on every replica gets 0: its words will be zero. They are sent all
  // the same, so that this round's size depends on the value count alone (the cost
  // model prices it before the step runs). In a loop with no branch; the blocks with
  // a non-finite scale are found after it, where there are some.
  // (The counts in 32 bits, and the scales' tests on their bits, or the compiler
  // makes no vectors of it; so a run of at most 2^31 blocks at a time.)
  std::int64_t zero_blocks = 0;
  bool some_whole = false;
  const std::int32_t significands = ScaleSumSignificands(replicas);
  for (std::int64_t run = 0; run < blocks; run += std::int64_t{1} << 31) {
    std::uint32_t zeros = 0, non_finite = 0;
    for (std::int64_t block = run; block < std::min(blocks, run + (std::int64_t{1} << 31)); ++block) {
      const float s = scale[static_cast<std::size_t>(block)];
      const std::uint32_t magnitude = std::bit_cast<std::uint32_t>(s) & 0x7fffffff;
      zeros += magnitude == 0;
      non_finite |= magnitude >= 0x7f800000;
      const int window = std::max(0, ScaleSumTopBelow(s, significands) + kScaleBias + count_bits - kFieldTop);
      block_lsb[static_cast<std::size_t>(block)] = magnitude == 0 ? 0 : window;
    }
    zero_blocks += zeros;
    some_whole |= non_finite != 0;
  }
  const bool last_zero = blocks > 0 && scale[static_cast<std::size_t>(blocks - 1)] == 0.0f;
  stats.zero_values = zero_blocks * kCompactBlock - (last_zero ? blocks * kCompactBlock - count : 0);
  std::vector<std::int64_t> whole;  // value indices sent whole
  for (std::int64_t block = 0; some_whole && block < blocks; ++block)
    if (!std::isfinite(scale[static_cast<std::size_t>(block)])) {
      block_lsb[static_cast<std::size_t>(block)] = kWholeLsb;
      for (std::int64_t i = block * kCompactBlock; i < std::min(count, (block + 1) * kCompactBlock); ++i)
        whole.push_back(i);
    }
  stats.full_values = static_cast<std::int64_t>(whole.size());
  // The values the first window round carries: all but the whole ones, in order (an
  // index list only where some are whole).
  std::vector<std::int64_t> windowed;
  if (!whole.empty())
    for (std::int64_t i = 0; i < count; ++i)
      if (block_lsb[static_cast<std::size_t>(i / kCompactBlock)] != kWholeLsb) windowed.push_back(i);
  const std::int64_t windowed_count = count - stats.full_values;
  lap(stats.seconds.windows);

  // Round 2 and the refinements: one 56-bit field per windowed value, eight to an
  // Int448; in round 2 the whole values' words follow in a collective of their own.
  std::vector<Pending> pending;
  std::optional<std::vector<std::int64_t>> refined;  // after a scattered round 2: the values decided later
  std::vector<HugePageVector<Int448>>& buffers = workspace->groups;
  std::vector<std::vector<std::int64_t>>& whole_words = workspace->words;
  buffers.resize(local);
  whole_words.resize(local);
  for (bool first = true; first || !pending.empty(); first = false) {
    const std::int64_t sent = first ? windowed_count : static_cast<std::int64_t>(pending.size());
    const std::int64_t groups = (sent + Int448::kFields - 1) / Int448::kFields;
    const std::int64_t whole_size = first ? stats.full_values * kExactWords : 0;
    if (sent + whole_size == 0) break;
    stats.sent.push_back(sent);
    auto value_index = [&](std::int64_t k) {
      if (!first) return pending[static_cast<std::size_t>(k)].index;
      return windowed.empty() ? k : windowed[static_cast<std::size_t>(k)];
    };
    // The window of value i, sent k-th this round: [its lsb, the previous round's lsb).
    auto window_lsb = [&](std::int64_t k, std::int64_t i) {
      return first ? block_lsb[static_cast<std::size_t>(i / kCompactBlock)]
                   : std::max(0, pending[static_cast<std::size_t>(k)].lsb - step);
    };
    // Between workers, round 2's sums are reduce-scattered, each worker deciding its
    // slice, and the floats all-gathered (ScatteredWindowRound); the undecided values
    // then go to every worker.
    const ExactSumCollectives::Scattered& scattered = collectives.scattered;
    const bool scatter = first && windowed.empty() && scattered.workers > 1 &&
                         workspace->undecided_fraction <= CompactExactWorkspace::kMaxScatteredUndecided;
    std::vector<std::int64_t> left;  // the undecided values, as (k, its field sum) pairs
    if (scatter) {
      DTLAB_ASSIGN_OR_RETURN(left, ScatteredWindowRound(inputs, outputs, block_lsb.data(), count_bits, scattered,
                                                        *workspace, stats, clock));
      DTLAB_ASSIGN_OR_RETURN(left, GatherFromWorkers(left, scattered, local, stats));
      SortPairs(left);  // in worker order, each worker's ascending: the pieces interleave them
      lap(stats.seconds.gather);
    } else {
      stats.words += replicas > 1 ? groups * Int448::kLimbs + whole_size : 0;
      std::vector<std::span<Int448>> spans(local);
      std::vector<std::span<std::int64_t>> word_spans(local);
      tbb::parallel_for(std::int64_t{0}, static_cast<std::int64_t>(local), [&](std::int64_t r64) {
        const auto r = static_cast<std::size_t>(r64);
        spans[r] = Grown(buffers[r], groups);  // every group is written below
        tbb::parallel_for(std::int64_t{0}, (sent + kGrain - 1) / kGrain, [&](std::int64_t chunk) {
          const std::int64_t chunk_begin = chunk * kGrain, chunk_end = std::min(sent, (chunk + 1) * kGrain);
          Int448* packed = spans[r].data() + chunk_begin / Int448::kFields;
          if (first && windowed.empty()) {  // the common case: packed a block at a time
            FirstWindowGroups(*inputs[r], block_lsb.data(), count_bits, chunk_begin, chunk_end, packed);
            return;
          }
          // The chunk's fields, then packed (kGrain is a multiple of eight; the last
          // group's missing fields are zero).
          std::array<std::int64_t, kGrain> fields;
          const std::int64_t chunk_groups = (chunk_end - chunk_begin + Int448::kFields - 1) / Int448::kFields;
          std::fill(fields.begin() + (chunk_end - chunk_begin), fields.begin() + chunk_groups * Int448::kFields, 0);
          for (std::int64_t k = chunk_begin; k < chunk_end; ++k) {
            const std::int64_t i = value_index(k);
            const int lsb = window_lsb(k, i);
            std::uint64_t bits = BitsAt(*inputs[r], i, lsb);
            if (!first) {  // [lsb, top): non-negative
              const int top = pending[static_cast<std::size_t>(k)].lsb;
              bits &= (std::uint64_t{1} << (top - lsb)) - 1;
            }
            fields[static_cast<std::size_t>(k - chunk_begin)] =
                static_cast<std::int64_t>(bits << count_bits) + HasBitsBelow(*inputs[r], i, lsb);
          }
          // Biased: the reader takes off the replicas' H (SumBias).
          PackBiasedFields(fields.data(), static_cast<std::size_t>(chunk_groups), packed);
        });
        if (whole_size > 0) {
          word_spans[r] = Grown(whole_words[r], whole_size);
          for (std::size_t w = 0; w < whole.size(); ++w)
            WholeWords(*inputs[r], whole[w], whole_words[r].data() + w * kExactWords);
        }
      });
      lap(stats.seconds.extraction);
      if (groups > 0) {
        DTLAB_RETURN_IF_ERROR(collectives.sum_groups(spans));
        DTLAB_RETURN_IF_ERROR(SameOnEveryReplica<Int448>(spans, "window sums"));
      }
      std::span<float> out = outputs[0];
      if (whole_size > 0) {
        DTLAB_RETURN_IF_ERROR(collectives.sum_words(word_spans));
        DTLAB_RETURN_IF_ERROR(SameOnEveryReplica<std::int64_t>(word_spans, "whole values' sums"));
        for (std::size_t w = 0; w < whole.size(); ++w)
          out[static_cast<std::size_t>(whole[w])] = ExactToFloat(whole_words[0].data() + w * kExactWords);
      }
      lap(stats.seconds.sum);

      // Decide from the sums, once: every replica read the same ones.
      const HugePageVector<Int448>& sums = buffers[0];
      const std::span<char> undecided = Grown(workspace->undecided, sent);  // every flag read below is written first
      const std::int64_t count_mask = (std::int64_t{1} << count_bits) - 1;
      tbb::parallel_for(std::int64_t{0}, (sent + kGrain - 1) / kGrain, [&](std::int64_t chunk) {
        const std::int64_t chunk_begin = chunk * kGrain, chunk_end = std::min(sent, (chunk + 1) * kGrain);
        if (first && windowed.empty()) {  // the common case, in a loop over plain arrays
          // A block at a time (chunks start at a block): its sums unpacked (eight at a
          // time, in registers, where the build has AVX-512), then decided with one
          // window lsb.
          for (std::int64_t first_value = chunk_begin; first_value < chunk_end; first_value += kCompactBlock) {
            const auto size = static_cast<std::size_t>(std::min(kCompactBlock, chunk_end - first_value));
            const auto j = static_cast<std::size_t>(first_value);
            alignas(64) std::array<std::int64_t, kCompactBlock> block_sums;
            std::size_t g = 0;
#if defined(__AVX512F__)
            const __m512i bias_limbs = LimbsVector(bias);
            for (; size == kCompactBlock && g < kCompactBlock / Int448::kFields; ++g)
              _mm512_store_si512(block_sums.data() + g * Int448::kFields,
                                 UnpackFieldsVector(sums[j / Int448::kFields + g], bias_limbs));
#endif
            for (; g * Int448::kFields < size; ++g)
              UnpackFields(sums[j / Int448::kFields + g], block_sums.data() + g * Int448::kFields, bias);
            compact_internal::DecideWindowSums(std::span<const std::int64_t>(block_sums.data(), size), count_bits,
                                               block_lsb[j / kCompactBlock], out.subspan(j, size),
                                               undecided.subspan(j, size));
          }
          return;
        }
        std::array<std::int64_t, kGrain> fields;  // the chunk's field sums
        for (std::int64_t g = 0; g * Int448::kFields < chunk_end - chunk_begin; ++g)
          UnpackFields(sums[static_cast<std::size_t>(chunk_begin / Int448::kFields + g)],
                       fields.data() + g * Int448::kFields, bias);
        auto sum = [&](std::int64_t k) { return fields[static_cast<std::size_t>(k - chunk_begin)]; };
        for (std::int64_t k = chunk_begin; k < chunk_end; ++k) {
          const auto j = static_cast<std::size_t>(k);
          const std::int64_t i = value_index(k);
          float value;
          undecided[j] = !Decide(sum(k) >> count_bits, sum(k) & count_mask, window_lsb(k, i),
                                 first ? nullptr : &pending[j].known, value);
          if (!undecided[j]) out[static_cast<std::size_t>(i)] = value;
        }
      });
      AppendUndecided(
          undecided.data(), sent, 0,
          [&](std::int64_t k) {
            std::array<std::int64_t, Int448::kFields> group;
            UnpackFields(sums[static_cast<std::size_t>(k / Int448::kFields)], group.data(), bias);
            return group[static_cast<std::size_t>(k % Int448::kFields)];
          },
          left);
      lap(stats.seconds.decision);
    }
    if (first && sent > 0)
      workspace->undecided_fraction = static_cast<double>(left.size() / 2) / static_cast<double>(sent);
    std::vector<Pending> next;
    for (std::size_t e = 0; e < left.size(); e += 2) {
      const std::int64_t k = left[e];
      if (e + 1 >= left.size() || k < 0 || k >= sent || (e > 0 && k <= left[e - 2]))
        return Status::Runtime("the compact all-reduce read an undecided value's index out of order (" +
                               std::to_string(k) + "): a collective broke its contract");
      const std::int64_t i = value_index(k);
      Pending p{i, window_lsb(k, i), first ? Words{} : pending[static_cast<std::size_t>(k)].known};
      ExactAddInt128(p.known.data(), left[e + 1] >> count_bits, p.lsb);
      next.push_back(p);
    }
    if (scatter) {  // the all-gather gave every replica round 2's floats: the rest remain
      refined.emplace();
      for (const Pending& p : next) refined->push_back(p.index);
    }
    pending = std::move(next);
    lap(stats.seconds.decision);
  }
  tbb::parallel_for(std::size_t{1}, local, [&](std::size_t r) {
    if (!refined) {
      std::copy(outputs[0].begin(), outputs[0].end(), outputs[r].begin());
      return;
    }
    for (const std::int64_t i : *refined)
      outputs[r][static_cast<std::size_t>(i)] = outputs[0][static_cast<std::size_t>(i)];
  });
  stats.seconds.total = std::chrono::duration<double>(Clock::now() - call_start).count();
  return stats;
}

}  // namespace dtlab
