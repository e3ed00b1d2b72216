// dtlab's all-reduce across MPI ranks (MpiWorkerGroup, sim/comm/mpi_group.h: the
// schedule of sim/comm/collectives.h over MPI point-to-point messages) beside a bare
// MPI_Allreduce (MPI_FLOAT, MPI_SUM, in place) on the same buffers, in one run,
// alternating: for each size, three rounds of each, each round about a second of
// calls between two barriers, the best round reported (as bench/mpi_allreduce.cc).
// One replica per rank, so dtlab's hierarchical all-reduce (its default under
// mpirun) is the ring between the ranks. The buffer is a HugePageVector, as a
// replica's gradient buffer (Cluster's `flat`) is; a third line, MPI_Allreduce_4KiB_pages,
// times the peer on a plain std::vector (ordinary 4 KiB pages) in the same rounds.
// Rank 0 prints one line per size and implementation:
//
//   bytes_per_rank ranks implementation seconds_per_call algbw_GBps busbw_GBps
//
// with algbw = bytes / time and busbw = algbw * 2(N-1)/N (GB = 1e9 bytes).
// Run: mpirun --oversubscribe -np N build/release/bench/mpi_dtlab_allreduce [MiB ...]
// (default 1 16 64); bench/compare_mpi_allreduce.sh runs it on 2, 3 and 4 ranks.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

#include "bench/mpi_bench.h"
#include "core/huge_pages.h"
#include "sim/comm/mpi_group.h"

namespace {

using dtlab::mpi_bench::Time;

constexpr int kRounds = 3;
constexpr int kWays = 3;  // MPI_Allreduce, dtlab, MPI_Allreduce on ordinary pages

void Check(const dtlab::Status& status) {
  if (status.ok()) return;
  std::fprintf(stderr, "mpi_dtlab_allreduce: %s\n", status.ToString().c_str());
  MPI_Abort(MPI_COMM_WORLD, 3);
}

// Small nonzero normal floats (2^-100 x 1..8): each call multiplies them by about
// N, so they are refilled, untimed, long before they could overflow.
void Fill(dtlab::HugePageVector<float>& buffer, int rank) {
  for (std::size_t i = 0; i < buffer.size(); ++i)
    buffer[i] = std::ldexp(static_cast<float>(1 + (i + static_cast<std::size_t>(rank)) % 8), -100);
}

}  // namespace

int main(int argc, char** argv) {
  dtlab::mpi_bench::Bench bench = dtlab::mpi_bench::Start(&argc, &argv, "mpi_dtlab_allreduce", {1, 16, 64});
  dtlab::MpiWorkerGroup& group = *bench.group;
  const int rank = group.rank(), ranks = group.size();
  const int calls_before_refill = static_cast<int>(200 / std::log2(static_cast<double>(ranks > 1 ? ranks : 2)));

  for (const long mib : bench.sizes_mib) {
    const long bytes = mib << 20;
    dtlab::HugePageVector<float> buffer(static_cast<std::size_t>(bytes) / sizeof(float));  // as Cluster's `flat`
    std::span<float> mine(buffer);
    dtlab::CollectiveOptions options;
    options.algorithm = dtlab::AllReduceAlgorithm::kHierarchical;
    options.replicas_per_worker = 1;
    auto bare = [&] {
      MPI_Allreduce(MPI_IN_PLACE, buffer.data(), static_cast<int>(buffer.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    };
    auto dtlab = [&] { Check(group.AllReduce(std::span(&mine, 1), ranks, dtlab::ReduceOp::kSum, options)); };
    // The peer again on ordinary pages (a plain std::vector): what the page size
    // alone is worth.
    std::vector<float> plain(buffer.size());
    auto bare_plain = [&] {
      MPI_Allreduce(MPI_IN_PLACE, plain.data(), static_cast<int>(plain.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    };
    auto call = [&](int which, int times) {
      return which == 0 ? Time(times, bare) : which == 1 ? Time(times, dtlab) : Time(times, bare_plain);
    };
    auto fill = [&] {
      Fill(buffer, rank);
      std::copy(buffer.begin(), buffer.end(), plain.begin());
    };
    // Warm up each, then size the rounds to about a second of MPI_Allreduce.
    fill();
    for (int which = 0; which < kWays; ++which) call(which, 2);
    fill();
    const double once = Time(1, bare);
    int iterations = std::clamp(static_cast<int>(1.0 / (once > 0 ? once : 1e-6)), 5, calls_before_refill - 1);
    MPI_Bcast(&iterations, 1, MPI_INT, 0, MPI_COMM_WORLD);
    double best[kWays] = {};
    for (int round = 0; round < kRounds; ++round)
      for (int which = 0; which < kWays; ++which) {
        fill();
        const double seconds = call(which, iterations);
        if (round == 0 || seconds < best[which]) best[which] = seconds;
      }
    if (rank == 0)
      for (int which = 0; which < kWays; ++which) {
        const char* names[kWays] = {"MPI_Allreduce", "dtlab", "MPI_Allreduce_4KiB_pages"};
        const double algbw = static_cast<double>(bytes) / best[which] / 1e9;
        std::printf("%ld %d %s %.6e %.3f %.3f\n", bytes, ranks, names[which], best[which], algbw,
                    algbw * 2.0 * (ranks - 1) / ranks);
        std::fflush(stdout);
      }
  }
  group.Finish();
  return 0;
}
