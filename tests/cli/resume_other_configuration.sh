# dtlab train resumes a checkpoint under another configuration, as TF restores a
# MirroredStrategy checkpoint on another replica count or without a strategy: a
# 4-replica checkpoint resumes on 3 replicas and says what it carried over; exact
# mode then ends byte-identical to an uninterrupted run; a changed global batch
# moves the position in the epoch (rounded up: no example twice); another model or
# optimizer is refused with exit 2.
. "$(dirname "$0")/lib.bash"
[ -d /usr/share/datasets/fashion-mnist ] || { echo "SKIP: dataset-fashion-mnist not installed"; exit 77; }

train() { local name=$1; shift; expect_exit 0 "$name" -- "$DTLAB" train --no-progress --threads 2 "$@"; }

# (a) Exact mode: 3 steps on 4 replicas, then 3 more on 3 replicas, at global
# batch 96, end byte-identical to 6 steps on 4 replicas.
EXACT=(--math exact --strategy mirrored --global-batch 96 --checkpoint-every 3)
train uninterrupted "${EXACT[@]}" --replicas 4 --steps 6 --checkpoint-dir "$WORK/uninterrupted"
train exact_first "${EXACT[@]}" --replicas 4 --steps 3 --checkpoint-dir "$WORK/exact"
train exact_second "${EXACT[@]}" --replicas 3 --steps 6 --checkpoint-dir "$WORK/exact"
expect_contains exact_second out "Resuming from the checkpoint at step 3"
expect_contains exact_second out "Carried over: the weights (8 variables), the optimizer's slots m, v (16 variables) and iteration count 3, step 3, epoch 1 after 288 of 60000 examples; changed: nothing the checkpoint records (exact mode does not record the strategy, replicas or workers)"
expect_same_file "$WORK/uninterrupted/ckpt-6.safetensors" "$WORK/exact/ckpt-6.safetensors"

# Fast mode: the same resume names the change, in the human line and in --json.
FAST=(--strategy mirrored --global-batch 128)
train fast_first "${FAST[@]}" --replicas 4 --steps 10 --checkpoint-every 10 --checkpoint-dir "$WORK/fast"
cp -r "$WORK/fast" "$WORK/fast_copy"
train fast_second "${FAST[@]}" --replicas 3 --steps 12 --checkpoint-dir "$WORK/fast" --json
expect_contains fast_second err "Carried over: the weights (8 variables), the optimizer's slots m, v (16 variables) and iteration count 10, step 10, epoch 1 after 1280 of 60000 examples; changed: replicas 4 -> 3"
check_json fast_second "d['resumed_from_step'] == 10 and d['steps'] == 12 and d['replicas'] == 3"
check_json fast_second "d['resume']['changes'] == [{'setting': 'replicas', 'checkpoint': '4', 'run': '3'}]"
check_json fast_second "d['resume']['model_variables'] == 8 and d['resume']['optimizer_slot_variables'] == 16 and d['resume']['optimizer_iterations'] == 10"
check_json fast_second "d['resume']['position']['step_in_epoch'] == 10 and d['resume']['position']['examples_consumed'] == 1280"
check_json fast_second "[e['steps'] for e in d['epochs']] == [2] and d['epochs'][0]['epoch'] == 1"

# (b) Another model, or another optimizer, is refused and the directory left as it was.
expect_exit 2 other_model -- "$DTLAB" train --no-progress --model mnist-cnn --checkpoint-dir "$WORK/fast_copy"
expect_contains other_model err "holds a checkpoint of another model (seed-cnn there, mnist-cnn here)"
expect_contains other_model err "resume with --model seed-cnn"
expect_exit 2 other_optimizer -- "$DTLAB" train --no-progress --optimizer rmsprop --checkpoint-dir "$WORK/fast_copy"
expect_contains other_optimizer err "another optimizer (adam with slots m, v there, rmsprop with slots velocity here)"
expect_same_file "$WORK/fast/ckpt-10.safetensors" "$WORK/fast_copy/ckpt-10.safetensors"
CHECKS=$((CHECKS + 1))
[ "$(ls "$WORK/fast_copy")" = "$(printf 'checkpoint\nckpt-10.safetensors\nmetrics.csv')" ] || fail "a refused resume wrote into its directory: $(ls "$WORK/fast_copy")"

# Another seed is taken, and the run says the data order changed.
train other_seed "${FAST[@]}" --replicas 4 --steps 11 --seed 4 --checkpoint-dir "$WORK/fast_copy"
expect_contains other_seed out "changed: seed 1 -> 4; the data order changed"

# (c) Another global batch: 10 batches of 128 are 1280 examples. At 192 the run
# goes on at batch ceil(1280/192) = 7 (1344: 64 examples left out, none twice),
# so epoch 1 (313 batches of 192) has 306 left. The linear model keeps it quick.
LINEAR=(--model linear --strategy mirrored)
train batch_first "${LINEAR[@]}" --replicas 4 --global-batch 128 --steps 10 --checkpoint-every 10 --checkpoint-dir "$WORK/batch"
cp -r "$WORK/batch" "$WORK/batch_down"
train batch_up "${LINEAR[@]}" --replicas 3 --global-batch 192 --epochs 1 --checkpoint-dir "$WORK/batch" --json
check_json batch_up "d['resume']['position'] == {'checkpoint_global_batch': 128, 'checkpoint_step_in_epoch': 10, 'global_batch': 192, 'step_in_epoch': 7, 'examples_consumed': 1280, 'examples_skipped': 64, 'epoch_examples': 60000}"
check_json batch_up "d['resumed_from_step'] == 10 and d['steps'] == 10 + 306 and [e['steps'] for e in d['epochs']] == [306]"
check_json batch_up "{'setting': 'global_batch', 'checkpoint': '128', 'run': '192'} in d['resume']['changes']"
expect_contains batch_up err "(batch 10 at global batch 128, now batch 7 at 192; 64 examples of this epoch left out, none repeated)"
# At 64 it goes on at batch 20 exactly: 938 - 20 = 918 left, then epoch 2 in full.
train batch_down "${LINEAR[@]}" --replicas 4 --global-batch 64 --epochs 2 --checkpoint-dir "$WORK/batch_down" --json
check_json batch_down "d['resume']['position']['step_in_epoch'] == 20 and d['resume']['position']['examples_skipped'] == 0"
check_json batch_down "[e['steps'] for e in d['epochs']] == [918, 938] and d['steps'] == 10 + 918 + 938"
finish
