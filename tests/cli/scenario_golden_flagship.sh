#!/usr/bin/env bash
# The Quick start's main job: the flagship scenario (2 epochs of Fashion-MNIST on 4
# replicas, every step against one device) and its one-screen pitfall summary print
# exactly tests/golden/scenarios/flagship.txt with 1 and 2 threads; the README's
# Quick-start excerpt of that output is the real output (its lines, in order, with
# "..." where lines are left out).
source "$(dirname "$0")/lib.bash"
GOLDEN="$DTLAB_SOURCE_DIR/tests/golden/scenarios/flagship.txt"
for threads in 1 2; do
  expect_exit 0 "flagship.t$threads" -- "$DTLAB" run flagship --threads "$threads" --no-progress
  expect_golden "flagship.t$threads" "$GOLDEN"
done
CHECKS=$((CHECKS + 1))
python3 "$DTLAB_SOURCE_DIR/tests/cli/doc_excerpt.py" "$DTLAB_SOURCE_DIR/README.md" "Quick start" "$WORK/flagship.t1.out" ||
  fail "README.md's Quick-start excerpt is not what dtlab run flagship prints"
finish
