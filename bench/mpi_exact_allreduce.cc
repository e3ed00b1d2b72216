// Exact mode's all-reduce between real processes, against a float all-reduce of the
// same gradient (issue 22, item 1). Each rank computes seed-cnn's exact gradient for
// its own 8 Fashion-MNIST examples (initial weights), tiled to the size asked (value
// i is value i mod 121,930), and all-reduces it five ways over MPI:
//   MPI_Allreduce  the rounded gradient, MPI_FLOAT SUM in place (the peer);
//   float          dtlab's float ring over MPI (MpiWorkerGroup), what fast mode moves;
//   compact        the compact exact all-reduce (sim/comm/compact_exact.h) from the
//                  encoded gradient, as a training step's waves leave it, its window
//                  sums all-reduced (every rank decides every value);
//   scattered      the same, its window sums reduce-scattered, each rank deciding its
//                  slice, the floats all-gathered (what a training step runs on MPI);
//   words          the kExactWords int64 words per value, then rounded once.
// compact's and scattered's floats are checked bitwise against words' on every rank. For each size:
// warm-up, then three rounds of each, alternating, each round a few calls between
// two barriers (their buffers refilled before the round), the best round reported.
// One replica per rank: dtlab's hierarchical all-reduce is the ring between ranks.
// Rank 0 prints one line per size and implementation:
//
//   bytes_per_rank ranks implementation seconds_per_call wire_bytes_per_value bitwise
//
// (bytes_per_rank: the float gradient's; wire bytes as CompactExactStats counts them,
// 4 for float, 152 for words; bitwise: the check, 1 for the float ones and words).
// Run from the repository root (the data set): mpirun -np N
// build/release/bench/mpi_exact_allreduce [MiB ...] (default 0 4 16; 0: one copy of
// the gradient, 0.47 MiB); bench/compare_mpi_exact.sh runs it on 2 and 4 ranks.
// With MPI_EXACT_STAGES=1 in the environment, rank 0 also writes to stderr where the
// compact calls' time went (CompactExactStats::seconds), per stage, in milliseconds
// per call over the timed rounds: rank 0's mean / the largest rank's mean.
// The float buffers (MPI_Allreduce's, the floats the compact all-reduces deliver)
// are HugePageVectors, as a replica's gradient buffer (Cluster's `flat`) is: the peer
// and dtlab send from the same kind of pages. A sixth line, MPI_Allreduce_4KiB_pages,
// times the peer on a plain std::vector (ordinary pages) in the same rounds.
// With MPI_EXACT_PIECE=N, the scattered calls run round 2 in pieces of N values (a
// multiple of 4096; the product's is kCompactScatterPiece, 2^18). On 2 ranks the
// scattered calls send the encoded high words as they lie (Scattered::high_words,
// as training does); with MPI_EXACT_EXTRACT=1 they extract the fields instead.
// With MPI_EXACT_PROFILE=N, each rank runs N scattered calls alone (for `perf
// record`), after one untimed call and the check, and writes its minor page faults per
// call to stderr (0 where the workspace is kept from call to call).
#include <mpi.h>
#include <sys/resource.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <numeric>
#include <span>
#include <vector>

#include "core/batch.h"
#include "core/exact_sum.h"
#include "core/huge_pages.h"
#include "core/mnist.h"
#include "core/model.h"
#include "sim/comm/compact_exact.h"
#include "bench/mpi_bench.h"
#include "sim/comm/mpi_group.h"
#include "sim/compute/batch_runner.h"

namespace {

using dtlab::mpi_bench::Time;

using dtlab::kExactWords;
constexpr int kRounds = 3;
constexpr std::int64_t kExamplesPerRank = 8;

void Check(const dtlab::Status& status) {
  if (status.ok()) return;
  std::fprintf(stderr, "mpi_exact_allreduce: %s\n", status.ToString().c_str());
  MPI_Abort(MPI_COMM_WORLD, 3);
}

// This rank's exact gradient words: seed-cnn, examples [8 rank, 8 rank + 8).
std::vector<std::int64_t> RankGradient(int rank, int ranks) {
  auto data = dtlab::LoadMnistStyleDataset("fashion-mnist");
  if (!data.ok()) {
    std::fprintf(stderr, "mpi_exact_allreduce: %s\n", data.status().message().c_str());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  auto model = std::move(dtlab::MakeModel<float>("seed-cnn", {28, 28, 1}, 10)).value();
  const dtlab::ParameterList<float> params = model->InitialParameters(1);
  std::vector<std::int64_t> indices(static_cast<std::size_t>(kExamplesPerRank));
  std::iota(indices.begin(), indices.end(), rank * kExamplesPerRank);
  dtlab::Tensor<float> images;
  std::vector<std::int32_t> labels;
  dtlab::GatherBatch(data->train, indices, images, labels);
  std::int64_t values = 0;
  for (const auto& p : params) values += p.size();
  std::vector<std::int64_t> words(static_cast<std::size_t>(values * kExactWords));
  std::vector<dtlab::ExactSegment> segments = {{&params, 0, kExamplesPerRank, words}};
  // The global batch's mean: each example's loss weighs 1 / (8 ranks).
  std::vector<float> coefficients(static_cast<std::size_t>(kExamplesPerRank),
                                  1.0f / static_cast<float>(kExamplesPerRank * ranks));
  std::vector<float> losses(coefficients.size());
  std::vector<std::int32_t> predictions(coefficients.size());
  dtlab::BatchRunner runner(*model, 16);
  runner.RunExact(images, labels, coefficients, losses, predictions, segments);
  dtlab::ExactNormalizeAll(words);
  return words;
}

}  // namespace

int main(int argc, char** argv) {
  dtlab::mpi_bench::Bench bench = dtlab::mpi_bench::Start(&argc, &argv, "mpi_exact_allreduce", {0, 4, 16});
  dtlab::MpiWorkerGroup& group = *bench.group;
  const int rank = group.rank(), ranks = group.size();
  const std::vector<std::int64_t> gradient = RankGradient(rank, ranks);
  const auto gradient_values = static_cast<std::int64_t>(gradient.size() / kExactWords);

  dtlab::CollectiveOptions options;
  options.algorithm = dtlab::AllReduceAlgorithm::kHierarchical;
  options.replicas_per_worker = 1;
  const dtlab::ExactSumCollectives collectives =
      dtlab::SumCollectivesOf([&]<typename T>(std::span<const std::span<T>> buffers) {
        return group.AllReduce(buffers, ranks, dtlab::ReduceOp::kSum, options);
      });
  dtlab::ExactSumCollectives scattered_collectives = collectives;
  scattered_collectives.scattered = dtlab::ScatteredOf(
      ranks, rank,
      [&](std::span<const std::span<std::int64_t>> buffers, std::span<const dtlab::ElementRange> slices,
          dtlab::OwnSlice own) { return group.ReduceScatterSlices(buffers, ranks, slices, own, options); },
      [&](auto buffers, std::span<const dtlab::ElementRange> slices) {
        return group.AllGatherSlices(buffers, ranks, slices, options);
      });
  if (ranks == 2 && std::getenv("MPI_EXACT_EXTRACT") == nullptr)  // the product's way on two ranks
    scattered_collectives.scattered.high_words = [&](std::span<const std::int64_t> input,
                                                     std::span<std::int64_t> output,
                                                     std::span<const dtlab::ElementRange> slices) {
      const std::span<const std::int64_t> inputs[] = {input};
      const std::span<std::int64_t> outputs[] = {output};
      return group.ReduceScatterSlices(outputs, ranks, slices, dtlab::OwnSlice::kLeftOut, options, inputs);
    };
  if (const char* piece = std::getenv("MPI_EXACT_PIECE"); piece != nullptr)
    scattered_collectives.scattered.piece = std::atoll(piece);  // refused by the call unless a multiple of 4096

  for (const long mib : bench.sizes_mib) {
    const std::int64_t values = mib == 0 ? gradient_values : (std::int64_t{mib} << 20) / 4;
    // The words, tiled; their rounding; their encoding.
    std::vector<std::int64_t> words(static_cast<std::size_t>(values * kExactWords));
    for (std::int64_t i = 0; i < values; ++i)
      std::memcpy(words.data() + i * kExactWords, gradient.data() + (i % gradient_values) * kExactWords,
                  kExactWords * sizeof(std::int64_t));
    std::vector<float> floats(static_cast<std::size_t>(values));
    dtlab::ExactToFloats(words, floats);
    dtlab::CompactGradient encoded;
    {
      std::vector<std::int64_t> copy = words;
      encoded.Encode(copy);
    }
    const dtlab::CompactGradient* encoded_pointer = &encoded;
    dtlab::HugePageVector<float> buffer(floats.size()), compact_out(floats.size());
    std::vector<float> words_out(floats.size());
    std::vector<std::int64_t> words_buffer(words.size());
    std::span<float> float_span(buffer), compact_span(compact_out);
    std::span<std::int64_t> words_span(words_buffer);
    dtlab::CompactExactWorkspace workspace;  // kept from call to call, as a training step keeps it
    double compact_bytes = 0.0, scattered_bytes = 0.0;
    // Per compact protocol (all-reduced, scattered): each stage's seconds summed over
    // calls, then the call count.
    constexpr int kStages = 7;
    double stages[2][kStages + 1] = {};
    auto add_stages = [&](int protocol, const dtlab::CompactExactStats::Seconds& t) {
      const double each[kStages] = {t.scales, t.windows, t.extraction, t.sum, t.decision, t.gather, t.total};
      for (int k = 0; k < kStages; ++k) stages[protocol][k] += each[k];
      stages[protocol][kStages] += 1.0;
    };

    auto bare = [&] {
      MPI_Allreduce(MPI_IN_PLACE, buffer.data(), static_cast<int>(buffer.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    };
    std::vector<float> plain(floats.size());  // the peer again, on ordinary 4 KiB pages
    auto bare_plain = [&] {
      MPI_Allreduce(MPI_IN_PLACE, plain.data(), static_cast<int>(plain.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    };
    auto ring = [&] { Check(group.AllReduce(std::span(&float_span, 1), ranks, dtlab::ReduceOp::kSum, options)); };
    auto compact = [&] {
      auto stats = dtlab::CompactExactAllReduce(std::span(&encoded_pointer, 1), std::span(&compact_span, 1), ranks,
                                                collectives, &workspace);
      Check(stats.status());
      compact_bytes = stats->BytesPerValue();
      add_stages(0, stats->seconds);
    };
    auto scattered = [&] {
      auto stats = dtlab::CompactExactAllReduce(std::span(&encoded_pointer, 1), std::span(&compact_span, 1), ranks,
                                                scattered_collectives, &workspace);
      Check(stats.status());
      scattered_bytes = stats->BytesPerValue();
      add_stages(1, stats->seconds);
    };
    auto all_words = [&] { Check(group.AllReduce(std::span(&words_span, 1), ranks, dtlab::ReduceOp::kSum, options)); };
    // Refilled before each round: the float sums grow N-fold a call, and the words'
    // int64 digits would overflow after some 30 / log2(N) calls.
    auto refill = [&](int which) {
      if (which < 2) std::copy(floats.begin(), floats.end(), buffer.begin());
      if (which == 3) std::copy(words.begin(), words.end(), words_buffer.begin());
      if (which == 5) std::copy(floats.begin(), floats.end(), plain.begin());
    };
    auto call = [&](int which) {
      if (which == 0) bare();
      if (which == 1) ring();
      if (which == 2) compact();
      if (which == 3) all_words();
      if (which == 4) scattered();
      if (which == 5) bare_plain();
    };
    // The check: compact's floats against the words' sum, rounded once.
    refill(3);
    all_words();
    dtlab::ExactNormalizeAll(words_buffer);
    dtlab::ExactToFloats(words_buffer, words_out);
    int same[2];
    for (int k = 0; k < 2; ++k) {
      std::fill(compact_out.begin(), compact_out.end(), -1.0f);
      k == 0 ? compact() : scattered();
      same[k] = std::memcmp(compact_out.data(), words_out.data(), compact_out.size() * sizeof(float)) == 0;
    }
    MPI_Allreduce(MPI_IN_PLACE, same, 2, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (const char* profile = std::getenv("MPI_EXACT_PROFILE"); profile != nullptr) {
      const int calls = std::max(std::atoi(profile), 1);
      rusage before, after;
      getrusage(RUSAGE_SELF, &before);
      for (int n = 0; n < calls; ++n) scattered();
      getrusage(RUSAGE_SELF, &after);
      std::fprintf(stderr, "rank %d: %lld bytes, %d scattered calls, %.2f minor page faults per call, bitwise %d\n",
                   rank, static_cast<long long>(values * 4), calls,
                   static_cast<double>(after.ru_minflt - before.ru_minflt) / calls, same[1]);
      continue;
    }
    // Calls per round: about half a second of each, at least 2, at most 8 for the
    // words (their digits stay far from overflow) and 40 for the rest (the float
    // sums from 2^-7 or less stay finite on up to 8 ranks: 8^40 = 2^120).
    constexpr int kWays = 6;
    int iterations[kWays];
    for (int which = 0; which < kWays; ++which) {
      refill(which);
      const double once = Time(1, [&] { call(which); });
      iterations[which] = std::clamp(static_cast<int>(0.5 / std::max(once, 1e-6)), 2, which == 3 ? 8 : 40);
    }
    MPI_Bcast(iterations, kWays, MPI_INT, 0, MPI_COMM_WORLD);
    double best[kWays] = {};
    for (auto& protocol : stages) std::fill(std::begin(protocol), std::end(protocol), 0.0);  // the timed calls only
    for (int round = 0; round < kRounds; ++round)
      for (int which = 0; which < kWays; ++which) {
        refill(which);
        const double seconds = Time(iterations[which], [&] { call(which); });
        if (round == 0 || seconds < best[which]) best[which] = seconds;
      }
    if (const char* show = std::getenv("MPI_EXACT_STAGES"); show != nullptr && std::strcmp(show, "1") == 0) {
      // Per protocol and stage: milliseconds per call on this rank, and the largest.
      double mean[2][kStages], largest[2][kStages];
      for (int p = 0; p < 2; ++p)
        for (int k = 0; k < kStages; ++k) mean[p][k] = 1e3 * stages[p][k] / std::max(stages[p][kStages], 1.0);
      MPI_Reduce(mean, largest, 2 * kStages, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
      if (rank == 0) {
        const char* protocols[2] = {"compact", "scattered"};
        const char* names[kStages] = {"scales", "windows", "extraction", "sum", "decision", "gather", "total"};
        for (int p = 0; p < 2; ++p) {
          std::fprintf(stderr, "stages %lld %d %s (ms per call, rank 0 / largest):", static_cast<long long>(values * 4),
                       ranks, protocols[p]);
          for (int k = 0; k < kStages; ++k) std::fprintf(stderr, " %s %.3f/%.3f", names[k], mean[p][k], largest[p][k]);
          std::fprintf(stderr, "\n");
        }
      }
    }
    if (rank == 0) {
      const char* names[kWays] = {"MPI_Allreduce", "float",     "compact",
                                  "words",         "scattered", "MPI_Allreduce_4KiB_pages"};
      const double wire[kWays] = {4.0, 4.0, compact_bytes, 8.0 * kExactWords, scattered_bytes, 4.0};
      for (int which = 0; which < kWays; ++which)
        std::printf("%lld %d %s %.6e %.3f %d\n", static_cast<long long>(values * 4), ranks, names[which], best[which],
                    wire[which],
                    which == 2   ? same[0]
                    : which == 4 ? same[1]
                                 : 1);
      std::fflush(stdout);
    }
  }
  group.Finish();
  return 0;
}
