#!/usr/bin/env bash
# Seed-model training throughput (images/s) on one GPU beside the CPU, all in one
# run (read the ratios): dtlab's fast and exact modes with --backend cuda, the CPU's
# fast and exact modes, and PyTorch on the same GPU where it is installed with CUDA.
# Also exact mode's overhead on the GPU (exact / fast time). docs/gpu.md.
#
# Usage: bench/gpu_throughput.sh [DTLAB_BINARY] [STEPS] [BATCH]
#   BACKEND=emulated bench/gpu_throughput.sh ...  tries the script on a machine without a GPU
#   TORCH_PYTHON=/path/to/python ...  the Python with PyTorch (default: the system's)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dtlab=${1:-$here/../build/release/cli/dtlab}
steps=${2:-200}
batch=${3:-64}
backend=${BACKEND:-cuda}
"$dtlab" devices
echo
run() {  # BACKEND MATH -> images per second of training
  "$dtlab" train --backend "$1" --math "$2" --steps "$steps" --epochs 1 --batch-per-replica "$batch" --no-progress \
    --json 2>/dev/null | python3 -c "import json,sys; print(json.load(sys.stdin)['images_per_second'])"
}
cpu_fast=$(run cpu fast)
cpu_exact=$(run cpu exact)
dev_fast=$(run "$backend" fast)
dev_exact=$(run "$backend" exact)
torch=""
torch_py=${TORCH_PYTHON:-/usr/bin/python3}
if "$torch_py" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  torch=$("$torch_py" "$here/../tests/peers/torch_peer.py" train --device cuda --batch "$batch" --steps "$steps" |
    python3 -c "import json,sys; print(json.load(sys.stdin)['images_per_second'])")
fi
python3 - "$steps" "$batch" "$backend" "$cpu_fast" "$cpu_exact" "$dev_fast" "$dev_exact" "$torch" <<'PY'
import sys
steps, batch, backend = sys.argv[1], sys.argv[2], sys.argv[3]
cpu_fast, cpu_exact, dev_fast, dev_exact = map(float, sys.argv[4:8])
torch = float(sys.argv[8]) if sys.argv[8] else None
print(f"seed-cnn on Fashion-MNIST, batch {batch}, {steps} steps, images/s of training (one run)\n")
print("| what | images/s | vs CPU fast |")
print("|---|---|---|")
for name, v in [("CPU fast (dtlab, all cores)", cpu_fast), ("CPU exact", cpu_exact),
                 (f"{backend} fast", dev_fast), (f"{backend} exact", dev_exact)]:
    print(f"| {name} | {v:.0f} | {v / cpu_fast:.2f}x |")
if torch is not None:
    print(f"| PyTorch on the GPU | {torch:.0f} | {torch / cpu_fast:.2f}x |")
    print(f"\ndtlab {backend} fast / PyTorch on the same GPU: {dev_fast / torch:.2f}x")
else:
    print("\nPyTorch with CUDA is not installed here: no PyTorch column")
print(f"exact mode's overhead on {backend}: {dev_fast / dev_exact:.2f}x the time of fast mode")
PY
