#include "sim/comm/compact_exact.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "core/enum_names.h"
#include "core/exact_sum.h"

namespace dtlab {
namespace {

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
constexpr std::int64_t kGrain = 4096;  // values per task

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

// Rounds m 2^lsb + f to float, for some 0 <= f < 2^lsb (sticky: f != 0), in units
// of 2^kExactLsbExponent, when that is simple: the result normal or overflowing and
// the fraction f below the rounding bit. Returns false otherwise.
bool RoundFast(std::int64_t m, bool sticky, int lsb, float& out) {
  if (m == 0 && !sticky) return out = 0.0f, true;
  const bool negative = m < 0;
  // A negative m with a fraction: |m 2^lsb + f| = (|m| - 1) 2^lsb + (2^lsb - f).
  const std::uint64_t magnitude =
      negative ? static_cast<std::uint64_t>(-(m + 1)) + (sticky ? 0 : 1) : static_cast<std::uint64_t>(m);
  const int width = std::bit_width(magnitude);
  if (sticky && width < 25) return false;
  const int top_exponent = width - 1 + lsb + kExactLsbExponent;
  if (top_exponent < -126) return false;
  const int shift = std::max(width - 24, 0);
  std::uint64_t keep = magnitude >> shift;
  if (shift > 0) {
    const std::uint64_t rest = magnitude & ((std::uint64_t{1} << shift) - 1);
    const std::uint64_t half = std::uint64_t{1} << (shift - 1);
    keep += rest > half || (rest == half && (sticky || (keep & 1) != 0));
  }
  const float result = top_exponent > 127 ? std::numeric_limits<float>::infinity()
                                          : std::ldexp(static_cast<float>(keep), shift + lsb + kExactLsbExponent);
  out = negative ? -result : result;
  return true;
}

using Words = std::array<std::int64_t, kExactWords>;

float RoundWords(const Words& known, std::int64_t add_high, int lsb, std::int64_t add_low) {
  Words words = known;
  ExactAddInt128(words.data(), add_high, lsb);
  ExactAddInt128(words.data(), add_low, 0);
  return ExactToFloat(words.data());
}

// A value still undecided: what the rounds so far summed, and its window's lsb.
struct Pending {
  std::int64_t index;
  int lsb;
  Words known;
};

template <typename T>
Status SameOnEveryReplica(std::span<const std::span<T>> buffers, const char* what) {
  for (std::size_t r = 1; r < buffers.size(); ++r)
    if (std::memcmp(buffers[r].data(), buffers[0].data(), buffers[0].size_bytes()) != 0)
      return Status::Runtime(std::string("compact exact all-reduce: the replicas read different ") + what);
  return Status::Ok();
}

const std::int64_t* DeepWords(const CompactGradient& g, std::int64_t i) {
  const auto it = std::lower_bound(g.deep_index.begin(), g.deep_index.end(), i);
  assert(it != g.deep_index.end() && *it == i);
  return g.deep_words.data() + (it - g.deep_index.begin()) * kExactWords;
}

// Value i of a CompactGradient that is not kDeep: floor(V / 2^base), exact.
ExactInt128 Window(const CompactGradient& g, std::int64_t i) {
  const auto j = static_cast<std::size_t>(2 * i);
  return static_cast<ExactInt128>(static_cast<Uint128>(g.window[j + 1]) << 64 | g.window[j]);
}

// Bits [p, p + 64) of value i of g (two's complement).
std::uint64_t BitsAt(const CompactGradient& g, std::int64_t i, int p) {
  const int base = g.base[static_cast<std::size_t>(i)];
  if (base == CompactGradient::kDeep) return Bits64(DeepWords(g, i), p);
  const ExactInt128 window = Window(g, i);
  const int shift = p - base;
  if (shift >= 0)
    return shift >= 127 ? (window < 0 ? ~std::uint64_t{0} : 0) : static_cast<std::uint64_t>(window >> shift);
  if (-shift >= 64) return 0;  // below base: no bits
  return static_cast<std::uint64_t>(static_cast<Uint128>(window) << -shift);
}

// The whole words of value i of g: kept, or rebuilt from its window (a replica whose
// own block is finite, where another replica's is not).
void WholeWords(const CompactGradient& g, std::int64_t i, std::int64_t* out) {
  const int base = g.base[static_cast<std::size_t>(i)];
  if (base == CompactGradient::kDeep) {
    std::copy_n(DeepWords(g, i), kExactWords, out);
    return;
  }
  std::fill_n(out, kExactWords, 0);
  ExactAddInt128(out, Window(g, i), base);
}

}  // namespace

StatusOr<ExactAllReduce> ParseExactAllReduce(std::string_view name) {
  return ParseEnumName(name, kKinds, "exact all-reduce");
}

std::string_view ExactAllReduceName(ExactAllReduce kind) { return EnumName(kind, kKinds); }

double CompactExactStats::BytesPerValue() const {
  if (values == 0) return 0.0;
  return static_cast<double>(scale_floats * 4 + words * 8) / static_cast<double>(values);
}

void CompactGradient::Encode(std::span<std::int64_t> words) {
  assert(words.size() % kExactWords == 0);
  values = static_cast<std::int64_t>(words.size() / kExactWords);
  const std::int64_t blocks = (values + kCompactBlock - 1) / kCompactBlock;
  bound.assign(static_cast<std::size_t>(blocks), 0);
  window.resize(static_cast<std::size_t>(2 * values));
  lsb.resize(static_cast<std::size_t>(values));
  base.resize(static_cast<std::size_t>(values));
  tbb::parallel_for(std::int64_t{0}, blocks, [&](std::int64_t block) {
    const std::int64_t begin = block * kCompactBlock, end = std::min(values, begin + kCompactBlock);
    int top = 0;
    bool whole = false;
    for (std::int64_t i = begin; i < end; ++i) {
      std::int64_t* w = words.data() + i * kExactWords;
      ExactNormalize(w);
      whole |= w[kExactDigitWords] != 0;
      const Shape shape = ShapeOf(w);
      top = std::max(top, shape.bound);
      lsb[static_cast<std::size_t>(i)] = shape.lsb;
      base[static_cast<std::size_t>(i)] = static_cast<std::int16_t>(std::max(0, shape.bound - 126));
    }
    whole |= top > kMaxScaleBound;
    const auto b = static_cast<std::int16_t>(whole ? kWholeBlock : top);
    bound[static_cast<std::size_t>(block)] = b;
    for (std::int64_t i = begin; i < end; ++i) {
      const std::int64_t* w = words.data() + i * kExactWords;
      const auto j = static_cast<std::size_t>(i);
      if (whole || lsb[j] < base[j]) {
        base[j] = kDeep;
        window[2 * j] = window[2 * j + 1] = 0;
      } else {
        window[2 * j] = Bits64(w, base[j]);
        window[2 * j + 1] = Bits64(w, base[j] + 64);
      }
    }
  });
  deep_index.clear();
  deep_words.clear();
  for (std::int64_t i = 0; i < values; ++i)
    if (base[static_cast<std::size_t>(i)] == kDeep) {
      deep_index.push_back(i);
      deep_words.insert(deep_words.end(), words.begin() + i * kExactWords, words.begin() + (i + 1) * kExactWords);
    }
}

std::int64_t CompactGradient::bytes() const {
  return static_cast<std::int64_t>(bound.size() * sizeof(std::int16_t) + window.size() * sizeof(std::uint64_t) +
                                   (lsb.size() + base.size()) * sizeof(std::int16_t) +
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
  // a refinement window carries `step` bits of each value.
  const int count_bits = std::bit_width(static_cast<std::uint32_t>(replicas));
  const int headroom = std::bit_width(static_cast<std::uint32_t>(replicas - 1));
  const int step = 62 - headroom - count_bits;
  CompactExactStats stats;
  stats.values = count;

  // Round 1: each block's scale.
  std::vector<std::vector<float>>& scales = workspace->scales;
  scales.resize(local);
  for (std::vector<float>& s : scales) s.resize(static_cast<std::size_t>(blocks));
  tbb::parallel_for(std::int64_t{0}, static_cast<std::int64_t>(local) * blocks, [&](std::int64_t task) {
    const auto r = static_cast<std::size_t>(task / blocks);
    const auto block = static_cast<std::size_t>(task % blocks);
    const int bound = inputs[r]->bound[block];
    scales[r][block] = bound == CompactGradient::kWholeBlock ? std::numeric_limits<float>::infinity()
                       : bound == 0                          ? 0.0f
                                    : std::ldexp(1.0f, std::max(bound, kMinScaleBound) - kScaleBias);
  });
  {
    std::vector<std::span<float>> spans(scales.begin(), scales.end());
    DTLAB_RETURN_IF_ERROR(collectives.sum_floats(spans));
    DTLAB_RETURN_IF_ERROR(SameOnEveryReplica<float>(spans, "block scales"));
  }
  stats.scale_floats = replicas > 1 ? blocks : 0;

  // The windows, from the scales every replica read: a zero block sends zero words, a
  // block with a non-finite or huge term whole accumulators.
  const std::vector<float>& scale = scales[0];
  std::vector<std::int64_t> windowed;  // value indices, in order
  std::vector<int> window_lsb;         // per windowed value
  std::vector<std::int64_t> whole;     // value indices sent whole
  for (std::int64_t block = 0; block < blocks; ++block) {
    const float s = scale[static_cast<std::size_t>(block)];
    const std::int64_t begin = block * kCompactBlock, end = std::min(count, begin + kCompactBlock);
    if (s == 0.0f) {
      // Zero on every replica: the words will be zero. They are sent all the same, so
      // that this round's size depends on the value count alone (the cost model
      // prices it before the step runs).
      stats.zero_values += end - begin;
      for (std::int64_t i = begin; i < end; ++i) windowed.push_back(i), window_lsb.push_back(0);
    } else if (!std::isfinite(s)) {
      for (std::int64_t i = begin; i < end; ++i) whole.push_back(i);
    } else {
      // Each replica's |V| < 2^bound, so its quotient is at most 2^(bound - L) in
      // magnitude, or 1; the N quotients sum to at most s 2^(kScaleBias - L) + N,
      // with s the exact sum of the scales, below 2^(ilogb(s) + 2) (the float sum
      // is within N ulps of it). So |Q| 2^b < 2^62 + N 2^b: no overflow. The sum of
      // the scales, rather than the largest one times N, saves log2(N) bits where
      // the replicas are alike.
      const int lsb = std::max(0, std::ilogb(s) + 2 + kScaleBias + count_bits - 62);
      for (std::int64_t i = begin; i < end; ++i) windowed.push_back(i), window_lsb.push_back(lsb);
    }
  }
  stats.full_values = static_cast<std::int64_t>(whole.size());

  // Round 2 and the refinements: one word per windowed value, then the whole values.
  std::vector<Pending> pending;
  std::vector<std::vector<std::int64_t>>& buffers = workspace->words;
  buffers.resize(local);
  for (bool first = true; first || !pending.empty(); first = false) {
    const auto sent = static_cast<std::int64_t>(first ? windowed.size() : pending.size());
    const std::int64_t size = sent + (first ? stats.full_values * kExactWords : 0);
    if (size == 0) break;
    stats.sent.push_back(sent);
    stats.words += replicas > 1 ? size : 0;
    // The window of each value sent this round: [lsb, previous lsb).
    std::vector<int> lsb(static_cast<std::size_t>(sent)), top(static_cast<std::size_t>(sent));
    for (std::int64_t k = 0; k < sent; ++k) {
      const auto j = static_cast<std::size_t>(k);
      if (first) {
        lsb[j] = window_lsb[j], top[j] = -1;
      } else {
        top[j] = pending[j].lsb, lsb[j] = std::max(0, pending[j].lsb - step);
      }
    }
    auto value_index = [&](std::int64_t k) {
      return first ? windowed[static_cast<std::size_t>(k)] : pending[static_cast<std::size_t>(k)].index;
    };
    tbb::parallel_for(std::int64_t{0}, static_cast<std::int64_t>(local), [&](std::int64_t r64) {
      const auto r = static_cast<std::size_t>(r64);
      std::vector<std::int64_t>& buffer = buffers[r];
      buffer.resize(static_cast<std::size_t>(size));  // every word is written below
      tbb::parallel_for(std::int64_t{0}, (sent + kGrain - 1) / kGrain, [&](std::int64_t chunk) {
        for (std::int64_t k = chunk * kGrain; k < std::min(sent, (chunk + 1) * kGrain); ++k) {
          const auto j = static_cast<std::size_t>(k);
          const std::int64_t i = value_index(k);
          std::uint64_t bits = BitsAt(*inputs[r], i, lsb[j]);
          if (top[j] >= 0) bits &= (std::uint64_t{1} << (top[j] - lsb[j])) - 1;  // [lsb, top): non-negative
          const bool sticky = inputs[r]->lsb[static_cast<std::size_t>(i)] < lsb[j];
          buffer[j] = static_cast<std::int64_t>(bits << count_bits) + sticky;
        }
      });
      if (first)
        for (std::size_t w = 0; w < whole.size(); ++w)
          WholeWords(*inputs[r], whole[w], buffer.data() + sent + w * kExactWords);
    });
    std::vector<std::span<std::int64_t>> spans(buffers.begin(), buffers.end());
    DTLAB_RETURN_IF_ERROR(collectives.sum_words(spans));
    DTLAB_RETURN_IF_ERROR(SameOnEveryReplica<std::int64_t>(spans, "window sums"));

    // Decide from the sums, once: every replica read the same ones.
    const std::vector<std::int64_t>& sum = buffers[0];
    std::span<float> out = outputs[0];
    std::vector<char> undecided(static_cast<std::size_t>(sent), 0);
    tbb::parallel_for(std::int64_t{0}, (sent + kGrain - 1) / kGrain, [&](std::int64_t chunk) {
      for (std::int64_t k = chunk * kGrain; k < std::min(sent, (chunk + 1) * kGrain); ++k) {
        const auto j = static_cast<std::size_t>(k);
        const std::int64_t q = sum[j] >> count_bits;  // arithmetic: floor
        const std::int64_t n = sum[j] & ((std::int64_t{1} << count_bits) - 1);
        const std::int64_t i = value_index(k);
        float low = 0.0f, high = 0.0f;
        if (first) {
          // S in [q 2^L + n, (q + n) 2^L - n]; both ends as m 2^L + f, 0 < f < 2^L.
          const bool fast = n == 0 ? RoundFast(q, false, lsb[j], low)
                                   : (n >> std::min(lsb[j], 62)) == 0 && RoundFast(q, true, lsb[j], low) &&
                                         RoundFast(q + n - 1, true, lsb[j], high);
          if (!fast) {
            const Words zero{};
            low = RoundWords(zero, q, lsb[j], n);
            if (n != 0) high = RoundWords(zero, q + n, lsb[j], -n);
          }
        } else {
          const Words& known = pending[j].known;
          low = RoundWords(known, q, lsb[j], n);
          if (n != 0) high = RoundWords(known, q + n, lsb[j], -n);
        }
        if (n == 0 || std::bit_cast<std::uint32_t>(low) == std::bit_cast<std::uint32_t>(high))
          out[static_cast<std::size_t>(i)] = low;
        else
          undecided[j] = 1;
      }
    });
    if (first)
      for (std::size_t w = 0; w < whole.size(); ++w)
        out[static_cast<std::size_t>(whole[w])] =
            ExactToFloat(sum.data() + static_cast<std::size_t>(sent) + w * kExactWords);
    std::vector<Pending> next;
    for (std::int64_t k = 0; k < sent; ++k) {
      const auto j = static_cast<std::size_t>(k);
      if (!undecided[j]) continue;
      Pending p{value_index(k), lsb[j], first ? Words{} : pending[j].known};
      ExactAddInt128(p.known.data(), sum[j] >> count_bits, lsb[j]);
      next.push_back(p);
    }
    pending = std::move(next);
  }
  for (std::size_t r = 1; r < local; ++r) std::copy(outputs[0].begin(), outputs[0].end(), outputs[r].begin());
  return stats;
}

}  // namespace dtlab
