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
python3 - "$DTLAB_SOURCE_DIR/README.md" "$WORK/flagship.t1.out" <<'PY' || fail "README.md's Quick-start excerpt is not what dtlab run flagship prints"
import sys
readme, output = open(sys.argv[1]).read(), open(sys.argv[2]).read().splitlines()
quick = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
blocks, block, info = [], None, ""
for line in quick.splitlines():  # fenced blocks with their info strings
    if line.startswith("```"):
        if block is None:
            block, info = [], line[3:].strip()
        else:
            blocks.append((info, block))
            block = None
    elif block is not None:
        block.append(line)
excerpts = [lines for info, lines in blocks if info == ""]  # the commands are "sh" blocks
assert len(excerpts) == 1, f"expected one output excerpt in the Quick start, found {len(excerpts)}"
position = 0
for line in excerpts[0]:
    if line.strip() == "...":
        continue
    try:
        position = output.index(line, position) + 1
    except ValueError:
        sys.exit(f"README line not in the output (in order): {line!r}")
PY
finish
