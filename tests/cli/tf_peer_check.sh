# Real TensorFlow (2.21, Keras 3) beside dtlab: the step a --dump-step file records on 4
# mirrored replicas is run again by tests/peers/tf_peer.py under tf.distribute.MirroredStrategy
# (4 logical CPUs) with the loss code the file names, and dtlab's reduced gradients and loss
# equal TF's, for several loss rules, on an even batch and on the short last batch of 1001
# examples in global batches of 96 (41, split 11/11/11/8). It also pins which rules make the
# distributed step equal one device's and Keras 3's refusal of reduction="auto" (dtlab
# quotes it). Skipped without the peers venv's TensorFlow
# (scripts/peers-venv.sh) or the Fashion-MNIST dataset.
. "$(dirname "$0")/lib.bash"
DATA=/usr/share/datasets/fashion-mnist
[ -d "$DATA" ] || { echo "SKIP: dataset-fashion-mnist not installed"; exit 77; }
require_tensorflow
PEER="$DTLAB_SOURCE_DIR/tests/peers/tf_peer.py"
MIRRORED=(--no-progress --strategy mirrored --replicas 4)

# The first 1001 training examples (and 100 test examples) as a --dataset directory: global
# batches of 96 leave a last batch of 41, step 11, the end of the first epoch.
"$PY" - "$DATA" "$WORK/fmnist-1001" <<'EOF' || fail "could not write the 1001-example dataset"
import gzip, os, struct, sys
src, dst = sys.argv[1:]
os.makedirs(dst, exist_ok=True)
for name, n in [("train-images-idx3-ubyte", 1001), ("train-labels-idx1-ubyte", 1001),
                ("t10k-images-idx3-ubyte", 100), ("t10k-labels-idx1-ubyte", 100)]:
    data = gzip.open(f"{src}/{name}.gz", "rb").read()
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    size = 1
    for d in dims[1:]:
        size *= d
    with open(f"{dst}/{name}", "wb") as f:
        f.write(data[:4] + struct.pack(">" + "I" * ndim, n, *dims[1:]) + data[4 + 4 * ndim:4 + 4 * ndim + n * size])
EOF
UNEVEN=(--dataset "$WORK/fmnist-1001" --global-batch 96 --steps 11 --dump-step 11)

# check NAME DUMP ONE-DEVICE-VERDICT [--eigen-only]: tf_peer agrees with the dump and says
# whether the distributed step equals one device's.
check() {
  local name=$1 dump=$2 verdict=$3
  expect_exit 0 "$name" -- "$PY" "$PEER" check-dump "${@:4}" "$dump"
  expect_contains "$name" out "MATCH: dtlab's reduced gradients and loss equal TensorFlow's"
  expect_contains "$name" out "SPLIT: same"
  expect_contains "$name" out "ONE-DEVICE: $verdict:"
}

# (1) The defaults (compute_average_loss with global_batch_size) on an even batch: 4 x 64.
expect_exit 0 train-even -- "$DTLAB" train "${MIRRORED[@]}" --steps 3 --dump-step 3 --dump-dir "$WORK/even"
check even "$WORK/even/step-3.safetensors" equal
expect_contains even out "replica batches 64,64,64,64"

# (2) Keras 3's sum_over_batch_size on the same even batch: local mean x 1/4, like one device.
expect_exit 0 train-sobs-even -- "$DTLAB" train "${MIRRORED[@]}" --steps 3 --dump-step 3 --dump-dir "$WORK/sobs-even" \
  --loss-reduction sum_over_batch_size
check sobs-even "$WORK/sobs-even/step-3.safetensors" equal
expect_contains sobs-even out 'reduction="sum_over_batch_size"'

# (3) sum_over_batch_size on the short last batch, 11/11/11/8: TF and dtlab agree, and both
# weigh the 8 examples 11/8 as much as the others, unlike one device (the pitfall).
expect_exit 0 train-sobs-uneven -- "$DTLAB" train "${MIRRORED[@]}" "${UNEVEN[@]}" --dump-dir "$WORK/sobs-uneven" \
  --loss-reduction sum_over_batch_size
check sobs-uneven "$WORK/sobs-uneven/step-11.safetensors" differs
expect_contains sobs-uneven out "replica batches 11,11,11,8 (batch 41, global_batch_size 96)"

# (4) compute_average_loss(per_example_loss) (the default denominator, local batch x 4) on the
# same batch: the same weights as (3), so the same difference from one device.
expect_exit 0 train-default-uneven -- "$DTLAB" train "${MIRRORED[@]}" "${UNEVEN[@]}" --dump-dir "$WORK/default-uneven" \
  --loss-denominator default
check default-uneven "$WORK/default-uneven/step-11.safetensors" differs
expect_contains default-uneven out "tf.nn.compute_average_loss(per_example_loss) +"

# ... while global_batch_size=96 on that batch equals one device (every example weighs 1/96).
expect_exit 0 train-global-uneven -- "$DTLAB" train "${MIRRORED[@]}" "${UNEVEN[@]}" --dump-dir "$WORK/global-uneven"
check global-uneven "$WORK/global-uneven/step-11.safetensors" equal --eigen-only

# ... and tf.reduce_mean(per_example_loss) per replica (the pitfall) agrees with TF too, 4x
# one device's gradient and then some.
expect_exit 0 train-per-replica-uneven -- "$DTLAB" train "${MIRRORED[@]}" "${UNEVEN[@]}" \
  --dump-dir "$WORK/per-replica-uneven" --loss-denominator per-replica
check per-replica-uneven "$WORK/per-replica-uneven/step-11.safetensors" differs --eigen-only

# A control: the dump of (3) relabelled as compute_average_loss(..., global_batch_size=96) is
# not what TF computes with that code (the check can fail).
cat >"$WORK/relabel.py" <<'EOF'
import json, struct, sys
data = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", data[:8])
header = json.loads(data[8:8 + n])
header["__metadata__"].update({"dtlab.loss_reduction": "none", "dtlab.loss_denominator": "global"})
text = json.dumps(header).encode()
open(sys.argv[2], "wb").write(struct.pack("<Q", len(text)) + text + data[8 + n:])
EOF
expect_exit 0 relabel -- "$PY" "$WORK/relabel.py" "$WORK/sobs-uneven/step-11.safetensors" "$WORK/relabelled.safetensors"
expect_exit 1 relabelled -- "$PY" "$PEER" check-dump --eigen-only "$WORK/relabelled.safetensors"
expect_contains relabelled out "MISMATCH"

# (5) reduction="auto": Keras 3 has no such value, and dtlab says so in Keras 3's words.
expect_exit 0 auto-tf -- "$PY" "$PEER" reduction-auto
expect_contains auto-tf out "Invalid value for argument \`reduction\`"
expect_contains auto-tf out "Received: reduction=auto"
expect_exit 2 auto-dtlab -- "$DTLAB" train --loss-reduction auto --replicas 4 --strategy mirrored
expect_contains auto-dtlab err "Invalid value for argument \`reduction\`"
expect_contains auto-dtlab err "Received: reduction=auto"

# (The Mean-metric trap in TF, keras.metrics.Mean over the replicas' scaled losses of
# [2, 3] and [4, 5] reading 1.75 where the SUM is 3.5, is in tests/peers/tf_rules.json:
# cli.tf_rules_check.)

for name in even sobs-even sobs-uneven default-uneven global-uneven per-replica-uneven relabelled auto-tf; do
  echo "== $name"
  cat "$WORK/$name.out"
done
echo "== auto-dtlab (stderr)"
cat "$WORK/auto-dtlab.err"
finish
