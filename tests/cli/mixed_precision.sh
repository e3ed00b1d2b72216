# Mixed precision and the dynamic loss scale (issue 21 item 4, docs/mixed_precision.md):
# mixed_float16 trains checked on 4 mirrored replicas; an overflow injected on one
# replica makes every replica skip the step and the scale halve; the pitfall
# (each replica decides alone) and TF's rule (replica 0 decides) stop with exit 3,
# naming the replicas; the scale survives a resume byte for byte; bad combinations
# exit 2.
. "$(dirname "$0")/lib.bash"
[ -d /usr/share/datasets/fashion-mnist ] || { echo "SKIP: dataset-fashion-mnist not installed"; exit 77; }

train() {
  local code=$1 name=$2; shift 2
  expect_exit "$code" "$name" -- timeout 300 "$DTLAB" train --no-progress --json --epochs 1 --replicas 4 \
    --batch-per-replica 16 --precision "${PRECISION:-mixed_float16}" "$@"
}

train 0 checked --steps 8 --check-reference
check_json checked "d['precision'] == 'mixed_float16' and d['reference_check']['within_bound'] and d['reference_check']['steps_checked'] == 8 and d['skipped_steps'] == 0 and d['epochs'][0]['loss_scale'] == 32768"

# An inf on replica 1 at step 3: the all-reduced gradient holds it, every replica skips.
train 0 overflow --steps 8 --check-reference --inject-fault nan:replica=1,step=3,value=inf
check_json overflow "d['skipped_steps'] == 1 and d['epochs'][0]['loss_scale'] == 16384 and d['reference_check']['within_bound'] and d['reference_check']['steps_checked'] == 7"

# The pitfall: replica 2 skips alone, the others apply; the copies diverge.
train 3 each --steps 8 --loss-scale-check each-replica --inject-fault nan:replica=2,step=3
expect_contains each err "mirrored variables diverged: replica(s) 2 found their own gradients non-finite"
# TF 2.21's rule: replica 0 decides. An overflow on replica 1 reaches the weights...
train 3 first --steps 8 --loss-scale-check first-replica --inject-fault nan:replica=1,step=3
expect_contains first err "replica(s) 1 overflowed"
# ... and one on replica 0 skips the step everywhere.
train 0 first0 --steps 8 --loss-scale-check first-replica --inject-fault nan:replica=0,step=3
check_json first0 "d['skipped_steps'] == 1 and d['epochs'][0]['loss_scale'] == 16384"

# The scale and its counter are in the checkpoint: 3 + 3 steps equal 6 in one go.
train 0 whole --steps 6 --loss-scale-growth-steps 2 --inject-fault nan:replica=1,step=2 --checkpoint-dir "$WORK/whole" --checkpoint-every 6
train 0 part1 --steps 3 --loss-scale-growth-steps 2 --inject-fault nan:replica=1,step=2 --checkpoint-dir "$WORK/parts" --checkpoint-every 3
train 0 part2 --steps 6 --loss-scale-growth-steps 2 --checkpoint-dir "$WORK/parts" --checkpoint-every 3
check_json part2 "d['resumed_from_step'] == 3"
expect_same_file "$WORK/whole/ckpt-6.safetensors" "$WORK/parts/ckpt-6.safetensors"

# The folded reduction (above --fold-above replicas) with a dynamic loss scale: 20
# replicas of one example from a scale of 2^24, whose first steps overflow (on some
# replicas) and are skipped, give the naive all-reduce's bits, scale and skipped
# steps; TF's rule (replica 0 decides) as well. (Not checked against one device: the
# replicas' 1/20 shares fit float16 at scales where the whole batch's gradient
# overflows, and the check says so.)
for check in reduced first-replica; do
  for how in "--fold-above 8" "--all-reduce naive"; do
    name="fold_${check}_${how##* }"
    expect_exit 0 "$name" -- timeout 300 "$DTLAB" train --no-progress --json --replicas 20 --batch-per-replica 1 \
      --precision mixed_float16 --loss-scale-initial 16777216 --loss-scale-check $check --steps 10 $how
  done
  check_json "fold_${check}_8" "d['folded_reduction'] and 0 < d['skipped_steps'] < 10"
  check_json "fold_${check}_naive" "not d['folded_reduction'] and d['weights_digest'] == json.load(open('$WORK/fold_${check}_8.out'))['weights_digest'] and d['skipped_steps'] == json.load(open('$WORK/fold_${check}_8.out'))['skipped_steps'] and d['epochs'][0]['loss_scale'] == json.load(open('$WORK/fold_${check}_8.out'))['epochs'][0]['loss_scale']"
done

# bfloat16 has float32's range: no loss scale unless asked for.
PRECISION=mixed_bfloat16 train 0 bf16 --steps 2 --check-reference
check_json bf16 "d['precision'] == 'mixed_bfloat16' and 'skipped_steps' not in d and d['reference_check']['within_bound']"

train 2 exact --steps 2 --math exact
expect_contains exact err "with --math exact"
PRECISION=mixed_bfloat16 train 2 check_without_scale --steps 2 --loss-scale-check each-replica
expect_contains check_without_scale err "needs --loss-scale dynamic"
PRECISION=float8 train 2 bad_precision --steps 2
expect_contains bad_precision err "float8"
train 2 bad_scale --steps 2 --loss-scale-initial 0
expect_contains bad_scale err "loss-scale-initial"
finish
