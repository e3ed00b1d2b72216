#!/usr/bin/env bash
# Exact mode's all-reduce (issue 22, item 1): the compact all-reduce and encoded
# gradients (the default) against the 19 accumulator words (--exact-all-reduce
# words), side by side, on seed-cnn with Fashion-MNIST, every step checked against one
# device: seconds per step, collective bytes per step (and per value per replica,
# against 4 for a float all-reduce), the admitted estimate and the measured peak,
# and the weights digest (equal in each pair).
# Usage: bench/exact_all_reduce.sh [DTLAB_BINARY] [STEPS]
set -euo pipefail
dtlab=${1:-$(dirname "$0")/../build/release/cli/dtlab}
steps=${2:-3}
run() {  # replicas batch-per-replica kind
  local replicas=$1 batch=$2 kind=$3
  "$dtlab" train --no-progress --json --epochs 1 --steps "$steps" --strategy mirrored --replicas "$replicas" \
    --batch-per-replica "$batch" --math exact --check-reference --exact-all-reduce "$kind" 2>/dev/null \
    >/tmp/dtlab_exact_all_reduce.json || { echo "| $replicas | $batch | $kind | failed (exit $?) | | | | | |"; return; }
  python3 - "$replicas" "$batch" "$kind" <<'PY'
import json, sys
d = json.load(open("/tmp/dtlab_exact_all_reduce.json"))
n, values, gib = int(sys.argv[1]), 121930, 1024.0 ** 3
steps = d["steps"]
per_step = d["collective_bytes"] / steps
# A ring all-reduce moves 2(N-1)/N of a replica's buffer per replica: bytes per value per replica.
per_value = per_step / n / (2 * (n - 1) / n) / values
c = d["reference_check"]
print(f"| {n} | {sys.argv[2]} | {sys.argv[3]} | {d['seconds'] / steps:.3f} | {per_step / 1e6:.1f} | {per_value:.2f} | "
      f"{d['estimated_peak_bytes'] / gib:.2f} | {d['peak_resident_bytes'] / gib:.2f} | "
      f"{'bitwise' if c['bitwise_equal'] else 'FAIL'} {d['weights_digest']} |")
PY
}
echo "| replicas | batch/replica | exact all-reduce | s/step | MB/step | bytes/value | estimated peak (GiB) | measured peak (GiB) | check, digest |"
echo "|---|---|---|---|---|---|---|---|---|"
for replicas in 8 64 256; do
  for kind in words compact; do run "$replicas" 1 "$kind"; done
done
for kind in words compact; do run 64 8 "$kind"; done
