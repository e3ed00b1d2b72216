# tests/peers/tf_rules.json is what TensorFlow says: tests/peers/tf_rules.py runs real
# TF 2.21 / Keras 3 again (rebatch under every AutoShardPolicy, compute_average_loss,
# Adam/RMSprop/SGD steps, the Mean-metric trap) and its answers must equal the
# committed file's, which tests/unit/tf_rules_test.cc holds dtlab to on every machine.
# Skipped without the peers venv's TensorFlow (scripts/peers-venv.sh).
. "$(dirname "$0")/lib.bash"
PY="${DTLAB_PEERS_VENV:-/opt/dtlab-peers}/bin/python"
[ -x "$PY" ] || { echo "SKIP: no peers venv at ${PY%/bin/python} (run scripts/peers-venv.sh)"; exit 77; }
export TF_CPP_MIN_LOG_LEVEL=3
"$PY" -c "import tensorflow, keras" 2>/dev/null ||
  { echo "SKIP: $PY cannot import tensorflow (run scripts/peers-venv.sh)"; exit 77; }
expect_exit 0 rules -- "$PY" "$DTLAB_SOURCE_DIR/tests/peers/tf_rules.py"
CHECKS=$((CHECKS + 1))
python3 - "$WORK/rules.out" "$DTLAB_SOURCE_DIR/tests/peers/tf_rules.json" <<'PY' ||
import json, sys
live, committed = (json.load(open(p)) for p in sys.argv[1:])
bad = [key for key in sorted(set(live) | set(committed)) if live.get(key) != committed.get(key)]
print("TensorFlow's answers differ from tests/peers/tf_rules.json in: " + ", ".join(bad) if bad else "same answers")
sys.exit(1 if bad else 0)
PY
  fail "TensorFlow no longer gives tests/peers/tf_rules.json's answers (rerun tests/peers/tf_rules.py and look at what moved)"
finish
