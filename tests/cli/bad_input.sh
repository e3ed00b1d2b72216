# Bad input: a clear message naming the problem and exit code 2, never a crash.
. "$(dirname "$0")/lib.bash"
FASHION=/usr/share/datasets/fashion-mnist
[ -d "$FASHION" ] || { echo "SKIP: $FASHION missing (apt-get install dataset-fashion-mnist)"; exit 77; }

# A timeout guards against an option that is wrongly accepted and starts a full run.
train() { timeout 120 "$DTLAB" train --no-progress "$@"; }

# Options out of range.
expect_exit 2 unknown_model -- train --model resnet
expect_contains unknown_model err "unknown model 'resnet'"
expect_contains unknown_model err "seed-cnn"
expect_exit 2 unknown_optimizer -- train --optimizer adagrad
expect_contains unknown_optimizer err "unknown optimizer 'adagrad'"
expect_exit 2 zero_batch -- train --batch-per-replica 0
expect_contains zero_batch err "--batch-per-replica must be at least 1"
expect_exit 2 negative_batch -- train --batch-per-replica -5
expect_exit 2 zero_epochs -- train --epochs 0
expect_contains zero_epochs err "--epochs must be at least 1"
expect_exit 2 negative_epochs -- train --epochs -1
expect_exit 2 zero_steps -- train --steps 0
expect_exit 2 bad_lr -- train --lr -1
expect_exit 2 non_numeric_batch -- train --batch-per-replica lots
expect_exit 2 bad_schedule -- train --lr-schedule 3:0.1
expect_contains bad_schedule err "start at 1"
expect_exit 2 negative_threads -- train --threads -2
expect_exit 2 dump_without_dir -- train --dump-step 1

# Data sets.
expect_exit 2 missing_dataset -- train --dataset "$WORK/nowhere"
expect_contains missing_dataset err "nowhere"
copy_dataset() { rm -rf "$WORK/$1"; mkdir -p "$WORK/$1"; cp "$FASHION"/*.gz "$WORK/$1/"; }

copy_dataset truncated
gzip -dc "$FASHION/t10k-images-idx3-ubyte.gz" | head -c 100000 | gzip > "$WORK/truncated/t10k-images-idx3-ubyte.gz"
expect_exit 2 truncated_idx -- train --dataset "$WORK/truncated"
expect_contains truncated_idx err "truncated"

copy_dataset badmagic
{ printf '\x00\x00\x08\x07'; gzip -dc "$FASHION/t10k-labels-idx1-ubyte.gz" | tail -c +5; } | gzip > "$WORK/badmagic/t10k-labels-idx1-ubyte.gz"
expect_exit 2 wrong_magic -- train --dataset "$WORK/badmagic"
expect_contains wrong_magic err "t10k-labels-idx1-ubyte"

copy_dataset corruptgz
head -c 20000 "$FASHION/t10k-images-idx3-ubyte.gz" > "$WORK/corruptgz/t10k-images-idx3-ubyte.gz"
expect_exit 2 corrupted_gzip -- train --dataset "$WORK/corruptgz"

copy_dataset mismatch
# 9999 test labels for 10000 test images.
{ printf '\x00\x00\x08\x01\x00\x00\x27\x0f'; gzip -dc "$FASHION/t10k-labels-idx1-ubyte.gz" | tail -c +9 | head -c 9999; } | gzip > "$WORK/mismatch/t10k-labels-idx1-ubyte.gz"
expect_exit 2 count_mismatch -- train --dataset "$WORK/mismatch"
expect_contains count_mismatch err "10000"
expect_contains count_mismatch err "9999"

copy_dataset badlabel
{ gzip -dc "$FASHION/train-labels-idx1-ubyte.gz" | head -c 108; printf '\x0c'; gzip -dc "$FASHION/train-labels-idx1-ubyte.gz" | tail -c +110; } | gzip > "$WORK/badlabel/train-labels-idx1-ubyte.gz"
expect_exit 2 label_out_of_range -- train --dataset "$WORK/badlabel"
expect_contains label_out_of_range err "12"

# A corrupted checkpoint is refused on resume and on eval.
expect_exit 0 make_checkpoint -- "$DTLAB" train --no-progress --steps 3 --checkpoint-dir "$WORK/ckpt"
ckpt="$WORK/ckpt/ckpt-3.safetensors"
size=$(stat -c %s "$ckpt")
printf '\xff' | dd of="$ckpt" bs=1 seek=$((size - 100)) conv=notrunc status=none
expect_exit 2 corrupted_checkpoint_eval -- "$DTLAB" eval --checkpoint-dir "$WORK/ckpt"
expect_contains corrupted_checkpoint_eval err "checksum mismatch"
expect_exit 2 corrupted_checkpoint_resume -- train --steps 5 --checkpoint-dir "$WORK/ckpt"
expect_contains corrupted_checkpoint_resume err "checksum mismatch"
expect_exit 2 eval_empty_dir -- "$DTLAB" eval --checkpoint-dir "$WORK/empty"
expect_contains eval_empty_dir err "no checkpoint"

# A checkpoint directory of another model or optimizer is not resumed (another
# seed, replica count or batch is: tests/cli/resume_other_configuration.sh).
expect_exit 0 other_run -- "$DTLAB" train --no-progress --steps 2 --seed 5 --checkpoint-dir "$WORK/other"
expect_exit 2 other_run_resume -- train --optimizer sgd --checkpoint-dir "$WORK/other"
expect_contains other_run_resume err "holds a checkpoint of another optimizer (adam with slots m, v there, sgd with slots none here)"
expect_exit 2 other_model_resume -- train --model linear --checkpoint-dir "$WORK/other"
expect_contains other_model_resume err "holds a checkpoint of another model (seed-cnn there, linear here)"
finish
