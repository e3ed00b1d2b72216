#!/usr/bin/env bash
# Graceful stop under mpirun (issue 23, docs/mpi.md): SIGINT reaching one rank only
# stops every rank after the same step (they agree after every step), the chief
# saves the checkpoint and says how to resume, every rank exits 130, and rerunning
# the same command ends with the uninterrupted run's weights. (SIGINT to mpirun
# itself is Open MPI's to pass on, on its own timing: docs/mpi.md.)
source "$(dirname "$0")/lib.bash"
[ "${DTLAB_WITH_MPI:-0}" = 1 ] && command -v mpirun >/dev/null || { echo "dtlab built without MPI: skipped"; exit 77; }
[ -d /usr/share/datasets/fashion-mnist ] || { echo "SKIP: dataset-fashion-mnist not installed"; exit 77; }
MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np 2)
TRAIN=(train --strategy multi_worker_mirrored --replicas-per-worker 1 --epochs 1 --steps 100 --no-progress)
digest() { python3 -c "import json; print(json.load(open('$WORK/$1.out'))['weights_digest'])" 2>/dev/null || echo "none-$1"; }
job() { "${MPIRUN[@]}" "$DTLAB" "${TRAIN[@]}" "$@"; }

expect_exit 0 whole -- job --json

# SIGINT to rank 1's worker alone.
D="$WORK/ckpt"
job --checkpoint-dir "$D" >"$WORK/rank1.out" 2>"$WORK/rank1.err" </dev/null &
pid=$!
wait_for_text "$WORK/rank1.out" "Learning rate for epoch 1" "$pid" || fail "rank1: training never began"
kill -INT $(mpi_workers "$pid" 1)
wait "$pid"
rc=$?
CHECKS=$((CHECKS + 1))
[ "$rc" = 130 ] || fail "rank1: mpirun exit $rc, expected 130 (every rank stopped on the signal)"
step=$(sed -n 's/^stopped at step \([0-9]*\); rerun the same command to resume (saved .*)$/\1/p' "$WORK/rank1.out")
CHECKS=$((CHECKS + 1))
[ -n "$step" ] && [ -f "$D/ckpt-$step.safetensors" ] && [ ! -e "$WORK/workertemp_1" ] ||
  { fail "rank1: no 'stopped at step N' with its checkpoint from the chief"; tail -5 "$WORK/rank1.out" >&2; }
expect_exit 0 resumed -- job --checkpoint-dir "$D" --json
expect_contains resumed err "Resuming from the checkpoint at step $step"
CHECKS=$((CHECKS + 1))
[ "$(digest resumed)" = "$(digest whole)" ] || fail "the resumed job ends with other weights than the uninterrupted one"

finish
