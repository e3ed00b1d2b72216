#!/usr/bin/env bash
# Seconds per training epoch on Fashion-MNIST, dtlab beside PyTorch (CPU), same model,
# batch and thread count, in one run (these machines are noisy: read the ratio).
# Usage: bench/compare_torch.sh [DTLAB_BINARY] [THREADS] [MODEL]
#   MODEL: seed-cnn (default), or batch-norm-cnn (scenarios/models/batch-norm-cnn.json:
#   Conv2D, BatchNormalization, MaxPooling2D, Dropout, Dense, BatchNormalization, Dense)
# (the probes come from build/release/bench, or BENCH_DIR)
# Needs Debian's python3-torch and libopenblas0-openmp (PyTorch's best setup here).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dtlab=${1:-$here/../build/release/cli/dtlab}
threads=${2:-2}
which_model=${3:-seed-cnn}
peer="/usr/bin/python3 $here/../tests/peers/torch_peer.py"
case $which_model in
  seed-cnn)
    # Analytic FLOPs per training example of seed-cnn (forward + backward, no input
    # gradient for the first layer): conv 2*(26*26*32*9)*2, conv_1 2*(11*11*64*288)*3,
    # dense 2*(1600*64)*3, dense_1 2*(64*10)*3.
    flops=14778624
    dtlab_model=(--model seed-cnn) ;;
  batch-norm-cnn)
    # conv 2*(26*26*8*9)*2, dense 2*(1352*32)*3, dense_1 2*(32*10)*3 (BatchNormalization,
    # pooling and dropout not counted).
    flops=456192
    dtlab_model=(--model "$here/../scenarios/models/batch-norm-cnn.json") ;;
  *) echo "compare_torch: unknown model '$which_model' (seed-cnn or batch-norm-cnn)" >&2; exit 2 ;;
esac
# The machine, as the figures depend on it: CPU model, the vector extensions that
# matter, caches. Peak: measured with bench/fma_peak (independent FMA chains in the
# widest vectors of this build, on THREADS threads), not assumed from a clock and a
# guessed number of FMA ports; the clock is printed too.
bench_dir=${BENCH_DIR:-$here/../build/release/bench}
model=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -xE 'avx2|fma|avx512f|avx512_fp16|amx_tile' | tr '\n' ' ')
caches=$(lscpu 2>/dev/null | grep -E '^L(1d|2|3) cache' | sed -E 's/ +/ /g' | tr '\n' ';')
zmm=$(objdump -d "$dtlab" 2>/dev/null | grep -c zmm || true)  # grep -c reads it all: no SIGPIPE under pipefail
isa=$([ "${zmm:-0}" -gt 0 ] && echo "AVX-512 (zmm registers) in the binary" || echo "no AVX-512 in the binary")
clock=$("$bench_dir/clock_probe")
peak_gflops=$("$bench_dir/fma_peak" "$threads")
peak=$(python3 -c "print($peak_gflops * 1e9)")
echo "CPU: $model; flags: $flags; $caches"
echo "dtlab binary: $isa"
echo "Core clock measured: $clock GHz; FMA peak measured: $peak_gflops GFLOP/s on $threads threads"
echo
echo "Model: $which_model"
echo "| batch | threads | dtlab s/epoch | PyTorch s/epoch | dtlab time / PyTorch time | dtlab GFLOP/s | of measured peak |"
echo "|---|---|---|---|---|---|---|"
for batch in 64 256; do
  torch_json=$($peer train --model "$which_model" --batch "$batch" --threads "$threads")
  dtlab_json=$("$dtlab" train "${dtlab_model[@]}" --epochs 1 --batch-per-replica "$batch" --threads "$threads" \
    --no-progress --json 2>/dev/null)
  python3 - "$batch" "$threads" "$flops" "$peak" "$torch_json" "$dtlab_json" <<'PY'
import json, sys
batch, threads, flops, peak = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
torch, dtlab = json.loads(sys.argv[5]), json.loads(sys.argv[6])
ours = dtlab["epochs"][0]["seconds"]
theirs = torch["seconds_per_epoch"]
gflops = 60000 * flops / ours / 1e9
print(f"| {batch} | {threads} | {ours:.2f} | {theirs:.2f} | {ours / theirs:.2f}x | {gflops:.0f} | "
      f"{gflops * 1e9 / peak:.0%} |")
PY
done
