# Hostile files, paths and names (issue 19, docs/reliability.md "Hostile files and
# paths"): symlink loops, devices and FIFOs where a file is read or written, output
# paths that are devices or symlinks, run names that are paths, and two trainings
# into one checkpoint directory. Every case exits with its code (never a crash:
# 134 is an abort), within a time limit (a FIFO must never hang dtlab: `timeout`
# exits 124), and writes nothing where it should not.
. "$(dirname "$0")/lib.bash"
VALID="$DTLAB_SOURCE_DIR/tests/bad_inputs/files/valid"
FASHION=/usr/share/datasets/fashion-mnist

dt() { timeout 60 "$DTLAB" "$@"; }
train() { dt train --no-progress --dataset "$VALID" "$@"; }
# expect_char_device PATH: PATH is still a character device (never replaced by a file).
expect_char_device() {
  CHECKS=$((CHECKS + 1))
  [ -c "$1" ] || fail "$1 is no longer a character device"
}
# expect_absent PATH WHY: nothing was created at PATH.
expect_absent() {
  CHECKS=$((CHECKS + 1))
  [ ! -e "$1" ] && [ ! -L "$1" ] || fail "$2: $1 was created"
}
latest_checkpoint() { sed -n 's/^model_checkpoint_path: "\(.*\)"$/\1/p' "$1/checkpoint"; }

# A tiny scenario (synthetic data, one step): for output paths and run names.
scenario() {  # scenario FILE [VARIANT-NAME]
  cat >"$1" <<'EOF'
title = "tiny"
[cluster]
strategy = "mirrored"
replicas = 2
[data]
source = "synthetic"
global_batch = 4
[run]
steps = 1
check_reference = true
[[check]]
kind = "reference"
expect = "pass"
EOF
  if [ $# -ge 2 ]; then printf '[[variant]]\nname = "%s"\nresume_from = "main"\n' "$2" >>"$1"; fi
}
scenario "$WORK/tiny.toml"

# --- (4) metrics.csv is a symlink loop, a FIFO or a device: refused before
# training (exit 2, no work lost), never an uncaught filesystem_error (abort, 134).
mkdir -p "$WORK/loop"
ln -s metrics.csv "$WORK/loop/metrics.csv"
expect_exit 2 metrics_loop -- train --steps 2 --checkpoint-dir "$WORK/loop"
expect_contains metrics_loop err "metrics file $WORK/loop/metrics.csv"
expect_contains metrics_loop err "symlink loop"
mkdir -p "$WORK/loop2"
ln -s b "$WORK/loop2/metrics.csv"; ln -s metrics.csv "$WORK/loop2/b"
expect_exit 2 metrics_loop2 -- train --steps 2 --checkpoint-dir "$WORK/loop2"
expect_contains metrics_loop2 err "symlink loop"
mkdir -p "$WORK/mfifo"
mkfifo "$WORK/mfifo/metrics.csv"
expect_exit 2 metrics_fifo -- train --steps 2 --checkpoint-dir "$WORK/mfifo"
expect_contains metrics_fifo err "is a FIFO, not a regular file"
mkdir -p "$WORK/mnull"
ln -s /dev/null "$WORK/mnull/metrics.csv"
expect_exit 2 metrics_device -- train --steps 2 --checkpoint-dir "$WORK/mnull"
expect_contains metrics_device err "is a character device"
# A metrics.csv symlinked to a regular file is appended through.
mkdir -p "$WORK/mlink"
ln -s ../metrics-real.csv "$WORK/mlink/metrics.csv"
expect_exit 0 metrics_link -- train --steps 2 --checkpoint-dir "$WORK/mlink"
CHECKS=$((CHECKS + 1))
[ -L "$WORK/mlink/metrics.csv" ] && grep -q '^epoch,learning_rate' "$WORK/metrics-real.csv" ||
  fail "metrics_link: metrics.csv was not written through its symlink"

# --- (6) A checkpoint or pointer file that is a device or a FIFO: refused, never
# read until memory runs out, never waited on.
expect_exit 0 make_ckpt -- train --steps 2 --checkpoint-dir "$WORK/ck"
latest=$(latest_checkpoint "$WORK/ck")
CHECKS=$((CHECKS + 1))
[ -n "$latest" ] && [ -f "$WORK/ck/$latest" ] || fail "make_ckpt: no checkpoint named in $WORK/ck/checkpoint"
[ -f "$WORK/ck/.dtlab.lock" ] || fail "make_ckpt: no lock file"
for kind in zero fifo; do
  for which in checkpoint pointer; do
    dir="$WORK/ck_${which}_$kind"
    rm -rf "$dir" && cp -r "$WORK/ck" "$dir"
    target="$dir/$latest"; [ "$which" = pointer ] && target="$dir/checkpoint"
    rm -f "$target"
    if [ "$kind" = zero ]; then ln -s /dev/zero "$target"; phrase="is a character device"; else mkfifo "$target"; phrase="is a FIFO"; fi
    expect_exit 2 "eval_${which}_$kind" -- dt eval --checkpoint-dir "$dir" --dataset "$VALID"
    expect_contains "eval_${which}_$kind" err "$target $phrase, not a regular file"
    expect_exit 2 "resume_${which}_$kind" -- train --steps 4 --checkpoint-dir "$dir"
    expect_contains "resume_${which}_$kind" err "$phrase"
  done
done
expect_char_device /dev/zero

# Scenario, lesson, replay record and data set files that are FIFOs or devices.
mkfifo "$WORK/fifo.toml" "$WORK/fifo.md" "$WORK/fifo.json"
expect_exit 2 scenario_fifo -- dt run "$WORK/fifo.toml" --no-progress
expect_contains scenario_fifo err "fifo.toml is a FIFO, not a regular file"
expect_exit 2 lesson_fifo -- dt lesson "$WORK/fifo.md"
expect_contains lesson_fifo err "fifo.md is a FIFO, not a regular file"
expect_exit 2 scenario_device -- dt run /dev/null --no-progress
expect_contains scenario_device err "/dev/null is a character device, not a regular file"
mkdir -p "$WORK/directory.toml"
expect_exit 2 scenario_directory -- dt run "$WORK/directory.toml" --no-progress
expect_contains scenario_directory err "directory.toml is a directory, not a regular file"
expect_exit 2 record_fifo -- dt replay short-final-batch --backend emulated --against "$WORK/fifo.json"
expect_contains record_fifo err "replay record $WORK/fifo.json is a FIFO"
expect_exit 2 record_device -- dt replay short-final-batch --backend emulated --against /dev/zero
expect_contains record_device err "replay record /dev/zero is a character device"
mkdir -p "$WORK/ds_fifo" "$WORK/ds_zero"
cp "$VALID"/* "$WORK/ds_fifo/"; cp "$VALID"/* "$WORK/ds_zero/"
rm "$WORK"/ds_fifo/train-labels-idx1-ubyte* "$WORK"/ds_zero/train-labels-idx1-ubyte*
mkfifo "$WORK/ds_fifo/train-labels-idx1-ubyte.gz"
ln -s /dev/zero "$WORK/ds_zero/train-labels-idx1-ubyte.gz"
expect_exit 2 dataset_fifo -- dt train --no-progress --dataset "$WORK/ds_fifo" --steps 1
expect_contains dataset_fifo err "train-labels-idx1-ubyte"
expect_exit 2 dataset_device -- dt train --no-progress --dataset "$WORK/ds_zero" --steps 1
expect_contains dataset_device err "train-labels-idx1-ubyte"

# --- (7) Output paths: a device, a FIFO or a directory is refused (exit 2),
# never replaced; a symlink is written through and survives.
for option in --csv --report --trace; do
  name=out${option#--}
  expect_exit 2 "${name}_null" -- dt run "$WORK/tiny.toml" --no-progress "$option" /dev/null
  expect_contains "${name}_null" err "$option /dev/null is a character device, not a regular file"
  expect_char_device /dev/null
  mkfifo "$WORK/$name.fifo"
  expect_exit 2 "${name}_fifo" -- dt run "$WORK/tiny.toml" --no-progress "$option" "$WORK/$name.fifo"
  expect_contains "${name}_fifo" err "is a FIFO"
  CHECKS=$((CHECKS + 1)); [ -p "$WORK/$name.fifo" ] || fail "$name: the FIFO was replaced"
  expect_exit 2 "${name}_dir" -- dt run "$WORK/tiny.toml" --no-progress "$option" "$WORK"
  expect_contains "${name}_dir" err "is a directory"
done
expect_exit 2 train_trace_null -- train --steps 1 --trace /dev/null
expect_contains train_trace_null err "--trace /dev/null is a character device"
expect_char_device /dev/null
expect_exit 2 record_null -- dt replay short-final-batch --backend cpu --steps 1 --record /dev/null
expect_contains record_null err "--record /dev/null is a character device"
expect_char_device /dev/null
ln -s /dev/null "$WORK/to-null.csv"
expect_exit 2 out_link_to_null -- dt run "$WORK/tiny.toml" --no-progress --csv "$WORK/to-null.csv"
expect_contains out_link_to_null err "(which points to /dev/null) is a character device"
expect_char_device /dev/null
CHECKS=$((CHECKS + 1)); [ -L "$WORK/to-null.csv" ] || fail "the symlink to /dev/null was replaced"

mkdir -p "$WORK/real"
echo old >"$WORK/real/out.csv"; echo old >"$WORK/real/out.html"
ln -s real/out.csv "$WORK/link.csv"
ln -s "$WORK/real/out.html" "$WORK/link.html"
expect_exit 0 out_symlink -- dt run "$WORK/tiny.toml" --no-progress --csv "$WORK/link.csv" --report "$WORK/link.html"
CHECKS=$((CHECKS + 1))
[ -L "$WORK/link.csv" ] && [ -L "$WORK/link.html" ] || fail "out_symlink: a symlinked output was replaced by a file"
CHECKS=$((CHECKS + 1))
grep -q '^run,' "$WORK/real/out.csv" || grep -q ',step,' "$WORK/real/out.csv" ||
  fail "out_symlink: the CSV did not reach the symlink's target: $(head -c 200 "$WORK/real/out.csv")"
CHECKS=$((CHECKS + 1))
grep -qi '<html' "$WORK/real/out.html" || fail "out_symlink: the report did not reach the symlink's target"
CHECKS=$((CHECKS + 1))
[ "$(ls "$WORK/real")" = "$(printf 'out.csv\nout.html')" ] || fail "out_symlink: left behind: $(ls "$WORK/real")"

# --- (9) Run names are names: a variant named like a path is refused when the
# file is read (exit 2, naming the file, the variant and the rule); nothing is
# created where the path points (TMPDIR is where run directories would be made).
mkdir -p "$WORK/tmp/a/b"
scenario "$WORK/escape.toml" "../../../escape"
TMPDIR="$WORK/tmp/a/b" expect_exit 2 name_relative -- dt run "$WORK/escape.toml" --no-progress
expect_contains name_relative err "$WORK/escape.toml:"
expect_contains name_relative err "[[variant]] name: run name '../../../escape' contains '/'"
expect_absent "$WORK/tmp/escape" "a variant named ../../../escape"
# (A short absolute name: a name over 64 characters is refused for its length
# first, and $WORK's length depends on where the tree is checked out.)
scenario "$WORK/absolute.toml" "/dtlab-hostile-abs"
TMPDIR="$WORK/tmp/a/b" expect_exit 2 name_absolute -- dt run "$WORK/absolute.toml" --no-progress
expect_contains name_absolute err "run name '/dtlab-hostile-abs' contains '/'"
expect_absent "/dtlab-hostile-abs" "a variant named /dtlab-hostile-abs"
scenario "$WORK/dotdot.toml" ".."
expect_exit 2 name_dotdot -- dt run "$WORK/dotdot.toml" --no-progress
expect_contains name_dotdot err "run name '..' is not allowed"
# A plain name still resumes, inside the run directory.
scenario "$WORK/plain.toml" "resumed-1.b"
TMPDIR="$WORK/tmp/a/b" expect_exit 0 name_plain -- dt run "$WORK/plain.toml" --no-progress
CHECKS=$((CHECKS + 1))
[ -z "$(ls -A "$WORK/tmp/a/b")" ] || fail "name_plain: the run directory was left behind: $(ls -A "$WORK/tmp/a/b")"

# --- The one-writer lock: a second training into a directory in use is refused
# (exit 2, naming the holder); eval reads it meanwhile; the lock dies with its holder.
if [ -d "$FASHION" ]; then
  expect_exit 0 lock_first -- timeout 300 "$DTLAB" train --no-progress --steps 2 --checkpoint-dir "$WORK/busy"
  "$DTLAB" train --no-progress --steps 100000 --checkpoint-dir "$WORK/busy" >"$WORK/long.out" 2>"$WORK/long.err" &
  long=$!
  for _ in $(seq 600); do
    grep -q "^pid $long on " "$WORK/busy/.dtlab.lock" 2>/dev/null && break
    kill -0 "$long" 2>/dev/null || break
    sleep 0.1
  done
  expect_exit 2 lock_second -- timeout 300 "$DTLAB" train --no-progress --steps 2 --checkpoint-dir "$WORK/busy/"
  expect_contains lock_second err "is in use by pid $long on $(hostname)"
  expect_contains lock_second err "$WORK/busy/.dtlab.lock"
  expect_exit 0 lock_eval -- timeout 300 "$DTLAB" eval --checkpoint-dir "$WORK/busy"
  CHECKS=$((CHECKS + 1))
  kill -0 "$long" 2>/dev/null || fail "the long training ended early: $(tail -3 "$WORK/long.err")"
  # SIGKILL: a holder that dies without a word (SIGTERM would now save at its step and stop).
  kill -9 "$long" 2>/dev/null; wait "$long" 2>/dev/null
  expect_exit 0 lock_after -- timeout 300 "$DTLAB" train --no-progress --steps 4 --checkpoint-dir "$WORK/busy"
  CHECKS=$((CHECKS + 1))
  [ "$(ls "$WORK/busy")" = "$(printf 'checkpoint\nckpt-2.safetensors\nckpt-4.safetensors\nmetrics.csv')" ] ||
    fail "lock: the directory holds $(ls -A "$WORK/busy" | tr '\n' ' ')"
else
  echo "note: $FASHION missing; the lock cases are left out"
fi

CHECKS=$((CHECKS + 1))
find "$WORK" -name 'core*' -type f | grep -q . && fail "a core dump was left"
finish
