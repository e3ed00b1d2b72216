#!/usr/bin/env bash
# Exact mode's all-reduce between MPI ranks beside a float one, on seed-cnn's real
# gradient tiled to each size (bench/mpi_exact_allreduce.cc: one replica per rank,
# alternating, best of three rounds each). Prints one markdown table: milliseconds
# per call of a float MPI_Allreduce, dtlab's float ring, the compact exact all-reduce
# and the exact words; bytes on the wire per value; compact against each float one;
# whether compact gave the words' bits on every rank. These machines are noisy: read
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
echo "| ranks | float gradient | MPI_Allreduce (ms) | dtlab float (ms) | compact exact (ms) | words (ms) | compact bytes/value | compact / MPI_Allreduce | compact / dtlab float | words / compact | compact = words |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for n in "${ranks[@]}"; do
  mpirun --allow-run-as-root --oversubscribe -np "$n" "$bench" 0 4 16 |
    awk '{ t[$1, $3] = $4 * 1e3; if ($3 == "compact") { w[$1] = $5; ok[$1] = $6 } ranks = $2; if (!($1 in seen)) { seen[$1] = 1; order[++k] = $1 } }
         END { for (i = 1; i <= k; ++i) { s = order[i];
           printf "| %d | %.2f MiB | %.3f | %.3f | %.3f | %.2f | %.3f | %.1fx | %.1fx | %.1fx | %s |\n", ranks, s / 1048576,
             t[s, "MPI_Allreduce"], t[s, "float"], t[s, "compact"], t[s, "words"], w[s],
             t[s, "compact"] / t[s, "MPI_Allreduce"], t[s, "compact"] / t[s, "float"], t[s, "words"] / t[s, "compact"],
             ok[s] ? "bitwise" : "DIFFERS" } }'
done
