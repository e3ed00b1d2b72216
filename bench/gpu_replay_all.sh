#!/usr/bin/env bash
# Replays every built-in scenario on the GPU (docs/gpu.md): exact mode with 1 stream,
# with 4 streams, and with the cluster cut to 1 replica (--set cluster.replicas=1),
# then fast mode; one line per replay: the table the docs record with the device name. Usage: bench/gpu_replay_all.sh [DTLAB] [STEPS]
#   BACKEND=emulated bench/gpu_replay_all.sh ...  tries it without a GPU
#   SCENARIOS="scale tf-vs-ddp" bench/gpu_replay_all.sh ...  replays only those
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dtlab=${1:-$here/../build/release/cli/dtlab}
steps=${2:-}
backend=${BACKEND:-cuda}
limit=()
[ -n "$steps" ] && limit=(--steps "$steps")
"$dtlab" devices | head -1
"$dtlab" devices --json | python3 -c "import json,sys; [print('GPU', d['index'], d['name']) for d in json.load(sys.stdin)['devices']]"
scenarios=${SCENARIOS:-$("$dtlab" list --json | python3 -c "import json,sys; print(' '.join(s['name'] for s in json.load(sys.stdin)['scenarios']))")}
echo
echo "| scenario | mode | streams | replicas | steps compared | differ | all-reduce method | busbw GB/s | #wrong | exit |"
echo "|---|---|---|---|---|---|---|---|---|---|"
worst=0
err=$(mktemp)
trap 'rm -f "$err"' EXIT
for s in $scenarios; do
  for variant in "exact 1 as-is" "exact 4 as-is" "exact 0 1" "fast 0 as-is"; do
    set -- $variant
    replicas=()
    [ "$3" != as-is ] && replicas=(--set "cluster.replicas=$3")
    out=$("$dtlab" replay "$s" --backend "$backend" --math "$1" --streams "$2" "${replicas[@]}" "${limit[@]}" --json \
      --no-progress 2>"$err")
    code=$?
    if [ $code = 2 ] && [ "$3" != as-is ]; then
      # The cut does not apply (exit 2 is a refused configuration, never a device
      # difference): faults that name other replicas, workers that no longer divide
      # the replicas, parameter servers (one replica per worker), or no training run.
      why=$(sed -e 's/.*: //' "$err" | head -1 | cut -c1-90)
      echo "| $s | $1 | $2 | $3 | n/a: $why | - | - | - | - | $code |"
      continue
    fi
    cat "$err" >&2
    [ $code -gt $worst ] && worst=$code
    echo "$out" | python3 -c "
import json, sys
try:
    d = json.load(sys.stdin)
except Exception:
    print('| $s | $1 | $2 | $3 | - | - | - | - | - | $code |'); sys.exit()
a = d.get('all_reduce', {})
print(f\"| $s | $1 | $2 | $3 | {d['steps_compared']} | {d['steps_failed']} | {a.get('method', '-')} | {a.get('busbw_gbps', 0):.1f} | {a.get('wrong', '-')} | $code |\")"
  done
done
exit $worst
