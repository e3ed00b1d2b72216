// The exact all-reduce on real gradients: seed-cnn's per-replica exact gradient words
// for a Fashion-MNIST batch (8 examples per replica, initial weights), all-reduced
//   float    the replicas' rounded gradients, ring, float SUM (what fast mode moves);
//   words    the kExactWords int64 words per value, ring, then rounded once;
//   compact  sim/comm/compact_exact.h over the same ring: same bits as `words`; from
//            the words (encoded: 0) or from gradients encoded beforehand, as a
//            training step's waves leave them (encoded: 1).
// Counters: bytes_per_value on the wire per replica (float: 4) and, for compact, the
// values each window round carried. docs/performance.md has the figures.
//
// Run: build/release/bench/compact_exact_bench [--benchmark_filter=/8]
#include <benchmark/benchmark.h>
#include <tbb/global_control.h>

#include <bit>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <numeric>
#include <span>
#include <vector>

#include "core/batch.h"
#include "core/exact_sum.h"
#include "core/mnist.h"
#include "core/model.h"
#include "sim/comm/collectives.h"
#include "sim/comm/compact_exact.h"
#include "sim/compute/batch_runner.h"

namespace dtlab {
namespace {

constexpr std::int64_t kExamplesPerReplica = 8;

// Per replica: the normalized exact gradient words and their rounding.
struct Gradients {
  std::vector<std::vector<std::int64_t>> words;
  std::vector<std::vector<float>> floats;
  std::int64_t values = 0;
};

const Gradients& GradientsOf(std::int32_t replicas) {
  static std::map<std::int32_t, std::unique_ptr<Gradients>> cache;
  auto& slot = cache[replicas];
  if (slot) return *slot;
  slot = std::make_unique<Gradients>();
  StatusOr<TrainTestData> data = LoadMnistStyleDataset("fashion-mnist");
  if (!data.ok()) {
    std::fprintf(stderr, "%s\n", data.status().message().c_str());
    std::exit(1);
  }
  auto model = std::move(MakeModel<float>("seed-cnn", {28, 28, 1}, 10)).value();
  const ParameterList<float> params = model->InitialParameters(1);
  const std::int64_t batch = replicas * kExamplesPerReplica;
  std::vector<std::int64_t> indices(static_cast<std::size_t>(batch));
  std::iota(indices.begin(), indices.end(), 0);
  Tensor<float> images;
  std::vector<std::int32_t> labels;
  GatherBatch(data->train, indices, images, labels);
  std::int64_t values = 0;
  for (const auto& p : params) values += p.size();
  slot->values = values;
  slot->words.assign(static_cast<std::size_t>(replicas),
                     std::vector<std::int64_t>(static_cast<std::size_t>(values * kExactWords)));
  std::vector<ExactSegment> segments;
  for (std::int32_t r = 0; r < replicas; ++r)
    segments.push_back(
        {&params, r * kExamplesPerReplica, kExamplesPerReplica, slot->words[static_cast<std::size_t>(r)]});
  std::vector<float> coefficients(static_cast<std::size_t>(batch), 1.0f / static_cast<float>(batch));
  std::vector<float> losses(coefficients.size());
  std::vector<std::int32_t> predictions(coefficients.size());
  BatchRunner runner(*model, 16);
  runner.RunExact(images, labels, coefficients, losses, predictions, segments);
  for (const auto& w : slot->words) {
    slot->floats.emplace_back(static_cast<std::size_t>(values));
    ExactToFloats(w, slot->floats.back());
  }
  return *slot;
}

void SetCounters(benchmark::State& state, double bytes_per_value, std::int64_t values) {
  state.counters["bytes_per_value"] = bytes_per_value;
  state.counters["values"] = static_cast<double>(values);
}

void BM_Float(benchmark::State& state) {
  const auto n = static_cast<std::int32_t>(state.range(0));
  tbb::global_control control(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(state.range(1)));
  const Gradients& g = GradientsOf(n);
  std::vector<std::vector<float>> buffers = g.floats;
  std::vector<std::span<float>> spans(buffers.begin(), buffers.end());
  for (auto _ : state) {
    state.PauseTiming();
    for (std::size_t r = 0; r < buffers.size(); ++r) buffers[r] = g.floats[r];
    state.ResumeTiming();
    AllReduce<float>(spans, ReduceOp::kSum, {});
  }
  SetCounters(state, 4.0, g.values);
}

// The words of every replica (refilled before each timed call) and the floats out.
struct WordBuffers {
  explicit WordBuffers(const Gradients& g, bool copy_words = true)
      : buffers(copy_words ? g.words : std::vector<std::vector<std::int64_t>>(g.words.size())),
        out(g.words.size(), std::vector<float>(static_cast<std::size_t>(g.values))) {
    spans.assign(buffers.begin(), buffers.end());
    out_spans.assign(out.begin(), out.end());
  }
  std::vector<std::vector<std::int64_t>> buffers;
  std::vector<std::span<std::int64_t>> spans;
  std::vector<std::vector<float>> out;
  std::vector<std::span<float>> out_spans;
};

void BM_Words(benchmark::State& state) {
  const auto n = static_cast<std::int32_t>(state.range(0));
  tbb::global_control control(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(state.range(1)));
  const Gradients& g = GradientsOf(n);
  WordBuffers b(g);
  for (auto _ : state) {
    state.PauseTiming();
    b.buffers = g.words;
    state.ResumeTiming();
    AllReduce<std::int64_t>(b.spans, ReduceOp::kSum, {});
    for (std::size_t r = 0; r < b.buffers.size(); ++r) RoundWords(b.buffers[r], b.out[r]);
  }
  SetCounters(state, 8.0 * kExactWords, g.values);
}

void BM_Compact(benchmark::State& state) {
  const auto n = static_cast<std::int32_t>(state.range(0));
  tbb::global_control control(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(state.range(1)));
  const Gradients& g = GradientsOf(n);
  // encoded = 1: the replicas' gradients encoded beforehand, as a training step's
  // waves leave them (CompactGradient), so only the rounds are timed; 0: from the
  // words, encoding included.
  const bool encoded = state.range(2) != 0;
  WordBuffers b(g, !encoded);
  std::vector<std::vector<float>>& out = b.out;
  const ExactSumCollectives collectives = SumCollectivesOf([]<typename T>(std::span<const std::span<T>> b) {
    AllReduce<T>(b, ReduceOp::kSum, {});
    return Status::Ok();
  });
  std::vector<CompactGradient> gradients(b.buffers.size());
  std::vector<const CompactGradient*> pointers;
  for (std::size_t r = 0; r < gradients.size(); ++r) {
    if (encoded) {
      std::vector<std::int64_t> words = g.words[r];
      gradients[r].Encode(words);
    }
    pointers.push_back(&gradients[r]);
  }
  CompactExactStats stats;
  CompactExactWorkspace workspace;  // kept from call to call, as a training step keeps it
  for (auto _ : state) {
    if (encoded) {
      stats = std::move(CompactExactAllReduce(pointers, b.out_spans, n, collectives, &workspace)).value();
      continue;
    }
    state.PauseTiming();
    b.buffers = g.words;
    state.ResumeTiming();
    stats = std::move(CompactExactAllReduce(b.spans, b.out_spans, n, collectives)).value();
  }
  SetCounters(state, stats.BytesPerValue(), g.values);
  for (std::size_t k = 0; k < stats.sent.size(); ++k)
    state.counters["round" + std::to_string(k + 2)] = static_cast<double>(stats.sent[k]);
  if (encoded) {
    // What a replica holds: bytes per value of its encoding, and the values (over
    // every replica) that keep their words.
    double bytes = 0.0, deep = 0.0;
    for (const CompactGradient& e : gradients) {
      bytes += static_cast<double>(e.bytes());
      deep += static_cast<double>(e.deep_index.size());
    }
    state.counters["encoded_bytes"] = bytes / static_cast<double>(gradients.size()) / static_cast<double>(g.values);
    state.counters["deep"] = deep;
  }
  // The point of it all: the bits of the full all-reduce (integer sums: any order).
  std::vector<std::int64_t> full = g.words[0];
  for (std::size_t r = 1; r < g.words.size(); ++r)
    for (std::int64_t i = 0; i < g.values; ++i)
      ExactMerge(full.data() + i * kExactWords, g.words[r].data() + i * kExactWords);
  std::vector<float> expected(static_cast<std::size_t>(g.values));
  RoundWords(full, expected);
  for (std::size_t r = 0; r < out.size(); ++r)
    for (std::size_t i = 0; i < expected.size(); ++i)
      if (std::bit_cast<std::uint32_t>(out[r][i]) != std::bit_cast<std::uint32_t>(expected[i])) {
        state.SkipWithError("compact all-reduce differs from the full one");
        return;
      }
}

// Round 2's decision alone (compact_internal::DecideWindowSums) on 2^20 window sums
// as two replicas' gradient-like fields give them: |Q| of 2^31 to 2^52, a count in 2
// bits (about one in four with no bits below the window), Arg values a call (a block
// of 32, as round 2 calls it, or all at once: what the call costs). Counter: ns per
// value (shown with an "s").
void BM_DecideWindowSums(benchmark::State& state) {
  constexpr std::int64_t kValues = std::int64_t{1} << 20;
  constexpr int kCountBits = 2;
  std::vector<std::int64_t> sums(kValues);
  std::uint64_t x = 88172645463325252ull;  // xorshift64
  for (std::int64_t& s : sums) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    const auto q = static_cast<std::int64_t>(x >> (12 + x % 22)) * ((x & 1) != 0 ? -1 : 1);
    s = q * (std::int64_t{1} << kCountBits) + static_cast<std::int64_t>(x >> 62 & 3);
  }
  std::vector<float> out(kValues);
  std::vector<char> undecided(kValues);
  const auto per_call = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    for (std::size_t first = 0; first < sums.size(); first += per_call)
      compact_internal::DecideWindowSums(std::span<const std::int64_t>(sums).subspan(first, per_call), kCountBits, 200,
                                         std::span<float>(out).subspan(first, per_call),
                                         std::span<char>(undecided).subspan(first, per_call));
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["ns_per_value"] = benchmark::Counter(
      static_cast<double>(kValues) * 1e-9, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_DecideWindowSums)->Arg(kCompactBlock)->Arg(1 << 20)->ArgName("values_per_call");

// The same decision where two ranks send their high words (Scattered::high_words),
// a block at a time from both parts' high words and headers, no field built
// (compact_internal::DecideHighWordBlocks): 2^20 values, each part's |Q| of 2^29 to
// 2^50 with 10 bits below its window (nearly always a sticky bit), one header a
// part per block. Counter: ns per value.
void BM_DecideHighWordBlocks(benchmark::State& state) {
  constexpr std::int64_t kValues = std::int64_t{1} << 20;
  constexpr int kCountBits = 2, kAbove = 10;
  std::vector<std::int64_t> own(kValues), other(kValues), headers(2 * kValues / kCompactBlock);
  std::uint64_t x = 88172645463325252ull;  // xorshift64
  auto next = [&x] { return x ^= x << 13, x ^= x >> 7, x ^= x << 17; };
  for (std::vector<std::int64_t>* high : {&own, &other})
    for (std::int64_t& h : *high) {
      const std::uint64_t r = next();
      const auto q = static_cast<std::int64_t>(r >> (13 + r % 22)) * ((r & 1) != 0 ? -1 : 1);
      h = static_cast<std::int64_t>(static_cast<std::uint64_t>(q) << kAbove | (next() & ((1u << kAbove) - 1)));
    }
  for (std::int64_t& header : headers)
    header = static_cast<std::int64_t>(next() & next() & 0xffffffff) | std::int64_t{kAbove} << 32;
  std::vector<float> out(kValues);
  std::vector<char> undecided(kValues);
  for (auto _ : state) {
    for (std::int64_t first = 0; first < kValues; first += kCompactBlock) {
      const auto at = static_cast<std::size_t>(first), block = static_cast<std::size_t>(first / kCompactBlock);
      compact_internal::DecideHighWordBlocks(
          std::span<const std::int64_t>(own).subspan(at, kCompactBlock), headers[2 * block],
          std::span<const std::int64_t>(other).subspan(at, kCompactBlock), headers[2 * block + 1], kCountBits, 200,
          std::span<float>(out).subspan(at, kCompactBlock), std::span<char>(undecided).subspan(at, kCompactBlock));
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["ns_per_value"] = benchmark::Counter(
      static_cast<double>(kValues) * 1e-9, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_DecideHighWordBlocks);

// Args: replicas, threads.
BENCHMARK(BM_Float)->ArgsProduct({{2, 8, 64}, {2}})->ArgNames({"replicas", "threads"})->UseRealTime();
BENCHMARK(BM_Words)->ArgsProduct({{2, 8, 64}, {2}})->ArgNames({"replicas", "threads"})->UseRealTime();
BENCHMARK(BM_Compact)
    ->ArgsProduct({{2, 8, 64}, {2}, {0, 1}})
    ->Args({256, 2, 1})  // 256 replicas' words take 4.7 GB: encoded only, and no copy
    ->ArgNames({"replicas", "threads", "encoded"})
    ->UseRealTime();

}  // namespace
}  // namespace dtlab

BENCHMARK_MAIN();
