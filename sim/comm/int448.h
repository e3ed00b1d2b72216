// Int448: a 448-bit two's complement integer in seven 64-bit limbs (least
// significant first), added with carries between limbs and wrapping modulo 2^448.
// It is the element the compact exact all-reduce's window rounds move
// (sim/comm/compact_exact.h): eight signed 56-bit fields, f0 + f1 2^56 + ... +
// f7 2^392, in 56 bytes, 7 bytes a value where an int64 word per value took 8.
//
// Why carries: the sum over replicas of such integers is sum_k F_k 2^(56 k), F_k the
// sum of the replicas' fields k, exactly, since integer addition is associative and
// commutative. Where every F_k lies in [-2^55, 2^55), UnpackFields reads them back.
// An int64 SUM over the limbs one by one would drop the carries out of each limb,
// and a field straddling two limbs would be lost.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace dtlab {

struct Int448 {
  static constexpr int kLimbs = 7;
  static constexpr int kFields = 8;
  static constexpr int kFieldBits = 56;
  using Limb = unsigned long long;  // the type _addcarry_u64 writes (std::uint64_t is unsigned long)
  std::array<Limb, kLimbs> limb;

  Int448& operator+=(const Int448& x);
  friend Int448 operator+(Int448 a, const Int448& b) { return a += b; }
  friend bool operator==(const Int448&, const Int448&) = default;
};

namespace int448_internal {

using Limb = Int448::Limb;

// out = a + b modulo 2^448, limb by limb (out may be a).
[[gnu::always_inline]] inline void AddLimbs(const Limb* a, const Limb* b, Limb* out) {
#if defined(__x86_64__)
  // One add-with-carry chain, unrolled: 2 times the speed of the 128-bit sums
  // below, or of a loop over the intrinsic, neither of which the compiler makes into
  // one chain.
  unsigned char c = _addcarry_u64(0, a[0], b[0], &out[0]);
  c = _addcarry_u64(c, a[1], b[1], &out[1]);
  c = _addcarry_u64(c, a[2], b[2], &out[2]);
  c = _addcarry_u64(c, a[3], b[3], &out[3]);
  c = _addcarry_u64(c, a[4], b[4], &out[4]);
  c = _addcarry_u64(c, a[5], b[5], &out[5]);
  _addcarry_u64(c, a[6], b[6], &out[6]);
#else
  __extension__ typedef unsigned __int128 Uint128;
  std::uint64_t carry = 0;
  for (int i = 0; i < Int448::kLimbs; ++i) {
    const Uint128 s = static_cast<Uint128>(a[i]) + b[i] + carry;
    out[i] = static_cast<std::uint64_t>(s);
    carry = static_cast<std::uint64_t>(s >> 64);
  }
#endif
}

inline constexpr std::uint64_t kFieldMask = (std::uint64_t{1} << Int448::kFieldBits) - 1;
inline constexpr std::int64_t kFieldOffset = std::int64_t{1} << (Int448::kFieldBits - 1);  // 2^55

// Limb i of the integer whose base-2^56 digits are d (each in [0, 2^56)): it starts
// at bit 8 i of digit i and ends with the low 8 (i + 1) bits of digit i + 1.
constexpr Limb LimbOfDigits(const std::uint64_t* d, int i) { return d[i] >> (8 * i) | d[i + 1] << (56 - 8 * i); }

// H = sum_k 2^55 2^(56 k), and 2^448 - H.
constexpr Int448 Offset(bool negated) {
  std::uint64_t digits[Int448::kFields];
  for (std::uint64_t& d : digits) d = static_cast<std::uint64_t>(kFieldOffset);
  Int448 h{};
  for (int i = 0; i < Int448::kLimbs; ++i) h.limb[static_cast<std::size_t>(i)] = LimbOfDigits(digits, i);
  if (!negated) return h;
  Int448 minus{};  // two's complement: invert, add one
  std::uint64_t carry = 1;
  for (std::size_t i = 0; i < Int448::kLimbs; ++i) {
    minus.limb[i] = ~h.limb[i] + carry;
    carry = carry != 0 && minus.limb[i] == 0;
  }
  return minus;
}
inline constexpr Int448 kOffset = Offset(false);
inline constexpr Int448 kMinusOffset = Offset(true);

}  // namespace int448_internal

inline Int448& Int448::operator+=(const Int448& x) {
  int448_internal::AddLimbs(limb.data(), x.limb.data(), limb.data());
  return *this;
}

// Why the offset: with every field moved up by 2^55 into [0, 2^56), the fields are
// plain base-2^56 digits, placed and read each on its own, with no borrow passed
// from field to field; one 448-bit addition of the constant H = sum_k 2^55 2^(56 k)
// (or of -H) moves the whole integer. Both work in registers and touch `out` or `x`
// limb by limb.

namespace int448_internal {
// The fields moved up by 2^55, as base-2^56 digits (PackBiasedFields without
// vectors): groups [first, groups).
inline void PackBiasedFieldsPortable(const std::int64_t* fields, std::size_t first, std::size_t groups, Int448* out) {
  for (std::size_t g = first; g < groups; ++g) {
    std::uint64_t digits[Int448::kFields];
    for (int k = 0; k < Int448::kFields; ++k) digits[k] = static_cast<std::uint64_t>(fields[8 * g + k] + kFieldOffset);
    for (int i = 0; i < Int448::kLimbs; ++i) out[g].limb[static_cast<std::size_t>(i)] = LimbOfDigits(digits, i);
  }
}
}  // namespace int448_internal

/// out = sum_k fields[k] 2^(56 k) modulo 2^448. REQUIRES: every field in [-2^55, 2^55).
inline void PackFields(const std::int64_t* fields, Int448& out) {
  using namespace int448_internal;
  Int448 digits;
  PackBiasedFieldsPortable(fields, 0, 1, &digits);
  AddLimbs(digits.limb.data(), kMinusOffset.limb.data(), out.limb.data());
}
inline Int448 PackFields(const std::int64_t* fields) {
  Int448 out;
  PackFields(fields, out);
  return out;
}

#if defined(__AVX2__)
/// One group from its eight digits (fields moved up by 2^55, each in [0, 2^56)), in
/// two vectors: d0 = digits 0-3, d4 = digits 4-7.
[[gnu::always_inline]] inline void PackDigits(__m256i d0, __m256i d4, Int448& out) {
  // Limbs 0-3 and 4-6 four at a time: limb i = d_i >> 8i | d_(i+1) << (56 - 8i).
  const __m256i right_low = _mm256_setr_epi64x(0, 8, 16, 24), left_low = _mm256_setr_epi64x(56, 48, 40, 32);
  const __m256i right_high = _mm256_setr_epi64x(32, 40, 48, 56), left_high = _mm256_setr_epi64x(24, 16, 8, 64);
  const __m256i d1 = _mm256_alignr_epi8(_mm256_permute2x128_si256(d0, d4, 0x21), d0, 8);  // d1 d2 d3 d4
  const __m256i d5 = _mm256_permute4x64_epi64(d4, 0xf9);  // d5 d6 d7 d7: the last lane shifts out (by 64)
  const __m256i low = _mm256_or_si256(_mm256_srlv_epi64(d0, right_low), _mm256_sllv_epi64(d1, left_low));
  const __m256i high = _mm256_or_si256(_mm256_srlv_epi64(d4, right_high), _mm256_sllv_epi64(d5, left_high));
  Int448::Limb* limbs = out.limb.data();
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(limbs), low);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(limbs + 4), _mm256_castsi256_si128(high));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(limbs + 6), _mm256_extracti128_si256(high, 1));
}
#endif

/// `groups` groups of eight fields, out[g] = PackFields(fields + 8 g) + H with H =
/// sum_k 2^55 2^(56 k): the fields moved up by 2^55 are base-2^56 digits, placed
/// with no carry to pass (PackFields's carry chain subtracts H). A sum of n such
/// groups is the sum of the packed fields plus n H, modulo 2^448: UnpackFields reads
/// it back with SumBias(n). So a collective's reader pays the chain once, not every
/// replica. REQUIRES: every field in [-2^55, 2^55).
inline void PackBiasedFields(const std::int64_t* fields, std::size_t groups, Int448* out) {
  using namespace int448_internal;
  std::size_t g = 0;
#if defined(__AVX2__)
  const __m256i offset = _mm256_set1_epi64x(kFieldOffset);
  for (; g < groups; ++g) {
    const std::int64_t* f = fields + 8 * g;
    PackDigits(_mm256_add_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(f)), offset),
               _mm256_add_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(f + 4)), offset), out[g]);
  }
#endif
  PackBiasedFieldsPortable(fields, g, groups, out);
}

/// What UnpackFields adds to read a sum of n groups from PackBiasedFields: (1 - n) H
/// modulo 2^448 (H for packed fields, n = 0). REQUIRES: 0 <= n < 2^62.
inline Int448 SumBias(std::int64_t n) {
  using namespace int448_internal;
  // H + n (-H), modulo 2^448: the product's carry out of the top limb drops.
  __extension__ typedef unsigned __int128 Uint128;
  Int448 bias{};
  std::uint64_t carry = 0;
  for (std::size_t i = 0; i < Int448::kLimbs; ++i) {
    const Uint128 p = static_cast<Uint128>(kMinusOffset.limb[i]) * static_cast<std::uint64_t>(n) + carry;
    bias.limb[i] = static_cast<std::uint64_t>(p);
    carry = static_cast<std::uint64_t>(p >> 64);
  }
  AddLimbs(bias.limb.data(), kOffset.limb.data(), bias.limb.data());
  return bias;
}

/// The fields F_k in [-2^55, 2^55) with x = sum_k F_k 2^(56 k) modulo 2^448: the
/// inverse of PackFields, and of a sum of packed fields whose field sums lie in
/// that range. With `bias` = SumBias(n), of a sum of n groups from PackBiasedFields.
inline void UnpackFields(const Int448& x, std::int64_t* fields, const Int448& bias = int448_internal::kOffset) {
  using namespace int448_internal;
  Limb m[Int448::kLimbs];
  AddLimbs(x.limb.data(), bias.limb.data(), m);
  // Digit k starts at bit 56 k: bit 64 - 8 k of limb k - 1, and fills limb k's low 8 k.
  fields[0] = static_cast<std::int64_t>(m[0] & kFieldMask) - kFieldOffset;
  for (int k = 1; k < Int448::kFields; ++k) {
    const std::uint64_t high = k < Int448::kLimbs ? m[k] << (8 * k) : 0;
    fields[k] = static_cast<std::int64_t>(((m[k - 1] >> (64 - 8 * k)) | high) & kFieldMask) - kFieldOffset;
  }
}

#if defined(__AVX512F__)
/// The limbs of `x` in lanes 0-6 of a vector, lane 7 zero (UnpackFieldsVector's bias).
inline __m512i LimbsVector(const Int448& x) { return _mm512_maskz_loadu_epi64(0x7f, x.limb.data()); }

/// UnpackFields in vectors: the eight fields of x with `bias` (LimbsVector of a
/// SumBias), field k in lane k. The 448-bit sum lane by lane, then each lane's carry
/// passed on where it must go: lane i carries out where its sum wrapped (g), and
/// passes a carry in on where its sum is all ones (p); the lanes that take a carry
/// in are ((g << 1) + p) ^ p (the carries ripple through p as through an integer
/// sum), and the one out of lane 6 drops (modulo 2^448).
[[gnu::always_inline]] inline __m512i UnpackFieldsVector(const Int448& x, __m512i bias) {
  using namespace int448_internal;
  const __m512i a = LimbsVector(x);
  __m512i m = _mm512_add_epi64(a, bias);
  const unsigned generate = _mm512_cmplt_epu64_mask(m, a);
  const unsigned propagate = _mm512_cmpeq_epi64_mask(m, _mm512_set1_epi64(-1));
  const auto carried = static_cast<__mmask8>((((generate << 1) + propagate) ^ propagate) & 0x7f);
  m = _mm512_mask_sub_epi64(m, carried, m, _mm512_set1_epi64(-1));
  // Field k is bits [56 k, 56 k + 56): m[k - 1] >> (64 - 8 k) | m[k] << 8 k (lane
  // 0: m[0]; lane 7: m[6] >> 8, lane 7 of m being zero).
  const __m512i previous = _mm512_maskz_permutexvar_epi64(0xfe, _mm512_setr_epi64(0, 0, 1, 2, 3, 4, 5, 6), m);
  const __m512i digits = _mm512_or_si512(_mm512_srlv_epi64(previous, _mm512_setr_epi64(64, 56, 48, 40, 32, 24, 16, 8)),
                                         _mm512_sllv_epi64(m, _mm512_setr_epi64(0, 8, 16, 24, 32, 40, 48, 56)));
  return _mm512_sub_epi64(_mm512_and_si512(digits, _mm512_set1_epi64(static_cast<long long>(kFieldMask))),
                          _mm512_set1_epi64(kFieldOffset));
}

/// PackBiasedFields of one group, from its eight fields in a vector (field k in
/// lane k): limb i = d_i >> 8 i | d_(i+1) << (56 - 8 i), d the fields moved up by 2^55.
[[gnu::always_inline]] inline void PackBiasedFieldsVector(__m512i fields, Int448& out) {
  using namespace int448_internal;
  const __m512i digits = _mm512_add_epi64(fields, _mm512_set1_epi64(kFieldOffset));
  const __m512i next = _mm512_permutexvar_epi64(_mm512_setr_epi64(1, 2, 3, 4, 5, 6, 7, 7), digits);
  const __m512i limbs = _mm512_or_si512(_mm512_srlv_epi64(digits, _mm512_setr_epi64(0, 8, 16, 24, 32, 40, 48, 56)),
                                        _mm512_sllv_epi64(next, _mm512_setr_epi64(56, 48, 40, 32, 24, 16, 8, 0)));
  _mm512_mask_storeu_epi64(out.limb.data(), 0x7f, limbs);
}
#endif

}  // namespace dtlab
