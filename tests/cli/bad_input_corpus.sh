# The bad-input corpus (issue 9): every case of tests/bad_inputs/corpus.tsv exits
# with its code and names the problem on stderr, within a time limit (no hang, no
# crash), and leaves no core dump or half-written file behind.
. "$(dirname "$0")/lib.bash"
CORPUS="$DTLAB_SOURCE_DIR/tests/bad_inputs"
cases=0
while IFS=$'\t' read -r name code text args; do
  case "$name" in '#'* | '') continue ;; esac
  cases=$((cases + 1))
  scratch="$WORK/$name.dir"
  mkdir -p "$scratch"
  args=${args//@FILES@/$CORPUS/files}
  args=${args//@WORK@/$scratch}
  # shellcheck disable=SC2086  # the arguments are words
  expect_exit "$code" "$name" -- timeout 60 "$DTLAB" $args
  expect_contains "$name" err "$text"
done < "$CORPUS/corpus.tsv"
echo "$cases cases"
[ "$cases" -ge 40 ] || fail "the corpus has $cases cases; issue 9 asks for at least 40"
CHECKS=$((CHECKS + 1))
if find "$CORPUS/files" -name '*.tmp-*' | grep -q .; then fail "a temporary file was left in the corpus"; fi
CHECKS=$((CHECKS + 1))
# A refused training writes nothing, not even its writer lock (core/checkpoint_manager.h).
if find "$CORPUS/files" -name '.dtlab.lock' | grep -q .; then fail "a lock file was left in the corpus"; fi
CHECKS=$((CHECKS + 1))
finish
