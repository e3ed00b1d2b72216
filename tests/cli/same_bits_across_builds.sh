#!/usr/bin/env bash
# Same bits from two builds of dtlab on one machine (docs/exact.md, "Fast mode"):
# DTLAB and DTLAB_OTHER train the same runs, and their checkpoints are
# byte-identical, in fast and in exact mode, on one device and on 4 mirrored
# replicas with the reference check. CI's portable build (plain x86-64-v3, another
# GEMM k-blocking: scripts/ci-portable.sh) runs it against the release build
# (-march=native). Without DTLAB_OTHER it skips.
source "$(dirname "$0")/lib.bash"
[ -n "${DTLAB_OTHER:-}" ] || { echo "SKIP: no other build to compare with (DTLAB_OTHER; the portable preset sets it)"; exit 77; }
[ -x "$DTLAB_OTHER" ] || { echo "FAIL: DTLAB_OTHER=$DTLAB_OTHER is not an executable (build the release preset first)"; exit 1; }
[ -d /usr/share/datasets/fashion-mnist ] || { echo "SKIP: dataset-fashion-mnist not installed"; exit 77; }

# A run's output without its wall-clock times ("(0.4 s)", "in 0.4 s (4551 images/s)"),
# with each side's checkpoint directory named alike.
untimed() { sed -E 's/[0-9.]+ s\b/_ s/g; s/[0-9]+ images\/s/_ images\/s/g; s/\.(this|other)\//.SIDE\//g' "$1"; }

runs=(
  "fast-one-device|--steps 30 --batch-per-replica 64"
  "fast-mirrored|--steps 30 --replicas 4 --batch-per-replica 16 --check-reference"
  "exact-mirrored|--steps 12 --replicas 4 --batch-per-replica 16 --math exact --check-reference"
)
for run in "${runs[@]}"; do
  name=${run%%|*}
  read -r -a flags <<<"${run#*|}"
  for side in this other; do
    binary=$DTLAB
    [ "$side" = other ] && binary=$DTLAB_OTHER
    expect_exit 0 "$name.$side" -- "$binary" train --no-progress --seed 5 --threads 2 \
      --checkpoint-dir "$WORK/$name.$side" "${flags[@]}"
  done
  found=0
  for ckpt in "$WORK/$name.this"/*.safetensors; do
    [ -e "$ckpt" ] || continue
    found=1
    expect_same_file "$ckpt" "$WORK/$name.other/$(basename "$ckpt")"
  done
  CHECKS=$((CHECKS + 1))
  [ "$found" = 1 ] || fail "$name: no checkpoint written"
  # The printed summary too, every figure but the wall-clock times.
  CHECKS=$((CHECKS + 1))
  diff <(untimed "$WORK/$name.this.out") <(untimed "$WORK/$name.other.out") >"$WORK/$name.diff" ||
    { fail "$name: the two builds print different figures"; head -20 "$WORK/$name.diff" >&2; }
done
finish
