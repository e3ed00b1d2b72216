// The compact exact all-reduce (sim/comm/compact_exact.h) against the full one: the
// replicas' kExactWords words all-reduced and rounded once. Every result must have
// the same bits, for any algorithm and replica count, on gradient-like values and
// on the cases that decide rounding: ties, cancellation down to a few units, values
// near the subnormal range and the overflow threshold, non-finite terms.
#include "sim/comm/compact_exact.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <barrier>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "core/exact_sum.h"
#include "sim/comm/collectives.h"

namespace dtlab {
namespace {

// Per replica, per value: the terms that replica adds to its accumulator.
using Terms = std::vector<std::vector<std::vector<double>>>;

struct Outcome {
  std::vector<std::vector<float>> compact;
  std::vector<float> full;
  CompactExactStats stats;
  // The same replicas as `workers` processes (threads), round 2 scattered across them
  // (ExactSumCollectives::Scattered): every replica's floats, and worker 0's stats.
  std::int32_t workers = 0;
  std::vector<std::vector<float>> scattered;
  CompactExactStats scattered_stats;
  // Where two workers hold one replica each (which send their high words): the same
  // with the fields extracted and reduce-scattered instead.
  std::vector<std::vector<float>> extracted;
};

// W workers, each a thread holding n / W consecutive replicas and calling the
// compact all-reduce on them alone, as MPI ranks do. A collective is emulated
// between two barriers: each worker posts its buffers, worker 0 runs the in-process
// collective over all of them (every worker's replicas, in order), and the others
// wait for it.
class EmulatedWorkers {
 public:
  explicit EmulatedWorkers(std::int32_t workers)
      : workers_(workers), posted_(static_cast<std::size_t>(workers)), barrier_(workers) {}

  // Runs `run(all replicas' buffers)` on worker 0 once every worker posted `mine`.
  template <typename T, typename Run>
  Status Collective(std::int32_t worker, std::span<const std::span<T>> mine, Run run) {
    posted_[static_cast<std::size_t>(worker)] = &mine;
    barrier_.arrive_and_wait();
    if (worker == 0) {
      std::vector<std::span<T>> all;
      for (const void* p : posted_) {
        const auto& spans = *static_cast<const std::span<const std::span<T>>*>(p);
        all.insert(all.end(), spans.begin(), spans.end());
      }
      run(std::span<const std::span<T>>(all));
    }
    barrier_.arrive_and_wait();
    return Status::Ok();
  }

  ExactSumCollectives For(std::int32_t worker, std::int32_t per_worker, const CollectiveOptions& options) {
    ExactSumCollectives c = SumCollectivesOf([=, this]<typename T>(std::span<const std::span<T>> buffers) {
      return Collective<T>(worker, buffers,
                           [&](std::span<const std::span<T>> all) { AllReduce<T>(all, ReduceOp::kSum, options); });
    });
    c.scattered = ScatteredOf(
        workers_, worker,
        [=, this](std::span<const std::span<std::int64_t>> buffers, std::span<const ElementRange> slices,
                  OwnSlice own) {
          const auto count = static_cast<std::int64_t>(buffers[0].size());
          return Collective<std::int64_t>(worker, buffers, [&](std::span<const std::span<std::int64_t>> all) {
            RunSchedule<std::int64_t>(all, "reduce_scatter", options, [&](Transport<std::int64_t>& t) {
              ScheduleReduceScatterSlices(t, per_worker, count, slices, own);
            });
          });
        },
        [=, this]<typename T>(std::span<const std::span<T>> buffers, std::span<const ElementRange> slices) {
          return Collective<T>(worker, buffers, [&](std::span<const std::span<T>> all) {
            RunSchedule<T>(all, "all_gather", options,
                           [&](Transport<T>& t) { ScheduleAllGatherSlices(t, per_worker, slices); });
          });
        });
    if (workers_ == 2 && per_worker == 1 && high_words_)
      c.scattered.high_words = [=, this](std::span<const std::int64_t> input, std::span<std::int64_t> output,
                                         std::span<const ElementRange> slices) {
        const auto count = static_cast<std::int64_t>(output.size());
        // Each worker leaves its spans here; worker 0 runs the schedule out of place.
        inputs_[static_cast<std::size_t>(worker)] = input;
        outputs_[static_cast<std::size_t>(worker)] = output;
        return Collective<std::int64_t>(worker, {}, [&](std::span<const std::span<std::int64_t>>) {
          RunSchedule<std::int64_t>(inputs_, outputs_, "reduce_scatter", options, [&](Transport<std::int64_t>& t) {
            ScheduleReduceScatterSlices(t, 1, count, slices, OwnSlice::kLeftOut);
          });
        });
      };
    return c;
  }

  // Whether two workers of one replica each send their high words as they lie.
  void set_high_words(bool on) { high_words_ = on; }

 private:
  std::int32_t workers_;
  std::vector<const void*> posted_;
  std::barrier<> barrier_;
  bool high_words_ = true;
  std::vector<std::span<const std::int64_t>> inputs_ = std::vector<std::span<const std::int64_t>>(2);
  std::vector<std::span<std::int64_t>> outputs_ = std::vector<std::span<std::int64_t>>(2);
};

// The compact all-reduce of `words` (one vector per replica) on `workers` emulated
// workers, round 2 scattered in pieces of `piece` values (by default two grains, so
// that a few thousand values take several): every replica's floats; worker 0's stats.
// Two workers of one replica each send their high words as they lie unless
// `high_words` is false.
std::vector<std::vector<float>> RunOnWorkers(const std::vector<std::vector<std::int64_t>>& words, std::int32_t workers,
                                             const CollectiveOptions& options, CompactExactStats& stats, int calls = 1,
                                             std::int64_t piece = 2 * kCompactScatterGrain, bool high_words = true) {
  const auto n = static_cast<std::int32_t>(words.size());
  const std::int32_t per = n / workers;
  const std::size_t count = words[0].size() / kExactWords;
  std::vector<std::vector<std::int64_t>> inputs = words;
  std::vector<std::vector<float>> outputs(words.size(), std::vector<float>(count, -1.0f));
  EmulatedWorkers emulated(workers);
  emulated.set_high_words(high_words);
  std::vector<Status> statuses(static_cast<std::size_t>(workers));
  std::vector<std::thread> threads;
  for (std::int32_t w = 0; w < workers; ++w)
    threads.emplace_back([&, w] {
      std::vector<std::span<std::int64_t>> in(inputs.begin() + w * per, inputs.begin() + (w + 1) * per);
      std::vector<std::span<float>> out(outputs.begin() + w * per, outputs.begin() + (w + 1) * per);
      CompactExactWorkspace workspace;  // kept from call to call, as a training step keeps it
      for (int call = 0; call < calls; ++call) {
        // (The inputs are normalized in place: the same values, call after call.)
        ExactSumCollectives collectives = emulated.For(w, per, options);
        collectives.scattered.piece = piece;
        StatusOr<CompactExactStats> result = CompactExactAllReduce(in, out, n, collectives, &workspace);
        statuses[static_cast<std::size_t>(w)] = result.status();
        if (w == 0 && result.ok()) stats = *result;
      }
    });
  for (std::thread& t : threads) t.join();
  for (const Status& status : statuses) EXPECT_TRUE(status.ok()) << status.message();
  return outputs;
}

// Runs both all-reduces on the accumulators of `terms` (every term exact in the
// words: a float, a float product or a power of two in range).
std::vector<std::vector<std::int64_t>> WordsOf(const Terms& terms) {
  const auto n = terms.size();
  const auto count = terms[0].size();
  std::vector<std::vector<std::int64_t>> words(n, std::vector<std::int64_t>(count * kExactWords, 0));
  for (std::size_t r = 0; r < n; ++r)
    for (std::size_t i = 0; i < count; ++i)
      for (const double x : terms[r][i]) ExactAddDouble(words[r].data() + i * kExactWords, x);
  return words;
}

Outcome RunBoth(const Terms& terms, AllReduceAlgorithm algorithm) {
  const auto n = terms.size();
  const auto count = terms[0].size();
  std::vector<std::vector<std::int64_t>> words = WordsOf(terms);

  Outcome outcome;
  CollectiveOptions options;
  options.algorithm = algorithm;
  options.replicas_per_worker = n % 2 == 0 && n > 2 ? static_cast<std::int32_t>(n / 2) : 0;
  {
    std::vector<std::vector<std::int64_t>> copy = words;
    std::vector<std::span<std::int64_t>> spans(copy.begin(), copy.end());
    AllReduce<std::int64_t>(spans, ReduceOp::kSum, options);
    outcome.full.resize(count);
    ExactToFloats(copy[0], outcome.full);
  }
  outcome.compact.assign(n, std::vector<float>(count, -1.0f));
  std::vector<std::span<std::int64_t>> inputs(words.begin(), words.end());
  std::vector<std::span<float>> outputs(outcome.compact.begin(), outcome.compact.end());
  const ExactSumCollectives collectives = SumCollectivesOf([&]<typename T>(std::span<const std::span<T>> buffers) {
    AllReduce<T>(buffers, ReduceOp::kSum, options);
    return Status::Ok();
  });
  StatusOr<CompactExactStats> stats = CompactExactAllReduce(inputs, outputs, static_cast<std::int32_t>(n), collectives);
  EXPECT_TRUE(stats.ok()) << stats.status().message();
  if (stats.ok()) outcome.stats = *stats;
  // Two workers where n is even, else one per replica (up to 7).
  outcome.workers = n % 2 == 0 ? 2 : n <= 7 ? static_cast<std::int32_t>(n) : 0;
  if (n > 1 && outcome.workers > 1) {
    CollectiveOptions on_workers;
    on_workers.replicas_per_worker = static_cast<std::int32_t>(n) / outcome.workers;
    outcome.scattered = RunOnWorkers(words, outcome.workers, on_workers, outcome.scattered_stats);
    if (n == 2) {
      CompactExactStats extracted;
      outcome.extracted = RunOnWorkers(words, 2, on_workers, extracted, 1, 2 * kCompactScatterGrain, false);
      EXPECT_EQ(extracted.sent, outcome.scattered_stats.sent);
    }
  }
  return outcome;
}

void ExpectSameBits(const Outcome& outcome, const std::string& what) {
  for (std::size_t r = 0; r < outcome.compact.size(); ++r)
    for (std::size_t i = 0; i < outcome.full.size(); ++i)
      ASSERT_EQ(std::bit_cast<std::uint32_t>(outcome.compact[r][i]), std::bit_cast<std::uint32_t>(outcome.full[i]))
          << what << ": replica " << r << ", value " << i << ": compact " << outcome.compact[r][i] << ", full "
          << outcome.full[i];
  for (std::size_t r = 0; r < outcome.scattered.size(); ++r)
    for (std::size_t i = 0; i < outcome.full.size(); ++i)
      ASSERT_EQ(std::bit_cast<std::uint32_t>(outcome.scattered[r][i]), std::bit_cast<std::uint32_t>(outcome.full[i]))
          << what << ", on " << outcome.workers << " workers: replica " << r << ", value " << i << ": compact "
          << outcome.scattered[r][i] << ", full " << outcome.full[i];
  for (std::size_t r = 0; r < outcome.extracted.size(); ++r)
    for (std::size_t i = 0; i < outcome.full.size(); ++i)
      ASSERT_EQ(std::bit_cast<std::uint32_t>(outcome.extracted[r][i]), std::bit_cast<std::uint32_t>(outcome.full[i]))
          << what << ", on 2 workers, the fields extracted: replica " << r << ", value " << i;
}

// Gradient-like values: each replica adds a few float products, with magnitudes
// that vary from value to value over 2^-40 .. 2^4, and some values zero everywhere.
Terms GradientTerms(std::size_t n, std::size_t count, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> scale(-40, 4);
  Terms terms(n, std::vector<std::vector<double>>(count));
  for (std::size_t i = 0; i < count; ++i) {
    if (i % 97 < 5) continue;  // dead units: zero on every replica
    const int e = scale(rng);
    for (std::size_t r = 0; r < n; ++r)
      for (int k = 0; k < 4; ++k) {
        const float a = std::ldexp(normal(rng), e), b = normal(rng);
        terms[r][i].push_back(static_cast<double>(a) * static_cast<double>(b));
      }
  }
  return terms;
}

TEST(CompactExact, GradientsGetTheFullAllReducesBits) {
  for (const std::size_t n : {1, 2, 3, 7, 8, 64}) {
    for (const AllReduceAlgorithm algorithm :
         {AllReduceAlgorithm::kRing, AllReduceAlgorithm::kNaive, AllReduceAlgorithm::kHalvingDoubling,
          AllReduceAlgorithm::kHierarchical}) {
      const Outcome outcome = RunBoth(GradientTerms(n, 1000, static_cast<std::uint32_t>(n)), algorithm);
      ExpectSameBits(outcome, std::to_string(n) + " replicas, " + std::string(AllReduceAlgorithmName(algorithm)));
      if (n > 1) {
        // A float per block, then a 56-bit field per value (zero blocks too: the
        // round's size is known before it runs), eight to an Int448 of 7 words, then
        // one per value left undecided. These values span 2^44 within a block, so the
        // small ones need a second window, and with 64 replicas a third.
        const CompactExactStats& stats = outcome.stats;
        EXPECT_EQ(stats.full_values, 0);
        EXPECT_EQ(stats.scale_floats, 32);
        ASSERT_EQ(stats.sent.size(), n == 64 ? 3u : 2u);
        EXPECT_EQ(stats.sent[0], 1000);
        std::int64_t words = 0;
        for (const std::int64_t sent : stats.sent) words += (sent + 7) / 8 * 7;
        EXPECT_EQ(stats.words, words);
        // The stages' times partition the call (one clock, read between stages).
        const CompactExactStats::Seconds& t = stats.seconds;
        for (const double stage : {t.scales, t.windows, t.extraction, t.sum, t.decision, t.gather})
          EXPECT_GE(stage, 0.0);
        EXPECT_GT(t.extraction, 0.0);
        EXPECT_EQ(t.gather, 0.0);  // in one process round 2 is all-reduced
        EXPECT_LE(t.scales + t.windows + t.extraction + t.sum + t.decision, t.total * (1.0 + 1e-9));
        if (outcome.workers > 1) {
          EXPECT_GT(outcome.scattered_stats.seconds.gather, 0.0);
        }
      }
    }
  }
}

// Blocks zero on every replica, the last one short, are counted; and a workspace
// kept from call to call keeps round 2's buffers through a refinement round's
// smaller ones (a call would otherwise allocate and clear them again), with the
// same bits.
TEST(CompactExact, ZeroBlocksAndAWorkspaceKeptFromCallToCall) {
  constexpr std::size_t kValues = 1020;  // 31 blocks, then 28 values
  Terms terms = GradientTerms(2, kValues, 5);
  for (std::vector<std::vector<double>>& replica : terms)
    for (std::size_t i = 0; i < kValues; ++i)
      if (i / kCompactBlock == 3 || i / kCompactBlock == 10 || i >= 992) replica[i].clear();
  const Outcome outcome = RunBoth(terms, AllReduceAlgorithm::kRing);
  ExpectSameBits(outcome, "zero blocks");
  EXPECT_EQ(outcome.stats.zero_values, 32 + 32 + 28);
  EXPECT_EQ(outcome.scattered_stats.zero_values, 32 + 32 + 28);

  std::vector<std::vector<std::int64_t>> words = WordsOf(terms);
  std::vector<std::span<std::int64_t>> inputs(words.begin(), words.end());
  std::vector<std::vector<float>> out(2, std::vector<float>(kValues));
  std::vector<std::span<float>> outputs(out.begin(), out.end());
  const ExactSumCollectives collectives = SumCollectivesOf([&]<typename T>(std::span<const std::span<T>> buffers) {
    AllReduce<T>(buffers, ReduceOp::kSum, CollectiveOptions{});
    return Status::Ok();
  });
  CompactExactWorkspace workspace;
  for (int call = 0; call < 2; ++call) {
    std::fill(out[0].begin(), out[0].end(), -1.0f);
    StatusOr<CompactExactStats> stats = CompactExactAllReduce(inputs, outputs, 2, collectives, &workspace);
    ASSERT_TRUE(stats.ok()) << stats.status().message();
    ASSERT_GE(stats->sent.size(), 2u);  // a refinement round, of fewer values
    EXPECT_LT(stats->sent.back(), stats->sent[0]);
    EXPECT_EQ(out[0], outcome.compact[0]) << "call " << call;
    for (const HugePageVector<Int448>& groups : workspace.groups) EXPECT_EQ(groups.size(), (kValues + 7) / 8);
    EXPECT_EQ(workspace.undecided.size(), kValues);
  }
}

TEST(CompactExact, ValuesOfOneScaleSendAboutSevenBytesEach) {
  // Gradient values within 2^-8 of one another in a block, the common case: about
  // 7 bytes per value (1.8x a float all-reduce) and few left for a second window.
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> scale(-8, 0);
  for (const std::size_t n : {2, 8, 64, 256}) {
    Terms terms(n, std::vector<std::vector<double>>(4096));
    for (std::size_t i = 0; i < 4096; ++i)
      for (std::size_t r = 0; r < n; ++r)
        terms[r][i].push_back(static_cast<double>(std::ldexp(normal(rng), scale(rng) - 10)) * normal(rng));
    const Outcome outcome = RunBoth(terms, AllReduceAlgorithm::kRing);
    ExpectSameBits(outcome, std::to_string(n) + " replicas");
    // 7.125 bytes at 2 and 8 replicas, 7.17 at 64, 7.88 at 256 (independent signs:
    // the sum is far below the bound its window is sized for).
    EXPECT_LT(outcome.stats.BytesPerValue(), n <= 64 ? 7.125 + 0.1 : 8.0) << n << " replicas";
  }
}

TEST(CompactExact, GradientsEncodeInSixteenBytesPerValue) {
  // Gradient-like sums of 64 products: a 128-bit window per value from its block's
  // base, a bound and a deep mask per block; no value's bits lie more than 126 bits
  // below its block's bound, so none keeps words.
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> scale(-20, 0);
  const std::int64_t count = 1000, blocks = (count + kCompactBlock - 1) / kCompactBlock;
  std::vector<std::int64_t> words(static_cast<std::size_t>(count * kExactWords), 0);
  for (std::int64_t i = 0; i < count; ++i)
    for (int k = 0; k < 64; ++k)
      ExactAddProduct(words.data() + i * kExactWords, std::ldexp(normal(rng), scale(rng)), normal(rng));
  CompactGradient g;
  g.Encode(words);
  EXPECT_EQ(g.values, count);
  EXPECT_TRUE(g.deep_index.empty());
  EXPECT_EQ(g.bytes(), count * 16 + (2 + 4 + 4) * blocks);
  for (std::int64_t i = 0; i < count; ++i) EXPECT_FALSE(g.IsDeep(i));
  // One term 2^-298 (one unit) added to value 7: its bits now reach 2^0, more than
  // 126 bits below its block's bound, so it keeps its words; its neighbours keep
  // their windows (the block's bound is unchanged).
  ExactAddDouble(words.data() + 7 * kExactWords, std::ldexp(1.0, -298));
  g.Encode(words);
  EXPECT_EQ(g.deep_index, std::vector<std::int64_t>{7});
  EXPECT_EQ(g.deep[0], 1u << 7);
  EXPECT_EQ(g.deep_words.size(), static_cast<std::size_t>(kExactWords));
  // 2^140 added to value 40 raises block 1's bound to about 2^140, and with it its
  // windows' base, above every bit of the block's other values (all below 2^8): the
  // whole block keeps its words, and no other block changes.
  ExactAddDouble(words.data() + 40 * kExactWords, std::ldexp(1.0, 140));
  g.Encode(words);
  EXPECT_EQ(g.deep[1], ~0u);
  std::vector<std::int64_t> deep = {7};
  for (std::int64_t i = 32; i < 64; ++i) deep.push_back(i);
  EXPECT_EQ(g.deep_index, deep);
  EXPECT_EQ(g.deep_words.size(), deep.size() * kExactWords);
  for (std::int64_t block = 2; block < blocks; ++block) EXPECT_EQ(g.deep[static_cast<std::size_t>(block)], 0u);
}

TEST(CompactExact, TheStickyBitOfEveryValueReadsItsOwnLowWord) {
  // Round 2 reads a window's high word and, for the bits below it, the block's mask
  // of low words that are not zero (CompactGradient::low_set). Each value is a tie, 1
  // + 2^-24 (times a power of two per block, negative in block 1), that rounds to even unless
  // replica 0 also holds 2^-100 (in its low word, far below the window): then it
  // rounds up. The 2^-100 lies on values k with k mod 3 = 0, so every lane of every
  // group, and the short last block (101 values), sees both.
  const std::size_t count = 3 * kCompactBlock + 5;
  Terms terms(2, std::vector<std::vector<double>>(count));
  for (std::size_t k = 0; k < count; ++k) {
    const double sign = k / kCompactBlock == 1 ? -1.0 : 1.0;  // (a negative value's high word has bits below)
    const double scale = std::ldexp(sign, static_cast<int>(k / kCompactBlock) * 3 - 4);
    terms[0][k] = {scale};
    if (k % 3 == 0) terms[0][k].push_back(scale * std::ldexp(1.0, -100));
    terms[1][k] = {scale * std::ldexp(1.0, -24)};
  }
  const Outcome outcome = RunBoth(terms, AllReduceAlgorithm::kRing);
  ExpectSameBits(outcome, "ties with low bits");
  for (std::size_t k = 0; k < count; ++k) {
    const double scale = std::fabs(terms[0][k][0]);
    EXPECT_EQ(std::fabs(outcome.full[k]), k % 3 == 0 ? scale * (1.0 + std::ldexp(1.0, -23)) : scale) << k;
  }
}

TEST(CompactExact, DecidesTiesCancellationAndTheEdgesOfTheRange) {
  // 64 values on 4 replicas, each a case; pairs of replicas hold the two halves.
  const double tiny = std::ldexp(1.0, -298);  // one unit: the smallest product
  const double min_normal = std::ldexp(1.0, -126), max_float = std::numeric_limits<float>::max();
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<std::vector<std::vector<double>>> cases = {
      {{1.0}, {std::ldexp(1.0, -24)}, {}, {}},                                       // tie: to even, 1
      {{1.0 + std::ldexp(1.0, -23)}, {std::ldexp(1.0, -24)}, {}, {}},                // tie: to even, up
      {{1.0}, {std::ldexp(1.0, -24)}, {tiny}, {}},                                   // just above the tie
      {{1.0}, {std::ldexp(1.0, -24)}, {-tiny}, {}},                                  // just below the tie
      {{-1.0}, {-std::ldexp(1.0, -24)}, {-tiny}, {}},                                // negative, past the tie
      {{std::ldexp(1.0, 60)}, {-std::ldexp(1.0, 60)}, {tiny}, {}},                   // cancels to one unit: +0
      {{std::ldexp(1.0, 60)}, {-std::ldexp(1.0, 60)}, {-tiny}, {}},                  // -0
      {{std::ldexp(1.0, 60)}, {-std::ldexp(1.0, 60)}, {std::ldexp(1.0, -140)}, {}},  // a subnormal survives
      {{std::ldexp(1.0, 60)}, {-std::ldexp(1.0, 60)}, {min_normal}, {-tiny}},        // just below the normal range
      {{3.0}, {-3.0}, {}, {}},                                                       // exact zero: +0
      {{max_float}, {max_float}, {}, {}},                                            // overflows to +inf
      {{-max_float}, {-max_float}, {}, {}},                                          // -inf
      {{max_float}, {std::ldexp(1.0, 103)}, {}, {}},                                 // the overflow tie: +inf
      {{max_float}, {std::ldexp(1.0, 103)}, {-tiny}, {}},                            // just below it: FLT_MAX
      {{std::ldexp(1.0, 200)}, {-std::ldexp(1.0, 200)}, {0.5}, {}},                  // products beyond float cancel
      {{nan}, {1.0}, {}, {}},                                                        // NaN
      {{inf}, {1.0}, {}, {}},                                                        // +inf
      {{inf}, {-inf}, {}, {}},                                                       // NaN
      {{-inf}, {}, {}, {}},                                                          // -inf
      {{std::ldexp(1.0, -149)}, {std::ldexp(1.0, -150)}, {}, {}},                    // subnormal tie: to even
      {{std::ldexp(1.0, -150)}, {}, {}, {}},                                         // tie with zero: +0
      {{-std::ldexp(1.0, -150)}, {-tiny}, {}, {}},                                   // past it, negative
      {{std::ldexp(1.0, 30)}, {std::ldexp(1.0, 5) + std::ldexp(1.0, -20)}, {std::ldexp(1.0, -200)}, {1.0}},
      {{0.1f * 0.3f}, {-(0.1f * 0.3f)}, {std::ldexp(1.0, -290)}, {std::ldexp(1.0, -297)}},
  };
  const std::size_t n = 4;
  // Pad to 64 values, and repeat the cases inside a block of large values so that
  // their windows start far above them (refinement rounds).
  Terms terms(n, std::vector<std::vector<double>>(64));
  for (std::size_t c = 0; c < cases.size(); ++c)
    for (std::size_t r = 0; r < n; ++r) terms[r][c] = cases[c][r];
  for (std::size_t c = 0; c < cases.size() && 32 + c < 64; ++c)
    for (std::size_t r = 0; r < n; ++r) {
      const bool finite = std::all_of(cases[c].begin(), cases[c].end(), [](const std::vector<double>& t) {
        return std::all_of(t.begin(), t.end(), [](double x) { return std::isfinite(x); });
      });
      if (finite && c != 14) terms[r][32 + c] = cases[c][r];  // 14: too large for a window
    }
  for (std::size_t r = 0; r < n; ++r) terms[r][63] = {std::ldexp(1.0, 100)};
  for (const AllReduceAlgorithm algorithm : {AllReduceAlgorithm::kRing, AllReduceAlgorithm::kHalvingDoubling}) {
    const Outcome outcome = RunBoth(terms, algorithm);
    ExpectSameBits(outcome, std::string(AllReduceAlgorithmName(algorithm)));
    EXPECT_EQ(outcome.stats.full_values, 32);  // the first block holds non-finite terms
    EXPECT_GE(outcome.stats.sent.size(), 3u);  // 2^100 beside units: several windows
  }
  // Each finite case alone in a block of its own, and no block sent whole: the first
  // window decides most of them, on its fast path (DecideWindowSums).
  Terms alone(n, std::vector<std::vector<double>>(kCompactBlock * (cases.size() + 1)));
  for (std::size_t c = 0; c < cases.size(); ++c) {
    bool finite = c != 14;
    for (const std::vector<double>& t : cases[c])
      finite = finite && std::all_of(t.begin(), t.end(), [](double x) { return std::isfinite(x); });
    if (finite)
      for (std::size_t r = 0; r < n; ++r) alone[r][kCompactBlock * c] = cases[c][r];
  }
  // And a last block whose small values fit its window in a few bits, no fraction:
  // an exact result of fewer than 24 bits, positive and negative.
  const std::size_t last = kCompactBlock * cases.size();
  alone[0][last] = {1.0};
  alone[1][last + 1] = {std::ldexp(1.0, -50)};
  alone[2][last + 2] = {-3.0 * std::ldexp(1.0, -52)};
  alone[3][last + 3] = {std::ldexp(1.0, -50), std::ldexp(1.0, -52)};
  const Outcome outcome = RunBoth(alone, AllReduceAlgorithm::kRing);
  ExpectSameBits(outcome, "alone");
  EXPECT_EQ(outcome.stats.full_values, 0);
}

// Round 2 scattered across workers (ExactSumCollectives::Scattered), as MPI ranks
// run it: each worker decides its slice of 4096-value grains, the floats are
// all-gathered, and the undecided values of every slice, with their sums, reach every
// worker for the refinement rounds. Every replica ends with the full all-reduce's
// bits: for 2 to 8 workers, slices of one grain or several, workers with an empty
// slice (more workers than grains), and undecided values in every slice.
TEST(CompactExact, ScatteredAcrossWorkersGivesTheSameBits) {
  struct Case {
    std::size_t replicas, values;
    std::vector<std::int32_t> workers;
  };
  // (5,001 and 1,234 values: the last group is not full, and some workers' slices
  // are empty, past the last value.)
  for (const Case& c : std::vector<Case>{{2, 20000, {2}},
                                         {3, 9000, {3}},
                                         {4, 20000, {2, 4}},
                                         {8, 5001, {2, 4, 8}},
                                         {6, 30000, {2, 3, 6}},
                                         {3, 1234, {3}}}) {
    const Terms terms = GradientTerms(c.replicas, c.values, static_cast<std::uint32_t>(c.replicas));
    const Outcome outcome = RunBoth(terms, AllReduceAlgorithm::kRing);
    ExpectSameBits(outcome, std::to_string(c.replicas) + " replicas");
    ASSERT_GE(outcome.stats.sent.size(), 2u);  // small values need a refinement round
    const std::vector<std::vector<std::int64_t>> words = WordsOf(terms);
    for (const std::int32_t w : c.workers) {
      CollectiveOptions options;
      options.replicas_per_worker = static_cast<std::int32_t>(c.replicas) / w;
      CompactExactStats stats;
      const std::vector<std::vector<float>> out = RunOnWorkers(words, w, options, stats);
      for (std::size_t r = 0; r < c.replicas; ++r)
        for (std::size_t i = 0; i < c.values; ++i)
          ASSERT_EQ(std::bit_cast<std::uint32_t>(out[r][i]), std::bit_cast<std::uint32_t>(outcome.full[i]))
              << c.replicas << " replicas on " << w << " workers: replica " << r << ", value " << i;
      // Round 2's fields reduce-scattered, an int64 word each, and its floats
      // all-gathered; the same rounds, the same refinements.
      if (w == 2 && c.values == 5001) {  // two grains: values [4096, 5001)
        const std::vector<ElementRange> slices = CompactScatterSlices(5001, 4);
        ASSERT_EQ(slices.size(), 4u);
        EXPECT_EQ(slices[0].begin, 0);
        EXPECT_EQ(slices[0].count, 4096);
        EXPECT_EQ(slices[1].begin, 4096);
        EXPECT_EQ(slices[1].count, 905);
        EXPECT_EQ(slices[3].begin, 5001);  // empty, at the end
        EXPECT_EQ(slices[3].count, 0);
      }
      // Two workers of one replica each send their high words, and each block's
      // header (none of these blocks goes as fields); else the fields.
      const bool high_words = w == 2 && options.replicas_per_worker == 1;
      const auto blocks = static_cast<std::int64_t>((c.values + kCompactBlock - 1) / kCompactBlock);
      EXPECT_EQ(stats.scattered_words, static_cast<std::int64_t>(c.values) + (high_words ? blocks : 0));
      EXPECT_EQ(stats.gathered_floats, static_cast<std::int64_t>(c.values));
      EXPECT_EQ(stats.sent, outcome.stats.sent);
      // Each undecided value's index and sum are all-gathered (16 bytes, half an
      // all-reduce's traffic); these values leave far more undecided than gradients
      // do (stats.sent[1] of them).
      EXPECT_EQ(stats.gathered_words, w + 2 * stats.sent[1]);  // a count from each worker, then the pairs
      // So the next call, with the same workspace, all-reduces round 2 instead: the
      // same bits.
      CompactExactStats second;
      const std::vector<std::vector<float>> again = RunOnWorkers(words, w, options, second, 2);
      EXPECT_EQ(again, out);
      EXPECT_EQ(second.scattered_words, 0);
      EXPECT_EQ(second.BytesPerValue(), outcome.stats.BytesPerValue());
      // In one piece (a training step's, for gradients of up to kCompactScatterPiece
      // values), or in pieces of one grain (a piece's slices then all lie on worker 0):
      // the same bits, the same rounds.
      for (const std::int64_t piece : {kCompactScatterPiece, kCompactScatterGrain}) {
        CompactExactStats whole;
        EXPECT_EQ(RunOnWorkers(words, w, options, whole, 1, piece), out) << piece;
        EXPECT_EQ(whole.sent, stats.sent) << piece;
        EXPECT_EQ(whole.gathered_words, stats.gathered_words) << piece;
      }
      // With the fields extracted and reduce-scattered instead of the high words:
      // the same bits, the same rounds, no headers.
      if (high_words) {
        CompactExactStats extracted;
        EXPECT_EQ(RunOnWorkers(words, w, options, extracted, 1, 2 * kCompactScatterGrain, false), out);
        EXPECT_EQ(extracted.sent, stats.sent);
        EXPECT_EQ(extracted.gathered_words, stats.gathered_words);
        EXPECT_EQ(extracted.scattered_words, static_cast<std::int64_t>(c.values));
      }
    }
  }
  // The cases that decide rounding (ties, cancellation, the range's edges), each
  // alone in a block, repeated past three grains; and a block with a non-finite term,
  // which sends its values whole: round 2 is then all-reduced on every worker.
  const double tiny = std::ldexp(1.0, -298);
  const std::vector<std::vector<std::vector<double>>> cases = {
      {{1.0}, {std::ldexp(1.0, -24)}},
      {{1.0}, {std::ldexp(1.0, -24) + tiny}},
      {{-1.0}, {-std::ldexp(1.0, -24) - tiny}},
      {{std::ldexp(1.0, 60)}, {-std::ldexp(1.0, 60) + tiny}},
      {{std::ldexp(1.0, 60)}, {-std::ldexp(1.0, 60) + std::ldexp(1.0, -140)}},
      {{std::ldexp(1.0, -149)}, {std::ldexp(1.0, -150)}},
      {{std::numeric_limits<float>::max()}, {std::ldexp(1.0, 103) - tiny}},
  };
  Terms terms(2, std::vector<std::vector<double>>(13000));
  for (std::size_t i = 0; i < 13000; i += kCompactBlock) {
    for (std::size_t r = 0; r < 2; ++r) terms[r][i] = cases[(i / kCompactBlock) % cases.size()][r];
    // Every other block, a large value beside the case: its window starts far above
    // the case's bits, which a refinement round decides.
    if (i / kCompactBlock % 2 == 1 && i + 31 < 13000) terms[0][i + 31] = {std::ldexp(1.0, 100)};
  }
  Outcome outcome = RunBoth(terms, AllReduceAlgorithm::kRing);
  ExpectSameBits(outcome, "the rounding cases");
  EXPECT_GT(outcome.scattered_stats.scattered_words, 0);
  EXPECT_GT(outcome.scattered_stats.sent.size(), 1u);
  // Few undecided values (one in 64): the wire carries 6.6 bytes a value (with the
  // blocks' headers, and the fields of the blocks below 2^126 units), against 7.3
  // all-reduced (6.1 and 7.1 with none: 1.5x and 1.8x a float all-reduce's).
  EXPECT_LT(outcome.scattered_stats.BytesPerValue(), outcome.stats.BytesPerValue() - 0.7);
  terms[1][12345] = {std::numeric_limits<double>::infinity()};
  outcome = RunBoth(terms, AllReduceAlgorithm::kRing);
  ExpectSameBits(outcome, "with a non-finite term");
  EXPECT_EQ(outcome.scattered_stats.scattered_words, 0);
  EXPECT_EQ(outcome.scattered_stats.full_values, 32);
}

// A piece that is not a positive multiple of the grain is refused, on every worker
// alike (each names the same), before round 2's collectives: an error, no hang.
TEST(CompactExact, RefusesPiecesOffTheGrain) {
  const std::vector<std::vector<std::int64_t>> words = WordsOf(Terms(2, std::vector<std::vector<double>>(5000, {1.5})));
  for (const std::int64_t piece : {std::int64_t{0}, -kCompactScatterGrain, kCompactScatterGrain + 32}) {
    std::vector<std::vector<std::int64_t>> inputs = words;
    std::vector<std::vector<float>> outputs(2, std::vector<float>(5000));
    EmulatedWorkers emulated(2);
    std::vector<Status> statuses(2);
    std::vector<std::thread> threads;
    for (std::int32_t w = 0; w < 2; ++w)
      threads.emplace_back([&, w] {
        std::vector<std::span<std::int64_t>> in{inputs[static_cast<std::size_t>(w)]};
        std::vector<std::span<float>> out{outputs[static_cast<std::size_t>(w)]};
        CollectiveOptions options;
        options.replicas_per_worker = 1;
        ExactSumCollectives collectives = emulated.For(w, 1, options);
        collectives.scattered.piece = piece;
        statuses[static_cast<std::size_t>(w)] = CompactExactAllReduce(in, out, 2, collectives).status();
      });
    for (std::thread& t : threads) t.join();
    for (const Status& status : statuses) {
      EXPECT_EQ(status.code(), Status::Code::kInvalidArgument) << piece;
      EXPECT_NE(status.message().find("multiple of 4096 values, not " + std::to_string(piece)), std::string::npos)
          << status.message();
    }
  }
}

// CompactGradient::AddTo, as gradient accumulation uses it: adding an encoding to
// words gives the words of adding the words it encodes, for windows, deep values
// (bits far below their block's bound), whole blocks (a non-finite term), huge
// values and zeros.
TEST(CompactExact, AnEncodingAddsAsItsWords) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> exponent(-20, 10), pick(0, 19);
  std::uniform_real_distribution<float> significand(-2.0f, 2.0f);
  const std::int64_t count = 200;
  auto draw_words = [&] {
    std::vector<std::int64_t> words(static_cast<std::size_t>(count * kExactWords), 0);
    for (std::int64_t i = 0; i < count; ++i) {
      if (pick(rng) == 0) continue;  // zero
      for (int k = 0; k < 3; ++k)
        ExactAddProduct(words.data() + i * kExactWords, std::ldexp(significand(rng), exponent(rng)),
                        std::ldexp(significand(rng), exponent(rng)));
    }
    return words;
  };
  std::vector<std::int64_t> encoded_words = draw_words(), words = draw_words();
  ExactAddDouble(encoded_words.data() + 7 * kExactWords, std::ldexp(1.0, -298));                      // deep
  ExactAddDouble(encoded_words.data() + 40 * kExactWords, std::numeric_limits<double>::quiet_NaN());  // block 1 whole
  ExactAddDouble(encoded_words.data() + 41 * kExactWords, std::ldexp(1.0, 140));
  ExactAddDouble(encoded_words.data() + 70 * kExactWords, std::numeric_limits<double>::infinity());  // block 2 whole
  ExactAddDouble(words.data() + 71 * kExactWords, -std::numeric_limits<double>::infinity());
  CompactGradient g;
  std::vector<std::int64_t> copy = encoded_words;
  g.Encode(copy);
  ASSERT_TRUE(g.IsDeep(7) && g.IsDeep(40) && g.IsDeep(70));
  ASSERT_LT(g.deep_index.size(), static_cast<std::size_t>(count / 2));  // most values are windows
  std::vector<std::int64_t> expected = words;
  for (std::int64_t i = 0; i < count; ++i)
    ExactMerge(expected.data() + i * kExactWords, encoded_words.data() + i * kExactWords);
  g.AddTo(words);
  ExactNormalizeAll(words);
  ExactNormalizeAll(expected);
  EXPECT_EQ(words, expected);
}

// Blocks that are zero on one replica only: on two workers, one sends high words of
// zeros (its block's header says so) or decides beside its own zeros, in vectors.
// Each block a third of the time zero on replica 0, a third on replica 1.
TEST(CompactExact, BlocksZeroOnOneReplica) {
  Terms terms = GradientTerms(2, 3 * kCompactScatterGrain + 100, 11);
  for (std::size_t i = 0; i < terms[0].size(); ++i)
    if (const std::size_t third = i / kCompactBlock % 3; third < 2) terms[third][i].clear();
  const Outcome outcome = RunBoth(terms, AllReduceAlgorithm::kRing);
  ASSERT_EQ(outcome.workers, 2);
  ExpectSameBits(outcome, "blocks zero on one replica");
}

TEST(CompactExact, BlocksDeepOnOneReplica) {
  // Per block, one replica (the first third: replica 0; the second: replica 1) holds a
  // deep value, with bits 160 and more below its top: its own fields are not in its
  // high words, while the other's are. Where two workers send their high words, each
  // decides blocks of both kinds in its slice.
  Terms terms = GradientTerms(2, 3 * kCompactScatterGrain + 100, 13);
  for (std::size_t i = 0; i < terms[0].size(); i += kCompactBlock)
    if (const std::size_t third = i / kCompactBlock % 3; third < 2 && !terms[third][i].empty())
      terms[third][i].push_back(std::ldexp(terms[third][i][0], -160));
  const Outcome outcome = RunBoth(terms, AllReduceAlgorithm::kRing);
  ASSERT_EQ(outcome.workers, 2);
  ExpectSameBits(outcome, "blocks deep on one replica");
}

TEST(CompactExact, RandomValuesOfEveryMagnitude) {
  // Each value a sum of a few floats or products drawn over the whole exponent range,
  // with signs mixed so that replicas cancel one another.
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> exponent(-149, 127), count(0, 3), pick(0, 9);
  std::uniform_real_distribution<float> significand(1.0f, 2.0f);
  auto draw = [&]() {
    // One in ten: a product below 2^-172 (126 units), whose window starts at bit 0.
    const bool tiny = pick(rng) == 0;
    const float a = std::ldexp(significand(rng), tiny ? -149 + std::abs(exponent(rng)) % 8 : exponent(rng) / 2);
    const float b = std::ldexp(significand(rng), tiny ? -126 - std::abs(exponent(rng)) % 20 : exponent(rng) / 2);
    return (pick(rng) < 5 ? -1.0 : 1.0) * static_cast<double>(a) * static_cast<double>(b);
  };
  for (const std::size_t n : {2, 5, 16}) {
    Terms terms(n, std::vector<std::vector<double>>(2000));
    for (std::size_t i = 0; i < 2000; ++i) {
      const double shared = draw();
      for (std::size_t r = 0; r < n; ++r) {
        for (int k = count(rng); k > 0; --k) terms[r][i].push_back(draw());
        if (pick(rng) < 3) terms[r][i].push_back(r % 2 == 0 ? shared : -shared);  // cancels in pairs
      }
    }
    const Outcome outcome = RunBoth(terms, AllReduceAlgorithm::kRing);
    ExpectSameBits(outcome, std::to_string(n) + " replicas");
  }
}

TEST(CompactExact, BlocksOfOneScalePerReplica) {
  // Per block and replica, values of one binade, which differs widely from replica to
  // replica: no value is deep, and a replica's window lies anywhere from within its
  // bits to far above them (then its field is its sign and its sticky bit says
  // whether it is zero), round 2's fast path throughout.
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> exponent(-140, 120), pick(0, 9);
  std::uniform_real_distribution<float> significand(1.0f, 2.0f);
  const std::size_t blocks = 64, count = blocks * kCompactBlock;
  for (const std::size_t n : {2, 3, 8}) {
    Terms terms(n, std::vector<std::vector<double>>(count));
    for (std::size_t block = 0; block < blocks; ++block)
      for (std::size_t r = 0; r < n; ++r) {
        const int e = exponent(rng);
        for (std::size_t i = block * kCompactBlock; i < (block + 1) * kCompactBlock; ++i)
          if (pick(rng) != 0) terms[r][i].push_back((pick(rng) < 5 ? -1.0 : 1.0) * std::ldexp(significand(rng), e));
      }
    const Outcome outcome = RunBoth(terms, AllReduceAlgorithm::kRing);
    ExpectSameBits(outcome, std::to_string(n) + " replicas");
  }
}

// ScaleSumTop's bound on the exact sum of the block scales, whatever order the float
// sum took. The edge: a float sum just under a power of two that lost its smallest
// terms, whose exact sum reaches the power: ilogb(s) + 1 would be too small there.
TEST(CompactExact, ScaleSumTopAtAPowerOfTwo) {
  using compact_internal::ScaleSumTop;
  // 1 + 1/2 + ... + 2^-23 = 2 - 2^-23, then four 2^-25 that a float sum loses: the
  // exact sum is 2.
  float s = 0.0f;
  for (int k = 0; k <= 23; ++k) s += std::ldexp(1.0f, -k);
  for (int k = 0; k < 4; ++k) s += std::ldexp(1.0f, -25);
  EXPECT_EQ(s, 2.0f - std::ldexp(1.0f, -23));
  EXPECT_EQ(ScaleSumTop(s, 28), 2);
  EXPECT_EQ(ScaleSumTop(1.5f, 28), 1);  // far from the power: one bit tighter
  EXPECT_EQ(ScaleSumTop(1.0f, 1), 1);
  EXPECT_EQ(ScaleSumTop(std::ldexp(1.0f, -149), 2), -148);  // the smallest subnormal
}

RC_GTEST_PROP(CompactExact, ScaleSumTopBoundsTheExactSum, ()) {
  // Scales 2^(e - k), k in [0, 40] (or zero); half the time a binade's expansion,
  // k = 0..23, with dust below the float sum's last bit (k >= 25). Summed in float
  // largest first (the dust lost), in a random order, or as a random tree; the exact
  // sum in units of 2^(e - 40).
  const int n = *rc::gen::inRange(1, 301);
  const int e = *rc::gen::inRange(-149 + 40, 100);
  const bool expansion = *rc::gen::arbitrary<bool>();
  std::vector<int> below(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r)
    below[static_cast<std::size_t>(r)] = expansion && r < 24 ? r : *rc::gen::inRange(expansion ? 25 : -1, 41);
  std::vector<float> scales;
  std::uint64_t exact = 0;
  for (const int k : below) {
    scales.push_back(k < 0 ? 0.0f : std::ldexp(1.0f, e - k));
    exact += k < 0 ? 0 : std::uint64_t{1} << (40 - k);
  }
  RC_PRE(exact != 0);
  std::mt19937 rng(*rc::gen::arbitrary<std::uint32_t>());
  const int order = *rc::gen::inRange(0, 3);
  if (order == 0) std::sort(scales.begin(), scales.end(), std::greater<>());
  if (order == 1) std::shuffle(scales.begin(), scales.end(), rng);
  if (order == 2) {
    while (scales.size() > 1) {  // a random tree: two at random, their sum back
      std::uniform_int_distribution<std::size_t> pick(0, scales.size() - 1);
      std::swap(scales[pick(rng)], scales.back());
      const float x = scales.back();
      scales.pop_back();
      scales[pick(rng) % scales.size()] += x;
    }
  } else {
    for (std::size_t r = 1; r < scales.size(); ++r) scales[0] += scales[r];
  }
  const int top = compact_internal::ScaleSumTop(scales[0], n);
  const int shift = top - (e - 40);  // exact < 2^shift in units
  RC_ASSERT(shift > 0);
  RC_ASSERT(shift >= 64 || exact < std::uint64_t{1} << shift);
  RC_ASSERT(top <= std::ilogb(scales[0]) + 2);
}

// The correctly rounded m 2^lsb + add units, from the words.
float RoundUnits(std::int64_t m, int lsb, std::int64_t add) {
  std::vector<std::int64_t> words(kExactWords, 0);
  ExactAddInt128(words.data(), m, lsb);
  ExactAddInt128(words.data(), add, 0);
  return ExactToFloat(words.data());
}

// Where DecideWindowSums departs from the words: a value is decided exactly where
// both ends of its interval, [Q 2^L + K, (Q + K) 2^L - K] (Q 2^L where K = 0),
// round to the same float, and that float is its result. "" where it does not.
std::string WindowSumsMismatch(const std::vector<std::int64_t>& sums, int count_bits, int lsb) {
  std::vector<float> out(sums.size(), -1.0f);
  std::vector<char> undecided(sums.size(), 2);
  compact_internal::DecideWindowSums(sums, count_bits, lsb, out, undecided);
  for (std::size_t k = 0; k < sums.size(); ++k) {
    const std::int64_t q = sums[k] >> count_bits, n = sums[k] & ((std::int64_t{1} << count_bits) - 1);
    const float low = RoundUnits(q, lsb, n), high = n == 0 ? low : RoundUnits(q + n, lsb, -n);
    const bool alike = std::bit_cast<std::uint32_t>(low) == std::bit_cast<std::uint32_t>(high);
    if (undecided[k] != (alike ? 0 : 1) ||
        (alike && std::bit_cast<std::uint32_t>(out[k]) != std::bit_cast<std::uint32_t>(low)))
      return "sum " + std::to_string(sums[k]) + " (value " + std::to_string(k) + "): undecided " +
             std::to_string(int{undecided[k]}) + ", " + std::to_string(out[k]) + " against " + std::to_string(low);
  }
  return "";
}

// Window sums Q 2^b + K: the replicas' quotients' sum Q and K replicas with bits below
// lsb. Q of every width a field holds, sign, and bit pattern that rounding turns on:
// powers of two and their neighbours, ties (a one, then zeros, past the 24th bit),
// ties' neighbours, random bits.
rc::Gen<std::int64_t> WindowSum(int count_bits, int lsb) {
  return rc::gen::exec([count_bits, lsb] {
    // |Q| < 2^(55 - b); half the time of the widest, whose ends the double holds only
    // where they are even.
    const int width =
        *rc::gen::arbitrary<bool>() ? 55 - count_bits - *rc::gen::inRange(0, 3) : *rc::gen::inRange(0, 56 - count_bits);
    const std::uint64_t top = width == 0 ? 0 : std::uint64_t{1} << (width - 1);
    std::uint64_t magnitude = 0;
    switch (*rc::gen::inRange(0, 4)) {
      case 0:
        magnitude = top;
        break;
      case 1: {  // a tie: 24 kept bits, then a one and zeros
        const int below = std::max(width - 25, 0);
        magnitude = (top | (*rc::gen::arbitrary<std::uint64_t>() & (top - 1))) >> below << below;
        if (below > 0) magnitude |= std::uint64_t{1} << (below - 1);
        break;
      }
      default:
        magnitude = top | (*rc::gen::arbitrary<std::uint64_t>() & (top == 0 ? 0 : top - 1));
    }
    magnitude += static_cast<std::uint64_t>(*rc::gen::inRange(-1, 2));  // a neighbour
    magnitude = std::min<std::uint64_t>(magnitude, (std::uint64_t{1} << (55 - count_bits)) - 2);
    const auto q = static_cast<std::int64_t>(magnitude) * (*rc::gen::arbitrary<bool>() ? -1 : 1);
    // K <= N < 2^b replicas, and none where nothing lies below the window (lsb 0).
    const std::int64_t k =
        lsb == 0 || *rc::gen::arbitrary<bool>() ? 0 : *rc::gen::inRange<std::int64_t>(1, std::int64_t{1} << count_bits);
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(q) << count_bits) + k;
  });
}

// Round 2's decision against the words' (WindowSumsMismatch). Window lsbs over the whole range, with
// results near 2^-126, subnormal, and near the overflow threshold, and lsbs below
// log2(N) (K may pass 2^L); sums in runs of any length (four at a time and the
// rest).
RC_GTEST_PROP(CompactExact, WindowSumsDecideWhereTheirIntervalsRoundAlike, ()) {
  const int count_bits = *rc::gen::inRange(1, 21);
  // 0: anywhere; 1: near 2^-126 (lsb + width = 172); 2: near 2^128; 3: a narrow lsb.
  const int edge = *rc::gen::inRange(0, 4);
  const int lsb = edge == 0   ? *rc::gen::inRange(0, 435)
                  : edge == 3 ? *rc::gen::inRange(0, 24)
                              : std::max(0, (edge == 1 ? 172 : 426) - *rc::gen::inRange(0, 56 - count_bits));
  const auto sums =
      *rc::gen::container<std::vector<std::int64_t>>(*rc::gen::inRange(1, 40), WindowSum(count_bits, lsb));
  RC_ASSERT(WindowSumsMismatch(sums, count_bits, lsb) == "");
}

// Where two workers send their high words, each part of a value is (its high word
// >> shift) 2^b + its sticky bit (bits below the window in the high word, or its
// low word's bit in low_set). A block of such parts, both workers', whose sums are
// those of WindowSum (ties, powers of two, their neighbours), split at random
// between the two; each part with its own window height: mostly a few bits into
// the high word, sometimes 63 or 64 (then its bits are its sign). The high-words
// decision (in registers: vectors of eight in the AVX-512 build, four in the AVX2
// one) against DecideWindowSums of the fields' sums: the same flags, and the same
// floats where decided.
RC_GTEST_PROP(CompactExact, HighWordBlocksDecideAsTheirFieldsSums, ()) {
  constexpr int kCountBits = 2;  // two workers of one replica each
  const int edge = *rc::gen::inRange(0, 4);
  const int lsb = edge == 0   ? *rc::gen::inRange(1, 435)
                  : edge == 3 ? *rc::gen::inRange(0, 24)
                              : std::max(0, (edge == 1 ? 172 : 426) - *rc::gen::inRange(0, 54));
  std::array<std::vector<std::int64_t>, 2> high = {std::vector<std::int64_t>(kCompactBlock),
                                                   std::vector<std::int64_t>(kCompactBlock)};
  std::array<std::int64_t, 2> header{};
  std::array<int, 2> above{};
  for (int w = 0; w < 2; ++w) {
    above[w] = *rc::gen::arbitrary<bool>() ? *rc::gen::inRange(0, 12) : *rc::gen::element(0, 1, 62, 63, 64);
    // Nothing lies below the window at lsb 0 (DecideWindowSums' contract).
    const auto low_set = lsb == 0 ? 0u : *rc::gen::arbitrary<std::uint32_t>();
    header[w] = static_cast<std::int64_t>(low_set) | static_cast<std::int64_t>(above[w]) << 32;
  }
  for (std::int64_t k = 0; k < kCompactBlock; ++k) {
    // The sum's quotient Q, split into the two parts' quotients, each in [-limit,
    // limit): a field's 52 bits, or what its shift leaves of the high word's 63.
    const std::int64_t q = *WindowSum(kCountBits, 0) >> kCountBits;
    auto limit = [](int a) { return a >= 62 ? std::int64_t{1} : std::int64_t{1} << std::min(52, 62 - a); };
    const std::int64_t limit0 = limit(above[0]), limit1 = limit(above[1]);
    std::array<std::int64_t, 2> part{};
    part[0] = std::clamp(*rc::gen::inRange<std::int64_t>(-limit0, limit0), q - limit1 + 1, q + limit1);
    part[1] = q - part[0];
    RC_PRE(part[0] >= -limit0 && part[0] < limit0 && part[1] >= -limit1 && part[1] < limit1);
    for (int w = 0; w < 2; ++w) {
      const int shift = std::min(above[w], 63);
      const std::uint64_t below = shift == 0 ? 0 : (std::uint64_t{1} << shift) - 1;
      const std::uint64_t low =
          lsb == 0 || *rc::gen::arbitrary<bool>() ? 0 : *rc::gen::arbitrary<std::uint64_t>() & below;
      high[static_cast<std::size_t>(w)][static_cast<std::size_t>(k)] =
          static_cast<std::int64_t>(static_cast<std::uint64_t>(part[w]) << shift | low);
    }
  }
  std::vector<std::int64_t> sums = compact_internal::HighWordFields(high[0], header[0], kCountBits);
  const std::vector<std::int64_t> other = compact_internal::HighWordFields(high[1], header[1], kCountBits);
  for (std::size_t k = 0; k < sums.size(); ++k) sums[k] += other[k];
  std::vector<float> expected(kCompactBlock, -1.0f), out(kCompactBlock, -2.0f);
  std::vector<char> expected_undecided(kCompactBlock, 2), undecided(kCompactBlock, 3);
  compact_internal::DecideWindowSums(sums, kCountBits, lsb, expected, expected_undecided);
  compact_internal::DecideHighWordBlocks(high[0], header[0], high[1], header[1], kCountBits, lsb, out, undecided);
  for (std::size_t k = 0; k < sums.size(); ++k) {
    RC_ASSERT(int{undecided[k]} == int{expected_undecided[k]});
    if (expected_undecided[k] == 0)
      RC_ASSERT(std::bit_cast<std::uint32_t>(out[k]) == std::bit_cast<std::uint32_t>(expected[k]));
  }
}

// The ends a double holds only rounded (2^53 and past), where that rounding lands on
// a float's midpoint: q = 2^53 + k 2^30 + 2^29 (24 kept bits, then a tie), k even,
// with a fraction (t = 2q + 1), and the tie's neighbour q + 1 without (t = 2q + 2,
// a double's half ulp past the tie). Rounded twice, both would go down to even;
// they lie past the tie and round up. Positive and negative, one count bit (the
// widest fields), in a run of four and alone.
TEST(CompactExact, WindowSumsPastADoublesPrecision) {
  const std::int64_t tie = (std::int64_t{1} << 53) + (std::int64_t{6} << 30) + (std::int64_t{1} << 29);
  const std::vector<std::int64_t> sums = {tie * 2 + 1, (tie + 1) * 2, -tie * 2 + 1, -(tie + 1) * 2, tie * 2 + 1};
  for (const int lsb : {1, 200, 370}) EXPECT_EQ(WindowSumsMismatch(sums, 1, lsb), "") << "lsb " << lsb;
}

}  // namespace
}  // namespace dtlab
