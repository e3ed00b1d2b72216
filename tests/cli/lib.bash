# Helpers for the end-to-end tests of the dtlab binary. Sourced by tests/cli/*.sh (its name does not end in .sh, so it is not a test itself).
# ctest sets DTLAB (the binary), DTLAB_SOURCE_DIR and DTLAB_TEST_WORK (a scratch dir).
set -u
# Output to files, as the goldens hold it: no terminal width, no colour preference.
unset COLUMNS NO_COLOR
: "${DTLAB:?set DTLAB to the dtlab binary}"
WORK="${DTLAB_TEST_WORK:-$(mktemp -d)}"
rm -rf "$WORK" && mkdir -p "$WORK"
FAILURES=0
CHECKS=0

fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }

# expect_exit CODE NAME -- CMD...: runs CMD, checks its exit code; keeps stdout/stderr in $WORK/NAME.{out,err}.
expect_exit() {
  local code=$1 name=$2; shift 3
  CHECKS=$((CHECKS + 1))
  "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" </dev/null
  local got=$?
  if [ "$got" != "$code" ]; then
    fail "$name: exit $got, expected $code: $*"
    sed 's/^/    | /' "$WORK/$name.err" | tail -5 >&2
  fi
}

# expect_contains NAME FILE-SUFFIX TEXT: the output file contains TEXT (fixed string).
expect_contains() {
  local name=$1 which=$2 text=$3
  CHECKS=$((CHECKS + 1))
  grep -qF -- "$text" "$WORK/$name.$which" || { fail "$name: $which lacks '$text'"; sed 's/^/    | /' "$WORK/$name.$which" | tail -5 >&2; }
}

# expect_same_file A B: byte-identical files.
expect_same_file() {
  CHECKS=$((CHECKS + 1))
  cmp -s "$1" "$2" || fail "files differ: $1 $2"
}

# check_json NAME PYTHON-EXPRESSION-ON-d: $WORK/NAME.out is JSON for which the expression holds.
check_json() {
  CHECKS=$((CHECKS + 1))
  python3 -c "import json,sys; d=json.load(open('$WORK/$1.out')); sys.exit(0 if ($2) else 1)" ||
    { fail "$1: expected $2"; head -c 800 "$WORK/$1.out" >&2; }
}

# expect_golden NAME GOLDEN: $WORK/NAME.out equals the file GOLDEN (a unified diff on
# failure). With UPDATE_GOLDEN=1, NAME.out first replaces GOLDEN if its name ends in
# .t1 (the single-thread run writes the golden file; the others are compared).
expect_golden() {
  local name=$1 golden=$2
  if [ "${UPDATE_GOLDEN:-0}" = 1 ] && [[ "$name" == *.t1 ]]; then cp "$WORK/$name.out" "$golden"; fi
  CHECKS=$((CHECKS + 1))
  diff -u "$golden" "$WORK/$name.out" >"$WORK/$name.diff" ||
    { fail "$name differs from its golden file $golden"; head -20 "$WORK/$name.diff" >&2; }
}

finish() {
  echo "$((CHECKS - FAILURES)) passed, $FAILURES failed"
  [ "$FAILURES" = 0 ]
  exit $?
}

# mpi_workers JOB_PID [RANK]: the dtlab worker processes of one mpirun job (each
# rank is a dtlab supervisor, a child of mpirun, whose child is the worker;
# cli/mpi_launch.h), optionally only rank RANK's. JOB_PID is mpirun's, or that of a
# background shell function that runs it. Only this job's: tests run side by side.
mpi_workers() {
  local job=$1 rank=${2:-} supervisor worker
  for supervisor in $(for p in "$job" $(pgrep -P "$job"); do pgrep -P "$p" -x dtlab; done); do
    if [ -n "$rank" ] && ! tr '\0' '\n' <"/proc/$supervisor/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$rank"; then
      continue
    fi
    for worker in $(pgrep -P "$supervisor" -x dtlab); do echo "$worker"; done
  done
}

# wait_for_text FILE TEXT PID: waits until FILE holds TEXT (a fixed string); fails
# when PID ends first or after 2 minutes. For signalling a run at a known point
# without a fixed sleep, which a loaded machine would outrun.
wait_for_text() {
  local i
  for i in $(seq 1 2400); do
    grep -qF -- "$2" "$1" 2>/dev/null && return 0
    kill -0 "$3" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}

# require_tensorflow [MODULE...]: PY becomes the peers venv's Python (scripts/peers-venv.sh),
# which must import tensorflow, keras and the MODULEs; else the test is skipped (exit 77).
require_tensorflow() {
  PY="${DTLAB_PEERS_VENV:-/opt/dtlab-peers}/bin/python"
  [ -x "$PY" ] || { echo "SKIP: no peers venv at ${PY%/bin/python} (run scripts/peers-venv.sh)"; exit 77; }
  export TF_CPP_MIN_LOG_LEVEL=3
  local modules
  modules=$(printf ', %s' tensorflow keras "$@")
  "$PY" -c "import ${modules:2}" 2>/dev/null ||
    { echo "SKIP: $PY cannot import ${modules:2} (run scripts/peers-venv.sh)"; exit 77; }
}
