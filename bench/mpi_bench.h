// What the MPI benches (mpi_dtlab_allreduce, mpi_exact_allreduce) share: the worker
// group with each rank's oneTBB sized to its share of the machine, the sizes asked on
// the command line, and a timer between barriers.
#pragma once

#include <mpi.h>
#include <tbb/global_control.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "sim/comm/mpi_group.h"

namespace dtlab::mpi_bench {

struct Bench {
  std::unique_ptr<MpiWorkerGroup> group;
  std::unique_ptr<tbb::global_control> threads;
  std::vector<long> sizes_mib;  // the arguments, or the defaults
};

/// The largest size a bench takes: 4 GiB of floats per rank.
inline constexpr long kMaxMib = 4096;

/// Joins the MPI job (exits 3 where it cannot, 2 on a size that is not
/// a whole number of MiB in [0, kMaxMib]). Ranks on one machine share its
/// cores: as dtlab train does, each rank's oneTBB gets cores / local ranks threads.
inline Bench Start(int* argc, char*** argv, const char* name, std::vector<long> default_sizes_mib) {
  auto created = MpiWorkerGroup::Create(argc, argv, 600);
  if (!created.ok()) {
    std::fprintf(stderr, "%s: %s\n", name, created.status().ToString().c_str());
    std::exit(3);
  }
  Bench bench;
  bench.group = std::move(*created);
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const unsigned local_ranks = local != nullptr ? static_cast<unsigned>(std::max(1, std::atoi(local))) : 1u;
  bench.threads = std::make_unique<tbb::global_control>(
      tbb::global_control::max_allowed_parallelism, std::max(1u, std::thread::hardware_concurrency() / local_ranks));
  for (int i = 1; i < *argc; ++i) {
    const char* text = (*argv)[i];
    char* rest = nullptr;
    const long mib = std::strtol(text, &rest, 10);
    if (rest == text || *rest != '\0' || mib < 0 || mib > kMaxMib) {
      if (bench.group->rank() == 0)
        std::fprintf(stderr, "%s: size '%s' is not a whole number of MiB from 0 to %ld (usage: %s [MiB ...])\n", name,
                     text, kMaxMib, name);
      bench.group->Finish();
      bench.group.reset();  // every rank reads the same arguments: all finalize
      std::exit(2);
    }
    bench.sizes_mib.push_back(mib);
  }
  if (bench.sizes_mib.empty()) bench.sizes_mib = std::move(default_sizes_mib);
  return bench;
}

/// Seconds per call of `call`, averaged over `iterations` calls between barriers.
template <typename Call>
double Time(int iterations, Call call) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (int i = 0; i < iterations; ++i) call();
  MPI_Barrier(MPI_COMM_WORLD);
  return (MPI_Wtime() - start) / iterations;
}

}  // namespace dtlab::mpi_bench
