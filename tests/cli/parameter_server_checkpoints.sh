#!/usr/bin/env bash
# parameter_server saves like every other strategy (docs/checkpoints.md): at
# --checkpoint-every and at the end of a --steps run, in the middle of an epoch; a
# checkpoint after update K holds the uninterrupted run's state after K, bit for
# bit; a resumed run pushes every batch once, equals the uninterrupted run with one
# worker, and does not continue on a synchronous strategy in the middle of the epoch.
source "$(dirname "$0")/lib.bash"
DATA="$DTLAB_SOURCE_DIR/tests/bad_inputs/files/valid"
# 20 images, 4 workers with shards of 5 in batches of 2: 3 + 3 + 3 + 3 = 12 updates an epoch.
PS=(--strategy parameter_server --workers 4 --dataset "$DATA" --epochs 2 --batch-per-replica 2 --no-progress --json)
train() { local name=$1; shift; expect_exit 0 "$name" -- "$DTLAB" train "$@"; }
digest() { python3 -c "import json; print(json.load(open('$WORK/$1.out'))['weights_digest'])" 2>/dev/null || echo "none-$1"; }
expect_file() { CHECKS=$((CHECKS + 1)); [ -f "$1" ] || fail "no file $1"; }
expect_no_file() { CHECKS=$((CHECKS + 1)); [ ! -e "$1" ] || fail "unexpected file $1"; }

# The issue's run: --steps 8 leaves its checkpoint.
train steps_8 "${PS[@]}" --steps 8 --checkpoint-dir "$WORK/steps_8"
expect_file "$WORK/steps_8/ckpt-8.safetensors"
expect_contains steps_8 out '"last_checkpoint"'
check_json steps_8 "d['steps'] == 8 and d['last_checkpoint'].endswith('ckpt-8.safetensors')"
expect_exit 0 eval_8 -- "$DTLAB" eval --checkpoint-dir "$WORK/steps_8" --dataset "$DATA"

# --checkpoint-every applies, and the end of the run is saved too.
train every_3 "${PS[@]}" --steps 8 --checkpoint-every 3 --checkpoint-dir "$WORK/every_3"
for n in 3 6 8; do expect_file "$WORK/every_3/ckpt-$n.safetensors"; done
# ckpt-6 of a run that went on is ckpt-6 of a run that stopped there.
train stop_6 "${PS[@]}" --steps 6 --checkpoint-dir "$WORK/stop_6"
expect_same_file "$WORK/stop_6/ckpt-6.safetensors" "$WORK/every_3/ckpt-6.safetensors"

# Resuming pushes the batches left: 12 - 8 of epoch 1, then 12.
train resumed "${PS[@]}" --checkpoint-dir "$WORK/steps_8"
check_json resumed "d['resumed_from_step'] == 8 and d['steps'] == 24 and [e['steps'] for e in d['epochs']] == [4, 12]"
# The same resume again: the same bits.
mkdir -p "$WORK/again" && cp "$WORK/steps_8/ckpt-8.safetensors" "$WORK/again/" &&
  printf 'model_checkpoint_path: "ckpt-8.safetensors"\nall_model_checkpoint_paths: "ckpt-8.safetensors"\n' >"$WORK/again/checkpoint"
train resumed_again "${PS[@]}" --checkpoint-dir "$WORK/again"
CHECKS=$((CHECKS + 1))
[ "$(digest resumed)" = "$(digest resumed_again)" ] || fail "two resumes from ckpt-8 end with different weights"

# One worker: nothing is in flight at a checkpoint, so the resumed run is the uninterrupted one.
ONE=(--strategy parameter_server --workers 1 --dataset "$DATA" --epochs 2 --batch-per-replica 2 --no-progress --json)
train one_whole "${ONE[@]}"
train one_first "${ONE[@]}" --steps 7 --checkpoint-dir "$WORK/one"
train one_rest "${ONE[@]}" --checkpoint-dir "$WORK/one"
check_json one_rest "d['resumed_from_step'] == 7 and d['steps'] == 20"
CHECKS=$((CHECKS + 1))
[ "$(digest one_whole)" = "$(digest one_rest)" ] || fail "one worker: the resumed run ends on other weights"

# A synchronous strategy does not continue a parameter_server epoch.
expect_exit 2 mirrored_mid_epoch -- "$DTLAB" train --strategy mirrored --replicas 4 --dataset "$DATA" --epochs 2 \
  --batch-per-replica 2 --no-progress --checkpoint-dir "$WORK/every_3"
expect_contains mirrored_mid_epoch err "a synchronous strategy resumes at one position in the epoch's order"
expect_no_file "$WORK/every_3/ckpt-9.safetensors"
finish
