#!/usr/bin/env bash
# dtlab run's outputs and dtlab list: --json, --csv of per-step metrics,
# --tensorboard event files read back by TensorBoard's own reader (skipped without
# the peers venv, scripts/peers-venv.sh), --trace, and the exit code when a
# verdict is not as the file expects.
source "$(dirname "$0")/lib.bash"

expect_exit 0 json -- "$DTLAB" run short-final-batch --json --csv "$WORK/steps.csv" --tensorboard "$WORK/tb" \
  --trace "$WORK/trace.json" --no-progress
check_json json "d['scenario'] == 'short-final-batch' and d['all_as_expected'] and len(d['checks']) == 6"
check_json json "[r['name'] for r in d['runs']] == ['main', 'default', 'per-replica']"
check_json json "d['runs'][1]['values']['first_failed_step'] == 11 and d['runs'][1]['steps'][10]['batch_sizes'] == [11, 11, 11, 8]"
check_json json "d['runs'][0]['steps'][10]['reference_passed'] and not d['runs'][1]['steps'][10]['reference_passed']"

# CSV: a header and one row per run and step (3 runs x 11 steps).
CHECKS=$((CHECKS + 1))
[ "$(wc -l <"$WORK/steps.csv")" = 34 ] || fail "steps.csv has $(wc -l <"$WORK/steps.csv") lines, expected 34"
expect_contains_file() { CHECKS=$((CHECKS + 1)); grep -qF -- "$2" "$1" || fail "$1 lacks '$2'"; }
expect_contains_file "$WORK/steps.csv" "run,step,epoch,loss,mean_loss,accuracy,batch_sizes,replica_losses,reference_passed"
expect_contains_file "$WORK/steps.csv" "default,11,1,"
CHECKS=$((CHECKS + 1))
python3 -c "import json; t=json.load(open('$WORK/trace.json')); assert len(t['traceEvents']) > 10" ||
  fail "trace.json is not a Chrome trace with events"

# TensorBoard's reader sees every step of every run.
PY="${DTLAB_PEERS_VENV:-/opt/dtlab-peers}/bin/python"
if [ -x "$PY" ] && "$PY" -c "import tensorboard" 2>/dev/null; then
  for run in main default per-replica; do
    CHECKS=$((CHECKS + 1))
    "$PY" "$DTLAB_SOURCE_DIR/tests/peers/read_tfevents.py" "$WORK/tb/$run" >"$WORK/tb_$run.out" 2>"$WORK/tb_$run.err" ||
      fail "TensorBoard could not read $WORK/tb/$run"
  done
  check_json tb_default "len(d['train/loss']) == 11 and [s for s, v in d['train/loss']] == list(range(1, 12)) and len(d['epoch/test_accuracy']) == 1 and len(d['reference/gradient_norm']) == 11"
else
  echo "note: no TensorBoard in ${DTLAB_PEERS_VENV:-/opt/dtlab-peers} (scripts/peers-venv.sh); its read-back is skipped"
fi

# A verdict not as expected: exit 1, and the table says which.
printf 'title = "wrong expectation"\n[[check]]\nkind = "mean_metric"\nreplica_losses = [[2, 3], [4, 5]]\nglobal_batch = 4\nexpect = "pass"\n' >"$WORK/wrong.toml"
expect_exit 1 wrong -- "$DTLAB" run "$WORK/wrong.toml"
expect_contains wrong out "NOT AS EXPECTED"
expect_contains wrong out "Verdict: 0 of 1 checks as expected -- this scenario does not behave as its file expects."

# --set changes a run; the verdicts follow.
expect_exit 0 set -- "$DTLAB" run per-replica-mean --set cluster.replicas=2 --json
check_json set "abs(d['runs'][0]['values']['gradient_ratio'] - 2) < 0.02"
# The description quotes the numbers of the run it describes, --set included.
expect_exit 0 set_text -- "$DTLAB" run per-replica-mean --set cluster.replicas=8 --no-progress --report "$WORK/r8.html"
expect_contains set_text out "8 replicas, 8x."
expect_contains set_text out "fixed: compute_average_loss(per_example_loss, global_batch_size=256)"
grep -q "8 replicas, 8x." "$WORK/r8.html" || fail "the HTML report's description does not say 8 replicas, 8x"
# ... also when the run is refused (its settings are known).
expect_exit 2 refused_text -- "$DTLAB" run per-replica-mean --set optimizer.name=adagrad --no-progress
expect_contains refused_text out "4 replicas, 4x."

# dtlab list: every built-in scenario and lesson, with titles.
expect_exit 0 list -- "$DTLAB" list
expect_contains list out "flagship"
expect_contains list out "Ring all-reduce, chunk by chunk"
expect_contains list out "Lessons (dtlab lesson NAME):"
expect_exit 0 list_json -- "$DTLAB" list --json
check_json list_json "len(d['scenarios']) >= 15 and len(d['lessons']) >= 12 and d['scenarios'][0]['name'] == 'flagship'"
finish
