// Cost of exact accumulation (core/exact_sum.h) against plain float arithmetic on
// the same values: ns per ExactAddFloat and per ExactAddProduct into one accumulator
// (L1-resident: the loss or metric sum) and into 64K accumulators, one add each per
// pass (a gradient: every parameter has its own accumulator, ~10 MB of words);
// the same adds through an out-of-line call, which is what the hot path would cost
// if it were not inline in the header; and ExactToFloats throughput (the step's
// final rounding of every gradient element).
//
// Run: build/release/bench/exact_sum_bench [--benchmark_filter=Product]
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/exact_sum.h"

namespace dtlab {
namespace {

constexpr int kValues = 4096;           // one accumulator: 16 KiB of inputs, L1/L2
constexpr int kAccumulators = 1 << 16;  // many: 64K x 152 bytes of words

// Gradient-like values: random sign, significand and exponent in [2^-20, 2^4), with
// a fraction `zero_fraction` of exact zeros (ReLU gradients and activations) that
// come in runs of `zero_run` values (1: each value is zero independently, the
// worst case for the branch predictor; 28: runs as long as an MNIST image row).
std::vector<float> RandomValues(int count, double zero_fraction, std::uint32_t seed, int zero_run = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> unit(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-20, 3);
  std::bernoulli_distribution zero(zero_fraction), negative(0.5);
  std::vector<float> values(static_cast<std::size_t>(count));
  bool is_zero = false;
  for (int i = 0; i < count; ++i) {
    if (i % zero_run == 0) is_zero = zero(rng);
    values[i] = is_zero ? 0.0f : (negative(rng) ? -1 : 1) * std::ldexp(unit(rng), exponent(rng));
  }
  return values;
}

// Reports items/s and time per add ("per_add", printed as e.g. 2.7ns).
void SetPerAdd(benchmark::State& state, std::int64_t adds_per_iteration) {
  state.SetItemsProcessed(state.iterations() * adds_per_iteration);
  state.counters["per_add"] =
      benchmark::Counter(static_cast<double>(adds_per_iteration),
                         benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// The hot adds behind a call the compiler cannot inline: what they would cost if
// they lived only in core/exact_sum.cc (dtlab builds without LTO).
[[gnu::noinline]] int OutOfLineAddFloat(std::int64_t* words, float x) { return ExactAddFloat(words, x); }
[[gnu::noinline]] void OutOfLineAddProduct(std::int64_t* words, float a, float b) { ExactAddProduct(words, a, b); }

// ---- One accumulator -------------------------------------------------------

void BM_PlainFloatSum_One(benchmark::State& state) {
  const std::vector<float> x = RandomValues(kValues, 0, 1);
  for (auto _ : state) {
    float sum = 0;
    for (float v : x) sum += v;
    benchmark::DoNotOptimize(sum);
  }
  SetPerAdd(state, kValues);
}

void BM_PlainProductSum_One(benchmark::State& state) {
  const std::vector<float> a = RandomValues(kValues, 0, 1), b = RandomValues(kValues, 0, 2);
  for (auto _ : state) {
    float sum = 0;
    for (int i = 0; i < kValues; ++i) sum += a[i] * b[i];
    benchmark::DoNotOptimize(sum);
  }
  SetPerAdd(state, kValues);
}

template <bool kInline>
void BM_ExactAddFloat_One(benchmark::State& state) {
  const std::vector<float> x =
      RandomValues(kValues, static_cast<double>(state.range(0)) / 100, 1, static_cast<int>(state.range(1)));
  std::int64_t words[kExactWords] = {};
  for (auto _ : state) {
    for (float v : x) kInline ? ExactAddFloat(words, v) : OutOfLineAddFloat(words, v);
    ExactNormalize(words);  // keeps the carry room for any iteration count (1 per 4096 adds)
    benchmark::DoNotOptimize(words);
  }
  SetPerAdd(state, kValues);
}

template <bool kInline>
void BM_ExactAddProduct_One(benchmark::State& state) {
  const std::vector<float> a =
      RandomValues(kValues, static_cast<double>(state.range(0)) / 100, 1, static_cast<int>(state.range(1)));
  const std::vector<float> b = RandomValues(kValues, 0, 2);
  std::int64_t words[kExactWords] = {};
  for (auto _ : state) {
    for (int i = 0; i < kValues; ++i)
      kInline ? ExactAddProduct(words, a[i], b[i]) : OutOfLineAddProduct(words, a[i], b[i]);
    ExactNormalize(words);
    benchmark::DoNotOptimize(words);
  }
  SetPerAdd(state, kValues);
}

// ---- Many accumulators: one add into each of 64K per pass -------------------

void BM_PlainFloatSum_Many(benchmark::State& state) {
  const std::vector<float> x = RandomValues(kAccumulators, 0, 1);
  std::vector<float> sums(kAccumulators, 0.0f);
  for (auto _ : state) {
    for (int i = 0; i < kAccumulators; ++i) sums[i] += x[i];
    benchmark::DoNotOptimize(sums.data());
    benchmark::ClobberMemory();
  }
  SetPerAdd(state, kAccumulators);
}

void BM_PlainProductSum_Many(benchmark::State& state) {
  const std::vector<float> a = RandomValues(kAccumulators, 0, 1), b = RandomValues(kAccumulators, 0, 2);
  std::vector<float> sums(kAccumulators, 0.0f);
  for (auto _ : state) {
    for (int i = 0; i < kAccumulators; ++i) sums[i] += a[i] * b[i];
    benchmark::DoNotOptimize(sums.data());
    benchmark::ClobberMemory();
  }
  SetPerAdd(state, kAccumulators);
}

// Words of 64K accumulators; passes are far fewer than 2^30, so no normalization.
std::vector<std::int64_t> ManyAccumulators() {
  return std::vector<std::int64_t>(static_cast<std::size_t>(kAccumulators) * kExactWords, 0);
}

template <bool kInline>
void BM_ExactAddFloat_Many(benchmark::State& state) {
  const std::vector<float> x =
      RandomValues(kAccumulators, static_cast<double>(state.range(0)) / 100, 1, static_cast<int>(state.range(1)));
  std::vector<std::int64_t> words = ManyAccumulators();
  for (auto _ : state) {
    std::int64_t* acc = words.data();
    for (int i = 0; i < kAccumulators; ++i, acc += kExactWords)
      kInline ? ExactAddFloat(acc, x[i]) : OutOfLineAddFloat(acc, x[i]);
    benchmark::DoNotOptimize(words.data());
    benchmark::ClobberMemory();
  }
  SetPerAdd(state, kAccumulators);
}

template <bool kInline>
void BM_ExactAddProduct_Many(benchmark::State& state) {
  const std::vector<float> a =
      RandomValues(kAccumulators, static_cast<double>(state.range(0)) / 100, 1, static_cast<int>(state.range(1)));
  const std::vector<float> b = RandomValues(kAccumulators, 0, 2);
  std::vector<std::int64_t> words = ManyAccumulators();
  for (auto _ : state) {
    std::int64_t* acc = words.data();
    for (int i = 0; i < kAccumulators; ++i, acc += kExactWords) {
      kInline ? ExactAddProduct(acc, a[i], b[i]) : OutOfLineAddProduct(acc, a[i], b[i]);
    }
    benchmark::DoNotOptimize(words.data());
    benchmark::ClobberMemory();
  }
  SetPerAdd(state, kAccumulators);
}

// ---- Rounding and normalizing 64K accumulators ------------------------------

std::vector<std::int64_t> FilledAccumulators() {
  std::vector<std::int64_t> words = ManyAccumulators();
  const std::vector<float> a = RandomValues(kAccumulators, 0, 1), b = RandomValues(kAccumulators, 0, 2);
  for (int pass = 0; pass < 16; ++pass) {
    for (int i = 0; i < kAccumulators; ++i)
      ExactAddProduct(&words[i * kExactWords], a[(i + pass) % kAccumulators], b[i]);
  }
  return words;
}

void BM_ExactToFloats(benchmark::State& state) {
  const std::vector<std::int64_t> words = FilledAccumulators();
  std::vector<float> out(kAccumulators);
  for (auto _ : state) {
    ExactToFloats(words, out);
    benchmark::DoNotOptimize(out.data());
  }
  SetPerAdd(state, kAccumulators);  // "per add" here: per accumulator rounded
}

// The same accumulators normalized first, as BatchRunner leaves them: ExactToFloat's
// path for normalized words.
void BM_ExactToFloatsNormalized(benchmark::State& state) {
  std::vector<std::int64_t> words = FilledAccumulators();
  ExactNormalizeAll(words);
  std::vector<float> out(kAccumulators);
  for (auto _ : state) {
    ExactToFloats(words, out);
    benchmark::DoNotOptimize(out.data());
  }
  SetPerAdd(state, kAccumulators);  // per accumulator rounded
}

void BM_ExactNormalizeAll(benchmark::State& state) {
  std::vector<std::int64_t> words = FilledAccumulators();
  for (auto _ : state) {
    ExactNormalizeAll(words);
    benchmark::DoNotOptimize(words.data());
  }
  SetPerAdd(state, kAccumulators);  // per accumulator
}

// Args: percent of zero terms (in the first operand), length of their runs.
void ZeroPatterns(benchmark::internal::Benchmark* benchmark) {
  benchmark->Args({0, 1})->Args({50, 1})->Args({50, 28})->Args({90, 1});
}
BENCHMARK(BM_PlainFloatSum_One);
BENCHMARK(BM_ExactAddFloat_One<true>)->Name("BM_ExactAddFloat_One")->Apply(ZeroPatterns);
BENCHMARK(BM_ExactAddFloat_One<false>)->Name("BM_ExactAddFloat_One_OutOfLine")->Args({0, 1});
BENCHMARK(BM_PlainProductSum_One);
BENCHMARK(BM_ExactAddProduct_One<true>)->Name("BM_ExactAddProduct_One")->Apply(ZeroPatterns);
BENCHMARK(BM_ExactAddProduct_One<false>)->Name("BM_ExactAddProduct_One_OutOfLine")->Args({0, 1});
BENCHMARK(BM_PlainFloatSum_Many);
BENCHMARK(BM_ExactAddFloat_Many<true>)->Name("BM_ExactAddFloat_Many")->Apply(ZeroPatterns);
BENCHMARK(BM_ExactAddFloat_Many<false>)->Name("BM_ExactAddFloat_Many_OutOfLine")->Args({0, 1});
BENCHMARK(BM_PlainProductSum_Many);
BENCHMARK(BM_ExactAddProduct_Many<true>)->Name("BM_ExactAddProduct_Many")->Apply(ZeroPatterns);
BENCHMARK(BM_ExactAddProduct_Many<false>)->Name("BM_ExactAddProduct_Many_OutOfLine")->Args({0, 1});
BENCHMARK(BM_ExactToFloats);
BENCHMARK(BM_ExactToFloatsNormalized);
BENCHMARK(BM_ExactNormalizeAll);

}  // namespace
}  // namespace dtlab

BENCHMARK_MAIN();
