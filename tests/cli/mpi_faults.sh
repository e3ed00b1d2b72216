#!/usr/bin/env bash
# A rank killed with SIGKILL at a random step (docs/mpi.md, "Failures"), 20 times:
# the job ends with exit 3 well within the collective timeout, naming the rank and
# the step; the same command run again resumes from the chief's latest checkpoint
# and ends with weights equal, bit for bit, to those of a run that never failed.
# 17 of the kills come from the die fault (the rank kills itself with SIGKILL at the
# chosen step); 3 are external `kill -9` of a running worker process at a random
# moment. Then 2 workers stopped with kill -STOP: the others name the stopped rank.
# MPI_FAULTS_SEED replays a sequence.
source "$(dirname "$0")/lib.bash"
[ "${DTLAB_WITH_MPI:-0}" = 1 ] && command -v mpirun >/dev/null || { echo "dtlab built without MPI: skipped"; exit 77; }
DATA="$DTLAB_SOURCE_DIR/tests/bad_inputs/files/valid"
SEED=${MPI_FAULTS_SEED:-$(date +%s)}
RANDOM=$SEED
echo "MPI_FAULTS_SEED=$SEED"
TIMEOUT=20
# 20 images, global batch 4: 5 steps per epoch, 15 steps; a checkpoint every 2 steps.
RUN=(--strategy multi_worker_mirrored --replicas-per-worker 2 --dataset "$DATA" --epochs 3 --global-batch 4
     --checkpoint-every 2 --collective-timeout $TIMEOUT --no-progress --json)
mpi() { local np=$1; shift; mpirun --allow-run-as-root --oversubscribe -np "$np" "$DTLAB" train "$@"; }
digest() { python3 -c "import json; print(json.load(open('$WORK/$1.out'))['weights_digest'])" 2>/dev/null || echo "none"; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

declare -A BASELINE
for np in 2 3; do
  expect_exit 0 "baseline_$np" -- mpi $np "${RUN[@]}" --checkpoint-dir "$WORK/baseline_$np/ckpt"
  BASELINE[$np]=$(digest "baseline_$np")
done

# check_resume NAME NP: the rerun of the same command resumes and ends on the baseline.
check_resume() {
  local name=$1 np=$2
  expect_exit 0 "${name}_rerun" -- mpi "$np" "${RUN[@]}" --checkpoint-dir "$WORK/$name/ckpt"
  CHECKS=$((CHECKS + 1))
  [ "$(digest "${name}_rerun")" = "${BASELINE[$np]}" ] ||
    fail "$name: resumed run ends with $(digest "${name}_rerun"), uninterrupted ${BASELINE[$np]}"
  CHECKS=$((CHECKS + 1))
  ! ls -d "$WORK/$name"/workertemp_* >/dev/null 2>&1 || fail "$name: a workertemp_N directory was left behind"
}

for i in $(seq 1 17); do
  np=$((2 + RANDOM % 2))
  replica=$((RANDOM % (np * 2)))
  rank=$((replica / 2))
  step=$((1 + RANDOM % 15))
  name="die_$i"
  start=$(now_ms)
  expect_exit 3 "$name" -- mpi $np "${RUN[@]}" --checkpoint-dir "$WORK/$name/ckpt" --inject-fault "die:replica=$replica,step=$step"
  elapsed=$(( $(now_ms) - start ))
  if [ "$step" -gt 1 ]; then
    expect_contains "$name" err "rank $rank (worker $rank) died: killed by signal 9 (Killed) after completing step $((step - 1)), during step $step"
  else
    expect_contains "$name" err "rank $rank (worker $rank) died: killed by signal 9 (Killed)"
  fi
  CHECKS=$((CHECKS + 1))
  [ "$elapsed" -lt $((TIMEOUT * 1000)) ] || fail "$name: the job took $elapsed ms to end (timeout ${TIMEOUT} s)"
  echo "kill $i: $np ranks, rank $rank at step $step: exit 3 after $elapsed ms (whole job)"
  check_resume "$name" $np
  if [ "$step" -gt 2 ]; then
    expected=$(( (step - 1) / 2 * 2 ))
    check_json "${name}_rerun" "d.get('resumed_from_step') == $expected"
  fi
done

# External kills: a longer run (40 epochs, 200 steps), one worker process (the
# child of a rank's supervisor) killed with kill -9 at a random moment after the
# first checkpoint.
LONG=("${RUN[@]}")
LONG[7]=40  # --epochs
expect_exit 0 long_baseline -- mpi 2 "${LONG[@]}" --checkpoint-dir "$WORK/long_baseline/ckpt"
LONG_BASELINE=$(digest long_baseline)
for i in 1 2 3; do
  name="kill_$i"
  mpi 2 "${LONG[@]}" --checkpoint-dir "$WORK/$name/ckpt" >"$WORK/$name.out" 2>"$WORK/$name.err" </dev/null &
  job=$!
  for _ in $(seq 1 200); do [ -f "$WORK/$name/ckpt/checkpoint" ] && break; sleep 0.05; done
  sleep "0.$((RANDOM % 3))$((RANDOM % 10))"
  mapfile -t victims < <(mpi_workers "$job")
  CHECKS=$((CHECKS + 1))
  if [ "${#victims[@]}" = 0 ]; then
    fail "$name: no running worker to kill (the run ended first?)"
    wait $job
    continue
  fi
  victim=${victims[$((RANDOM % ${#victims[@]}))]}
  killed_at=$(now_ms)
  kill -9 "$victim"
  wait $job
  code=$?
  elapsed=$(( $(now_ms) - killed_at ))
  CHECKS=$((CHECKS + 1))
  [ "$code" = 3 ] || fail "$name: exit $code after kill -9 of a worker, expected 3"
  expect_contains "$name" err "died: killed by signal 9 (Killed) after completing step"
  echo "external kill $i: exit $code, $elapsed ms from kill -9 to the end of mpirun"
  CHECKS=$((CHECKS + 1))
  [ "$elapsed" -lt $((TIMEOUT * 1000)) ] || fail "$name: $elapsed ms from the kill to the end (timeout ${TIMEOUT} s)"
  expect_exit 0 "${name}_rerun" -- mpi 2 "${LONG[@]}" --checkpoint-dir "$WORK/$name/ckpt"
  CHECKS=$((CHECKS + 1))
  [ "$(digest "${name}_rerun")" = "$LONG_BASELINE" ] || fail "$name: resumed run does not end on the uninterrupted weights"
  check_json "${name}_rerun" "d.get('resumed_from_step', 0) >= 2"
done
# A worker stopped (kill -STOP) at a random moment, possibly in the middle of a ring:
# the others time out, probe every rank, and name the stopped one even when they
# were waiting for a neighbour that waits for it. 400 epochs: the run must still be
# going after the wait of up to 0.9 s below (40 epochs took about 1.2 s in all, and
# once ended before it).
for i in 1 2; do
  name="stop_$i"
  mpi 3 --strategy multi_worker_mirrored --dataset "$DATA" --epochs 400 --global-batch 4 --checkpoint-every 2 \
    --collective-timeout 3 --no-progress --checkpoint-dir "$WORK/$name/ckpt" >"$WORK/$name.out" 2>"$WORK/$name.err" </dev/null &
  job=$!
  for _ in $(seq 1 200); do [ -f "$WORK/$name/ckpt/checkpoint" ] && break; sleep 0.05; done
  sleep "0.$((RANDOM % 10))"
  rank=$((RANDOM % 3))
  victim=$(mpi_workers "$job" $rank)
  CHECKS=$((CHECKS + 1))
  if [ -z "$victim" ]; then fail "$name: rank $rank's worker was not found running"; wait $job; continue; fi
  stopped_at=$(now_ms)
  kill -STOP "$victim"
  wait $job
  code=$?
  elapsed=$(( $(now_ms) - stopped_at ))
  kill -CONT "$victim" 2>/dev/null
  CHECKS=$((CHECKS + 1))
  [ "$code" = 3 ] || fail "$name: exit $code after kill -STOP of rank $rank's worker, expected 3"
  expect_contains "$name" err "rank $rank did not answer a probe within 1 s: it stopped responding"
  CHECKS=$((CHECKS + 1))
  [ "$elapsed" -lt 15000 ] || fail "$name: $elapsed ms from the stop to the end (timeout 3 s)"
  echo "stop $i: rank $rank stopped; exit $code after $elapsed ms"
done
finish
