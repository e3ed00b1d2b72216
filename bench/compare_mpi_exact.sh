#!/usr/bin/env bash
# Exact mode's all-reduce between MPI ranks beside a float one, on seed-cnn's real
# gradient tiled to each size (bench/mpi_exact_allreduce.cc: one replica per rank,
# alternating, best of three rounds each). Prints one markdown table: milliseconds
# per call of a float MPI_Allreduce, dtlab's float ring, the compact exact all-reduce
# (its window sums all-reduced, and reduce-scattered as training runs it on MPI) and
# the exact words; bytes on the wire per value; the compact ones against the float
# ones; whether both compact ones gave the words' bits on every rank. The float
# buffers are in huge pages, as dtlab's gradients are; the last columns time
# MPI_Allreduce on ordinary 4 KiB pages too, in the same rounds. These machines are noisy: read
# the ratios, and run it twice.
#
# Usage: bench/compare_mpi_exact.sh [BUILD_DIR] [RANKS...]   (default: build/release, 2 4)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build/release}
shift || true
ranks=("$@")
[[ ${#ranks[@]} -gt 0 ]] || ranks=(2 4)
bench=$build/bench/mpi_exact_allreduce
[[ -x $bench ]] || { echo "compare_mpi_exact: $bench not found (built where MPI is found)" >&2; exit 2; }
cd "$here/.."  # the data set
echo "Load before the run: $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min); $(nproc) cores; $(mpirun --version | head -1)"
echo
echo "| ranks | float gradient | MPI_Allreduce (ms) | dtlab float (ms) | compact, all-reduced (ms) | compact, scattered (ms) | words (ms) | bytes/value all-reduced | scattered | all-reduced / MPI_Allreduce | scattered / MPI_Allreduce | scattered / dtlab float | all-reduced / scattered | = words | MPI_Allreduce, 4 KiB pages (ms) | scattered / that |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for n in "${ranks[@]}"; do
  mpirun --allow-run-as-root --oversubscribe -np "$n" "$bench" 0 4 16 |
    awk '{ t[$1, $3] = $4 * 1e3; w[$1, $3] = $5; if ($3 == "compact" || $3 == "scattered") ok[$1] += $6; ranks = $2
           if (!($1 in seen)) { seen[$1] = 1; order[++k] = $1 } }
         END { for (i = 1; i <= k; ++i) { s = order[i];
           printf "| %d | %.2f MiB | %.3f | %.3f | %.3f | %.3f | %.2f | %.3f | %.3f | %.1fx | %.1fx | %.1fx | %.2fx | %s | %.3f | %.1fx |\n", ranks,
             s / 1048576, t[s, "MPI_Allreduce"], t[s, "float"], t[s, "compact"], t[s, "scattered"], t[s, "words"],
             w[s, "compact"], w[s, "scattered"], t[s, "compact"] / t[s, "MPI_Allreduce"],
             t[s, "scattered"] / t[s, "MPI_Allreduce"], t[s, "scattered"] / t[s, "float"],
             t[s, "compact"] / t[s, "scattered"], ok[s] == 2 ? "bitwise" : "DIFFERS",
             t[s, "MPI_Allreduce_4KiB_pages"], t[s, "scattered"] / t[s, "MPI_Allreduce_4KiB_pages"] } }'
done
