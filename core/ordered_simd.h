// The vector type of the ordered kernels (core/ordered_gemm.cc, core/ordered_gemm_sparse.cc):
// the widest instruction set the build targets (AVX-512, AVX2 with FMA, or one float
// with std::fma). Each lane runs one scalar chain, so the width never changes a bit.
//
// Included by the ordered kernels only.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

namespace dtlab::ordered_simd {

// One instruction set's vector of `kLanes` floats. A masked vector is the last one of
// a row of C, where fewer than kLanes columns remain: its lanes past the end are
// neither loaded (no fault past the end of B or C) nor stored.
#if defined(__AVX512F__)
struct Simd {
  using Vec = __m512;
  using Mask = __mmask16;
  static constexpr int kLanes = 16;
  // Tile shapes (rows x vectors) that fit the 32 vector registers: accumulators
  // plus one register per vector of B; the A value is an embedded broadcast.
  static constexpr int kMaxVectors = 4;
  static constexpr int RowsFor(int vectors) { return vectors == 4 ? 6 : vectors == 3 ? 8 : 12; }
  static Vec Zero() { return _mm512_setzero_ps(); }
  static Vec Broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static Vec Load(const float* p) { return _mm512_loadu_ps(p); }
  static Vec LoadMasked(const float* p, Mask mask) { return _mm512_maskz_loadu_ps(mask, p); }
  static void Store(float* p, Vec v) { _mm512_storeu_ps(p, v); }
  static void StoreMasked(float* p, Vec v, Mask mask) { _mm512_mask_storeu_ps(p, mask, v); }
  static Vec Fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
  static Vec Add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
  // v > 0 ? v : +0 (max returns its second operand unless the first is greater: a NaN
  // or a -0 gives +0, as the scalar expression does).
  static Vec Relu(Vec v) { return _mm512_max_ps(v, Zero()); }
  static Mask FirstLanes(int count) { return static_cast<Mask>((1u << count) - 1u); }
  // Bit l set: lane l is not zero (a NaN is not zero).
  static std::uint32_t NonZeroBits(Vec v) { return _mm512_cmp_ps_mask(v, Zero(), _CMP_NEQ_UQ); }
  // Bit l set: lane l is -0.
  static std::uint32_t NegativeZeroBits(Vec v) {
    return _mm512_cmpeq_epi32_mask(_mm512_castps_si512(v), _mm512_set1_epi32(static_cast<int>(0x80000000u)));
  }
};
#elif defined(__AVX2__) && defined(__FMA__)
struct Simd {
  using Vec = __m256;
  using Mask = __m256i;
  static constexpr int kLanes = 8;
  // 16 registers: 12 accumulators, the vectors of B and the broadcast A value.
  static constexpr int kMaxVectors = 2;
  static constexpr int RowsFor(int vectors) { return vectors == 2 ? 6 : 8; }
  static Vec Zero() { return _mm256_setzero_ps(); }
  static Vec Broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static Vec Load(const float* p) { return _mm256_loadu_ps(p); }
  static Vec LoadMasked(const float* p, Mask mask) { return _mm256_maskload_ps(p, mask); }
  static void Store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
  static void StoreMasked(float* p, Vec v, Mask mask) { _mm256_maskstore_ps(p, mask, v); }
  static Vec Fma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
  static Vec Add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
  static Vec Relu(Vec v) { return _mm256_max_ps(v, Zero()); }  // as AVX-512's
  static Mask FirstLanes(int count) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static std::uint32_t NonZeroBits(Vec v) {
    return static_cast<std::uint32_t>(_mm256_movemask_ps(_mm256_cmp_ps(v, Zero(), _CMP_NEQ_UQ)));
  }
  static std::uint32_t NegativeZeroBits(Vec v) {
    const __m256i minus_zero = _mm256_set1_epi32(static_cast<int>(0x80000000u));
    return static_cast<std::uint32_t>(
        _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_castps_si256(v), minus_zero))));
  }
};
#else
// Portable fallback: a "vector" is one float and std::fma is the chain step (in
// software where the target has no FMA instruction: slow, but the same bits).
struct Simd {
  using Vec = float;
  using Mask = int;
  static constexpr int kLanes = 1;
  static constexpr int kMaxVectors = 4;
  static constexpr int RowsFor(int /*vectors*/) { return 4; }
  static Vec Zero() { return 0.0f; }
  static Vec Broadcast(const float* p) { return *p; }
  static Vec Load(const float* p) { return *p; }
  static Vec LoadMasked(const float* p, Mask /*mask*/) { return *p; }
  static void Store(float* p, Vec v) { *p = v; }
  static void StoreMasked(float* p, Vec v, Mask /*mask*/) { *p = v; }
  static Vec Fma(Vec a, Vec b, Vec c) { return std::fma(a, b, c); }
  static Vec Add(Vec a, Vec b) { return a + b; }
  static Vec Relu(Vec v) { return v > 0.0f ? v : 0.0f; }
  static Mask FirstLanes(int count) { return count; }
  static std::uint32_t NonZeroBits(Vec v) { return v != 0.0f ? 1u : 0u; }
  static std::uint32_t NegativeZeroBits(Vec v) { return v == 0.0f && std::signbit(v) ? 1u : 0u; }
};
#endif

using Vec = Simd::Vec;
using Mask = Simd::Mask;
constexpr int kLanes = Simd::kLanes;

}  // namespace dtlab::ordered_simd
