# Keras 3's gradient accumulation beside dtlab's: tests/peers/tf_accumulation.py trains a
# Dense model on 56 scripted 8x8 images in micro-batches of 16 (each epoch's last one 8),
# 3 per optimizer step, with dtlab (--accumulation keras and global, --dump-step) and with
# Keras 3's SGD and Adam (gradient_accumulation_steps=3, fit's sum_over_batch_size loss),
# and compares the weights before the dumped step and the gradient it applies within
# float32 noise: the keras rule, its partial group carried across epochs, Adam's step
# count, the global rule against one Keras step per group, and the mean of means that a
# short micro-batch makes. Skipped (exit 77) without the peers venv's TensorFlow
# (scripts/peers-venv.sh).
. "$(dirname "$0")/lib.bash"
require_tensorflow numpy

expect_exit 0 accumulation -- "$PY" "$DTLAB_SOURCE_DIR/tests/peers/tf_accumulation.py" "$DTLAB" "$WORK"
for text in "MATCH: keras rule, SGD: dense/kernel before step 4" \
            "MATCH: keras rule, SGD: the gradient step 4 applies, dense/kernel" \
            "MATCH: keras rule, Adam: dense/kernel before step 4" \
            "MATCH: keras rule, Adam: the gradient step 4 applies, dense/kernel" \
            "MATCH: global rule, SGD: dense/kernel before step 6" \
            "MATCH: global rule, SGD: the gradient of step 6 (the short group alone)" \
            "iterations 4 (optimizer steps), _iterations 12 (micro-batches)" \
            "dtlab's keras rule gives Keras's, not the mean" \
            "OK: dtlab's keras rule is Keras 3's gradient_accumulation_steps"; do
  expect_contains accumulation out "$text"
done
CHECKS=$((CHECKS + 1))
grep -q "^DIFFER" "$WORK/accumulation.out" && fail "a comparison differs"
cat "$WORK/accumulation.out"
finish
