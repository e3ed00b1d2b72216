// Run under mpirun by tests/cli/mpi_collectives.sh: MpiWorkerGroup::AllReduce
// (sim/comm/mpi_group.h) gives, on every rank, the same bits as the in-process
// AllReduce of sim/comm/collectives.h over the same W x R buffers, for every algorithm,
// SUM and MEAN, float and int64 words, SUM of the compact exact all-reduce's Int448
// groups (sim/comm/int448.h, carries across limbs), R = 1..3 replicas per rank, and
// element counts from 0 to past a segment (4 MiB). Every rank builds all W x R inputs
// (seeded), reduces them in process for the expected result, and reduces its own R
// over MPI. Also the compact all-reduce's reduce-scatter of int64 slices
// (MpiWorkerGroup::ReduceScatterSlices), each rank's own slice summed or, with one
// replica per rank, left out (OwnSlice::kLeftOut: on 2 ranks, received as it is).
// And MpiWorkerGroup::AllGatherSlices, float and int64 (each slice sent from where
// it is kept).
// Prints "ok N cases" on rank 0; exits 1 on a mismatch.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "sim/comm/collectives.h"
#include "sim/comm/int448.h"
#include "sim/comm/mpi_group.h"

namespace {

template <typename T>
std::vector<std::vector<T>> Inputs(int replicas, std::int64_t count, unsigned seed) {
  std::mt19937 random(seed);
  std::vector<std::vector<T>> inputs(static_cast<std::size_t>(replicas),
                                     std::vector<T>(static_cast<std::size_t>(count)));
  for (auto& input : inputs)
    for (T& v : input) {
      if constexpr (std::is_floating_point_v<T>)
        v = std::uniform_real_distribution<T>(-1, 1)(random) * static_cast<T>(1 << (random() % 20));
      else if constexpr (std::is_same_v<T, dtlab::Int448>)  // every limb random: carries everywhere
        for (auto& limb : v.limb) limb = std::uniform_int_distribution<dtlab::Int448::Limb>()(random);
      else
        v = static_cast<T>(random()) - (T{1} << 31);
    }
  return inputs;
}

// Whether this rank's replicas (of `per_rank`) hold the expected elements; else says
// which does not, after `what`.
template <typename T>
bool Matches(const std::vector<std::vector<T>>& mine, const std::vector<std::vector<T>>& expected, int rank,
             int per_rank, std::int64_t count, const std::string& what) {
  for (int k = 0; k < per_rank; ++k) {
    const auto r = static_cast<std::size_t>(rank * per_rank + k);
    if (count > 0 &&
        std::memcmp(mine[r].data(), expected[r].data(), sizeof(T) * static_cast<std::size_t>(count)) != 0) {
      std::fprintf(stderr, "rank %d: %s, %d per rank, %lld elements: replica %zu differs from in-process\n", rank,
                   what.c_str(), per_rank, static_cast<long long>(count), r);
      return false;
    }
  }
  return true;
}

// This rank's replicas of `all` (`per_rank` of them), as the MPI collectives take them.
template <typename T>
std::vector<std::span<T>> LocalSpans(std::vector<std::vector<T>>& all, int rank, int per_rank) {
  std::vector<std::span<T>> local;
  for (int k = 0; k < per_rank; ++k) local.emplace_back(all[static_cast<std::size_t>(rank * per_rank + k)]);
  return local;
}

// Whether the collective succeeded; else says why.
bool Succeeded(const dtlab::Status& status, int rank) {
  if (!status.ok()) std::fprintf(stderr, "rank %d: %s\n", rank, status.ToString().c_str());
  return status.ok();
}

// Near-equal slices of `count` elements, one per worker, in worker order.
std::vector<dtlab::ElementRange> EqualSlices(std::int64_t count, int workers) {
  std::vector<dtlab::ElementRange> slices;
  for (int w = 0; w < workers; ++w) slices.push_back(dtlab::Chunk(count, workers, w));
  return slices;
}

template <typename T>
bool Check(dtlab::MpiWorkerGroup& group, dtlab::AllReduceAlgorithm algorithm, int per_rank, std::int64_t count,
           dtlab::ReduceOp op, unsigned seed) {
  const int replicas = group.size() * per_rank;
  auto expected = Inputs<T>(replicas, count, seed);
  auto mine = Inputs<T>(replicas, count, seed);
  dtlab::CollectiveOptions options;
  options.algorithm = algorithm;
  options.replicas_per_worker = per_rank;
  std::vector<std::span<T>> all(expected.begin(), expected.end());
  dtlab::AllReduce<T>(all, op, options);
  if (!Succeeded(group.AllReduce(LocalSpans(mine, group.rank(), per_rank), replicas, op, options), group.rank()))
    return false;
  return Matches(
      mine, expected, group.rank(), per_rank, count,
      std::string(dtlab::AllReduceAlgorithmName(algorithm)) + (op == dtlab::ReduceOp::kSum ? " SUM" : " MEAN"));
}

// Slice `rank` of this rank's leader after ReduceScatterSlices, against the in-process
// schedule over the same buffers: in place, or out of place (the addends read from
// inputs, which stay as they were).
bool CheckSlices(dtlab::MpiWorkerGroup& group, int per_rank, std::int64_t count, dtlab::OwnSlice own, unsigned seed,
                 bool out_of_place = false) {
  const int replicas = group.size() * per_rank;
  const auto inputs = Inputs<std::int64_t>(replicas, count, seed);
  auto expected = out_of_place ? Inputs<std::int64_t>(replicas, count, seed + 1) : inputs;
  auto mine = expected;
  const std::vector<dtlab::ElementRange> slices = EqualSlices(count, group.size());
  dtlab::CollectiveOptions options;
  options.replicas_per_worker = per_rank;
  std::vector<std::span<std::int64_t>> all(expected.begin(), expected.end());
  const std::vector<std::span<const std::int64_t>> all_inputs(inputs.begin(), inputs.end());
  auto emit = [&](dtlab::Transport<std::int64_t>& t) {
    dtlab::ScheduleReduceScatterSlices(t, per_rank, count, slices, own);
  };
  if (out_of_place)
    dtlab::RunSchedule<std::int64_t>(all_inputs, all, "reduce_scatter", options, emit);
  else
    dtlab::RunSchedule<std::int64_t>(all, "reduce_scatter", options, emit);
  const std::span<const std::span<const std::int64_t>> my_inputs =
      out_of_place ? std::span(all_inputs)
                         .subspan(static_cast<std::size_t>(group.rank() * per_rank), static_cast<std::size_t>(per_rank))
                   : std::span<const std::span<const std::int64_t>>();
  if (!Succeeded(group.ReduceScatterSlices(LocalSpans(mine, group.rank(), per_rank), replicas, slices, own, options,
                                           my_inputs),
                 group.rank()))
    return false;
  const dtlab::ElementRange slice = slices[static_cast<std::size_t>(group.rank())];
  const auto leader = static_cast<std::size_t>(group.rank() * per_rank);
  if ((slice.count > 0 && std::memcmp(mine[leader].data() + slice.begin, expected[leader].data() + slice.begin,
                                      sizeof(std::int64_t) * static_cast<std::size_t>(slice.count)) != 0) ||
      inputs != Inputs<std::int64_t>(replicas, count, seed)) {
    std::fprintf(stderr,
                 "rank %d: reduce_scatter, %d per rank, %lld elements, own slice %s, %s: differs from in-process\n",
                 group.rank(), per_rank, static_cast<long long>(count),
                 own == dtlab::OwnSlice::kSummed ? "summed" : "left out", out_of_place ? "out of place" : "in place");
    return false;
  }
  return true;
}

// Every replica after AllGatherSlices, against the in-process schedule over the same
// buffers.
template <typename T>
bool CheckGather(dtlab::MpiWorkerGroup& group, int per_rank, std::int64_t count, unsigned seed) {
  const int replicas = group.size() * per_rank;
  auto expected = Inputs<T>(replicas, count, seed);
  auto mine = Inputs<T>(replicas, count, seed);
  const std::vector<dtlab::ElementRange> slices = EqualSlices(count, group.size());
  dtlab::CollectiveOptions options;
  options.replicas_per_worker = per_rank;
  std::vector<std::span<T>> all(expected.begin(), expected.end());
  dtlab::RunSchedule<T>(all, "all_gather", options,
                        [&](dtlab::Transport<T>& t) { dtlab::ScheduleAllGatherSlices(t, per_rank, slices); });
  if (!Succeeded(group.AllGatherSlices(LocalSpans(mine, group.rank(), per_rank), replicas, slices, options),
                 group.rank()))
    return false;
  return Matches(mine, expected, group.rank(), per_rank, count, "all_gather");
}

}  // namespace

int main(int argc, char** argv) {
  auto created = dtlab::MpiWorkerGroup::Create(&argc, &argv, 60);
  if (!created.ok()) {
    std::fprintf(stderr, "%s\n", created.status().ToString().c_str());
    return 3;
  }
  dtlab::MpiWorkerGroup& group = **created;
  int cases = 0;
  bool ok = true;
  unsigned seed = 1;
  for (const auto algorithm : dtlab::kAllReduceAlgorithms)
    for (int per_rank = 1; per_rank <= 3; ++per_rank)
      for (const std::int64_t count : {0, 1, 7, 1000, (1 << 20) + 333}) {
        ok &= Check<float>(group, algorithm, per_rank, count, dtlab::ReduceOp::kSum, seed++);
        ok &= Check<float>(group, algorithm, per_rank, count, dtlab::ReduceOp::kMean, seed++);
        ok &= Check<std::int64_t>(group, algorithm, per_rank, count, dtlab::ReduceOp::kSum, seed++);
        // 56 bytes an element: past the segment at a ninth of the float count.
        ok &= Check<dtlab::Int448>(group, algorithm, per_rank, count > 1000 ? (1 << 17) + 333 : count,
                                   dtlab::ReduceOp::kSum, seed++);
        cases += 4;
      }
  for (int per_rank = 1; per_rank <= 2; ++per_rank)
    for (const std::int64_t count : {0, 1, 1000, (1 << 20) + 333}) {
      ok &= CheckSlices(group, per_rank, count, dtlab::OwnSlice::kSummed, seed++);
      ++cases;
      if (per_rank == 1) ok &= CheckSlices(group, per_rank, count, dtlab::OwnSlice::kLeftOut, seed++), ++cases;
      // Out of place, as two ranks send their encoded high words (Scattered::high_words).
      ok &= CheckSlices(group, per_rank, count, dtlab::OwnSlice::kSummed, seed++, true), ++cases;
      if (per_rank == 1) ok &= CheckSlices(group, per_rank, count, dtlab::OwnSlice::kLeftOut, seed++, true), ++cases;
    }
  for (int per_rank = 1; per_rank <= 3; ++per_rank)
    for (const std::int64_t count : {0, 1, 1000, (1 << 20) + 333}) {
      ok &= CheckGather<float>(group, per_rank, count, seed++);
      ok &= CheckGather<std::int64_t>(group, per_rank, count, seed++);
      cases += 2;
    }
  if (ok && group.rank() == 0) std::printf("ok %d cases on %d ranks\n", cases, group.size());
  group.Finish();
  return ok ? 0 : 1;
}
