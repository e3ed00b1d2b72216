#!/usr/bin/env bash
# How long a multi-worker job on MPI takes to notice a dead or stalled rank and
# exit (docs/mpi.md, "Failures"). Each repetition starts `mpirun -np RANKS dtlab
# train --strategy multi_worker_mirrored` on the 20-image test set (a few seconds
# of steps), waits for its first checkpoint plus a random delay, then either
#   kill:  kill -9 one worker process (the child of a rank's supervisor), or
#   stall: kill -STOP one worker (it stops answering; the peers' --collective-timeout
#          of TIMEOUT seconds finds it),
# and times from the signal to the end of mpirun. Prints each repetition and the
# median and the largest; every job must end with exit 3.
#
# Usage: bench/mpi_failure_detection.sh [BUILD_DIR] [REPETITIONS] [RANKS] [TIMEOUT]
#        (default: build/release 10 3 5)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build/release}
reps=${2:-10}
ranks=${3:-3}
timeout=${4:-5}
dtlab=$build/cli/dtlab
data=$here/../tests/bad_inputs/files/valid
work=$(mktemp -d)
trap 'pkill -CONT -x dtlab 2>/dev/null || true; rm -rf "$work"' EXIT
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
workers() {  # dtlab processes whose parent is a dtlab process (a supervisor)
  for pid in $(pgrep -x dtlab); do
    parent=$(ps -o ppid= -p "$pid" | tr -d ' ')
    [[ "$(ps -o comm= -p "$parent" 2>/dev/null)" == dtlab ]] && echo "$pid"
  done
}
echo "Load before the run: $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min); $(nproc) cores; $ranks ranks; collective timeout $timeout s"
for mode in kill stall; do
  times=()
  for i in $(seq 1 "$reps"); do
    dir=$work/$mode-$i
    mpirun --allow-run-as-root --oversubscribe -np "$ranks" "$dtlab" train --strategy multi_worker_mirrored \
      --dataset "$data" --epochs 200 --global-batch 4 --checkpoint-dir "$dir/ckpt" --checkpoint-every 5 \
      --collective-timeout "$timeout" --no-progress >"$dir.out" 2>"$dir.err" </dev/null &
    job=$!
    for _ in $(seq 1 400); do [[ -f $dir/ckpt/checkpoint ]] && break; sleep 0.05; done
    sleep "0.$((RANDOM % 10))"
    mapfile -t pids < <(workers)
    victim=${pids[$((RANDOM % ${#pids[@]}))]}
    start=$(now_ms)
    if [[ $mode == kill ]]; then kill -9 "$victim"; else kill -STOP "$victim"; fi
    code=0
    wait $job || code=$?
    elapsed=$(( $(now_ms) - start ))
    [[ $mode == stall ]] && kill -CONT "$victim" 2>/dev/null || true
    times+=("$elapsed")
    echo "$mode $i: exit $code after $elapsed ms: $(grep -m1 -o 'rank [0-9]* (worker [0-9]*) died.*step [0-9]*\|timed out after [^,]*, waiting for rank [0-9]*\|timed out after [0-9.]* s waiting for [^,]*' "$dir.err" || true)"
    [[ $code == 3 ]] || { echo "  expected exit 3; stderr:"; tail -5 "$dir.err"; }
  done
  sorted=($(printf '%s\n' "${times[@]}" | sort -n))
  echo "$mode: median $((sorted[${#sorted[@]} / 2])) ms, largest ${sorted[-1]} ms over $reps runs"
done
