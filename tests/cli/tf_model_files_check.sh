# Real TensorFlow (2.21, Keras 3) beside dtlab on models from files (docs/models.md):
# tests/peers/tf_model_files.py writes, with Keras itself, one small model per new layer
# (Conv2D with strides and same padding, MaxPooling2D and AveragePooling2D with
# overlapping and same-padded windows, Softmax, Activation and ReLU layers, a final
# softmax, L2 regularizers, BatchNormalization synchronized or not, with and without gamma
# and beta) and a data set whose values repeat (pooling windows tie); dtlab trains each for
# one step on 2 mirrored replicas and dumps it (BatchNormalization: three steps on 2 or 4
# replicas, dumping the third, whose moving statistics are no longer the initial ones), and
# TF, given dtlab's weights, moving statistics included, gives the same logits, loss and
# gradients within float32 noise (of TF's float32 run or, where TF's own float32 rounding
# strays, of the same model in float64). The Keras-written files of tests/models/ go
# through the same check. Skipped without the peers venv's TensorFlow (scripts/peers-venv.sh).
. "$(dirname "$0")/lib.bash"
require_tensorflow
PEER="$DTLAB_SOURCE_DIR/tests/peers/tf_model_files.py"
expect_exit 0 write-cases -- "$PY" "$PEER" write-cases "$WORK/cases"

check() {  # check NAME MODEL-FILE [STEP [REPLICAS]]: step STEP's dump (1) on REPLICAS (2) x 64/REPLICAS
  local name=$1 model=$2 step=${3:-1} replicas=${4:-2}
  expect_exit 0 "$name-train" -- timeout 300 "$DTLAB" train --no-progress --model "$model" --dataset "$WORK/cases/data" \
    --strategy mirrored --replicas "$replicas" --batch-per-replica $((64 / replicas)) --steps "$step" \
    --dump-step "$step" --dump-dir "$WORK/$name"
  expect_exit 0 "$name" -- "$PY" "$PEER" check-dump "$WORK/$name/step-$step.safetensors"
  expect_contains "$name" out "RESULT: dtlab equals TensorFlow within float32 noise"
  expect_contains "$name" out "MATCH: logits"
}
for model in "$WORK"/cases/*.json; do
  name=$(basename "$model" .json)
  case $name in
    batch_norm_*) ;;  # below
    *) check "$name" "$model" ;;
  esac
done
check every_layer "$DTLAB_SOURCE_DIR/tests/models/every_layer.json"
check strided_cnn "$DTLAB_SOURCE_DIR/tests/models/strided_cnn.json"
expect_contains final_softmax out "MATCH: loss"

# BatchNormalization: step 3's dump, so that the moving statistics (replica 0's, after two
# steps) are not the initial 0 and 1 and the logits, an inference pass, depend on them (the
# MOVING line's control: the initial ones would move the logits far beyond the tolerance).
# An unsynchronized layer normalizes each replica's examples by their own statistics, which
# check-dump computes per replica slice; a synchronized one normalizes the whole batch.
check batch_norm_conv "$WORK/cases/batch_norm_conv.json" 3 4
check batch_norm_synchronized "$WORK/cases/batch_norm_synchronized.json" 3 4
check batch_norm_dense "$WORK/cases/batch_norm_dense.json" 3
check batch_normalization "$DTLAB_SOURCE_DIR/tests/models/batch_normalization.json" 3
for name in batch_norm_conv batch_norm_dense batch_normalization; do
  expect_contains "$name" out "BATCH: normalized together: per replica"
done
expect_contains batch_norm_synchronized out "BATCH: normalized together: the whole batch"
# A bias that feeds BatchNormalization directly cancels: its gradient is rounding noise.
expect_contains batch_norm_dense out "NOTE: dense_"
expect_contains batch_norm_dense out "its gradient is zero in exact arithmetic"
for name in batch_norm_conv batch_norm_synchronized batch_norm_dense batch_normalization; do
  expect_contains "$name" out "MOVING: loaded dtlab's moving_mean and moving_variance"
  CHECKS=$((CHECKS + 1))
  # The control: the logits with the initial moving statistics are far (100 x the logits'
  # tolerance) from those with the loaded ones, which match.
  awk '/^MOVING:/ { found = 1; if ($NF + 0 < 1e-3) bad = 1 } END { exit !(found && !bad) }' "$WORK/$name.out" ||
    fail "$name: the logits do not depend on the moving statistics: $(grep '^MOVING:' "$WORK/$name.out")"
  expect_contains "$name" out "MATCH: gradient"
  expect_contains "$name" out "moving_variance (not trainable) is zero"
done
finish
