"""BatchNormalization under MirroredStrategy: dtlab beside TensorFlow (2.21, Keras 3) on 4 replicas.

  write-cases DIR     writes tf_model_files.py's small data set (DIR/data: 64 training images) and,
                      with Keras, two models without Dropout (DIR/synchronized.json,
                      DIR/unsynchronized.json): Conv2D(relu) -> BatchNormalization -> Flatten ->
                      Dense(relu) -> BatchNormalization -> Dense(10), the BatchNormalization
                      layers synchronized=True in one and False in the other.
  check DIR CASE...   for each CASE, reads what dtlab wrote under DIR/CASE (below), runs the same
                      two training steps in TF under tf.distribute.MirroredStrategy on 4 logical
                      CPU devices and compares; prints MATCH or MISMATCH lines and exits 1 on a
                      mismatch (2 on files it cannot check).

What dtlab writes for a CASE (tests/cli/tf_batch_norm_check.sh runs it), each run `dtlab train
--model DIR/CASE.json --dataset DIR/data --optimizer sgd --steps 2` from the same seed:
  DIR/CASE/mirrored/{dump,ckpt}   4 mirrored replicas of 4 examples: step 1's dump (--dump-step 1:
                                  the weights before the step, the global batch of 16 in dtlab's
                                  order, the summed gradients, the summed loss) and a checkpoint
                                  after each step (--checkpoint-every 1; the moving statistics in
                                  it are replica 0's copy, as TF's checkpoints hold)
  DIR/CASE/mirrored-2/dump        the same run's step 2 dump
  DIR/CASE/one/{dump,ckpt}        one device on the same global batches of 16

TF's side: the model from DIR/CASE.json, built in strategy.scope() and given the weights of step
1's dump; each step's global batch is dtlab's (dtlab shuffles with its own random numbers, not
TF's: docs/semantics.md, "Input pipeline"), handed to TF's own input pipeline,
strategy.experimental_distribute_dataset(Dataset.from_tensor_slices(batch).batch(16)), which
deals each replica its slice (a SPLIT line says which, against dtlab.replica_batch_sizes); then
strategy.run of the custom-training step: model(x, training=True),
compute_average_loss(per-example loss, global_batch_size=16), tape.gradient and
SGD.apply_gradients (which all-reduces the gradients), with the replicas' losses and gradients
reduced with SUM. Compared with dtlab, each step: the summed loss, the summed gradient of every
trainable variable and, after the step, every variable's copy on replica 0, the moving
statistics included (dtlab's checkpoint). TF runs the steps in float32 and in float64 (every
layer's dtype policy float64); a value matches when it is within the tolerance of either,
relative to the largest of its tensor, so that TF's own float32 rounding (its batch statistics
are float32 reduce_sums) is not taken for dtlab's. Each MATCH line gives both distances and TF
float32's own from float64.

It also says, on both sides, whether the 4 replicas equal one device on the global batch:
synchronized=True all-reduces the statistics, so TF's distributed step equals its one-device
step (float64, to rounding) and dtlab's equals its own one-device run within float32 noise;
synchronized=False normalizes each replica's 4 examples by their own statistics, so both differ
from one device, by the same amounts (ONE-DEVICE lines), and TF's replicas end with different
copies of the moving statistics (REPLICAS line).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_file import read_safetensors  # noqa: E402
from tf_model_files import relative, retyped, write_data  # noqa: E402

REPLICAS = 4
LOSS_TOLERANCE = 1e-5      # as tf_model_files.py
GRADIENT_TOLERANCE = 5e-5  # per tensor, relative to its largest entry
STATE_TOLERANCE = 1e-5     # the weights and moving statistics after a step
ONE_DEVICE_EQUAL = 1e-5    # dtlab's two runs, float32: within float32 noise of each other
TF_ONE_DEVICE_EQUAL = 1e-9  # TF's, both float64: only rounding apart
DIFFERS = 1e-3             # "differs from one device": far beyond any rounding

tf = None
keras = None
mirrored = None  # the MirroredStrategy


def import_tf():
    """TensorFlow with REPLICAS logical CPU devices on the one physical CPU, few threads."""
    global tf, keras
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow
    import keras as keras3
    tf, keras = tensorflow, keras3
    tf.get_logger().setLevel("ERROR")
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * REPLICAS)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(2)


def case_model(synchronized):
    L = keras.layers
    return keras.Sequential([
        keras.Input(shape=(28, 28, 1)),
        L.Conv2D(4, 3, strides=2, activation="relu", name="conv2d"),
        L.BatchNormalization(synchronized=synchronized, momentum=0.9, name="batch_normalization"),
        L.Flatten(name="flatten"),
        L.Dense(8, activation="relu", name="dense"),
        L.BatchNormalization(synchronized=synchronized, momentum=0.8, epsilon=0.01, name="batch_normalization_1"),
        L.Dense(10, name="dense_1"),
    ], name=f"{'' if synchronized else 'un'}synchronized")


def write_cases(directory):
    import_tf()
    write_data(os.path.join(directory, "data"))
    for synchronized in (True, False):
        model = case_model(synchronized)
        with open(os.path.join(directory, model.name + ".json"), "w") as f:
            f.write(model.to_json())
    print("wrote synchronized, unsynchronized")
    return 0


class Run:
    """One run's files: step 1's and step 2's dumps (step 2's may be absent), the checkpoints."""

    def __init__(self, directory, second=None):
        self.dump = [read_safetensors(os.path.join(directory, "dump", "step-1.safetensors"))]
        if second is not None:
            self.dump.append(read_safetensors(os.path.join(second, "dump", "step-2.safetensors")))
        self.after = [read_safetensors(os.path.join(directory, "ckpt", f"ckpt-{k}.safetensors"))[0]
                      for k in (1, 2)]

    def gradients(self, step):
        tensors = self.dump[step - 1][0]
        return {k[len("gradients/"):]: v for k, v in tensors.items() if k.startswith("gradients/")}

    def state(self, step):
        """Every variable after the step (replica 0's copy of the moving statistics)."""
        return {k[len("model/"):]: v for k, v in self.after[step - 1].items() if k.startswith("model/")}


def tf_run(model_json, weights, batches, learning_rate, dtype, distributed):
    """Two SGD steps of TF's custom training loop, distributed (MirroredStrategy on REPLICAS logical
    CPUs) or on one device. Returns per step: the summed loss, the summed gradients, replica 0's
    variables after the step, every replica's moving statistics after it and (distributed) the
    dump positions each replica was dealt."""
    global mirrored
    if distributed and mirrored is None:
        # One strategy for every run: a second one would number its collectives from the same
        # keys, and TF's runtime refuses a float64 all-reduce under a key a float32 one used.
        mirrored = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(REPLICAS)])
    strategy = mirrored if distributed else tf.distribute.get_strategy()
    with strategy.scope():
        model = keras.models.model_from_json(retyped(model_json, dtype))
        for variable in model.weights:
            variable.assign(weights[variable.path].astype(dtype))
        optimizer = keras.optimizers.SGD(learning_rate=learning_rate)
        optimizer.build(model.trainable_variables)
    loss_object = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None, dtype=dtype)

    def replica_step(images, labels, global_batch):
        with tf.GradientTape() as tape:
            per_example = loss_object(labels, model(images, training=True))
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
            if model.losses:
                loss += tf.nn.scale_regularization_loss(tf.add_n(model.losses))
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        return loss, gradients

    @tf.function
    def distributed_step(images, labels, global_batch):
        losses, gradients = strategy.run(replica_step, args=(images, labels, global_batch))
        return (strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None),
                [strategy.reduce(tf.distribute.ReduceOp.SUM, g, axis=None) for g in gradients])

    def local(variable):
        return [v.numpy().astype(np.float64) for v in strategy.experimental_local_results(variable.value)]

    steps = []
    for images, labels in batches:
        global_batch = len(labels)
        images = images.astype(dtype).reshape((global_batch,) + tuple(model.input_shape[1:]))
        if distributed:
            dataset = tf.data.Dataset.from_tensor_slices((images, labels, np.arange(global_batch))).batch(global_batch)
            x, y, positions = next(iter(strategy.experimental_distribute_dataset(dataset)))
            split = [p.numpy().tolist() for p in strategy.experimental_local_results(positions)]
            loss, gradients = distributed_step(x, y, global_batch)
        else:
            split = None
            loss, gradients = replica_step(tf.constant(images), tf.constant(labels), global_batch)
        steps.append({
            "loss": float(loss.numpy()),
            "gradients": {v.path: g.numpy().astype(np.float64) for v, g in zip(model.trainable_variables, gradients)},
            "state": {v.path: local(v)[0] for v in model.weights},
            "moving": {v.path: local(v) for v in model.non_trainable_variables},
            "split": split,
        })
    return steps


def check_case(directory, case):
    model_json = open(os.path.join(directory, case + ".json")).read()
    base = os.path.join(directory, case)
    mirrored = Run(os.path.join(base, "mirrored"), os.path.join(base, "mirrored-2"))
    one = Run(os.path.join(base, "one"))
    tensors, meta = mirrored.dump[0]
    if meta.get("dtlab.replica_batch_sizes") != ",".join(["4"] * REPLICAS) or \
            meta.get("dtlab.strategy") != "mirrored" or meta.get("dtlab.optimizer") != "sgd":
        print(f"{case}: not a dump of 4 mirrored replicas of 4 examples with SGD: "
              f"{meta.get('dtlab.strategy')}, {meta.get('dtlab.replica_batch_sizes')}, {meta.get('dtlab.optimizer')}")
        return 2
    weights = {k[len("weights/"):]: v for k, v in tensors.items() if k.startswith("weights/")}
    batches = [(t["batch/images"], t["batch/labels"]) for t, _ in mirrored.dump]
    one_batches = [one.dump[0][0]["batch/images"]]
    if not np.array_equal(batches[0][0], one_batches[0]):
        print(f"{case}: dtlab's one-device run took another first batch than its 4 replicas")
        return 2
    learning_rate = float(meta["dtlab.learning_rate"])
    tf32 = tf_run(model_json, weights, batches, learning_rate, "float32", True)
    tf64 = tf_run(model_json, weights, batches, learning_rate, "float64", True)
    tf_one = tf_run(model_json, weights, batches, learning_rate, "float64", False)
    print(f"== {case}: TensorFlow {tf.__version__}, Keras {keras.__version__}, MirroredStrategy on {REPLICAS} "
          f"logical CPUs, SGD(learning_rate={learning_rate:g}), 2 steps of global batch {len(batches[0][1])}")
    ok = True

    def report(what, ours, theirs32, theirs64, tolerance):
        nonlocal ok
        ours = np.asarray(ours, np.float64)
        e32, e64, e3264 = relative(ours, theirs32), relative(ours, theirs64), relative(np.asarray(theirs32), theirs64)
        error = min(e32, e64)
        good = error <= tolerance
        ok &= good
        print(f"{'MATCH' if good else 'MISMATCH'}: {what} relative difference {error:.3g} (tolerance {tolerance:g}; "
              f"from TF float32 {e32:.3g}, from TF float64 {e64:.3g}, TF float32 from float64 {e3264:.3g})")

    for step in (1, 2):
        a, b = tf32[step - 1], tf64[step - 1]
        sizes = [len(s) for s in a["split"]]
        slices = np.split(np.arange(sum(sizes)), np.cumsum(sizes)[:-1])
        dtlab_sizes = mirrored.dump[step - 1][1]["dtlab.replica_batch_sizes"]
        same = [len(s) for s in slices] == [int(n) for n in dtlab_sizes.split(",")] and \
            all(list(s) == p for s, p in zip(slices, a["split"]))
        ok &= same
        print(f"SPLIT: step {step}: {'same' if same else 'DIFFERS'}: TF's experimental_distribute_dataset deals the "
              f"replicas positions {a['split']} of dtlab's global batch; dtlab's replica batches {dtlab_sizes}, "
              "consecutive")
        dump = mirrored.dump[step - 1][0]
        report(f"step {step} loss", dump["loss"], a["loss"], b["loss"], LOSS_TOLERANCE)
        gradients = mirrored.gradients(step)
        for name in a["gradients"]:
            report(f"step {step} gradient {name}", gradients[name], a["gradients"][name], b["gradients"][name],
                   GRADIENT_TOLERANCE)
        state = mirrored.state(step)
        for name in a["state"]:
            report(f"after step {step}: {name} (replica 0)", state[name], a["state"][name], b["state"][name],
                   STATE_TOLERANCE)
    copies = tf64[-1]["moving"]
    spread = max(relative(c, v[0]) for v in copies.values() for c in v[1:])
    print(f"REPLICAS: TF's {REPLICAS} copies of the moving statistics after step 2 "
          f"{'are identical' if spread == 0 else f'differ (up to {spread:.3g} relative, float64)'}")

    # Distributed versus one device, on each side: TF's two float64 runs, every step; dtlab's
    # two runs, step 1's loss and gradients (the dumps) and the variables after steps 1 and 2.
    def distance(pairs):
        return max(abs(float(x) - float(y)) / max(abs(float(y)), 1e-30) if np.ndim(x) == 0 and np.ndim(y) == 0
                   else relative(np.asarray(x, np.float64), np.asarray(y, np.float64)) for x, y in pairs)

    tf_pairs = []
    for x, y in zip(tf64, tf_one):
        tf_pairs.append((x["loss"], y["loss"]))
        tf_pairs += [(x[kind][n], y[kind][n]) for kind in ("gradients", "state") for n in y[kind]]
    dtlab_pairs = [(mirrored.dump[0][0]["loss"], one.dump[0][0]["loss"])]
    dtlab_pairs += [(mirrored.gradients(1)[n], one.gradients(1)[n]) for n in one.gradients(1)]
    dtlab_pairs += [(mirrored.state(k)[n], one.state(k)[n]) for k in (1, 2) for n in one.state(k)]
    tf_distance, dtlab_distance = distance(tf_pairs), distance(dtlab_pairs)
    tf_verdict = "equal" if tf_distance < TF_ONE_DEVICE_EQUAL else "differs" if tf_distance > DIFFERS else "unclear"
    dtlab_verdict = "equal" if dtlab_distance < ONE_DEVICE_EQUAL else "differs" if dtlab_distance > DIFFERS \
        else "unclear"
    print(f"ONE-DEVICE: TF {tf_verdict}: its 4 replicas against one device on the global batch (float64, loss, "
          f"gradients and the variables after each step): max relative difference {tf_distance:.3g}")
    print(f"ONE-DEVICE: dtlab {dtlab_verdict}: its 4 replicas against its one-device run (step 1's loss and "
          f"gradients, the variables after steps 1 and 2): max relative difference {dtlab_distance:.3g}")
    ok &= tf_verdict == dtlab_verdict and tf_verdict != "unclear"
    if case == "synchronized":
        ok &= tf_verdict == "equal"
    print(f"RESULT: {case}:", "dtlab equals TensorFlow within float32 noise" if ok else "dtlab differs from TensorFlow")
    return 0 if ok else 1


def check(directory, cases):
    import_tf()
    try:
        results = [check_case(directory, case) for case in cases]
    except (OSError, KeyError, ValueError) as e:
        print(f"tf_batch_norm: cannot check {directory}: {e!r}")
        return 2
    return max(results)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "write-cases":
        return write_cases(sys.argv[2])
    if len(sys.argv) >= 4 and sys.argv[1] == "check":
        return check(sys.argv[2], sys.argv[3:])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
