# Real TensorFlow (2.21, Keras 3) beside dtlab on models from files (docs/models.md):
# tests/peers/tf_model_files.py writes, with Keras itself, one small model per new layer
# (Conv2D with strides and same padding, MaxPooling2D and AveragePooling2D with
# overlapping and same-padded windows, Softmax, Activation and ReLU layers, a final
# softmax, L2 regularizers) and a data set whose values repeat (pooling windows tie);
# dtlab trains each for one step on 2 mirrored replicas and dumps it, and TF, given
# dtlab's weights, gives the same logits, loss and gradients within float32 noise. The
# Keras-written files of tests/models/ go through the same check. Skipped without the
# peers venv's TensorFlow (scripts/peers-venv.sh).
. "$(dirname "$0")/lib.bash"
PY="${DTLAB_PEERS_VENV:-/opt/dtlab-peers}/bin/python"
[ -x "$PY" ] || { echo "SKIP: no peers venv at ${PY%/bin/python} (run scripts/peers-venv.sh)"; exit 77; }
export TF_CPP_MIN_LOG_LEVEL=3
"$PY" -c "import tensorflow, keras" 2>/dev/null ||
  { echo "SKIP: $PY cannot import tensorflow (run scripts/peers-venv.sh)"; exit 77; }
PEER="$DTLAB_SOURCE_DIR/tests/peers/tf_model_files.py"
expect_exit 0 write-cases -- "$PY" "$PEER" write-cases "$WORK/cases"

check() {  # check NAME MODEL-FILE
  local name=$1 model=$2
  expect_exit 0 "$name-train" -- timeout 300 "$DTLAB" train --no-progress --model "$model" --dataset "$WORK/cases/data" \
    --strategy mirrored --replicas 2 --batch-per-replica 32 --steps 1 --dump-step 1 --dump-dir "$WORK/$name"
  expect_exit 0 "$name" -- "$PY" "$PEER" check-dump "$WORK/$name/step-1.safetensors"
  expect_contains "$name" out "RESULT: dtlab equals TensorFlow within float32 noise"
  expect_contains "$name" out "MATCH: logits"
}
for model in "$WORK"/cases/*.json; do
  name=$(basename "$model" .json)
  check "$name" "$model"
done
check every_layer "$DTLAB_SOURCE_DIR/tests/models/every_layer.json"
check strided_cnn "$DTLAB_SOURCE_DIR/tests/models/strided_cnn.json"
expect_contains final_softmax out "MATCH: loss"
finish
