#!/usr/bin/env bash
# Runs on a lent GPU machine, from the repository root, with .gpu/ carried
# (bench/gpu_bundle.sh made it): installs the data set, finds NCCL, then runs
# tests/cli/replay.sh with the GPU, a checked training on cpu and cuda, and
# bench/gpu_replay_all.sh within what is left of BUDGET seconds. Writes its logs
# to $OUT (or ./gpu-out). docs/gpu.md, "On a lent GPU machine".
# Usage: bench/gpu_device_run.sh [STEPS] [BUDGET_SECONDS]
#   PARTS="throughput all" bench/gpu_device_run.sh ...  runs only those parts, in this
#   order: replay (tests/cli/replay.sh), train (checked training), waves (exact
#   training below and above the fold on cpu and cuda, compact and words all-reduce),
#   throughput (bench/gpu_throughput.sh, with PyTorch where a Python on the machine has
#   it), all (bench/gpu_replay_all.sh). Default: "replay train all".
set -uo pipefail
cd "$(dirname "$0")/.."
steps=${1:-4}
budget=${2:-400}
start=$(date +%s)
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
G=$PWD/.gpu
[ -x "$G/dtlab" ] || { echo "gpu_device_run: no .gpu/dtlab: run bench/gpu_bundle.sh and carry .gpu" >&2; exit 2; }
mkdir -p /usr/share/datasets && cp -r "$G/datasets/fashion-mnist" /usr/share/datasets/
nccl=$(find /usr /opt -name 'libnccl.so.2*' 2>/dev/null | head -1)
echo "NCCL: ${nccl:-none found}"
export LD_LIBRARY_PATH=$G/lib${nccl:+:$(dirname "$nccl")}
export DTLAB_SCENARIOS_DIR=$PWD/scenarios DTLAB_LESSONS_DIR=$PWD/lessons
D=$G/dtlab
nvidia-smi -L 2>/dev/null
ldd "$D" | grep "not found"
"$D" devices | tee "$out/devices.txt"
parts=" ${PARTS:-replay train all} "
if [[ $parts == *" replay "* ]]; then
echo "== tests/cli/replay.sh with the GPU =="
DTLAB=$D DTLAB_WITH_CUDA=1 DTLAB_CUDA_FOUND=1 DTLAB_SOURCE_DIR=$PWD DTLAB_TEST_WORK=/tmp/replay-work \
  timeout 150 bash tests/cli/replay.sh >"$out/replay_sh.log" 2>&1
echo "exit $?: $(tail -1 "$out/replay_sh.log")"
fi
if [[ $parts == *" train "* ]]; then
echo "== checked training, cpu and cuda =="
for b in cpu cuda; do
  "$D" train --backend $b --replicas 4 --math exact --check-reference --steps 40 --no-progress --json \
    >"$out/train_$b.json" 2>"$out/train_$b.err"
  echo "$b: exit $? $(python3 -c "import json; d=json.load(open('$out/train_$b.json')); print(round(d['images_per_second']), 'images/s, weights', d['weights_digest'])" 2>/dev/null)"
done
fi
if [[ $parts == *" waves "* ]]; then
  # Exact mode below the fold computes in waves of slots and reduces through the
  # compact all-reduce; above it the cluster folds: each on cpu and cuda, compact and
  # words, every step checked against one device; the digests of a row must match.
  echo "== exact waves and folds, cpu and cuda, compact and words =="
  echo "| replicas | backend | exact all-reduce | exit | s | check | weights digest |"
  echo "|---|---|---|---|---|---|---|"
  for n in 8 64 300; do for b in cpu cuda; do for k in compact words; do
    t0=$(date +%s.%N)
    timeout 40 "$D" train --backend $b --replicas $n --batch-per-replica 1 --math exact --exact-all-reduce $k \
      --check-reference --steps 3 --no-progress --json >"$out/waves.json" 2>"$out/waves_${n}_${b}_$k.err"
    code=$?
    python3 -c "import json,sys; d=json.load(open('$out/waves.json')); c=d['reference_check']; print('| $n | $b | $k | $code | %.1f | %s | %s |' % ($(date +%s.%N)-$t0, 'bitwise' if c['bitwise_equal'] else 'FAIL', d['weights_digest']))" 2>/dev/null ||
      echo "| $n | $b | $k | $code | - | - | - |"
  done; done; done
fi
if [[ $parts == *" throughput "* ]]; then
  echo "== bench/gpu_throughput.sh =="
  torch_py=$(for p in /usr/bin/python3 /opt/*/.venv/bin/python /opt/*/bin/python3; do
    [ -x "$p" ] && "$p" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null && { echo "$p"; break; }
  done)
  echo "PyTorch with CUDA: ${torch_py:-none found}"
  TORCH_PYTHON=$torch_py timeout 240 bash bench/gpu_throughput.sh "$D" 200 64 2>&1 | tee "$out/throughput.md"
fi
[[ $parts == *" all "* ]] || exit 0
left=$((budget - $(date +%s) + start))
[ "$left" -gt 10 ] || { echo "no time left for bench/gpu_replay_all.sh (raise BUDGET_SECONDS)"; exit 0; }
echo "== bench/gpu_replay_all.sh, $steps steps, $left s left =="
timeout "$left" bash bench/gpu_replay_all.sh "$D" "$steps" 2>&1 | tee "$out/replay_all.md"
echo "gpu_replay_all: exit ${PIPESTATUS[0]} after $(($(date +%s) - start)) s"
