// CombineRange: the arithmetic of one transfer of a collective (sim/comm/transport.h),
// shared by every transport so that they all produce the same bits: elements
// [begin, end) of the sum of `num_sources` addends, added in order
// (((s0 + s1) + s2) + ...), divided by `divisor` if `divide` (MEAN, floating
// types only), stored to every destination.
//
// One step of 4 x 64 bytes at a time: the step's sum lives in vector registers
// while its sources are added in order and while it is stored to every
// destination, so an in-place transfer reads each element once and writes it once
// (the line just read is written back from cache). No per-element call and no
// staging array: staging the sum through a local array made loads wait on stores
// to addresses equal modulo 4 KiB, which halved the bandwidth at random
// (docs/performance.md). The tail shorter than a step is summed the same way one
// element at a time, so the bits do not depend on where a block starts. A T that is
// not arithmetic (Int448, sim/comm/int448.h) is summed an element at a time
// throughout, in place (below).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace dtlab {

/// The divisor of a MEAN over `replicas` replicas: floating types only (T{} otherwise).
template <typename T>
T MeanDivisor(std::int32_t replicas) {
  if constexpr (std::is_floating_point_v<T>)
    return static_cast<T>(replicas);
  else
    return T{};
}

/// 64 bytes of T as one value (GCC/Clang vector extension): one register with
/// AVX-512, two with AVX2; the compiler picks the instructions.
template <typename T>
struct Vector64 {
  typedef T type __attribute__((vector_size(64)));
};

/// `source(s)` and `destination(d)` return the base pointers (element 0 of the
/// transfer) of addend s and destination d.
template <typename T, typename SourceAt, typename DestinationAt>
inline void CombineRange(std::size_t num_sources, SourceAt source, std::size_t num_destinations,
                         DestinationAt destination, std::int64_t begin, std::int64_t end, bool divide, T divisor) {
  if constexpr (!std::is_arithmetic_v<T>) {
    // Wide integers (Int448, sim/comm/int448.h): summed in the first destination's
    // memory, where each add-with-carry chain reads and writes limb by limb. (A sum
    // kept in a local was copied to the stack and read back whole every element,
    // which stalled on store forwarding: 3 times the time.) Integer addition is
    // commutative, so where that destination is one of the sources (an in-place
    // transfer), the sum starts from it.
    if (num_destinations == 0) return;
    T* const sum = destination(0);
    std::size_t first = 0;  // the addend the sum starts from
    for (std::size_t s = 0; s < num_sources; ++s)
      if (source(s) == sum) first = s;
    const bool copy = source(first) != sum;
    for (std::int64_t k = begin; k < end; ++k) {
      if (copy) sum[k] = source(first)[k];
      for (std::size_t s = 0; s < num_sources; ++s)
        if (s != first) sum[k] += source(s)[k];
      for (std::size_t d = 1; d < num_destinations; ++d) destination(d)[k] = sum[k];
    }
  } else {
    using Vector = typename Vector64<T>::type;
    constexpr std::int64_t kLanes = static_cast<std::int64_t>(sizeof(Vector) / sizeof(T));
    constexpr int kVectorsPerStep = 4;
    constexpr std::int64_t kStep = kLanes * kVectorsPerStep;
    divide = divide && std::is_floating_point_v<T>;
    std::int64_t k = begin;
    for (; k + kStep <= end; k += kStep) {
      Vector sum[kVectorsPerStep];
      const T* first = source(0) + k;
      for (int v = 0; v < kVectorsPerStep; ++v) std::memcpy(&sum[v], first + v * kLanes, sizeof(Vector));
      for (std::size_t s = 1; s < num_sources; ++s) {
        const T* addend = source(s) + k;
        for (int v = 0; v < kVectorsPerStep; ++v) {
          Vector x;
          std::memcpy(&x, addend + v * kLanes, sizeof(Vector));
          sum[v] += x;
        }
      }
      if (divide)
        for (int v = 0; v < kVectorsPerStep; ++v) sum[v] /= divisor;
      for (std::size_t d = 0; d < num_destinations; ++d) {
        T* to = destination(d) + k;
        for (int v = 0; v < kVectorsPerStep; ++v) std::memcpy(to + v * kLanes, &sum[v], sizeof(Vector));
      }
    }
    for (; k < end; ++k) {
      T sum = source(0)[k];
      for (std::size_t s = 1; s < num_sources; ++s) sum += source(s)[k];
      if (divide) sum /= divisor;
      for (std::size_t d = 0; d < num_destinations; ++d) destination(d)[k] = sum;
    }
  }
}

}  // namespace dtlab
