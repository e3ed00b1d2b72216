# BatchNormalization under MirroredStrategy, dtlab beside real TensorFlow (2.21, Keras 3):
# tests/peers/tf_batch_norm.py writes, with Keras, a Conv2D -> BatchNormalization -> Dense ->
# BatchNormalization -> Dense model without Dropout, synchronized=True and False, and a data
# set of 64 images; dtlab trains each for 2 SGD steps on 4 mirrored replicas of 4 examples
# (dumping both steps, checkpointing after each) and on one device, and TF runs the same two
# steps under MirroredStrategy on 4 logical CPUs from dtlab's weights on dtlab's global
# batches. The summed loss, the summed gradients and every variable after each step, replica
# 0's copy of the moving statistics included, agree within float32 noise; with
# synchronized=True both equal one device, with synchronized=False both differ from it (and
# dtlab's --check-reference says why). Skipped without the peers venv's TensorFlow
# (scripts/peers-venv.sh).
. "$(dirname "$0")/lib.bash"
require_tensorflow
PEER="$DTLAB_SOURCE_DIR/tests/peers/tf_batch_norm.py"
expect_exit 0 write-cases -- "$PY" "$PEER" write-cases "$WORK"

MIRRORED=(--strategy mirrored --replicas 4 --batch-per-replica 4)
train() {  # train NAME CASE OPTION...: two SGD steps of the case's model, from the same seed
  local name=$1 case=$2
  shift 2
  expect_exit "${EXIT:-0}" "$name" -- "$DTLAB" train --no-progress --model "$WORK/$case.json" --dataset "$WORK/data" \
    --optimizer sgd --lr 0.1 --steps 2 "$@"
}
for case in synchronized unsynchronized; do
  train "$case-mirrored" "$case" "${MIRRORED[@]}" --dump-step 1 --dump-dir "$WORK/$case/mirrored/dump" \
    --checkpoint-dir "$WORK/$case/mirrored/ckpt" --checkpoint-every 1
  train "$case-mirrored-2" "$case" "${MIRRORED[@]}" --dump-step 2 --dump-dir "$WORK/$case/mirrored-2/dump"
  train "$case-one" "$case" --batch-per-replica 16 --dump-step 1 --dump-dir "$WORK/$case/one/dump" \
    --checkpoint-dir "$WORK/$case/one/ckpt" --checkpoint-every 1
done
# dtlab's own verdict: synchronized statistics equal one device, per-replica ones do not.
train synchronized-reference synchronized "${MIRRORED[@]}" --check-reference
expect_contains synchronized-reference out "Reference check: PASS, 2 of 2 steps"
EXIT=1 train unsynchronized-reference unsynchronized "${MIRRORED[@]}" --check-reference
expect_contains unsynchronized-reference out "Reference check: FAIL, 2 of 2 steps outside the bound; first at step 1"
expect_contains unsynchronized-reference out \
  "BatchNormalization (batch_normalization, batch_normalization_1) normalizes each replica's examples"

expect_exit 0 check -- "$PY" "$PEER" check "$WORK" synchronized unsynchronized
expect_contains check out "RESULT: synchronized: dtlab equals TensorFlow within float32 noise"
expect_contains check out "RESULT: unsynchronized: dtlab equals TensorFlow within float32 noise"
CHECKS=$((CHECKS + 1))
[ "$(grep -c "^SPLIT: step [12]: same" "$WORK/check.out")" = 4 ] ||
  fail "check: TF's replicas were not dealt dtlab's slices"
CHECKS=$((CHECKS + 1))
[ "$(grep -c "^MATCH: after step 2: batch_normalization.*/moving_.* (replica 0)" "$WORK/check.out")" = 8 ] ||
  fail "check: not every moving statistic (replica 0's) matched after step 2"
# synchronized=True equals one device on both sides; synchronized=False differs on both.
sed -n '/^== synchronized/,/^== unsynchronized/p' "$WORK/check.out" >"$WORK/synchronized.out"
sed -n '/^== unsynchronized/,$p' "$WORK/check.out" >"$WORK/unsynchronized.out"
for side in TF dtlab; do
  expect_contains synchronized out "ONE-DEVICE: $side equal"
  expect_contains unsynchronized out "ONE-DEVICE: $side differs"
done
expect_contains check out "REPLICAS: TF's 4 copies of the moving statistics after step 2 are identical"
expect_contains check out "REPLICAS: TF's 4 copies of the moving statistics after step 2 differ"
grep -v "^MATCH" "$WORK/check.out"
finish
