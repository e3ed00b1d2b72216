#!/usr/bin/env bash
# dtlab's all-reduce across MPI ranks (MpiWorkerGroup, one replica per rank) beside a
# bare MPI_Allreduce on the same buffers, in one run per rank count
# (bench/mpi_dtlab_allreduce.cc alternates them; best of three ~1 s rounds each).
# Prints one markdown table: busbw as nccl-tests (algbw * 2(N-1)/N, GB = 1e9 bytes)
# and the ratio dtlab / MPI_Allreduce, both on huge-page buffers as dtlab's gradients
# are; then the peer on ordinary 4 KiB pages, and what huge pages gave it. These
# machines are noisy: read the ratios, and run it twice.
#
# Usage: bench/compare_mpi_allreduce.sh [BUILD_DIR] [RANKS...]   (default: build/release, 2 3 4)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build/release}
shift || true
ranks=("$@")
[[ ${#ranks[@]} -gt 0 ]] || ranks=(2 3 4)
bench=$build/bench/mpi_dtlab_allreduce
[[ -x $bench ]] || { echo "compare_mpi_allreduce: $bench not found (built where MPI is found)" >&2; exit 2; }
echo "Load before the run: $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min); $(nproc) cores; $(mpirun --version | head -1)"
echo
echo "| ranks | size | MPI_Allreduce busbw GB/s | dtlab busbw GB/s | dtlab / MPI | MPI_Allreduce, 4 KiB pages | huge / 4 KiB pages |"
echo "|---|---|---|---|---|---|---|"
for n in "${ranks[@]}"; do
  mpirun --allow-run-as-root --oversubscribe -np "$n" "$bench" 1 16 64 |
    awk '{ key = $1; bw[key, $3] = $6
           if ($3 == "MPI_Allreduce_4KiB_pages") {
             mpi = bw[key, "MPI_Allreduce"]; d = bw[key, "dtlab"]
             printf "| %d | %d MiB | %.2f | %.2f | %.2fx | %.2f | %.2fx |\n", $2, key / 1048576, mpi, d, d / mpi, $6, mpi / $6 } }'
done
