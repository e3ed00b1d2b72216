# Issue 19: untrusted content never crashes dtlab, reaches the terminal raw or
# aborts its output. Checkpoints whose header nests deep or holds unknown keys,
# checkpoints whose CRCs are right but whose counters lie, a deep TF_CONFIG,
# control characters in scenario and lesson files, paths that are not UTF-8 under
# --json, and a standard output that cannot be written (docs/reliability.md).
. "$(dirname "$0")/lib.bash"
TAMPER="python3 $DTLAB_SOURCE_DIR/tests/tools/tamper_checkpoint.py"
cd "$WORK" || exit 1

# A real checkpoint directory to tamper with: 3 steps of the linear model.
expect_exit 0 seed -- "$DTLAB" train --model linear --steps 3 --checkpoint-every 1 --checkpoint-dir ck
fresh() { rm -rf c && cp -r ck c; }

# The header nests 100 000 lists deep (the CRC is not checked first: it needs the
# parsed header): refused for eval and for resume alike, not a stack overflow.
for depth in 4 100000; do
  fresh && $TAMPER c/ckpt-3.safetensors deep-header $depth
  expect_exit 2 deep$depth.eval -- "$DTLAB" eval --checkpoint-dir c
  expect_contains deep$depth.eval err "header nests deeper than 3 levels"
  expect_exit 2 deep$depth.train -- "$DTLAB" train --model linear --steps 5 --checkpoint-dir c
  expect_contains deep$depth.train err "header nests deeper than 3 levels"
done
fresh && $TAMPER c/ckpt-3.safetensors deep-header 1
expect_exit 2 extra_key -- "$DTLAB" eval --checkpoint-dir c
expect_contains extra_key err 'unknown key "extra"'

# Counters that lie under a valid CRC: refused as the options would be (exit 2).
lie() {  # lie NAME TEXT NAME=VALUE...
  local name=$1 text=$2; shift 2
  fresh && $TAMPER c/ckpt-3.safetensors set "$@"
  expect_exit 2 "$name" -- "$DTLAB" train --model linear --steps 5 --checkpoint-dir c
  expect_contains "$name" err "$text"
}
lie epoch_huge "progress/epoch is 1000000000000000" progress/epoch=1e15
lie epoch_huge_step_too "progress/epoch is 1000000000000000" progress/epoch=1e15 progress/step=1e15
lie epochs_without_steps "finished epochs after only 3 steps" progress/epoch=4
lie step_in_epoch_past_end "has 938 batches" progress/step_in_epoch=1e12
lie step_in_epoch_just_past "has 938 batches" progress/step_in_epoch=939
lie step_negative "progress/step is -1" progress/step=-1
lie iterations_negative "optimizer/iterations is -100" optimizer/iterations=-100
lie iterations_past_2_53 "optimizer/iterations is 9007199254740993" optimizer/iterations=9007199254740993
lie batches_nan "metrics/train_batches is nan" metrics/train_batches=nan
lie batches_fraction "not a whole count of batches" metrics/train_batches=1.5
lie batches_negative "not a whole count of batches" metrics/train_batches=-3
lie loss_inf "metrics/train_loss_total is inf" metrics/train_loss_total=inf
lie loss_without_batches "over 0 batches" metrics/train_batches=0 metrics/train_loss_total=2
lie accuracy_past_count "metrics/train_accuracy_total is" metrics/train_accuracy_total=1000
# The same tool with a lie a run can tell (a later step) resumes: the CRCs are right.
fresh && $TAMPER c/ckpt-3.safetensors set progress/step=4 optimizer/iterations=4
expect_exit 0 consistent_edit -- "$DTLAB" train --model linear --steps 5 --checkpoint-dir c
expect_contains consistent_edit out "Resuming from the checkpoint at step 4"

# TF_CONFIG nested 50 000 deep: a usage error, not a crash.
CHECKS=$((CHECKS + 1))
TF_CONFIG=$(python3 -c "print('[' * 50000 + ']' * 50000)") "$DTLAB" cluster >deep_tf.out 2>deep_tf.err
[ $? = 2 ] && grep -qF "TF_CONFIG nests deeper than 8 levels" deep_tf.err || fail "deep TF_CONFIG: $(head -c 300 deep_tf.err)"

# A replay record nested 50 000 deep (--against): refused before parsing.
python3 -c "print('{\"runs\": ' + '[' * 50000 + ']' * 50000 + '}')" >deep_record.json
expect_exit 2 deep_record -- "$DTLAB" replay mean-metric-trap --backend emulated --against deep_record.json
expect_contains deep_record err "nests deeper than 8 levels"

# Control characters in a scenario: NUL, ESC, BEL, CR and U+202E (a TOML escape
# each) are shown escaped; the verdict table is all there.
sed -e 's/^title = "/title = "NUL\\u0000 ESC\\u001b[31m BEL\\u0007 CR\\r RLO\\u202e /' \
    -e 's/^\(ask = "[^"]*\)/\1/' "$DTLAB_SOURCE_DIR/scenarios/mean-metric-trap.toml" >control.toml
expect_exit 0 control -- "$DTLAB" run control.toml
expect_contains control out 'NUL\x00 ESC\x1b[31m BEL\x07 CR\x0d RLO\u202e'
expect_contains control out "as expected"
CHECKS=$((CHECKS + 1))
if LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]' control.out; then fail "control: a raw control character reached stdout"; fi
CHECKS=$((CHECKS + 1))
if grep -q $'\xe2\x80\xae' control.out; then fail "control: U+202E reached stdout raw"; fi
expect_exit 0 control.json -- "$DTLAB" run --json control.toml
check_json control.json "d['title'].startswith('NUL\\\\x00 ESC')"

# The same in a lesson: raw bytes in the prose, TOML escapes in a question.
{
  printf -- '---\ntitle: Raw \033[2J title\nsummary: A \007 bell\n---\n'
  printf 'Prose with ESC \033]0;pwned\007 and RLO \342\200\256 here.\n\n'
  printf '```question\nask = "Really\\u001b[5m?"\nanswer = "check1.mean_metric"\n```\n\n'
  printf '```run\nscenario = "mean-metric-trap"\nshow = ["table"]\n```\n'
} >control.md
expect_exit 0 lesson_control -- "$DTLAB" lesson control.md --no-interactive --width 100
expect_contains lesson_control out 'Prose with ESC \x1b]0;pwned\x07 and RLO \u202e here.'
expect_contains lesson_control out 'Really\x1b[5m?'
CHECKS=$((CHECKS + 1))
if LC_ALL=C grep -q $'\x07\|\x1b\]\|\x1b\[2J\|\x1b\[5m' lesson_control.out; then fail "lesson_control: a raw control sequence from the file reached stdout"; fi

# Paths that are not UTF-8, with --json: the JSON is written (U+FFFD for the bad byte).
expect_exit 0 train_json -- "$DTLAB" train --json --model linear --steps 2 --checkpoint-dir $'ck_\xff'
check_json train_json "d['steps'] == 2"
expect_exit 0 eval_json -- "$DTLAB" eval --json --checkpoint-dir $'ck_\xff'
check_json eval_json "'\\ufffd' in d['checkpoint']"
mkdir -p $'scenarios_\xfe' && cp "$DTLAB_SOURCE_DIR/scenarios/mean-metric-trap.toml" $'scenarios_\xfe/'
expect_exit 0 list_json -- env DTLAB_SCENARIOS_DIR=$'scenarios_\xfe' "$DTLAB" list --json
check_json list_json "len(d) > 0"
cp "$DTLAB_SOURCE_DIR/scenarios/mean-metric-trap.toml" $'x_\xfe.toml'
expect_exit 0 run_json -- "$DTLAB" run --json $'x_\xfe.toml'
check_json run_json "d['all_as_expected'] is True"

# A standard output that cannot be written is a failure (exit 3), not a silent success.
if [ -w /dev/full ]; then
  for args in "list" "list --json" "run mean-metric-trap" "cluster"; do
    name="full_${args// /_}"
    CHECKS=$((CHECKS + 1))
    # shellcheck disable=SC2086  # the arguments are words
    TF_CONFIG='{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0}}' \
      "$DTLAB" $args >/dev/full 2>"$name.err"
    got=$?
    [ "$got" = 3 ] && grep -qF "cannot write the output to standard output" "$name.err" ||
      fail "$name: exit $got, expected 3 and a message: $(head -c 200 "$name.err")"
  done
fi
finish
