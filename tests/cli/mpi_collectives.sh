#!/usr/bin/env bash
# The MPI all-reduce (sim/comm/mpi_group.h) equals the in-process one bit for bit on 2, 3
# and 4 ranks: every algorithm, SUM and MEAN, float and int64 words, SUM of Int448 groups,
# 1 to 3 replicas per rank, 0 to past the 4 MiB segment; and the compact all-reduce's
# reduce-scatter of slices, own slice summed or left out; the all-gather of slices, float and
# int64. tests/tools/mpi_collectives_check.cc.
source "$(dirname "$0")/lib.bash"
[ "${DTLAB_WITH_MPI:-0}" = 1 ] && command -v mpirun >/dev/null && [ -x "${MPI_COLLECTIVES_CHECK:-}" ] ||
  { echo "dtlab built without MPI: skipped"; exit 77; }
for np in 2 3 4; do
  expect_exit 0 "np$np" -- mpirun --allow-run-as-root --oversubscribe -np $np "$MPI_COLLECTIVES_CHECK"
  expect_contains "np$np" out "ok 348 cases on $np ranks"
done
finish
