# Manual pages (cli/man_page.h): the build writes build/<preset>/man/dtlab.1 and
# dtlab-COMMAND.1 from the --help texts; dtlab --man-page DIR writes the same pages;
# groff renders each without a warning, and dtlab-train(1) has the help's groups and
# examples.
. "$(dirname "$0")/lib.bash"

COMMANDS="train eval run list lesson check cluster replay devices"
BUILT="$(dirname "$DTLAB")/../man"
expect_exit 0 man_page -- "$DTLAB" --man-page "$WORK"
# A directory that is not there, or a file, is the caller's mistake: exit 2, and nothing written.
expect_exit 2 man_missing -- "$DTLAB" --man-page "$WORK/missing"
expect_contains man_missing err "is not a directory"
[ -e "$WORK/missing" ] && fail "dtlab --man-page created $WORK/missing"
expect_exit 2 man_file -- "$DTLAB" --man-page "$WORK/dtlab.1"
for page in dtlab $(for c in $COMMANDS; do echo "dtlab-$c"; done); do
  CHECKS=$((CHECKS + 1))
  [ -s "$WORK/$page.1" ] || { fail "dtlab --man-page wrote no $page.1"; continue; }
  CHECKS=$((CHECKS + 1))
  cmp -s "$WORK/$page.1" "$BUILT/$page.1" || fail "the build's $BUILT/$page.1 differs from dtlab --man-page's (or is missing)"
  if command -v groff >/dev/null; then
    CHECKS=$((CHECKS + 1))
    groff -man -Tutf8 -ww -z "$WORK/$page.1" >"$WORK/$page.groff" 2>&1
    [ -s "$WORK/$page.groff" ] && { fail "groff warns about $page.1:"; head -5 "$WORK/$page.groff" >&2; }
  fi
done
expect_exit 2 man_page_no_dir -- "$DTLAB" --man-page
if command -v groff >/dev/null; then
  groff -man -Tascii "$WORK/dtlab-train.1" 2>/dev/null | sed 's/\x1b\[[0-9;]*m//g; s/.\x08//g' >"$WORK/train_man.out"
  for text in "Model and data" "Cluster" "Loss code" "Math" "Checkpoints" "Faults" "Outputs" "EXAMPLES" \
    "--batch-per-replica" "dtlab train --replicas 4 --steps 100 --check-reference"; do
    expect_contains train_man out "$text"
  done
  groff -man -Tascii "$WORK/dtlab.1" 2>/dev/null | sed 's/.\x08//g' >"$WORK/dtlab_man.out"
  expect_contains dtlab_man out "on one device or a virtual cluster"
fi
finish
