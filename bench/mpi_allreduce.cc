// The peer of bench/allreduce_bench.cc: MPI_Allreduce (MPI_FLOAT, MPI_SUM, in
// place) between N processes on this machine, timed the way nccl-tests times its
// all-reduce: a few warm-up calls, then the average over many calls (about a
// second, fewer than would overflow the inputs) between two barriers; the best
// of three such rounds is reported.
// Rank 0 prints one line per size:
//
//   bytes_per_rank ranks seconds_per_call algbw_GBps busbw_GBps
//
// with algbw = bytes per rank / time and busbw = algbw * 2(N-1)/N (GB = 1e9 bytes).
// Run: mpirun --allow-run-as-root --oversubscribe -np N build/release/bench/mpi_allreduce [MiB ...]
// (default sizes 1 16 64). bench/compare_allreduce.sh runs it beside dtlab.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

constexpr int kRounds = 3;

// Aborts the job with the MPI error text: a benchmark has nobody to return a
// status to, and a rank that returned alone would leave its peers hanging.
void CheckMpi(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  std::fprintf(stderr, "mpi_allreduce: %s failed: %s\n", what, text);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

// The inputs allreduce_bench uses: small nonzero normal floats, 2^-100 times 1..8.
// Each call multiplies them by about N, so they are filled again, untimed, before
// they could overflow.
void FillSmallValues(std::vector<float>& buffer, int rank) {
  for (std::size_t i = 0; i < buffer.size(); ++i)
    buffer[i] = std::ldexp(static_cast<float>(1 + (i + static_cast<std::size_t>(rank)) % 8), -100);
}

// Seconds per MPI_Allreduce of `count` floats, averaged over `iterations` calls.
double TimeAllReduce(std::vector<float>& buffer, int iterations) {
  CheckMpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
  const double start = MPI_Wtime();
  for (int i = 0; i < iterations; ++i)
    CheckMpi(
        MPI_Allreduce(MPI_IN_PLACE, buffer.data(), static_cast<int>(buffer.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
        "MPI_Allreduce");
  CheckMpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
  return (MPI_Wtime() - start) / iterations;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  std::vector<long> sizes_mib;
  for (int i = 1; i < argc; ++i) sizes_mib.push_back(std::strtol(argv[i], nullptr, 10));
  if (sizes_mib.empty()) sizes_mib = {1, 16, 64};

  // Calls before the values could overflow (see FillSmallValues); a round is
  // never longer.
  const int calls_before_refill = static_cast<int>(200 / std::log2(static_cast<double>(ranks > 1 ? ranks : 2)));
  for (long mib : sizes_mib) {
    const long bytes = mib << 20;
    std::vector<float> buffer(static_cast<std::size_t>(bytes) / sizeof(float));
    FillSmallValues(buffer, rank);
    // Warm up (connections, page faults), then size the rounds to about a second,
    // as rank 0 measures it; every rank must agree on the count.
    TimeAllReduce(buffer, 2);
    FillSmallValues(buffer, rank);
    const double once = TimeAllReduce(buffer, 1);
    int iterations = 0;
    if (rank == 0) {
      iterations = static_cast<int>(1.0 / (once > 0 ? once : 1e-6));
      iterations = std::clamp(iterations, 5, calls_before_refill - 1);
    }
    CheckMpi(MPI_Bcast(&iterations, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast");
    // The best of three rounds, as allreduce_bench's figures are the best of
    // three repetitions in compare_allreduce.sh: on a shared machine the best
    // round is the one least disturbed by other tenants.
    double seconds = 0;
    for (int round = 0; round < kRounds; ++round) {
      FillSmallValues(buffer, rank);
      const double time = TimeAllReduce(buffer, iterations);
      if (round == 0 || time < seconds) seconds = time;
    }
    if (rank == 0) {
      const double algbw = static_cast<double>(bytes) / seconds / 1e9;
      const double busbw = algbw * 2.0 * (ranks - 1) / ranks;
      std::printf("%ld %d %.6e %.3f %.3f\n", bytes, ranks, seconds, algbw, busbw);
      std::fflush(stdout);
    }
  }
  MPI_Finalize();
  return 0;
}
