# Gradient accumulation (docs/semantics.md, "Gradient accumulation"): in exact mode 4
# accumulated micro-batches of 16 write the checkpoint of one step of 64, byte for byte
# (cmp), on 1 and on 4 mirrored replicas, at every optimizer step and across an epoch's
# partial group; in fast mode every synchronous strategy stays within the bound of one
# device on the whole step; a resumed run ends with the bits of an uninterrupted one;
# steps are optimizer steps in --json, metrics.csv and the progress line; under mpirun
# the ranks accumulate as one process does; parameter_server refuses.
. "$(dirname "$0")/lib.bash"
DATA=/usr/share/datasets/fashion-mnist
[ -d "$DATA" ] || { echo "SKIP: dataset-fashion-mnist not installed"; exit 77; }
SMALL="$DTLAB_SOURCE_DIR/tests/bad_inputs/files/valid"  # 20 images
RUN=(--no-progress --threads 2)

# (1) Exact mode: 4 x 16 against 1 x 64 on Fashion-MNIST, checkpoints after steps 5 and 10.
# 40 replicas compute in waves (16 slots on 2 cores), each keeping its micro-batch
# sum encoded (docs/cluster.md, "Compact gradients in waves"), most of them empty;
# folded, one sum takes them all.
EXACT=(--math exact --steps 10 --checkpoint-every 5 --check-reference --json)
expect_exit 0 one_step -- "$DTLAB" train "${RUN[@]}" "${EXACT[@]}" --global-batch 64 --checkpoint-dir "$WORK/one_step"
for replicas in 1 4 40; do
  name=accumulated_$replicas
  expect_exit 0 $name -- "$DTLAB" train "${RUN[@]}" "${EXACT[@]}" --replicas $replicas --global-batch 16 \
    --accumulation-steps 4 --checkpoint-dir "$WORK/$name"
  check_json $name "d['steps'] == 10 and d['accumulation_steps'] == 4 and d['step_batch_size'] == 64 and d['global_batch_size'] == 16 and d['reference_check']['bitwise_equal'] and d['reference_check']['steps_checked'] == 10"
  for step in 5 10; do expect_same_file "$WORK/one_step/ckpt-$step.safetensors" "$WORK/$name/ckpt-$step.safetensors"; done
done
# Folded above 8 replicas: one sum takes every replica's micro-batches (exact mode).
expect_exit 0 accumulated_folded -- "$DTLAB" train "${RUN[@]}" "${EXACT[@]}" --replicas 40 --fold-above 8 \
  --global-batch 16 --accumulation-steps 4 --checkpoint-dir "$WORK/accumulated_folded"
check_json accumulated_folded "d['folded_reduction'] and d['reference_check']['bitwise_equal'] and d['reference_check']['steps_checked'] == 10"
for step in 5 10; do
  expect_same_file "$WORK/one_step/ckpt-$step.safetensors" "$WORK/accumulated_folded/ckpt-$step.safetensors"
done
# The same with a model that has Dropout: an example's mask is keyed by its data set
# index and the optimizer step, so it is the same in micro-batch k of a step as in the
# one step of 64 (keyed by its position in the batch, micro-batches would reuse the
# first 16 positions' masks and fail the reference check).
DROPOUT=(--model "$DTLAB_SOURCE_DIR/tests/models/dropout_cnn.json" --math exact --steps 3 --check-reference --json)
expect_exit 0 dropout_one_step -- "$DTLAB" train "${RUN[@]}" "${DROPOUT[@]}" --global-batch 64 \
  --checkpoint-dir "$WORK/dropout_one_step"
expect_exit 0 dropout_accumulated -- "$DTLAB" train "${RUN[@]}" "${DROPOUT[@]}" --replicas 4 --global-batch 16 \
  --accumulation-steps 4 --checkpoint-dir "$WORK/dropout_accumulated"
check_json dropout_accumulated "d['reference_check']['bitwise_equal'] and d['reference_check']['steps_checked'] == 3"
expect_same_file "$WORK/dropout_one_step/ckpt-3.safetensors" "$WORK/dropout_accumulated/ckpt-3.safetensors"
# An epoch of 20 images in micro-batches of 4: a group of 4 and a partial group of 1,
# applied with the step's denominator 16 as one step of 16 applies its short batch of 4.
expect_exit 0 small_one_step -- "$DTLAB" train "${RUN[@]}" --dataset "$SMALL" --math exact --epochs 3 \
  --global-batch 16 --checkpoint-dir "$WORK/small_one_step"
expect_exit 0 small_accumulated -- "$DTLAB" train "${RUN[@]}" --dataset "$SMALL" --math exact --epochs 3 \
  --replicas 4 --global-batch 4 --accumulation-steps 4 --checkpoint-dir "$WORK/small_accumulated" --check-reference
expect_same_file "$WORK/small_one_step/ckpt-6.safetensors" "$WORK/small_accumulated/ckpt-6.safetensors"
expect_contains small_accumulated out "Reference check (exact): PASS, 6 of 6 steps bitwise equal to one device"
# metrics.csv counts optimizer steps: 2 per epoch.
CHECKS=$((CHECKS + 1))
[ "$(cut -d, -f8 "$WORK/small_accumulated/metrics.csv" | tr '\n' ' ')" = "steps 2 2 2 " ] ||
  fail "metrics.csv's steps are not optimizer steps: $(cat "$WORK/small_accumulated/metrics.csv")"

# (2) Fast mode: float sums in micro-batch order, within the bound on every synchronous strategy.
for setup in "one_device 1 1" "mirrored 3 1" "central_storage 2 1" "tpu 4 1" "multi_worker_mirrored 4 2"; do
  read -r strategy replicas workers <<<"$setup"
  expect_exit 0 "fast_$strategy" -- "$DTLAB" train "${RUN[@]}" --strategy "$strategy" --replicas "$replicas" \
    --workers "$workers" --global-batch 24 --accumulation-steps 3 --steps 4 --check-reference --json
  check_json "fast_$strategy" "d['reference_check']['within_bound'] and d['reference_check']['steps_checked'] == 4 and d['steps'] == 4"
done
# The keras rule with Keras's fit loss on full micro-batches equals one device too.
expect_exit 0 fast_keras -- "$DTLAB" train "${RUN[@]}" --replicas 2 --global-batch 24 --accumulation-steps 3 \
  --accumulation keras --loss-reduction sum_over_batch_size --steps 3 --check-reference --json
check_json fast_keras "d['reference_check']['within_bound'] and d['accumulation'] == 'keras'"
expect_contains fast_keras err "Keras's rule: each micro-batch's loss as a step of its own"

# (3) Resume: stopped after step 3 (of 2 + 2 + 2 on the small set) and resumed, the
# run ends with the checkpoint of an uninterrupted run.
FAST=(--dataset "$SMALL" --replicas 2 --global-batch 4 --accumulation-steps 3 --epochs 3)
expect_exit 0 whole -- "$DTLAB" train "${RUN[@]}" "${FAST[@]}" --checkpoint-dir "$WORK/whole"
expect_exit 0 first -- "$DTLAB" train "${RUN[@]}" "${FAST[@]}" --steps 3 --checkpoint-dir "$WORK/resumed"
expect_exit 0 resumed -- "$DTLAB" train "${RUN[@]}" "${FAST[@]}" --checkpoint-dir "$WORK/resumed" --json
check_json resumed "d['resumed_from_step'] == 3 and d['steps'] == 6 and d['resume']['changes'] == []"
expect_same_file "$WORK/whole/ckpt-6.safetensors" "$WORK/resumed/ckpt-6.safetensors"
# Resumed without accumulation, the change is named.
expect_exit 0 changed -- "$DTLAB" train "${RUN[@]}" --dataset "$SMALL" --replicas 2 --global-batch 4 --epochs 4 \
  --checkpoint-dir "$WORK/resumed"
expect_contains changed out "changed: global batch 12 -> 4, accumulation steps 3 -> 1"

# (4) The progress line on a terminal counts optimizer steps of 4 micro-batches.
expect_exit 0 progress -- python3 "$DTLAB_SOURCE_DIR/tests/cli/pty_run.py" "$DTLAB" train --threads 2 \
  --global-batch 16 --accumulation-steps 4 --epochs 1 --steps 3
expect_contains progress out "3/3 [============] "
expect_contains progress out " steps of 4x16 "

# (5) Refused: parameter_server has no synchronous step to accumulate into.
expect_exit 2 ps -- "$DTLAB" train "${RUN[@]}" --strategy parameter_server --workers 2 --accumulation-steps 2 --steps 1
expect_contains ps err "parameter_server workers push every batch's gradient"

# (6) Under mpirun: 2 ranks of 2 replicas accumulate as one process does, and in exact
# mode as one device on the whole step.
if [ "${DTLAB_WITH_MPI:-0}" = 1 ] && command -v mpirun >/dev/null; then
  MPI=(mpirun --allow-run-as-root --oversubscribe -np 2 "$DTLAB" train --strategy multi_worker_mirrored
       --replicas-per-worker 2 --dataset "$SMALL" --epochs 2 --global-batch 4 --accumulation-steps 3 --json)
  SIM=("$DTLAB" train --strategy multi_worker_mirrored --workers 2 --replicas 4 --all-reduce hierarchical
       --dataset "$SMALL" --epochs 2 --global-batch 4 --accumulation-steps 3 --json "${RUN[@]}")
  for math in fast exact; do
    expect_exit 0 mpi_$math -- "${MPI[@]}" --math $math --check-reference --no-progress
    expect_exit 0 sim_$math -- "${SIM[@]}" --math $math --check-reference
    check_json mpi_$math "d['reference_check']['within_bound'] and d['steps'] == 4 and d['workers'] == 2"
    CHECKS=$((CHECKS + 1))
    a=$(python3 -c "import json; print(json.load(open('$WORK/mpi_$math.out'))['weights_digest'])" 2>/dev/null)
    b=$(python3 -c "import json; print(json.load(open('$WORK/sim_$math.out'))['weights_digest'])" 2>/dev/null)
    [ -n "$a" ] && [ "$a" = "$b" ] || fail "mpirun ($a) and one process ($b) end with different weights ($math)"
  done
  expect_exit 0 mpi_one_device -- "$DTLAB" train "${RUN[@]}" --dataset "$SMALL" --epochs 2 --global-batch 12 \
    --math exact --json
  CHECKS=$((CHECKS + 1))
  a=$(python3 -c "import json; print(json.load(open('$WORK/mpi_exact.out'))['weights_digest'])" 2>/dev/null)
  b=$(python3 -c "import json; print(json.load(open('$WORK/mpi_one_device.out'))['weights_digest'])" 2>/dev/null)
  [ -n "$a" ] && [ "$a" = "$b" ] || fail "exact mode under mpirun ($a) is not one device's step of 12 ($b)"
else
  echo "dtlab built without MPI: the mpirun part is skipped"
fi
finish
