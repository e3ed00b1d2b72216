#!/usr/bin/env bash
# Scale (issue 22): seed-cnn, one example per replica, every step checked against one
# device (--check-reference), 64 to 4096 replicas in fast and exact mode: seconds per
# step, the peak resident set measured over the run (VmHWM, and /usr/bin/time's
# maximum RSS of the whole process) beside the estimate the run was admitted with,
# and whether the gradients were folded. Then the same counts with the collective
# kept (--fold-above 4096) where it fits, side by side.
# Usage: bench/scale.sh [DTLAB_BINARY] [STEPS]
set -euo pipefail
dtlab=${1:-$(dirname "$0")/../build/release/cli/dtlab}
steps=${2:-3}
run() {  # replicas math extra-args...
  local replicas=$1 math=$2; shift 2
  /usr/bin/time -f "%M" -o /tmp/dtlab_scale_rss "$dtlab" train --no-progress --json --epochs 1 --steps "$steps" \
    --strategy mirrored --replicas "$replicas" --global-batch "$replicas" --math "$math" --check-reference "$@" \
    2>/dev/null >/tmp/dtlab_scale.json || { echo "| $replicas | $math | $* | refused or failed (exit $?) | | | | |"; return; }
  python3 - "$replicas" "$math" "$*" <<'PY'
import json, sys
d = json.load(open("/tmp/dtlab_scale.json"))
rss = int(open("/tmp/dtlab_scale_rss").read().split()[-1]) * 1024
c = d["reference_check"]
gib = 1024.0 ** 3
print(f"| {sys.argv[1]} | {sys.argv[2]} | {'folded' if d['folded_reduction'] else 'collective'} {sys.argv[3]} | "
      f"{d['seconds'] / d['steps']:.3f} | {d['estimated_peak_bytes'] / gib:.2f} | {d['peak_resident_bytes'] / gib:.2f} | "
      f"{rss / gib:.2f} | {c['steps_checked']} checked, {'all pass' if c['within_bound'] else 'FAIL'} |")
PY
}
echo "| replicas | math | gradients | s/step | estimated peak (GiB) | measured peak (GiB) | max RSS, time (GiB) | reference check |"
echo "|---|---|---|---|---|---|---|---|"
for math in fast exact; do
  for replicas in 64 256 1024 4096; do run "$replicas" "$math"; done
done
# The collective, kept above the fold where the machine holds it, and the fold forced below it.
run 1024 fast --fold-above 4096
run 256 exact --fold-above 0
run 256 exact --fold-above 4096
