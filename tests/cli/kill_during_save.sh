# Durable checkpoints (issue 9): SIGKILL a training run that saves a checkpoint at
# every step, at a random moment, 50 times. Afterwards the latest pointer always
# names a complete checkpoint (eval loads it, checksums and all), and a rerun
# resumes from it. Kills that land inside a save leave only a temporary file,
# which the next save removes.
. "$(dirname "$0")/lib.bash"
[ -d /usr/share/datasets/fashion-mnist ] || { echo "SKIP: dataset-fashion-mnist not installed"; exit 77; }

TRIALS=${TRIALS:-50}
mid_save=0 saved=0
RANDOM=7  # reproducible kill times
for trial in $(seq 1 "$TRIALS"); do
  dir="$WORK/run$trial"
  "$DTLAB" train --no-progress --epochs 1 --checkpoint-every 1 --max-to-keep 2 --checkpoint-dir "$dir" \
    >"$WORK/train$trial.out" 2>&1 &
  pid=$!
  delay=$(printf "0.%03d" $((RANDOM % 1000)))
  if [ $((trial % 2)) = 0 ]; then
    # Even trials: once the first checkpoint exists (however loaded the machine is),
    # 0 to 1 s later, while steps and saves alternate.
    for _ in $(seq 1 600); do
      [ -f "$dir/checkpoint" ] || ! kill -0 "$pid" 2>/dev/null && break
      sleep 0.05
    done
    sleep "$delay"
  else
    # Odd trials: 0.6 to 1.6 s after the start, before or after the first save.
    sleep "$delay"; sleep 0.6
  fi
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  ls "$dir"/*.tmp-* >/dev/null 2>&1 && mid_save=$((mid_save + 1))
  if [ -f "$dir/checkpoint" ]; then
    saved=$((saved + 1))
    expect_exit 0 eval$trial -- "$DTLAB" eval --checkpoint-dir "$dir" --json
  else
    # Killed before the first save completed: no pointer, so nothing claims to be a checkpoint.
    expect_exit 2 eval$trial -- "$DTLAB" eval --checkpoint-dir "$dir"
    expect_contains eval$trial err "no checkpoint"
  fi
  if [ $((trial % 10)) = 0 ] && [ -f "$dir/checkpoint" ]; then
    step=$(python3 -c "import json; print(json.load(open('$WORK/eval$trial.out'))['step'])")
    expect_exit 0 resume$trial -- "$DTLAB" train --no-progress --epochs 1 --checkpoint-every 1 --max-to-keep 2 \
      --checkpoint-dir "$dir" --steps $((step + 1))
    expect_contains resume$trial out "Resuming from the checkpoint at step $step"
    CHECKS=$((CHECKS + 1))
    ls "$dir"/*.tmp-* >/dev/null 2>&1 && fail "resume$trial: a temporary file survived the next save"
  fi
done
echo "$TRIALS kills: $saved after a first checkpoint, $mid_save inside a save (a temporary file left behind)"
[ "$saved" -ge $((TRIALS / 2)) ] || fail "only $saved of $TRIALS kills came after a first save; the timing is off"
finish
