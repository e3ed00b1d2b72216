#!/usr/bin/env python3
"""TensorFlow peer for dtlab: real TensorFlow (2.21, Keras 3) beside dtlab, a reference, never a dependency.

  tf_peer.py check-dump STEP.safetensors  run the step a `dtlab train --dump-step` file records under
                                          tf.distribute.MirroredStrategy, with the loss code its metadata
                                          names, and compare the reduced gradients and loss (exit 1 on
                                          mismatch, 2 on a file it cannot check)
  tf_peer.py reduction-auto               what Keras 3 says to SparseCategoricalCrossentropy(reduction="auto")

check-dump rebuilds the seed-cnn model as a keras.Sequential (Conv2D, MaxPooling2D, Flatten, Dense, with
kernel_regularizer=keras.regularizers.L2(l2)), sets the dump's weights, gives replica r exactly its slice of
the dump's batch (dtlab.replica_batch_sizes, in replica order; of unknown static batch size, as
experimental_distribute_dataset gives them) and runs, in a tf.function, strategy.run of the tutorial's train
step without the optimizer: the per-replica loss, tape.gradient, then strategy.reduce(SUM) of the gradients
and losses. It runs that three times: float32 with TF's Eigen kernels (TF_ENABLE_ONEDNN_OPTS=0), float32 with
oneDNN's (TF's default on x86; in a child process, since the switch is read once at import) and float64 (the
reference). It also runs the same loss code at N=1 (no strategy, the whole batch on one device, float64) to
say whether the distributed step equals one device's, and asks TF's input pipeline
(experimental_distribute_dataset of Dataset.range(batch).batch(global batch)) how it splits the dump's batch.

A gradient tensor matches when max |dtlab - tf| / max |tf| < 1e-5 for one of TF's three runs; the reduced loss
must be within 1e-5 of all of them. Why not always the same run: a ReLU input or a max-pool gap within
float32 rounding of 0 (a kink; every batch has a few) may fall either way in a float32 run and moves one
example's share of the gradient, up to ~1e-3 of a conv kernel's largest entry. In the runs seen so far
dtlab and TF's Eigen float32 agree to ~1e-6 on every tensor, while oneDNN's float32 now and then decides a
kink the other way (a conv2d_1 pre-activation at -7e-10 where Eigen, dtlab and float64 have +5e-9); a
different loss rule moves gradients by percents and the loss too, so it fails all three.

An empty replica: TF 2.21's oneDNN Conv2D returns an empty batch in the input's shape ([0,28,28,1] in,
[0,28,28,1] out) and the next Conv2D fails, so such dumps get no oneDNN run (said in a note).

Run it with the peers venv's python (scripts/peers-venv.sh installs tensorflow-cpu there). The machine may
have few cores: TF runs with 1 intra-op and 2 inter-op threads over R logical CPU devices.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

from safetensors_file import read_safetensors  # noqa: E402  (tests/peers, beside this script)
SEED_CNN = ["conv2d", "conv2d_1", "dense", "dense_1"]
# The relative bound of a float32 step: max |dtlab - tf| / max |tf| per tensor. Both sum the same float32
# products in different orders; over the at most 1600-term dot products of seed-cnn (and the batch sums of
# the gradients) that is a few 1e-7 of the tensor's largest entry, seen up to 1.1e-6.
TOLERANCE = 1e-5
# Distributed and one-device gradients, both float64, are "equal" when this close (only rounding apart).
SAME_AS_ONE_DEVICE = 1e-9

tf = None
keras = None


def import_tf(replicas):
    """Imports TensorFlow with `replicas` logical CPU devices on the one physical CPU, few threads."""
    global tf, keras
    import tensorflow
    import keras as keras3
    tf, keras = tensorflow, keras3
    tf.get_logger().setLevel("ERROR")
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * max(1, replicas))
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(2)


def mirrored(replicas):
    return tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(replicas)])


class LossCode:
    """The per-replica loss code the dump's metadata names, as TF text and as a function."""

    def __init__(self, meta):
        self.convention = meta.get("dtlab.convention", "tf")
        self.denominator = meta.get("dtlab.loss_denominator", "global")
        self.reduction = meta.get("dtlab.loss_reduction", "none")
        self.keras = meta.get("dtlab.keras", "3")
        self.global_batch = int(meta["dtlab.global_batch"])
        self.dtlab_text = meta.get("dtlab.loss", "")

    def unsupported(self):
        if self.convention != "tf":
            return f"convention {self.convention}: only tf (SUM of the replicas' scaled losses) is checked"
        if "scale_regularization_loss" not in self.dtlab_text:
            return "unscaled regularization: only scale_regularization_loss is checked"
        if self.reduction == "sum_over_batch_size":
            return None if self.keras == "3" else "sum_over_batch_size under Keras 2 (refused by Keras 2)"
        if self.reduction != "none":
            return (f"loss reduction {self.reduction}: the tutorial's compute_average_loss needs per-example "
                    "losses (reduction none)")
        if self.denominator not in ("global", "default", "per-replica"):
            return f"loss denominator {self.denominator}"
        return None

    def text(self):
        reg = " + tf.nn.scale_regularization_loss(tf.add_n(model.losses))"
        if self.reduction == "sum_over_batch_size":
            return ('keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="sum_over_batch_size")'
                    "(labels, logits)" + reg)
        data = {"global": f"tf.nn.compute_average_loss(per_example_loss, global_batch_size={self.global_batch})",
                "default": "tf.nn.compute_average_loss(per_example_loss)",
                "per-replica": "tf.reduce_mean(per_example_loss)"}[self.denominator]
        return data + reg

    def __call__(self, labels, logits, model_losses):
        """The loss of one replica (or of one device when no strategy is in scope). The loss object takes the
        logits' dtype (Keras 3's default, floatx float32, would cast float64 logits to float32)."""
        if self.reduction == "sum_over_batch_size":
            data = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="sum_over_batch_size",
                                                          dtype=logits.dtype)(labels, logits)
        else:
            per_example_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none",
                                                                      dtype=logits.dtype)(labels, logits)
            if self.denominator == "global":
                data = tf.nn.compute_average_loss(per_example_loss, global_batch_size=self.global_batch)
            elif self.denominator == "default":
                data = tf.nn.compute_average_loss(per_example_loss)
            else:
                data = tf.reduce_mean(per_example_loss)
        return data + tf.nn.scale_regularization_loss(tf.add_n(model_losses))


def seed_cnn(weights, input_shape, l2, dtype):
    """The tutorial's model in Keras 3, holding the dump's weights. Returns it and its variables by name."""
    def reg():
        return keras.regularizers.L2(l2)
    model = keras.Sequential([
        keras.Input(shape=input_shape, dtype=dtype),
        keras.layers.Conv2D(32, 3, activation="relu", kernel_regularizer=reg(), name="conv2d", dtype=dtype),
        keras.layers.MaxPooling2D(name="max_pooling2d", dtype=dtype),
        keras.layers.Conv2D(64, 3, activation="relu", kernel_regularizer=reg(), name="conv2d_1", dtype=dtype),
        keras.layers.MaxPooling2D(name="max_pooling2d_1", dtype=dtype),
        keras.layers.Flatten(name="flatten", dtype=dtype),
        keras.layers.Dense(64, activation="relu", kernel_regularizer=reg(), name="dense", dtype=dtype),
        keras.layers.Dense(10, kernel_regularizer=reg(), name="dense_1", dtype=dtype),
    ])
    variables = {}
    for layer in SEED_CNN:
        for kind in ("kernel", "bias"):
            variable = getattr(model.get_layer(layer), kind)
            value = weights[f"{layer}/{kind}"]
            if tuple(variable.shape) != value.shape:
                raise ValueError(f"{layer}/{kind}: the dump has shape {value.shape}, Keras {tuple(variable.shape)}")
            variable.assign(value.astype(dtype))
            variables[f"{layer}/{kind}"] = variable
    return model, variables


def distributed_step(strategy, weights, images, labels, sizes, l2, code, dtype):
    """TF's reduced gradients and loss of the step on len(sizes) replicas; replica r gets sizes[r] examples."""
    with strategy.scope():
        model, variables = seed_cnn(weights, images.shape[1:], l2, dtype)
    names = list(variables)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    x = [images[offsets[r]:offsets[r + 1]].astype(dtype) for r in range(len(sizes))]
    y = [labels[offsets[r]:offsets[r + 1]] for r in range(len(sizes))]
    dist_x = strategy.experimental_distribute_values_from_function(
        lambda ctx: tf.constant(x[ctx.replica_id_in_sync_group]))
    dist_y = strategy.experimental_distribute_values_from_function(
        lambda ctx: tf.constant(y[ctx.replica_id_in_sync_group]))

    def replica_step(images, labels):
        # experimental_distribute_dataset gives the replicas tensors of unknown batch size: hide the static
        # one (Keras 3's reduce_values, for one, treats a static (0,) loss apart from a dynamic empty one).
        images = tf.compat.v1.placeholder_with_default(images, [None] + list(images.shape[1:]))
        labels = tf.compat.v1.placeholder_with_default(labels, [None])
        with tf.GradientTape() as tape:
            logits = model(images, training=True)
            loss = code(labels, logits, model.losses)
        gradients = tape.gradient(loss, [variables[n] for n in names])
        return loss, gradients

    @tf.function
    def step(images, labels):
        losses, gradients = strategy.run(replica_step, args=(images, labels))
        return (strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None),
                [strategy.reduce(tf.distribute.ReduceOp.SUM, g, axis=None) for g in gradients])

    loss, gradients = step(dist_x, dist_y)
    return float(loss.numpy()), {n: g.numpy().astype(np.float64) for n, g in zip(names, gradients)}


def one_device_step(weights, images, labels, l2, code, dtype):
    """The same loss code with no strategy (num_replicas_in_sync 1) on the whole batch."""
    model, variables = seed_cnn(weights, images.shape[1:], l2, dtype)
    names = list(variables)
    with tf.GradientTape() as tape:
        logits = model(tf.constant(images.astype(dtype)), training=True)
        loss = code(tf.constant(labels), logits, model.losses)
    gradients = tape.gradient(loss, [variables[n] for n in names])
    return float(loss.numpy()), {n: g.numpy().astype(np.float64) for n, g in zip(names, gradients)}


def relative(a, b):
    """max |a - b| / max |b|."""
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


def load_dump(path):
    """The dump's tensors and metadata, checked: (tensors, meta, code, sizes) or an error message."""
    try:
        tensors, meta = read_safetensors(path)
    except (OSError, ValueError, KeyError, TypeError, struct.error) as e:
        return f"cannot read {path}: {e}"
    if meta.get("dtlab.model") != "seed-cnn":
        return f"only seed-cnn dumps are supported, got {meta.get('dtlab.model')}"
    try:
        code = LossCode(meta)
        replicas = int(meta.get("dtlab.num_replicas_in_sync", "1"))
        batch = tensors["batch/images"].shape[0]
        sizes = [int(s) for s in meta.get("dtlab.replica_batch_sizes", str(batch)).split(",")]
        missing = [k for k in ["batch/labels", "loss"] + [f"{p}/{n}/{kind}" for p in ("weights", "gradients")
                                                          for n in SEED_CNN for kind in ("kernel", "bias")]
                   if k not in tensors]
    except (KeyError, ValueError) as e:
        return f"{path} lacks what a --dump-step file holds: {e}"
    if missing:
        return f"{path} lacks {', '.join(missing)}"
    why = code.unsupported()
    if why:
        return f"cannot check this dump: {why}"
    if len(sizes) != replicas or sum(sizes) != batch:
        return f"dtlab.replica_batch_sizes {sizes} does not split a batch of {batch} over {replicas} replicas"
    return tensors, meta, code, sizes


def float32_step(path):
    """TF's float32 reduced loss and gradients of the dump's step (the kernels that this process has)."""
    tensors, meta, code, sizes = load_dump(path)
    import_tf(len(sizes))
    weights = {k[len("weights/"):]: v for k, v in tensors.items() if k.startswith("weights/")}
    return distributed_step(mirrored(len(sizes)), weights, tensors["batch/images"], tensors["batch/labels"], sizes,
                            float(meta.get("dtlab.l2", "1e-05")), code, np.float32)


def step_onednn(path, out):
    """check-dump's helper, run with TF_ENABLE_ONEDNN_OPTS=1: the float32 step with oneDNN's kernels."""
    loss, gradients = float32_step(path)
    np.savez(out, loss=np.float64(loss), **{"gradients/" + n: g for n, g in gradients.items()})
    return 0


def check_dump(path, eigen_only=False):
    loaded = load_dump(path)
    if isinstance(loaded, str):
        print(f"tf_peer: {loaded}", file=sys.stderr)
        return 2
    tensors, meta, code, sizes = loaded
    replicas = len(sizes)
    images, labels = tensors["batch/images"], tensors["batch/labels"]
    l2 = float(meta.get("dtlab.l2", "1e-05"))
    weights = {k[len("weights/"):]: v for k, v in tensors.items() if k.startswith("weights/")}

    # Two float32 runs of TF: this process with TF's Eigen kernels, a child with oneDNN's (TF's default on
    # x86), in parallel. oneDNN cannot run an empty replica (its Conv2D keeps the input's shape).
    child = None
    tmp = tempfile.TemporaryDirectory(prefix="tf_peer.")
    out = os.path.join(tmp.name, "onednn.npz")
    if 0 not in sizes and not eigen_only:
        child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "step-onednn", path, out],
                                 env=dict(os.environ, TF_ENABLE_ONEDNN_OPTS="1"),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
    import_tf(replicas)
    strategy = mirrored(replicas)
    loss32, eigen32 = distributed_step(strategy, weights, images, labels, sizes, l2, code, np.float32)
    loss64, tf64 = distributed_step(strategy, weights, images, labels, sizes, l2, code, np.float64)
    one_loss, one64 = one_device_step(weights, images, labels, l2, code, np.float64)
    tf_split = tf_split_of(strategy, images.shape[0], code.global_batch)
    onednn, onednn_loss = None, None
    if child is not None:
        child_out, child_err = child.communicate()
        if child.returncode != 0:
            tmp.cleanup()
            print(child_out + child_err, file=sys.stderr)
            print(f"tf_peer: the oneDNN run failed (exit {child.returncode})", file=sys.stderr)
            return 2
        with np.load(out) as saved:
            onednn_loss = float(saved["loss"])
            onednn = {n: saved["gradients/" + n] for n in eigen32}
    tmp.cleanup()

    print(f"TensorFlow {tf.__version__}, Keras {keras.__version__}: MirroredStrategy over {replicas} logical CPUs, "
          f"replica batches {','.join(map(str, sizes))} (batch {images.shape[0]}, "
          f"global_batch_size {code.global_batch})")
    print(f"per-replica loss: {code.text()}")
    print(f"dtlab's loss:     {code.dtlab_text}")
    if onednn is None and eigen_only:
        print("note: --eigen-only: no oneDNN run")
    elif onednn is None:
        print("note: an empty replica: no oneDNN run (TF 2.21's oneDNN Conv2D returns an empty batch in the "
              "input's shape, [0,28,28,1] -> [0,28,28,1], and the next Conv2D fails); TF's Eigen kernels only")
    ok = True
    worst = 0.0
    kinks = []
    print(f"{'gradient':16s} {'dtlab-eigen':>11s} {'dtlab-onednn':>12s} {'dtlab-tf64':>10s} {'eigen-tf64':>10s} "
          f"{'onednn-tf64':>11s} {'dist/one':>8s}")
    for name in eigen32:
        ours = tensors["gradients/" + name].astype(np.float64)
        e_eigen, e64, eigen64 = relative(ours, eigen32[name]), relative(ours, tf64[name]), relative(eigen32[name],
                                                                                                    tf64[name])
        e_onednn = relative(ours, onednn[name]) if onednn is not None else float("nan")
        onednn64 = relative(onednn[name], tf64[name]) if onednn is not None else float("nan")
        # Matched by one of TF's three runs of the same code: a float32 kink (a ReLU input or a max-pool gap
        # within rounding of 0) may fall either way in one float32 run, never a different loss rule.
        best = min(e for e in (e_eigen, e_onednn, e64) if e == e)
        good = best < TOLERANCE
        ok &= good
        worst = max(worst, best)
        if good and onednn is not None and not e_onednn < TOLERANCE:
            agree = [k for k, e in (("TF's Eigen float32", e_eigen), ("TF's float64", e64)) if e < TOLERANCE]
            kinks.append((name, agree, e_onednn, onednn64))
        ratio = np.linalg.norm(tf64[name]) / max(np.linalg.norm(one64[name]), 1e-300)
        print(f"{name:16s} {e_eigen:11.2e} {e_onednn:12.2e} {e64:10.2e} {eigen64:10.2e} {onednn64:11.2e} "
              f"{ratio:8.5f}   {'ok' if good else 'TOO FAR'}")
    print("(max |a - b| / max |b| per tensor; eigen, onednn: TF float32 with either kernel library, tf64: TF "
          "float64 (Eigen); dist/one: |g| of TF's distributed step / one device's, float64)")
    dtlab_loss = float(tensors["loss"])
    losses = {"eigen": loss32, "onednn": onednn_loss, "tf64": loss64}
    loss_errs = {k: abs(dtlab_loss - v) / max(abs(v), 1e-30) for k, v in losses.items() if v is not None}
    ok &= max(loss_errs.values()) < TOLERANCE
    worst = max(worst, max(loss_errs.values()))
    print(f"reduced loss: dtlab {dtlab_loss:.9g}, " + ", ".join(f"{k} {v:.9g}" for k, v in losses.items()
                                                                if v is not None)
          + f" (dtlab vs those, at most {max(loss_errs.values()):.2e}); one device (float64) {one_loss:.9g}")
    for name, agree, e, e64 in kinks:
        print(f"note: {name}: dtlab is within {TOLERANCE:g} of {' and '.join(agree)} but {e:.2e} from oneDNN's "
              f"float32 (itself {e64:.2e} from float64): a float32 kink, a ReLU input or max-pool gap within "
              "rounding of 0 that oneDNN decides the other way")
    if ok:
        print(f"MATCH: dtlab's reduced gradients and loss equal TensorFlow's within {TOLERANCE:g} "
              f"(worst {worst:.2e})")
    else:
        print(f"MISMATCH: dtlab and TensorFlow differ by up to {worst:.2e} (bound {TOLERANCE:g})")

    if int(meta.get("dtlab.workers", "1")) != 1:
        print("SPLIT: not checked (several workers: each has its own input pipeline)")
    else:
        print(f"SPLIT: {'same' if tf_split == sizes else 'differs'}: TF's experimental_distribute_dataset splits a "
              f"batch of {images.shape[0]} (global batch {code.global_batch}) {','.join(map(str, tf_split))}, dtlab "
              f"{','.join(map(str, sizes))}")

    # Distributed versus one device, both in float64 so that only the loss rule can tell them apart.
    flat64 = np.concatenate([tf64[n].ravel() for n in tf64])
    flat_one = np.concatenate([one64[n].ravel() for n in one64])
    diff = max(relative(tf64[n], one64[n]) for n in tf64)
    ratio = np.linalg.norm(flat64) / np.linalg.norm(flat_one)
    verdict = "equal" if diff < SAME_AS_ONE_DEVICE else "differs"
    print(f"ONE-DEVICE: {verdict}: TF's distributed gradient / one device's (same loss code at N=1, the whole "
          f"batch): |g| ratio {ratio:.6f}, max relative difference {diff:.2e}; loss ratio {loss64 / one_loss:.6f}")
    return 0 if ok else 1


def tf_split_of(strategy, batch, global_batch):
    """How TF's input pipeline splits one (possibly short last) global batch of `batch` examples."""
    dataset = tf.data.Dataset.range(batch).batch(global_batch)
    first = next(iter(strategy.experimental_distribute_dataset(dataset)))
    return [int(t.shape[0]) for t in strategy.experimental_local_results(first)]


def reduction_auto():
    import_tf(1)
    try:
        keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="auto")
    except ValueError as e:
        print(f"reduction-auto: Keras {keras.__version__} raises ValueError: {e}")
        return 0
    print(f"reduction-auto: Keras {keras.__version__} accepts reduction='auto'")
    return 1


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check-dump", help="run a --dump-step file's step in TensorFlow and compare")
    c.add_argument("path")
    c.add_argument("--eigen-only", action="store_true", help="skip the float32 run with oneDNN's kernels")
    o = sub.add_parser("step-onednn", help=argparse.SUPPRESS)
    o.add_argument("path")
    o.add_argument("out")
    sub.add_parser("reduction-auto", help="Keras 3 and reduction='auto'")
    args = parser.parse_args()
    if args.command == "check-dump":
        return check_dump(args.path, args.eigen_only)
    if args.command == "step-onednn":
        return step_onednn(args.path, args.out)
    return reduction_auto()


if __name__ == "__main__":
    sys.exit(main())
