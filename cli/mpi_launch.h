// How `dtlab train` runs as one rank of `mpirun -np W dtlab train --strategy
// multi_worker_mirrored ...` (docs/mpi.md).
//
// Each rank mpirun starts is a small supervisor: it forks the worker (the process
// that calls MPI_Init and trains), forwards signals to it, and reports how it
// ended. A worker that exits passes its exit code through. A worker killed by a
// signal (SIGKILL, the OOM killer, a crash) makes its supervisor print which rank
// died after which step and exit 3; mpirun then stops the other ranks at once, so
// the job ends with exit 3 instead of the signal's 137. The worker dies with its
// supervisor (PR_SET_PDEATHSIG). A rank that stalls instead is found by its peers'
// collective timeout (sim/comm/mpi_group.h).
#pragma once

#include <cstdint>

namespace dtlab::cli {

/// True when an MPI launcher (mpirun, prterun) started this process.
bool LaunchedByMpi();
/// This rank and the world's size as the launcher's environment says (before
/// MPI_Init); 0 and 1 when absent.
int LauncherRank();
int LauncherLocalSize();

/// Forks the worker. Returns -1 in the worker, which goes on; in the supervisor,
/// returns the exit code for the rank once the worker has ended.
int SuperviseWorker();

/// The worker tells its supervisor how many steps it has completed (for the
/// message if it dies). Does nothing outside a supervised worker.
void ReportCompletedSteps(std::int64_t steps);

}  // namespace dtlab::cli
