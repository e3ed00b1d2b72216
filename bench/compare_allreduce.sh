#!/usr/bin/env bash
# All-reduce bandwidth of dtlab (replicas in one process, bench/allreduce_bench)
# beside OpenMPI's MPI_Allreduce (ranks on this machine, bench/mpi_allreduce), in
# one run, as one markdown table (these machines are noisy: read the ratios, and
# run it twice). Columns as nccl-tests: busbw = algbw * 2(N-1)/N, GB = 1e9 bytes.
# Every figure is the best of three: three Google Benchmark repetitions for
# dtlab, three rounds of about a second for OpenMPI.
# The cap is the bound derived in docs/performance.md: busbw <= C (N-1) / N^2,
# with C the copy bandwidth (STREAM convention: bytes read + written per second,
# the best of three 64 MiB copies on 1 and on 2 threads). A second, tighter
# reference: U, the bandwidth of reading and writing back one buffer in place
# (the traffic of an in-place all-reduce, which pays no write-allocate reads),
# gives the in-place cap U (N-1) / N^2.
#
# Usage: bench/compare_allreduce.sh [BUILD_DIR]   (default: build/release)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build/release}
bench=$build/bench/allreduce_bench
mpi=$build/bench/mpi_allreduce
[[ -x $bench ]] || { echo "compare_allreduce: $bench not found; build the allreduce_bench target" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "Load before the run: $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min); $(nproc) cores"
"$bench" --benchmark_filter='BM_Copy|BM_UpdateInPlace' --benchmark_repetitions=3 --benchmark_format=json >"$work/copy.json"
"$bench" --benchmark_filter='BM_AllReduce' --benchmark_repetitions=3 --benchmark_format=json >"$work/dtlab.json"
for n in 2 4 8; do
  if [[ -x $mpi ]] && command -v mpirun >/dev/null; then
    mpirun --allow-run-as-root --oversubscribe -np "$n" "$mpi" 1 16 64 >"$work/mpi_$n.txt" 2>"$work/mpi_$n.err" ||
      { echo "mpirun -np $n failed:" >&2; cat "$work/mpi_$n.err" >&2; }
  else
    : >"$work/mpi_$n.txt"
  fi
done

python3 - "$work" <<'PY'
import json, sys, os
work = sys.argv[1]
copy = json.load(open(os.path.join(work, "copy.json")))["benchmarks"]
def best(prefix, key):
    values = [b[key] for b in copy if b["name"].startswith(prefix) and b.get("run_type") == "iteration"]
    return max(values)
copy_1, copy_2 = best("BM_Copy/threads:1", "stream_GBps"), best("BM_Copy/threads:2", "stream_GBps")
cap_c = max(copy_1, copy_2)
update_1, update_2 = best("BM_UpdateInPlace/threads:1", "stream_GBps"), best("BM_UpdateInPlace/threads:2", "stream_GBps")
cap_u = max(update_1, update_2)
print(f"Copy bandwidth C (64 MiB memcpy, bytes read + written, best of 3): "
      f"{copy_1:.1f} GB/s on 1 thread, {copy_2:.1f} GB/s on 2 threads; C = {cap_c:.1f} GB/s")
print(f"In-place update bandwidth U (128 MiB x += 1, bytes read + written, best of 3): "
      f"{update_1:.1f} GB/s on 1 thread, {update_2:.1f} GB/s on 2 threads; U = {cap_u:.1f} GB/s")
print()

dtlab = {}  # (MiB, N) -> {algorithm: busbw}
for b in json.load(open(os.path.join(work, "dtlab.json")))["benchmarks"]:
    if b.get("run_type") != "iteration":
        continue
    # BM_AllReduce/<algorithm>/MiB:<m>/replicas:<n>/real_time; the best of the repetitions
    parts = b["name"].split("/")
    algorithm = parts[1]
    mib = int(parts[2].split(":")[1])
    n = int(parts[3].split(":")[1])
    row = dtlab.setdefault((mib, n), {})
    row[algorithm] = max(row.get(algorithm, 0.0), b["busbw_GBps"])
mpi = {}
for n in (2, 4, 8):
    for line in open(os.path.join(work, f"mpi_{n}.txt")):
        fields = line.split()
        if len(fields) == 5:
            mpi[(int(fields[0]) >> 20, int(fields[1]))] = float(fields[4])

print("| MiB per replica | N | cap busbw GB/s | dtlab busbw GB/s (best algorithm) | % of cap | OpenMPI busbw GB/s | dtlab / OpenMPI | in-place cap GB/s | % of in-place cap |")
print("|---|---|---|---|---|---|---|---|---|")
for (mib, n) in sorted(dtlab):
    cap = cap_c * (n - 1) / n**2
    algorithm, ours = max(dtlab[(mib, n)].items(), key=lambda kv: kv[1])
    theirs = mpi.get((mib, n))
    theirs_text = f"{theirs:.2f}" if theirs else "n/a"
    ratio = f"{ours / theirs:.1f}x" if theirs else "n/a"
    cap_in_place = cap_u * (n - 1) / n**2
    print(f"| {mib} | {n} | {cap:.2f} | {ours:.2f} ({algorithm}) | {ours / cap:.0%} | {theirs_text} | {ratio} | "
          f"{cap_in_place:.2f} | {ours / cap_in_place:.0%} |")
print()
algorithms = ["ring", "halving_doubling", "naive", "hierarchical", "direct"]
print("dtlab busbw (GB/s) of every algorithm:")
print()
print("| MiB per replica | N | " + " | ".join(algorithms) + " |")
print("|---|---|" + "---|" * len(algorithms))
for (mib, n) in sorted(dtlab):
    row = dtlab[(mib, n)]
    print(f"| {mib} | {n} | " + " | ".join(f"{row.get(a, float('nan')):.2f}" for a in algorithms) + " |")
PY
