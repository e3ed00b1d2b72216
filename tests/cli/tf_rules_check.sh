# TensorFlow's answers committed under tests/peers are still what TensorFlow says: each
# tests/peers/tf_NAME.py runs real TF 2.21 / Keras 3 again and its output must equal
# tests/peers/tf_NAME.json, which a unit test holds dtlab to on every machine without TF:
# - tf_rules (tests/unit/tf_rules_test.cc): rebatch under every AutoShardPolicy,
#   compute_average_loss, Adam/RMSprop/SGD steps, the Mean-metric trap;
# - tf_loss_scale (tests/unit/loss_scale_test.cc): LossScaleOptimizer trajectories with
#   infinities and NaNs, and which replica decides a skip under MirroredStrategy.
# Skipped without the peers venv's TensorFlow (scripts/peers-venv.sh).
. "$(dirname "$0")/lib.bash"
require_tensorflow
for name in tf_rules tf_loss_scale; do
  expect_exit 0 "$name" -- "$PY" "$DTLAB_SOURCE_DIR/tests/peers/$name.py"
  CHECKS=$((CHECKS + 1))
  python3 - "$WORK/$name.out" "$DTLAB_SOURCE_DIR/tests/peers/$name.json" <<'PY' ||
import json, sys
live, committed = (json.load(open(p)) for p in sys.argv[1:])
bad = [key for key in sorted(set(live) | set(committed)) if live.get(key) != committed.get(key)]
print("TensorFlow's answers differ from the committed file in: " + ", ".join(bad) if bad else "same answers")
sys.exit(1 if bad else 0)
PY
    fail "TensorFlow no longer gives tests/peers/$name.json's answers (rerun tests/peers/$name.py and look at what moved)"
done
finish
