// DTLAB_HOST_DEVICE marks a function that CUDA code calls on the GPU as well as on
// the host (core/portable_math.h, core/exact_words.h, core/device_kernels.h); in a
// plain C++ build it expands to nothing. Also the bit casts such code needs:
// std::bit_cast is not available in device code, and CUDA has intrinsics for it.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define DTLAB_HOST_DEVICE __host__ __device__
#else
#define DTLAB_HOST_DEVICE
#endif

namespace dtlab {

inline DTLAB_HOST_DEVICE std::uint32_t FloatToBits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  std::uint32_t bits;
  __builtin_memcpy(&bits, &x, sizeof bits);
  return bits;
#endif
}

inline DTLAB_HOST_DEVICE float FloatFromBits(std::uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float x;
  __builtin_memcpy(&x, &bits, sizeof x);
  return x;
#endif
}

inline DTLAB_HOST_DEVICE std::uint64_t DoubleToBits(double x) {
#if defined(__CUDA_ARCH__)
  return static_cast<std::uint64_t>(__double_as_longlong(x));
#else
  std::uint64_t bits;
  __builtin_memcpy(&bits, &x, sizeof bits);
  return bits;
#endif
}

inline DTLAB_HOST_DEVICE double DoubleFromBits(std::uint64_t bits) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(bits));
#else
  double x;
  __builtin_memcpy(&x, &bits, sizeof x);
  return x;
#endif
}

}  // namespace dtlab
