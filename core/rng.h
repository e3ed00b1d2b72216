// Counter-based random numbers (Philox4x32-10, Salmon et al., SC'11).
//
// Every random draw in dtlab is a pure function of (seed, purpose, index, draw#):
// there is no hidden generator state shared between components, so any part of a
// run (one layer's initial weights, one epoch's shuffle, one replica's dropout)
// can be regenerated on its own, and results cannot depend on thread count or on
// the order in which work happens to run.
//
// Thread safety: a CounterRng is a small value; use one per task.
#pragma once

#include <array>
#include <cstdint>

namespace dtlab {

/// What a stream of random numbers is for. Distinct purposes never share numbers.
enum class RngPurpose : std::uint32_t {
  kWeightInit = 1,  // index: parameter number in model order
  kShuffle = 2,     // index: shuffle stage and iteration (see dataset.h)
  kTest = 3,        // tests and property checks
  kSynthetic = 4,   // synthetic data sets
  kStraggler = 5,   // simulated step-time jitter; index: worker << 44 | epoch << 24 | batch
  kDropout = 6,     // Dropout masks; key: DropoutStreamKey, index: the example's stream (core/dropout.h)
  kDropoutKey = 7,  // the key of one layer's masks at one step (core/dropout.h)
};

/// One Philox4x32-10 block: 128 random bits from a 128-bit counter and 64-bit key.
std::array<std::uint32_t, 4> Philox4x32(std::array<std::uint32_t, 4> counter, std::array<std::uint32_t, 2> key);

/// A stream of random numbers keyed by (seed, purpose, index).
class CounterRng {
 public:
  CounterRng(std::uint64_t seed, RngPurpose purpose, std::uint64_t index)
      : key_{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)},
        purpose_(static_cast<std::uint32_t>(purpose)),
        index_(index) {}

  /// The next 32 random bits.
  std::uint32_t NextU32();
  /// Uniform in [0, 1), a multiple of 2^-24 (exactly representable in float).
  float UniformFloat() { return static_cast<float>(NextU32() >> 8) * 0x1p-24f; }
  /// Uniform in [0, 1), a multiple of 2^-53.
  double UniformDouble();
  /// Uniform integer in [0, n) without modulo bias. REQUIRES: n > 0.
  std::uint64_t UniformInt(std::uint64_t n);

 private:
  std::array<std::uint32_t, 2> key_;
  std::uint32_t purpose_;
  std::uint64_t index_;
  std::uint32_t block_ = 0;  // which Philox block of this stream
  std::array<std::uint32_t, 4> buffer_{};
  int used_ = 4;  // words of buffer_ already handed out
};

}  // namespace dtlab
