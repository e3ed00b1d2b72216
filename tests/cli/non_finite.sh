# Non-finite values (issue 9): a learning rate that blows the weights up stops the
# run at the first step whose gradient is NaN or infinite, with exit 3, naming the
# step, the replica and the variables, before the all-reduce spreads the NaN.
. "$(dirname "$0")/lib.bash"
[ -d /usr/share/datasets/fashion-mnist ] || { echo "SKIP: dataset-fashion-mnist not installed"; exit 77; }
for math in fast exact; do
  expect_exit 3 blowup_$math -- timeout 120 "$DTLAB" train --no-progress --optimizer sgd --lr 1e38 --steps 5 \
    --math $math --strategy mirrored --replicas 2 --checkpoint-dir "$WORK/ckpt_$math" --checkpoint-every 1
  expect_contains blowup_$math err "runtime fault: step 2: replica 0 of 2 computed a non-finite gradient for dense/kernel (NaN)"
  expect_contains blowup_$math err "its weights were finite before the step. Try a smaller --lr"
  # The checkpoint of step 1 (finite) is the latest one; nothing non-finite was saved.
  expect_exit 0 eval_$math -- "$DTLAB" eval --checkpoint-dir "$WORK/ckpt_$math" --json
  expect_contains eval_$math out '"step": 1'
done
# One replica in exact mode rounds its gradient in the pass (ExactSegment::rounded),
# without most of its words: the words of the non-finite values still name the NaN.
expect_exit 3 blowup_one_device -- timeout 120 "$DTLAB" train --no-progress --optimizer sgd --lr 1e38 --steps 5 \
  --math exact --strategy one_device
expect_contains blowup_one_device err "runtime fault: step 2: replica 0 of 1 computed a non-finite gradient for dense/kernel (NaN)"
finish
