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

/// out = sum_k fields[k] 2^(56 k) modulo 2^448. REQUIRES: every field in [-2^55, 2^55).
inline void PackFields(const std::int64_t* fields, Int448& out) {
  using namespace int448_internal;
  std::uint64_t digits[Int448::kFields];
  for (int k = 0; k < Int448::kFields; ++k) digits[k] = static_cast<std::uint64_t>(fields[k] + kFieldOffset);
  Limb limbs[Int448::kLimbs];
  for (int i = 0; i < Int448::kLimbs; ++i) limbs[i] = LimbOfDigits(digits, i);
  AddLimbs(limbs, kMinusOffset.limb.data(), out.limb.data());
}
inline Int448 PackFields(const std::int64_t* fields) {
  Int448 out;
  PackFields(fields, out);
  return out;
}

/// The fields F_k in [-2^55, 2^55) with x = sum_k F_k 2^(56 k) modulo 2^448: the
/// inverse of PackFields, and of a sum of packed fields whose field sums lie in
/// that range.
inline void UnpackFields(const Int448& x, std::int64_t* fields) {
  using namespace int448_internal;
  Limb m[Int448::kLimbs];
  AddLimbs(x.limb.data(), kOffset.limb.data(), m);
  // Digit k starts at bit 56 k: bit 64 - 8 k of limb k - 1, and fills limb k's low 8 k.
  fields[0] = static_cast<std::int64_t>(m[0] & kFieldMask) - kFieldOffset;
  for (int k = 1; k < Int448::kFields; ++k) {
    const std::uint64_t high = k < Int448::kLimbs ? m[k] << (8 * k) : 0;
    fields[k] = static_cast<std::int64_t>(((m[k - 1] >> (64 - 8 * k)) | high) & kFieldMask) - kFieldOffset;
  }
}

}  // namespace dtlab
