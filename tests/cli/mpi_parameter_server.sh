#!/usr/bin/env bash
# ParameterServerStrategy across MPI ranks (docs/mpi.md): rank 0 the chief, then the
# workers, then the parameter servers, which own round-robin shards of the
# variables and apply each worker's pushed gradient as it arrives. With one worker
# the run is sequential, so it must equal the single-process simulation bit for bit
# (1 and 2 parameter servers, fast and exact mode), also after a kill -9 and a
# resume; with several workers the updates interleave for real (every batch applied
# once, staleness measured), and training on Fashion-MNIST learns.
source "$(dirname "$0")/lib.bash"
[ "${DTLAB_WITH_MPI:-0}" = 1 ] && command -v mpirun >/dev/null || { echo "dtlab built without MPI: skipped"; exit 77; }
DATA="$DTLAB_SOURCE_DIR/tests/bad_inputs/files/valid"
COMMON=(--strategy parameter_server --dataset "$DATA" --epochs 2 --batch-per-replica 3 --no-progress --json)
MPIRUN=(mpirun --allow-run-as-root --oversubscribe)
mpi() { local np=$1; shift; "${MPIRUN[@]}" -np "$np" "$DTLAB" train "$@"; }
digest() { python3 -c "import json; print(json.load(open('$WORK/$1.out'))['weights_digest'])" 2>/dev/null || echo "none-$1"; }
expect_same_digest() {
  CHECKS=$((CHECKS + 1))
  [ "$(digest "$1")" = "$(digest "$2")" ] || fail "$1 ($(digest "$1")) and $2 ($(digest "$2")) end with different weights"
}

# One worker: sequential, so equal to the simulation.
for math in fast exact; do
  for ps in 1 2; do
    name="one_worker_${ps}ps_$math"
    expect_exit 0 "mpi_$name" -- mpi $((2 + ps)) "${COMMON[@]}" --parameter-servers $ps --math $math
    expect_exit 0 "sim_$name" -- "$DTLAB" train "${COMMON[@]}" --workers 1 --parameter-servers $ps --math $math
    expect_same_digest "mpi_$name" "sim_$name"
    check_json "mpi_$name" "d['steps'] == 14 and len(d['staleness']['per_update']) == 14 and d['staleness']['max'] == 0"
  done
done

# Three workers, two parameter servers: every batch applied once, in whatever order.
expect_exit 0 three_workers -- mpi 6 "${COMMON[@]}" --parameter-servers 2
# 20 images in 3 shards of 7, 7, 6 images, batches of 3: 3 + 3 + 2 = 8 updates per epoch.
check_json three_workers "d['steps'] == 16 and d['workers'] == 3 and len(d['staleness']['per_update']) == 16 and all(s >= 0 for s in d['staleness']['per_update'])"
check_json three_workers "all(e['train_loss'] == e['train_loss'] and e['steps'] == 8 for e in d['epochs'])"

# kill -9 of the worker during a longer one-worker run; the rerun resumes from the
# last epoch checkpoint and ends on the uninterrupted weights.
LONG=(--strategy parameter_server --dataset "$DATA" --epochs 60 --batch-per-replica 2 --no-progress --json
      --parameter-servers 1)
expect_exit 0 long_baseline -- mpi 3 "${LONG[@]}"
mpi 3 "${LONG[@]}" --checkpoint-dir "$WORK/killed/ckpt" >"$WORK/killed.out" 2>"$WORK/killed.err" </dev/null &
job=$!
for _ in $(seq 1 200); do [ -f "$WORK/killed/ckpt/checkpoint" ] && break; sleep 0.05; done
victim=$(mpi_workers "$job" 1)  # rank 1, the worker
CHECKS=$((CHECKS + 1))
if [ -n "$victim" ]; then kill -9 "$victim"; else fail "killed: the worker was not found running"; fi
wait $job
code=$?
CHECKS=$((CHECKS + 1))
[ "$code" = 3 ] || fail "killed: exit $code after kill -9 of the worker, expected 3"
expect_contains killed err "rank 1 (worker 1) died: killed by signal 9 (Killed)"
expect_exit 0 killed_rerun -- mpi 3 "${LONG[@]}" --checkpoint-dir "$WORK/killed/ckpt"
check_json killed_rerun "d['resumed_from_step'] > 0"
expect_same_digest killed_rerun long_baseline

# It learns: 1 chief + 2 workers + 1 parameter server on Fashion-MNIST, 300 updates.
if [ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || [ -n "${DTLAB_DATASETS_DIR:-}" ]; then
  expect_exit 0 learns -- mpi 4 --strategy parameter_server --epochs 1 --batch-per-replica 64 --steps 300 \
    --no-progress --json
  check_json learns "d['final_test_accuracy'] > 0.7 and d['steps'] >= 300"
fi

# Bad set-ups.
expect_exit 2 too_few_ranks -- mpi 2 "${COMMON[@]}" --parameter-servers 1
expect_contains too_few_ranks err "needs 1 chief + at least 1 worker + 1 parameter server(s) (--parameter-servers) = at least 3 ranks"
NO_CHIEF='{"cluster": {"worker": ["h1:1", "h2:1"], "ps": ["h3:1"]}, "task": {"type": "worker", "index": 0}}'
expect_exit 2 tf_no_chief -- env TF_CONFIG="$NO_CHIEF" "${MPIRUN[@]}" -x TF_CONFIG -np 3 "$DTLAB" train "${COMMON[@]}"
expect_contains tf_no_chief err "parameter_server needs a chief task in TF_CONFIG"
finish
