"""Keras 3's gradient accumulation beside dtlab's (tests/cli/tf_accumulation_check.sh).

A Dense model (dtlab's `linear`: Flatten, Dense 10) on 56 scripted 8x8 images in micro-batches of 16, so that
every epoch ends with a short micro-batch of 8, and 3 micro-batches per optimizer step, which do not divide an
epoch's 4: the keras rule carries a partial group into the next epoch. dtlab trains with --dump-step; Keras 3
(keras.optimizers.SGD / Adam with gradient_accumulation_steps=3, the loss SparseCategoricalCrossentropy with its
default sum_over_batch_size) trains the same micro-batches from the same weights, and the weights before the
dumped step and the gradient it applies must agree within float32 noise:

  keras rule, SGD and Adam (Adam's bias correction counts optimizer steps, `iterations`, not micro-batches);
  global rule, SGD, against one Keras step per group on the group's examples (no accumulation);
  and the step holding the short micro-batch: Keras's mean of means against the mean over its examples.

Prints one line per comparison and exits 1 if any disagrees. Usage: tf_accumulation.py DTLAB WORKDIR
"""
import os
import struct
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_file import read_safetensors  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # noqa: E402
import keras  # noqa: E402

EXAMPLES, SIDE, CLASSES, MICRO, K, EPOCHS = 56, 8, 10, 16, 3, 3
NOISE = 2e-5  # float32 noise: relative to the largest magnitude compared


def write_dataset(directory):
    """56 training and 16 test images, random bytes, as uncompressed IDX files."""
    rng = np.random.default_rng(5)
    os.makedirs(directory, exist_ok=True)
    sets = {"train": (EXAMPLES, rng), "t10k": (16, rng)}
    arrays = {}
    for prefix, (n, r) in sets.items():
        images = r.integers(0, 256, (n, SIDE, SIDE)).astype(np.uint8)
        labels = r.integers(0, CLASSES, n).astype(np.uint8)
        with open(f"{directory}/{prefix}-images-idx3-ubyte", "wb") as f:
            f.write(struct.pack(">IIII", 0x803, n, SIDE, SIDE) + images.tobytes())
        with open(f"{directory}/{prefix}-labels-idx1-ubyte", "wb") as f:
            f.write(struct.pack(">II", 0x801, n) + labels.tobytes())
        arrays[prefix] = (images, labels)
    images, labels = arrays["train"]
    return (images.astype(np.float32) / np.float32(255)).reshape(EXAMPLES, SIDE, SIDE, 1), labels.astype(np.int32)


def dtlab_dump(dtlab, data, out, step, *flags):
    """Trains with dtlab (no shuffling: buffer 1) and returns the --dump-step file's tensors."""
    command = [dtlab, "train", "--no-progress", "--threads", "2", "--dataset", data, "--model", "linear",
               "--global-batch", str(MICRO), "--accumulation-steps", str(K), "--loss-reduction",
               "sum_over_batch_size", "--epochs", str(EPOCHS), "--shuffle-buffer", "1", "--dump-step", str(step),
               "--dump-dir", out, *flags]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    tensors, _ = read_safetensors(f"{out}/step-{step}.safetensors")
    return tensors


def model_with(weights):
    model = keras.Sequential([keras.Input((SIDE, SIDE, 1)), keras.layers.Flatten(name="flatten"),
                              keras.layers.Dense(CLASSES, name="dense")])
    dense = model.get_layer("dense")
    dense.kernel.assign(weights["weights/dense/kernel"])
    dense.bias.assign(weights["weights/dense/bias"])
    return model, [dense.kernel, dense.bias]


LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)  # reduction sum_over_batch_size, as fit's


def gradient(model, variables, images, labels):
    with tf.GradientTape() as tape:
        loss = LOSS(tf.constant(labels), model(tf.constant(images), training=True))
    return tape.gradient(loss, variables)


def micro_batches(images, labels):
    """Every epoch's micro-batches in order (no shuffling), epoch after epoch."""
    for _ in range(EPOCHS):
        for begin in range(0, EXAMPLES, MICRO):
            yield images[begin:begin + MICRO], labels[begin:begin + MICRO]


def agree(what, ours, theirs):
    """True when dtlab's and Keras's arrays agree within float32 noise; prints the comparison."""
    scale = max(float(np.max(np.abs(theirs))), 1e-30)
    diff = float(np.max(np.abs(np.asarray(ours, np.float64) - np.asarray(theirs, np.float64))))
    ok = diff <= NOISE * scale
    print(f"{'MATCH' if ok else 'DIFFER'}: {what}: max |dtlab - keras| = {diff:.3g} "
          f"({diff / scale:.2e} of the largest magnitude {scale:.3g})")
    return ok


def keras_rule(dump, images, labels, optimizer, step):
    """Keras's optimizer with gradient_accumulation_steps=K over the micro-batches, from the dump's initial
    weights (the dump of step 1 holds them): the weights before update `step` and the gradient it applies."""
    model, variables = model_with(dump)
    calls = 0
    for x, y in micro_batches(images, labels):
        g = gradient(model, variables, x, y)
        calls += 1
        if calls == step * K:  # this call applies update `step`: (g + accumulator) / K
            before = [v.numpy() for v in variables]
            applied = [((gi + acc.value) / K).numpy()
                       for gi, acc in zip(g, optimizer._accumulated_gradients)]
            optimizer.apply_gradients(zip(g, variables))
            return before, applied, optimizer, model, variables, x, y
        optimizer.apply_gradients(zip(g, variables))
    raise RuntimeError("the run ended before that step")


def main():
    dtlab, work = sys.argv[1], sys.argv[2]
    data = f"{work}/data"
    images, labels = write_dataset(data)
    ok = True

    # (1) keras rule, SGD: 12 micro-batches, updates after the 3rd, 6th, 9th and 12th; update 2 takes the first
    # epoch's short micro-batch carried into the second epoch, update 4 the third epoch's short one.
    start = dtlab_dump(dtlab, data, f"{work}/start", 1, "--accumulation", "keras", "--optimizer", "sgd",
                       "--lr", "0.1")
    dump = dtlab_dump(dtlab, data, f"{work}/keras-sgd", 4, "--accumulation", "keras", "--optimizer", "sgd",
                      "--lr", "0.1")
    ok &= agree("the dumped batch of step 4 is examples 16..55 of the third epoch",
                dump["batch/images"], images[16:56])
    sgd = keras.optimizers.SGD(learning_rate=0.1, gradient_accumulation_steps=K)
    before, applied, optimizer, model, variables, x, y = keras_rule(start, images, labels, sgd, 4)
    ok &= agree("keras rule, SGD: dense/kernel before step 4", dump["weights/dense/kernel"], before[0])
    ok &= agree("keras rule, SGD: dense/bias before step 4", dump["weights/dense/bias"], before[1])
    ok &= agree("keras rule, SGD: the gradient step 4 applies, dense/kernel", dump["gradients/dense/kernel"],
                applied[0])
    ok &= agree("keras rule, SGD: the gradient step 4 applies, dense/bias", dump["gradients/dense/bias"], applied[1])
    print(f"Keras's optimizer after 12 micro-batches: iterations {int(optimizer.iterations.numpy())} "
          f"(optimizer steps), _iterations {int(optimizer._iterations.numpy())} (micro-batches)")

    # The mean of means: step 4's group is 16 + 16 + 8 examples (16..55). One step on those 40 takes their mean.
    model, variables = model_with(dump)
    mean = [g.numpy() for g in gradient(model, variables, images[16:56], labels[16:56])]
    scale = float(np.max(np.abs(mean[0])))
    off = float(np.max(np.abs(applied[0] - mean[0])))
    print(f"mean of means: step 4's gradient (dense/kernel) is off the mean over its 40 examples by "
          f"{off / scale:.1%} of its largest value; dtlab's keras rule gives Keras's, not the mean")
    if not off > 100 * NOISE * scale:
        print("DIFFER: the short micro-batch should make the mean of means differ from the mean")
        ok = False

    # (2) keras rule, Adam: its bias correction uses iterations = optimizer steps.
    dump = dtlab_dump(dtlab, data, f"{work}/keras-adam", 4, "--accumulation", "keras", "--optimizer", "adam")
    adam = keras.optimizers.Adam(learning_rate=1e-3, gradient_accumulation_steps=K)
    before, applied, *_ = keras_rule(start, images, labels, adam, 4)
    ok &= agree("keras rule, Adam: dense/kernel before step 4", dump["weights/dense/kernel"], before[0])
    ok &= agree("keras rule, Adam: the gradient step 4 applies, dense/kernel", dump["gradients/dense/kernel"],
                applied[0])

    # (3) global rule, SGD: one step per group of the epoch (3 micro-batches, then the short one alone), on the
    # group's examples; 6 steps. Keras without accumulation, one step per group.
    dump = dtlab_dump(dtlab, data, f"{work}/global-sgd", 6, "--accumulation", "global", "--optimizer", "sgd",
                      "--lr", "0.1")
    model, variables = model_with(start)
    plain = keras.optimizers.SGD(learning_rate=0.1)
    groups = [(0, 48), (48, 56)] * EPOCHS
    for index, (begin, end) in enumerate(groups):
        g = gradient(model, variables, images[begin:end], labels[begin:end])
        if index == 5:
            ok &= agree("global rule, SGD: dense/kernel before step 6", dump["weights/dense/kernel"],
                        variables[0].numpy())
            ok &= agree("global rule, SGD: the gradient of step 6 (the short group alone)",
                        dump["gradients/dense/kernel"], g[0].numpy())
        plain.apply_gradients(zip(g, variables))
    print("OK: dtlab's keras rule is Keras 3's gradient_accumulation_steps" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
