#!/usr/bin/env bash
# Graceful stop and progress (issue 23). SIGINT in the middle of epoch 1 of
# `dtlab train --checkpoint-dir D` finishes the step, saves a checkpoint at it, says
# how to resume and exits 130; rerunning the same command resumes and ends with the
# uninterrupted run's weights, bit for bit. SIGTERM exits 143; a second SIGINT stops
# at once (no message, no half-written file); without a checkpoint directory the
# message says that nothing was saved. `dtlab run` stops after the current step of
# its run and says what it completed. --steps ending on an epoch boundary announces
# no next epoch; on a terminal the progress counts --steps, with steps/s and an ETA,
# and a lesson's runs draw their progress.
source "$(dirname "$0")/lib.bash"
[ -d /usr/share/datasets/fashion-mnist ] || { echo "SKIP: dataset-fashion-mnist not installed"; exit 77; }
PTY=(python3 "$DTLAB_SOURCE_DIR/tests/cli/pty_run.py")
TRAIN=(train --no-progress --epochs 1 --steps 300)  # epoch 1 has 938 steps: the stop lands inside it

# handler_installed PID: the process catches SIGINT (/proc/PID/status, SigCgt bit 2).
handler_installed() {
  local i mask
  for i in $(seq 1 1200); do
    mask=$(awk '/^SigCgt:/ {print $2}' "/proc/$1/status" 2>/dev/null) || return 1
    [ -n "$mask" ] && [ $((0x$mask & 2)) != 0 ] && return 0
    sleep 0.05
  done
  return 1
}
# stop_after NAME SIGNALS... -- CMD...: starts CMD, waits for its first epoch to
# begin, sends the signals, each after the last one's note (signals that arrive
# together count once); leaves NAME.{out,err} and NAME.rc.
stop_after() {
  local name=$1 signals=() pid s stream=out
  shift
  while [ "$1" != -- ]; do signals+=("$1"); shift; done
  shift
  [[ " $* " == *" --json "* ]] && stream=err  # the human lines go to stderr
  "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" </dev/null &
  pid=$!
  wait_for_text "$WORK/$name.$stream" "Learning rate for epoch 1" "$pid" || fail "$name: training never began"
  for s in "${signals[@]}"; do
    kill "-$s" "$pid"
    wait_for_text "$WORK/$name.err" "stopping after the current step" "$pid" || true
  done
  wait "$pid"
  echo $? >"$WORK/$name.rc"
}
expect_rc() {
  CHECKS=$((CHECKS + 1))
  [ "$(cat "$WORK/$1.rc")" = "$2" ] || { fail "$1: exit $(cat "$WORK/$1.rc"), expected $2"; tail -3 "$WORK/$1.err" >&2; }
}
json_field() { python3 -c "import json; print(json.load(open('$WORK/$1.out'))['$2'])" 2>/dev/null || echo "none-$1"; }

# The uninterrupted run.
expect_exit 0 whole -- "$DTLAB" "${TRAIN[@]}" --json

# SIGINT in the middle of epoch 1: a checkpoint at the step reached, the message, 130.
D="$WORK/ckpt"
stop_after sigint INT -- "$DTLAB" "${TRAIN[@]}" --checkpoint-dir "$D"
expect_rc sigint 130
step=$(sed -n 's/^stopped at step \([0-9]*\); rerun the same command to resume (saved .*)$/\1/p' "$WORK/sigint.out")
CHECKS=$((CHECKS + 1))
[ -n "$step" ] && [ "$step" -ge 1 ] && [ "$step" -lt 300 ] ||
  { fail "sigint: no 'stopped at step N; rerun the same command to resume' before step 300"; cat "$WORK/sigint.out" >&2; }
expect_contains sigint out "Saved checkpoint $D/ckpt-$step.safetensors"
expect_contains sigint err "stopping after the current step"
expect_exit 0 sigint_eval -- "$DTLAB" eval --checkpoint-dir "$D" --json
CHECKS=$((CHECKS + 1))
[ "$(json_field sigint_eval step)" = "$step" ] || fail "sigint: the checkpoint is at step $(json_field sigint_eval step), not $step"
# Rerunning the same command resumes there and ends with the same bits.
expect_exit 0 resumed -- "$DTLAB" "${TRAIN[@]}" --checkpoint-dir "$D" --json
expect_contains resumed err "Resuming from the checkpoint at step $step"
CHECKS=$((CHECKS + 1))
[ "$(json_field resumed weights_digest)" = "$(json_field whole weights_digest)" ] ||
  fail "the resumed run ends with other weights than the uninterrupted one"

# SIGTERM: 143, the same message (on stderr with --json), and the JSON says where it stopped.
stop_after sigterm TERM -- "$DTLAB" "${TRAIN[@]}" --checkpoint-dir "$WORK/term" --json
expect_rc sigterm 143
expect_contains sigterm err "; rerun the same command to resume (saved $WORK/term/ckpt-"
check_json sigterm "d['stopped']['signal'] == 15 and d['stopped']['step'] == d['steps'] and d['last_checkpoint'].endswith('ckpt-%d.safetensors' % d['steps'])"

# A second signal stops at once, as SIGINT's default does: long steps (a global
# batch of 4096) so that it lands while the first waits for the step to end.
stop_after twice INT INT -- "$DTLAB" "${TRAIN[@]}" --global-batch 4096 --checkpoint-dir "$WORK/twice"
expect_rc twice 130
CHECKS=$((CHECKS + 1))
grep -q "^stopped at step" "$WORK/twice.out" && fail "twice: the second SIGINT did not stop the run at once"
CHECKS=$((CHECKS + 1))
ls "$WORK/twice"/*.tmp-* >/dev/null 2>&1 && fail "twice: a half-written file was left behind"

# No checkpoint directory: the message says that nothing was saved.
stop_after unsaved INT -- "$DTLAB" "${TRAIN[@]}"
expect_rc unsaved 130
expect_contains unsaved out "nothing was saved to resume from (give --checkpoint-dir"

# dtlab run: stops after the current step of its run, says what it completed, 130.
"$DTLAB" run per-replica-mean --set run.steps=400 --set run.epochs=100 >"$WORK/run.out" 2>"$WORK/run.err" </dev/null &
pid=$!
handler_installed "$pid" || fail "run: the SIGINT handler was never installed"
kill -INT "$pid"
wait "$pid"
echo $? >"$WORK/run.rc"
expect_rc run 130
expect_contains run out "of run 'main' (run 1 of 2); completed: none. The checks did not run"

# --steps ending on an epoch boundary announces no next epoch (20 images, 2 steps an epoch).
DATA="$DTLAB_SOURCE_DIR/tests/bad_inputs/files/valid"
expect_exit 0 boundary -- "$DTLAB" train --dataset "$DATA" --global-batch 10 --epochs 3 --steps 2 --no-progress
expect_contains boundary out "Learning rate for epoch 1"
CHECKS=$((CHECKS + 1))
grep -q "Learning rate for epoch 2" "$WORK/boundary.out" && fail "boundary: announced epoch 2 after --steps ended"

# On a terminal: the progress counts --steps ("Step 25/25", not "Epoch 1/3 ... 20/20"), with steps/s and an ETA.
expect_exit 0 tty_steps -- "${PTY[@]}" "$DTLAB" train --dataset "$DATA" --global-batch 1 --epochs 3 --steps 25
expect_contains tty_steps out "Step 25/25 ["
expect_contains tty_steps out " step/s ETA 0s"
CHECKS=$((CHECKS + 1))
grep -q "Epoch 1/3 \[" "$WORK/tty_steps.out" && fail "tty_steps: the progress counts the epoch, not --steps"
expect_exit 0 tty_epochs -- "${PTY[@]}" "$DTLAB" train --dataset "$DATA" --global-batch 1 --epochs 2
expect_contains tty_epochs out "Epoch 2/2 [============] 20/20 loss "
# A lesson's runs draw their progress on a terminal (and only there: cli.lessons keeps the transcripts).
expect_exit 0 tty_lesson -- "${PTY[@]}" "$DTLAB" lesson loss-scaling --no-interactive
expect_contains tty_lesson out "run 1/"
finish
