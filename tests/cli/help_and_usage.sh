# --help on every command; usage errors exit 2 with a readable message.
. "$(dirname "$0")/lib.bash"

expect_exit 0 help -- "$DTLAB" --help
expect_contains help out "train"
expect_contains help out "train a model on one device or a virtual cluster"
expect_contains help out "eval"
expect_exit 0 train_help -- "$DTLAB" train --help
expect_contains train_help out "--batch-per-replica"
expect_contains train_help out "seed-cnn"
expect_contains train_help out "mpirun -np W dtlab train --strategy multi_worker_mirrored --replicas-per-worker R"
expect_contains train_help out "--backup-dir"
expect_contains train_help out "halving_doubling (alias tree)"
expect_exit 0 eval_help -- "$DTLAB" eval --help
expect_contains eval_help out "--checkpoint-dir"
expect_contains help out "dtlab run flagship"
for command in run list lesson check cluster replay devices; do
  expect_exit 0 "${command}_help" -- "$DTLAB" "$command" --help
  expect_contains "${command}_help" out "Usage: dtlab $command"
done
expect_contains run_help out "--set"
expect_contains run_help out "--report"
expect_contains lesson_help out "--no-interactive"
expect_contains lesson_help out "--html"
expect_contains help out "replay"
expect_contains help out "devices"
expect_contains replay_help out "--against"
expect_contains train_help out "--backend"
# train --help groups its options by topic and ends with examples (scenarios/run_options.h).
for group in "Model and data:" "Cluster:" "Loss code:" "Math:" "Checkpoints:" "Faults:" "Outputs:" "Examples:"; do
  expect_contains train_help out "$group"
done
CHECKS=$((CHECKS + 1))
tail -n 2 "$WORK/train_help.out" | grep -q '^    dtlab train' || fail "train --help does not end with an example"
for command in run lesson check; do expect_contains "${command}_help" out "Examples:"; done
expect_contains lesson_help out "--all"
expect_exit 2 no_command -- "$DTLAB"
expect_exit 2 unknown_command -- "$DTLAB" frobnicate
expect_contains unknown_command err "unknown command 'frobnicate'"
expect_exit 2 unknown_option -- "$DTLAB" train --no-such-option
expect_contains unknown_option err "dtlab train --help"
expect_exit 2 eval_missing_dir_option -- "$DTLAB" eval
expect_contains eval_missing_dir_option err "checkpoint-dir"
finish
