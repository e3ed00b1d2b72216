# Every run is a scenario: dtlab train --save-scenario FILE writes the run its flags
# describe, without training, and dtlab run FILE trains the same run: the same
# final weights (digest), losses and accuracies as dtlab train --json. Options a
# scenario cannot hold, a directory and a missing folder are refused with exit 2.
. "$(dirname "$0")/lib.bash"
[ -d /usr/share/datasets/fashion-mnist ] || { echo "SKIP: dataset-fashion-mnist not installed"; exit 77; }

# round_trip NAME FLAGS...: train with FLAGS (--json), save FLAGS as NAME.toml, run
# it (--json, --csv), and compare the figures.
round_trip() {
  local name=$1; shift
  expect_exit 0 "$name.train" -- "$DTLAB" train --no-progress --threads 2 --json "$@"
  expect_exit 0 "$name.save" -- "$DTLAB" train --no-progress --threads 2 "$@" --save-scenario "$WORK/$name.toml"
  expect_contains "$name.save" out "Saved the scenario file $WORK/$name.toml: dtlab run $WORK/$name.toml trains this run"
  CHECKS=$((CHECKS + 1))
  ! grep -q "Epoch" "$WORK/$name.save.out" || fail "$name.save: --save-scenario trained"
  # From another folder: a relative --dataset must not depend on where the file is run.
  expect_exit 0 "$name.run" -- bash -c "cd / && '$DTLAB' run '$WORK/$name.toml' --json --no-progress --threads 2 --csv '$WORK/$name.csv'"
  CHECKS=$((CHECKS + 1))
  python3 - "$WORK/$name.train.out" "$WORK/$name.run.out" "$WORK/$name.csv" <<'EOF' || fail "$name: dtlab run trained another run"
import csv, json, struct, sys
f32 = lambda x: struct.unpack('f', struct.pack('f', float(x)))[0]
train, scenario = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert len(scenario['runs']) == 1 and scenario['all_as_expected'], scenario['checks']
run = scenario['runs'][0]
values, last_epoch = run['values'], train['epochs'][-1]
steps = [row for row in csv.DictReader(open(sys.argv[3]))]
pairs = [('weights digest', train['weights_digest'], run['weights_digest']),
         ('steps', train['steps'], values['steps']),
         ('replicas', train['replicas'], run['replicas']),
         ('global batch', train['global_batch_size'], run['global_batch']),
         ('test accuracy', f32(train['final_test_accuracy']), f32(values['test_accuracy'])),
         ('test loss', f32(train['final_test_loss']), f32(values['test_loss'])),
         ('train accuracy', f32(last_epoch['train_accuracy']), f32(values['train_accuracy'])),
         ('train loss (the epoch mean)', f32(last_epoch['train_loss']), f32(steps[-1]['mean_loss']))]
bad = [f'{what}: train {a}, run {b}' for what, a, b in pairs if a != b]
print('\n'.join(bad) or 'same run', file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
}

round_trip mirrored --replicas 4 --steps 5
check_json mirrored.train "d['strategy'] == 'mirrored' and d['steps'] == 5"
expect_contains mirrored toml 'strategy = "mirrored"'  # the command line's default for 4 replicas
expect_contains mirrored toml 'epochs = 10'            # a file's runs take 1 epoch unless told
expect_contains mirrored toml '# Not part of the scenario (how the process runs, not what it computes): --threads 2, --no-progress'
expect_contains mirrored toml 'title = "dtlab train --steps 5 --threads 2 --replicas 4 --no-progress"'

# docs/scenarios.md's example file is this command line's, byte for byte.
(cd "$WORK" && "$DTLAB" train --replicas 4 --steps 5 --threads 2 --save-scenario doc_example.toml >/dev/null)
CHECKS=$((CHECKS + 1))
python3 - "$DTLAB_SOURCE_DIR/docs/scenarios.md" "$WORK/doc_example.toml" <<'EOF' || fail "docs/scenarios.md's example differs from the file dtlab train writes"
import sys
section = open(sys.argv[1]).read().split('## From a command line to a scenario file')[1]
sys.exit(0 if section.split('```toml\n')[1].split('```')[0] == open(sys.argv[2]).read() else 1)
EOF

# Many options at once, exact mode with the reference check, and a data set in a
# directory named relative to where dtlab train ran.
mkdir -p "$WORK/data/fm"
for f in /usr/share/datasets/fashion-mnist/*; do ln -sf "$f" "$WORK/data/fm/"; done
cd "$WORK" || exit 1
round_trip exact --dataset data/fm --strategy multi_worker_mirrored --replicas 4 --workers 2 \
    --global-batch 100 --loss-denominator default --math exact --check-reference --steps 3 --optimizer sgd \
    --lr 0.05 --momentum 0.9 --seed 5 --shuffle-buffer 1000 --inject-fault straggler:replica=1,step=2,seconds=0.5
cd - >/dev/null || exit 1
expect_contains exact toml "source = \"$WORK/data/fm\""
expect_contains exact toml 'kind = "reference"'
check_json exact.train "d['reference_check']['bitwise_equal'] and d['math'] == 'exact'"

# The exit codes agree too: a reference check that fails (the per-replica-mean
# pitfall) is 1 from both, an injected NaN 3.
same_exit() {
  local name=$1 code=$2; shift 2
  expect_exit "$code" "$name.train" -- "$DTLAB" train --no-progress --threads 2 "$@"
  expect_exit 0 "$name.save" -- "$DTLAB" train "$@" --save-scenario "$WORK/$name.toml"
  expect_exit "$code" "$name.run" -- "$DTLAB" run "$WORK/$name.toml" --no-progress --threads 2
}
same_exit pitfall 1 --replicas 2 --loss-denominator per-replica --check-reference --steps 2
expect_contains pitfall.run out "NOT AS EXPECTED"
same_exit fault 3 --replicas 2 --inject-fault nan:replica=1,step=2 --steps 3
expect_contains fault.run err "step 2"

# Refusals, each with exit 2 and nothing written.
expect_exit 2 into_directory -- "$DTLAB" train --steps 1 --save-scenario "$WORK"
expect_contains into_directory err "dtlab train: "
expect_contains into_directory err "is a directory"
expect_exit 2 missing_folder -- "$DTLAB" train --steps 1 --save-scenario "$WORK/no-such-folder/s.toml"
expect_contains missing_folder err "cannot write the scenario file $WORK/no-such-folder/s.toml: the folder $WORK/no-such-folder does not exist"
expect_exit 2 no_key -- "$DTLAB" train --steps 1 --lr-schedule tutorial --save-scenario "$WORK/no_key.toml"
expect_contains no_key err "a scenario file has no key for --lr-schedule"
expect_exit 2 out_of_range -- "$DTLAB" train --seed 18446744073709551615 --save-scenario "$WORK/out_of_range.toml"
expect_contains out_of_range err "--seed 18446744073709551615 is outside what a scenario file's run.seed holds"
expect_exit 2 empty_path -- "$DTLAB" train --steps 1 --save-scenario ""
expect_contains empty_path err "--save-scenario needs the path of the file to write"
expect_exit 2 invalid_run -- "$DTLAB" train --strategy one_device --replicas 2 --save-scenario "$WORK/invalid_run.toml"
CHECKS=$((CHECKS + 1))
[ ! -e "$WORK/no_key.toml" ] && [ ! -e "$WORK/out_of_range.toml" ] && [ ! -e "$WORK/invalid_run.toml" ] ||
  fail "a refused --save-scenario left a file"
CHECKS=$((CHECKS + 1))
[ -z "$(find "$WORK" -maxdepth 1 -name '*.tmp-*')" ] || fail "a temporary file was left behind"

# --help lists it.
expect_exit 0 help -- "$DTLAB" train --help
expect_contains help out "--save-scenario"
finish
