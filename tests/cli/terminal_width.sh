#!/usr/bin/env bash
# Output that fits the terminal, and colour where it helps (docs/scenarios.md, "On a terminal"):
#  - on an 80-column pseudo-terminal, no line of `dtlab run`, `dtlab lesson` (its
#    prompts answered) or `dtlab train --steps` is wider than 80 (ANSI codes
#    stripped; tests/cli/terminal_width.py), nor at 40 columns for a run;
#  - COLUMNS fits output that goes to a file; without it the file keeps the golden
#    layout (cli.scenario_golden);
#  - --color always|never and NO_COLOR; an expected failure reads "the pitfall, as
#    expected", in the text and in the HTML report.
source "$(dirname "$0")/lib.bash"
PTY="$DTLAB_SOURCE_DIR/tests/cli/terminal_width.py"

on_terminal() {  # on_terminal COLUMNS NAME -- ARGS...: no line wider than COLUMNS
  local columns=$1 name=$2
  shift 3
  CHECKS=$((CHECKS + 1))
  python3 "$PTY" "$columns" "$WORK/$name.pty" -- "$@" >"$WORK/$name.log" 2>&1 ||
    { fail "$name: dtlab $* on a $columns-column terminal"; tail -8 "$WORK/$name.log" >&2; }
}

on_terminal 80 run80 -- run per-replica-mean
on_terminal 80 ring80 -- run ring-all-reduce
on_terminal 40 run40 -- run tf-vs-ddp
on_terminal 80 lesson80 -- lesson loss-scaling
on_terminal 80 train80 -- train --steps 12 --replicas 4 --check-reference
# On a terminal, colour unless NO_COLOR or --color never.
CHECKS=$((CHECKS + 1))
grep -q $'\033\\[32m' "$WORK/run80.pty" || fail "no colour on a terminal"
grep -q $'\033\\[33mthe pitfall, as expected' "$WORK/run80.pty" || fail "the expected failure has no colour of its own"
grep -q "Answer:" "$WORK/lesson80.pty" || fail "the lesson did not reveal its answer"
NO_COLOR=1 on_terminal 80 nocolor -- run per-replica-mean
on_terminal 80 never -- run per-replica-mean --color never
CHECKS=$((CHECKS + 1))
! grep -q $'\033\\[3[0-9]m' "$WORK/nocolor.pty" "$WORK/never.pty" || fail "colour despite NO_COLOR or --color never"

# In a file: no colour, unless --color always (which NO_COLOR does not stop).
expect_exit 0 plain -- "$DTLAB" run per-replica-mean --no-progress
expect_exit 0 always -- env NO_COLOR=1 "$DTLAB" run per-replica-mean --no-progress --color always
CHECKS=$((CHECKS + 1))
! grep -q $'\033' "$WORK/plain.out" || fail "colour in a file"
grep -q $'\033\\[32mPASS' "$WORK/always.out" || fail "--color always did not colour PASS"
cmp -s "$WORK/plain.out" <(sed 's/\x1b\[[0-9;]*m//g' "$WORK/always.out") || fail "colour changed more than colour"
expect_exit 2 badcolor -- "$DTLAB" run per-replica-mean --color sometimes
expect_contains badcolor err "--color must be auto, always or never"
expect_exit 2 badtraincolor -- "$DTLAB" train --color sometimes
expect_exit 2 badlessoncolor -- "$DTLAB" lesson loss-scaling --color sometimes

# The words: an expected failure is the pitfall, as expected.
expect_contains plain out "FAIL      FAIL  the pitfall, as expected"
expect_contains plain out "PASS      PASS  as expected"

# COLUMNS fits output in a file too; --width fits a lesson.
expect_exit 0 columns -- env COLUMNS=72 "$DTLAB" run tf-vs-ddp --no-progress
expect_exit 0 width -- "$DTLAB" lesson loss-scaling --no-interactive --width 64
CHECKS=$((CHECKS + 1))
awk 'length($0) > 72 { bad = 1 } END { exit bad }' "$WORK/columns.out" || fail "COLUMNS=72: a line is wider"
awk 'length($0) > 64 { bad = 1 } END { exit bad }' "$WORK/width.out" || fail "--width 64: a line is wider"
expect_contains columns out "(left out to fit 72 columns:"

# A handout written from a coloured, narrow lesson has neither colour nor the narrow
# layout: its tables fit the 100 columns of the page's preformatted block, which
# would wrap a wider line in the middle of a row.
expect_exit 0 handout -- "$DTLAB" lesson loss-scaling --no-interactive --color always --width 60 \
  --html "$WORK/handout.html"
CHECKS=$((CHECKS + 1))
grep -q $'\033\\[1m' "$WORK/handout.out" || fail "--color always did not colour the lesson"
! grep -q $'\033' "$WORK/handout.html" || fail "colour codes in the handout"
grep -q 'FAIL  the pitfall, as expected' "$WORK/handout.html" || fail "the handout's check table lost its verdict"
python3 - "$WORK/handout.html" <<'PY' || fail "a line of the handout's preformatted text is wider than 100 columns"
import html, re, sys
page = open(sys.argv[1], encoding="utf-8").read()
lines = [l for p in re.findall(r"<pre[^>]*>(.*?)</pre>", page, re.S) for l in html.unescape(re.sub("<[^>]+>", "", p)).split("\n")]
sys.exit(0 if lines and max(map(len, lines)) <= 100 else 1)
PY

# The HTML report: the pitfall in its own colour and words, not a green check mark.
expect_exit 0 report -- "$DTLAB" run per-replica-mean --no-progress --report "$WORK/report.html"
CHECKS=$((CHECKS + 1))
grep -q 'class="verdict pitfall">⚠ <strong>FAIL (the pitfall, as expected)</strong>' "$WORK/report.html" ||
  fail "the report does not show the expected failure as the pitfall"
! grep -q '✓ <strong>FAIL' "$WORK/report.html" || fail "the report still shows a green ✓ FAIL"
grep -q '\.verdict\.pitfall{' "$WORK/report.html" || fail "the report has no style for the pitfall"
finish
