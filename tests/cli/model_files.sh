# Models from files (issue 21, docs/models.md): Keras-written model.to_json() files
# (tests/models/) train on 4 mirrored replicas with --check-reference in fast mode
# (within the bound) and in exact mode (bitwise, and the checkpoint byte-identical to
# one device's), Dropout and synchronized BatchNormalization included; TF's per-replica
# dropout streams and unsynchronized BatchNormalization fail the check, naming the layer,
# and the unsynchronized layer's replicas compute in waves with the same checkpoint; a
# checkpoint of a file model evaluates and resumes without the file where it was; scenario files read a model path relative to themselves; files dtlab
# does not support exit 2 naming the layer, its index and what is supported; the
# built-in models keep their names.
. "$(dirname "$0")/lib.bash"
MODELS="$DTLAB_SOURCE_DIR/tests/models"
DATA="$DTLAB_SOURCE_DIR/tests/bad_inputs/files/valid"  # 20 training and 10 test images, 28x28
COMMON=(--no-progress --json --dataset "$DATA" --epochs 2)

train() { local code=$1 name=$2; shift 2; expect_exit "$code" "$name" -- timeout 300 "$DTLAB" train "${COMMON[@]}" "$@"; }

for model in every_layer strided_cnn dropout_cnn batch_norm_cnn; do
  # Fast mode: every step within the floating-point bound of one device (20 = 16 + 4: a short last batch).
  train 0 "$model-fast" --model "$MODELS/$model.json" --strategy mirrored --replicas 4 --batch-per-replica 4 \
    --check-reference
  check_json "$model-fast" "d['reference_check']['within_bound'] and d['reference_check']['steps_checked'] == 4"
  # Exact mode: bitwise equal to one device, and the checkpoint is one device's, byte for byte.
  train 0 "$model-exact" --model "$MODELS/$model.json" --strategy mirrored --replicas 4 --batch-per-replica 4 \
    --check-reference --math exact --checkpoint-dir "$WORK/$model-four" --checkpoint-every 4
  check_json "$model-exact" "d['reference_check']['bitwise_equal'] and d['reference_check']['steps_checked'] == 4"
  train 0 "$model-one" --model "$MODELS/$model.json" --batch-per-replica 16 --math exact \
    --checkpoint-dir "$WORK/$model-one" --checkpoint-every 4
  expect_same_file "$WORK/$model-four/ckpt-4.safetensors" "$WORK/$model-one/ckpt-4.safetensors"
done

# TF's per-replica dropout streams: the run depends on the replica count, and the check says why.
train 1 per-replica --model "$MODELS/dropout_cnn.json" --strategy mirrored --replicas 4 --batch-per-replica 4 \
  --check-reference --dropout-rng per-replica
check_json per-replica "not d['reference_check']['within_bound']"
expect_contains per-replica out "Dropout (dropout, dropout_1) draws its masks per replica"
train 1 per-replica-exact --model "$MODELS/dropout_cnn.json" --strategy mirrored --replicas 4 --batch-per-replica 4 \
  --check-reference --dropout-rng per-replica --math exact
expect_contains per-replica-exact out "--dropout-rng keyed keys each mask by the example"
expect_exit 2 bad-dropout-rng -- "$DTLAB" train --dropout-rng shared --steps 1
expect_contains bad-dropout-rng err "unknown dropout rng 'shared' (expected one of: keyed, per-replica)"

# BatchNormalization: synchronized=True passes above (its checkpoint, moving statistics
# included, is one device's); Keras's default synchronized=False normalizes each
# replica by its own batch, so the check fails (exit 1) naming the layers and the cure.
for math in fast exact; do
  train 1 bn-unsynchronized-$math --model "$MODELS/batch_norm_cnn_unsynchronized.json" --strategy mirrored \
    --replicas 4 --batch-per-replica 4 --check-reference --math $math
  check_json bn-unsynchronized-$math "not d['reference_check']['within_bound']"
  expect_contains bn-unsynchronized-$math out "BatchNormalization (batch_normalization, batch_normalization_1) normalizes each replica's examples by that replica's own batch statistics"
  expect_contains bn-unsynchronized-$math out "BatchNormalization(synchronized=True) all-reduces the statistics and equals one device"
done
# One replica: nothing to differ from.
train 0 bn-unsynchronized-one --model "$MODELS/batch_norm_cnn_unsynchronized.json" --check-reference --math exact
# Unsynchronized, each replica's passes need no other's: 17 replicas compute in waves
# (exact mode's compacted gradients, and the fold in both modes) and give the
# checkpoint of all of them at once (exact: the words' all-reduce; fast: naive's).
# A global batch of 20 gives some replicas 2 examples: one example alone would
# normalize to the layer's offset in the dense layer's BatchNormalization, and no
# gradient would reach the layers below it.
waves() {
  local name=$1; shift
  train 0 "bn-waves-$name" --model "$MODELS/batch_norm_cnn_unsynchronized.json" --strategy mirrored --replicas 17 \
    --global-batch 20 --checkpoint-dir "$WORK/bn-waves-$name" --checkpoint-every 2 "$@"
}
waves exact-words --math exact --exact-all-reduce words
waves exact-compacted --math exact
waves exact-folded --math exact --fold-above 8
check_json bn-waves-exact-folded "d['folded_reduction'] and d['exact_all_reduce'] == 'compact'"
waves fast-naive --all-reduce naive
waves fast-folded --all-reduce naive --fold-above 8
check_json bn-waves-fast-folded "d['folded_reduction']"
for name in exact-compacted exact-folded; do
  expect_same_file "$WORK/bn-waves-exact-words/ckpt-2.safetensors" "$WORK/bn-waves-$name/ckpt-2.safetensors"
done
expect_same_file "$WORK/bn-waves-fast-naive/ckpt-2.safetensors" "$WORK/bn-waves-fast-folded/ckpt-2.safetensors"
# What BatchNormalization does not run with yet: exit 2, saying what to change.
bn_refused() {
  local name=$1 text=$2; shift 2
  expect_exit 2 "bn-$name" -- "$DTLAB" train --dataset "$DATA" --steps 1 --model "$MODELS/batch_norm_cnn.json" "$@"
  expect_contains "bn-$name" err "$text"
}
bn_refused device "layer batch_normalization (BatchNormalization) has no device kernel" --backend emulated
bn_refused half "--precision mixed_float16: Keras computes BatchNormalization in float32" --precision mixed_float16
bn_refused accumulation "--accumulation-steps 2: each micro-batch would normalize by its own statistics" \
  --accumulation-steps 2
bn_refused central "the central_storage strategy keeps one copy of the variables" --strategy central_storage \
  --replicas 2
bn_refused parameter-server "the parameter_server strategy keeps one copy" --strategy parameter_server \
  --workers 2 --parameter-servers 1

# The summary shows the file's layers and the softmax the loss applies.
expect_exit 0 summary -- timeout 300 "$DTLAB" train --no-progress --dataset "$DATA" --steps 1 --model "$MODELS/every_layer.json"
expect_contains summary out 'Model: "every_layer"'
expect_contains summary out "average_pooling2d (AveragePooling2D) [6, 6, 12]"
expect_contains summary out "(softmax)                       applied by the loss, as Keras does"

# A checkpoint records the model's description: dtlab eval needs no file, and a resume
# matches the model by its description, not by the path it was read from.
mkdir -p "$WORK/elsewhere" && cp "$MODELS/strided_cnn.json" "$WORK/elsewhere/model.json"
train 0 first-half --model "$WORK/elsewhere/model.json" --steps 2 --checkpoint-dir "$WORK/resume" --checkpoint-every 2
mv "$WORK/elsewhere/model.json" "$WORK/moved.json"
expect_exit 0 eval -- "$DTLAB" eval --json --checkpoint-dir "$WORK/resume" --dataset "$DATA"
check_json eval "d['model'] == 'strided_cnn' and d['step'] == 2"
train 0 second-half --model "$WORK/moved.json" --steps 4 --checkpoint-dir "$WORK/resume" --checkpoint-every 2
check_json second-half "d['resumed_from_step'] == 2"
train 2 other-model --model "$MODELS/dropout_cnn.json" --steps 6 --checkpoint-dir "$WORK/resume"
expect_contains other-model err "holds a checkpoint of another model"
train 2 builtin-on-file --model seed-cnn --steps 6 --checkpoint-dir "$WORK/resume"
expect_contains builtin-on-file err "holds a checkpoint of another model"

# A scenario file names its model relative to itself; --save-scenario writes the path absolute.
mkdir -p "$WORK/scenario/models" && cp "$MODELS/strided_cnn.json" "$WORK/scenario/models/"
cat >"$WORK/scenario/run.toml" <<EOF
title = "a model from a file"
[cluster]
strategy = "mirrored"
replicas = 2
[data]
source = "$DATA"
batch_per_replica = 4
[model]
name = "models/strided_cnn.json"
[run]
steps = 2
check_reference = true
dropout_rng = "keyed"
[[check]]
kind = "reference"
expect = "pass"
EOF
expect_exit 0 scenario -- timeout 300 "$DTLAB" run --no-progress "$WORK/scenario/run.toml"
expect_contains scenario out "as expected"
(cd "$WORK/scenario" && "$DTLAB" train --model models/strided_cnn.json --dataset "$DATA" --steps 1 \
  --save-scenario saved.toml >/dev/null 2>&1) || fail "--save-scenario with a model file"
CHECKS=$((CHECKS + 1))
grep -qF "name = \"$WORK/scenario/models/strided_cnn.json\"" "$WORK/scenario/saved.toml" ||
  fail "--save-scenario did not write the model file's absolute path"

# Files dtlab does not support: exit 2, the layer, its index and what is supported.
refused() {
  local name=$1 file=$2 text=$3
  expect_exit 2 "$name" -- "$DTLAB" train --dataset "$DATA" --steps 1 --model "$file"
  expect_contains "$name" err "$text"
}
printf '%s' "$(sed 's/"renorm": false/"renorm": true/' "$MODELS/batch_normalization.json")" >"$WORK/renorm.json"
refused batch-renormalization "$WORK/renorm.json" \
  "layers[2] 'batch_normalization' (BatchNormalization): renorm must be false (batch renormalization is not supported)"
refused l1 "$MODELS/l1_regularizer.json" "layers[2] 'dense_5' (Dense): kernel_regularizer must be null or an L2"
refused dilated "$MODELS/dilated.json" "layers[1] 'conv2d_5' (Conv2D): dilation_rate must be 1 or [1, 1]"
refused functional "$MODELS/functional.json" "a Functional model; dtlab reads Sequential models"
refused no-input "$MODELS/no_input_shape.json" "the model has no input shape"
refused missing "$WORK/nowhere.json" "nowhere.json"
refused directory "$WORK/" "model file"
printf '{"class_name": "Sequential", "config": {"layers": [' >"$WORK/truncated.json"
refused truncated "$WORK/truncated.json" "not JSON"
expect_exit 2 device -- "$DTLAB" train --dataset "$DATA" --steps 1 --backend emulated --model "$MODELS/strided_cnn.json"
expect_contains device err "layer conv2d_2 (Conv2D) has strides or same padding"
# Dropout runs on the device backends (masks drawn on the host): the emulated device
# trains a Dropout model to the CPU's bits in exact mode.
for backend in cpu emulated; do
  expect_exit 0 device-dropout.$backend -- "$DTLAB" train --dataset "$DATA" --steps 2 --replicas 2 --math exact \
    --backend $backend --model "$MODELS/dropout_cnn.json" --json
done
check_json device-dropout.emulated "d['weights_digest'] == json.load(open('$WORK/device-dropout.cpu.out'))['weights_digest']"

# The built-in models keep their names; an unknown name is still NotFound.
expect_exit 2 unknown -- "$DTLAB" train --model resnet --steps 1
expect_contains unknown err "unknown model 'resnet' (available: seed-cnn, mnist-cnn, linear)"
finish
