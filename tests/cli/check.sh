# dtlab check (issue 8): the built-in properties behave as documented with 1000
# trials; every pitfall is caught with a counterexample in words; the same seed
# replays the same report; bad input exits 2.
. "$(dirname "$0")/lib.bash"

expect_exit 0 list -- "$DTLAB" check --list
for p in correct-scaling per-replica-mean default-denominator unscaled-regularization per-pixel-without-hw \
         metric-merge mean-metric-trap checkpoint-restore; do
  expect_contains list out "$p: "
done
expect_exit 0 help -- "$DTLAB" check --help
expect_contains help out "Usage: dtlab check [PROPERTY]"

expect_exit 0 all -- "$DTLAB" check --trials 1000 --seed 7 --json
check_json all "d['all_as_expected'] and d['seed'] == 7 and len(d['properties']) == 8"
check_json all "[p for p in d['properties'] if p['name'] == 'correct-scaling'][0]['cases'] == 1000"
check_json all "all(('counterexample' in p) == (p['expect'] == 'fail') for p in d['properties'])"
expect_contains all err "Every property behaved as expected; seed 7 (replay with --seed 7)"

# Text: each pitfall shows its shrunk counterexample.
expect_exit 0 text -- "$DTLAB" check --trials 200 --seed 7
expect_contains text out "per-replica-mean         CAUGHT"
expect_contains text out "every example weighs 2x what the global-batch loss gives it"
expect_contains text out "the regularization is counted 2 times instead of once"
expect_contains text out "losses per example (per-pixel labels)"
expect_contains text out "a Mean metric fed them reads"

# One property; the same seed gives the same counterexample.
expect_exit 0 one_a -- "$DTLAB" check default-denominator --seed 123 --json
expect_exit 0 one_b -- "$DTLAB" check default-denominator --seed 123 --json
python3 -c "import json,sys; a,b=(json.load(open(f'$WORK/one_{x}.out')) for x in 'ab'); sys.exit(0 if a['properties'][0]['counterexample']==b['properties'][0]['counterexample'] else 1)" || fail "same seed, different counterexample"
CHECKS=$((CHECKS + 1))
check_json one_a "len(d['properties']) == 1 and d['properties'][0]['name'] == 'default-denominator' and not d['properties'][0]['passed']"

expect_exit 2 unknown -- "$DTLAB" check no-such-property
expect_contains unknown err "unknown property 'no-such-property'"
expect_contains unknown err "correct-scaling: "
expect_exit 2 zero_trials -- "$DTLAB" check --trials 0
expect_contains zero_trials err "--trials must be at least 1"
expect_exit 2 bad_option -- "$DTLAB" check --trails 5
finish
