"""TensorFlow (Keras 3) beside dtlab on models from files (docs/models.md).

  write-cases DIR   writes a crafted data set (DIR/data: 28x28 images whose values repeat, so
                    that pooling windows tie and padding matters) and one Keras model per layer
                    under test (DIR/<case>.json, written by model.to_json()).
  check-dump DUMP   rebuilds the dump's model with keras.models.model_from_json(dtlab.model_json),
                    sets dtlab's weights (every variable of every layer, BatchNormalization's
                    non-trainable moving_mean and moving_variance included), and compares with
                    what dtlab computed on the batch: the logits (an inference pass, which
                    normalizes by the moving statistics), the loss and every trainable
                    parameter's gradient of the step (compute_average_loss with the global batch
                    plus the layers' regularization losses). Prints MATCH or MISMATCH lines;
                    exit 1 on a mismatch.

The step is one device's on the whole batch, which is what dtlab's replicas sum to, with one
exception: a model with a BatchNormalization(synchronized=False) layer normalizes each replica's
examples by that replica's own statistics, so there the step is the sum over the dump's replica
slices (dtlab.replica_batch_sizes, in replica order) of each slice's training pass, as
MirroredStrategy's replicas compute it. A synchronized layer all-reduces its statistics, so it
takes the whole batch (one device); a model mixing both kinds is not checked (exit 2). For a
model with BatchNormalization a MOVING line says which moving statistics were loaded and how far
the logits with Keras's initial ones (0 and 1) would be from dtlab's: dump a later step than the
first, so that the moving statistics are not their initial values and the logits check uses them.

Float32 noise only: TF's kernels sum in other orders (oneDNN, Eigen), so each value is compared
relative to the largest of its tensor, with TF's float32 run and with the same model in float64
(every layer's dtype policy float64): a tensor matches when it is within the tolerance of either.
The float64 run tells dtlab's rounding from TF's own: TF's float32 sums of a batch's statistics
over many values (a synchronized BatchNormalization's reduce_sum over 64 x 26 x 26 positions)
stray from float64 by up to ~6e-4 of a gradient, where dtlab, whose statistics are exact sums,
stays within ~1e-5 of float64; each MATCH line gives all three distances. One kind of gradient is
zero in exact arithmetic: the bias of a layer without an activation that feeds
BatchNormalization (the batch's mean subtracts it). Its float32 values in dtlab and TF alike are
rounding noise (~1e-6 where TF float64 says 1e-15), so it is compared relative to the largest
gradient of its layer (a NOTE line says so). A final softmax is TF's: the loss is
SparseCategoricalCrossentropy(from_logits=False) on the model's probabilities, which Keras's
TensorFlow backend computes from the softmax's input (_keras_logits), as dtlab does.
"""
import gzip
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_file import read_safetensors  # noqa: E402

LOGITS_TOLERANCE = 1e-5    # max |dtlab - TF| / max |TF| over the batch's logits
LOSS_TOLERANCE = 1e-5
GRADIENT_TOLERANCE = 5e-5  # per tensor: sums over the batch of products, in other orders


def keras_modules():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf
    import keras
    tf.get_logger().setLevel("ERROR")
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(2)
    return tf, keras


def write_idx(path, array, magic):
    data = struct.pack(">I", magic) + struct.pack(">" + "I" * array.ndim, *array.shape) + array.tobytes()
    with open(path + ".gz", "wb") as f:
        f.write(gzip.compress(data, mtime=0))


def write_data(directory):
    """64 training and 16 test images of 28x28 with values from a few levels: ties everywhere."""
    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(21)
    for name, count in (("train", 64), ("t10k", 16)):
        levels = np.array([0, 0, 0, 64, 128, 128, 255], dtype=np.uint8)
        images = levels[rng.integers(0, len(levels), size=(count, 28, 28))]
        images[:, :, 20:] = 0  # flat regions: all-zero pooling windows
        write_idx(f"{directory}/{name}-images-idx3-ubyte", images.astype(np.uint8), 0x00000803)
        labels = (np.arange(count) * 7 % 10).astype(np.uint8)
        write_idx(f"{directory}/{name}-labels-idx1-ubyte", labels, 0x00000801)


def cases(keras):
    """One small model per layer under test, each ending in Dense(10) (or its softmax)."""
    L, R = keras.layers, keras.regularizers
    inp = lambda: keras.Input(shape=(28, 28, 1))
    head = lambda: [L.Flatten(), L.Dense(10)]
    return {
        "conv_strided_same": [inp(), L.Conv2D(3, 3, strides=2, padding="same", activation="relu")] + head(),
        "conv_uneven_same": [inp(), L.Conv2D(2, (4, 2), strides=(1, 3), padding="same")] + head(),
        "conv_strided_valid": [inp(), L.Conv2D(3, (2, 3), strides=(3, 2), padding="valid")] + head(),
        "max_pool_same": [inp(), L.Conv2D(2, 1), L.MaxPooling2D(3, strides=2, padding="same")] + head(),
        "max_pool_overlapping": [inp(), L.Conv2D(2, 1), L.MaxPooling2D(2, strides=1)] + head(),
        "average_pool_same": [inp(), L.Conv2D(2, 1), L.AveragePooling2D(3, strides=2, padding="same")] + head(),
        "average_pool_uneven": [inp(), L.Conv2D(2, 1), L.AveragePooling2D((2, 3), strides=(1, 2))] + head(),
        "softmax_layer": [inp(), L.Flatten(), L.Dense(12), L.Reshape((3, 4)), L.Softmax(), L.Flatten(),
                          L.Dense(10)],
        "activation_layers": [inp(), L.Flatten(), L.Dense(12), L.Activation("relu"), L.ReLU(),
                              L.Activation("linear"), L.Dense(10)],
        "final_softmax": [inp(), L.Conv2D(2, 3, strides=2), L.Flatten(), L.Dense(10, activation="softmax")],
        "regularizers": [inp(), L.Conv2D(3, 3, kernel_regularizer=R.L2(1e-2), bias_regularizer=R.L2(1e-1)),
                         L.Flatten(), L.Dense(10, kernel_regularizer=R.L2(3e-3))],
        # BatchNormalization (docs/models.md): batch statistics in the step, the moving ones in
        # the inference pass. Unsynchronized (Keras's default) over a convolution's channels...
        "batch_norm_conv": [inp(), L.Conv2D(3, 3, strides=2), L.BatchNormalization(momentum=0.5)] + head(),
        # ... synchronized after a ReLU, with a pooling layer behind it ...
        "batch_norm_synchronized": [inp(), L.Conv2D(2, 3, activation="relu"),
                                    L.BatchNormalization(synchronized=True, momentum=0.8),
                                    L.MaxPooling2D(2)] + head(),
        # ... and over a Dense layer's units without gamma and beta, another epsilon and momentum.
        "batch_norm_dense": [inp(), L.Flatten(), L.Dense(12),
                             L.BatchNormalization(center=False, scale=False, epsilon=0.01, momentum=0.9),
                             L.ReLU(), L.Dense(10)],
    }


def write_cases(directory):
    tf, keras = keras_modules()
    write_data(os.path.join(directory, "data"))
    for name, layers in cases(keras).items():
        model = keras.Sequential(layers, name=name)
        with open(os.path.join(directory, name + ".json"), "w") as f:
            f.write(model.to_json())
    print("wrote", ", ".join(cases(keras)))
    return 0


def relative(a, b):
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


def retyped(model_json, dtype):
    """dtlab.model_json with every layer's dtype policy (and the input's dtype) set to `dtype`."""
    config = json.loads(model_json)

    def visit(node):
        if isinstance(node, dict):
            if node.get("class_name") == "DTypePolicy" and isinstance(node.get("config"), dict):
                node["config"]["name"] = dtype
            for key, value in node.items():
                if key == "dtype" and isinstance(value, str):
                    node[key] = dtype
                else:
                    visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)
    visit(config)
    return json.dumps(config)


def cancelled_biases(keras, model):
    """The biases whose gradient is zero in exact arithmetic: a layer without an activation (its
    output is x W + b) followed by BatchNormalization, which in a training pass subtracts the
    batch's mean of each channel, so b cancels from the loss. Both dtlab's and TF's float32
    gradients of such a bias are rounding noise, relative to nothing: {bias path: its layer}."""
    out = {}
    for layer, after in zip(model.layers, model.layers[1:]):
        bias = getattr(layer, "bias", None)
        if after.__class__.__name__ == "BatchNormalization" and bias is not None and \
                getattr(layer, "activation", None) is keras.activations.linear:
            out[bias.path] = layer
    return out


class TFStep:
    """TF's inference pass and training step of the dump's model in one dtype (float32 is what
    dtlab computes; float64 tells dtlab's rounding from TF's own)."""

    def __init__(self, tf, keras, tensors, meta, dtype):
        self.model = model = keras.models.model_from_json(retyped(meta["dtlab.model_json"], dtype))
        # Every variable of every layer from the dump (weights/<layer>/<name>, Keras's variable.path):
        # kernel and bias, gamma and beta, and the non-trainable moving_mean and moving_variance.
        self.missing = []
        for variable in model.weights:
            name = f"weights/{variable.path}"
            if name not in tensors:
                self.missing.append(name)
            elif tuple(variable.shape) != tensors[name].shape:
                raise ValueError(f"{name} has shape {tensors[name].shape}, Keras's {tuple(variable.shape)}")
            else:
                variable.assign(tensors[name].astype(dtype))
        if self.missing:
            return
        images = tensors["batch/images"].astype(dtype)
        images = images.reshape((images.shape[0],) + tuple(model.input_shape[1:]))
        labels = tensors["batch/labels"]
        global_batch = int(meta.get("dtlab.global_batch", len(labels)))
        self.batch_norm = [layer for layer in model.layers if layer.__class__.__name__ == "BatchNormalization"]
        unsynchronized = [layer for layer in self.batch_norm if not layer.synchronized]
        sizes = [int(n) for n in meta.get("dtlab.replica_batch_sizes", str(len(labels))).split(",")]
        if sum(sizes) != len(labels):
            raise ValueError(f"dtlab.replica_batch_sizes {sizes} does not split the batch of {len(labels)}")
        if unsynchronized and len(unsynchronized) != len(self.batch_norm):
            raise ValueError("the model mixes synchronized and unsynchronized BatchNormalization layers")
        # The examples normalized together: each replica's own with unsynchronized
        # BatchNormalization, else the whole batch (what the replicas' summed gradients equal).
        self.per_replica = bool(unsynchronized)
        self.groups = sizes if unsynchronized else [len(labels)]
        offsets = np.concatenate([[0], np.cumsum(self.groups)]).astype(int)
        last = model.layers[-1]
        softmax_output = last.__class__.__name__ == "Softmax" or getattr(last, "activation", None) is \
            keras.activations.softmax

        def inference():  # the model without its final softmax
            outputs = model(images, training=False)
            return (outputs._keras_logits if softmax_output else outputs).numpy().astype(np.float64)
        self.logits = inference()
        self.initial_logits = None
        if self.batch_norm:
            # A control: the same inference pass with Keras's initial moving statistics (0 and 1).
            moving = [(layer.moving_mean, layer.moving_variance) for layer in self.batch_norm]
            self.loaded = [(m.numpy(), v.numpy()) for m, v in moving]
            for m, v in moving:
                m.assign(np.zeros(m.shape, dtype))
                v.assign(np.ones(v.shape, dtype))
            self.initial_logits = inference()
            for (m, v), (mean, variance) in zip(moving, self.loaded):
                m.assign(mean)
                v.assign(variance)
        # The step: per group (one device's whole batch, or each replica's slice),
        # compute_average_loss(per-example, global batch) summed, plus the regularization losses.
        loss_object = keras.losses.SparseCategoricalCrossentropy(from_logits=not softmax_output, reduction=None,
                                                                 dtype=dtype)
        with tf.GradientTape() as tape:
            loss = 0.0
            for begin, end in zip(offsets[:-1], offsets[1:]):
                per_example = loss_object(labels[begin:end], model(images[begin:end], training=True))
                loss += tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
            if model.losses:
                loss += tf.nn.scale_regularization_loss(tf.add_n(model.losses))
        gradients = tape.gradient(loss, model.trainable_variables)
        self.loss = float(loss.numpy())
        self.gradients = {v.path: g.numpy().astype(np.float64) for v, g in zip(model.trainable_variables, gradients)}


def check_dump(path):
    tf, keras = keras_modules()
    tensors, meta = read_safetensors(path)
    if "dtlab.model_json" not in meta:
        print(f"{path}: not a dump of a model from a file (no dtlab.model_json)")
        return 2
    try:
        tf32 = TFStep(tf, keras, tensors, meta, "float32")
        if tf32.missing:
            print(f"{path}: the dump lacks {', '.join(tf32.missing)}")
            return 2
        tf64 = TFStep(tf, keras, tensors, meta, "float64")
    except ValueError as e:
        print(f"{path}: not checked: {e}")
        return 2
    ok = True

    def report(what, ours, tolerance, scale=None):
        """ours against TF's float32 and float64 values: a match within `tolerance` of either (the
        float32 run sums in other orders; where TF's float32 strays, float64 says who is right).
        Relative to the largest of TF's tensor, or to `scale`."""
        nonlocal ok
        ours = np.asarray(ours, np.float64)
        a, b = (tf32, tf64)
        pick = {"logits": lambda t: t.logits, "loss": lambda t: np.float64(t.loss)}.get(what)
        values = [pick(t) if pick else t.gradients[what.split(" ", 1)[1]] for t in (a, b)]
        if scale is None:
            e32, e64, e3264 = relative(ours, values[0]), relative(ours, values[1]), relative(values[0], values[1])
        else:
            def rel(x, y):
                return float(np.abs(x - y).max() / scale)
            e32, e64, e3264 = rel(ours, values[0]), rel(ours, values[1]), rel(values[0], values[1])
        error = min(e32, e64)
        good = error <= tolerance
        ok &= good
        print(f"{'MATCH' if good else 'MISMATCH'}: {what} relative difference {error:.3g} (tolerance {tolerance:g}; "
              f"from TF float32 {e32:.3g}, from TF float64 {e64:.3g}, TF float32 from float64 {e3264:.3g})")

    report("logits", tensors["batch/logits"], LOGITS_TOLERANCE)
    if tf32.batch_norm:
        away = max(max(np.abs(mean).max(), np.abs(variance - 1).max()) for mean, variance in tf32.loaded)
        print(f"MOVING: loaded dtlab's moving_mean and moving_variance of "
              f"{', '.join(layer.name for layer in tf32.batch_norm)} (at most {away:.3g} from the initial 0 and 1); "
              f"the logits with the initial ones instead: relative difference "
              f"{relative(tf32.initial_logits, tf32.logits):.3g}")
        together = f"per replica, {','.join(map(str, tf32.groups))}" if tf32.per_replica else "the whole batch"
        print(f"BATCH: normalized together: {together} ("
              f"{', '.join(f'{layer.name} synchronized={layer.synchronized}' for layer in tf32.batch_norm)})")
    report("loss", tensors["loss"], LOSS_TOLERANCE)
    cancelled = cancelled_biases(keras, tf64.model)
    for name in tf32.gradients:
        ours = tensors[f"gradients/{name}"]
        if name in cancelled:
            # Zero in exact arithmetic (TF's float64 is ~1e-16 of its layer's kernel gradient):
            # rounding noise, compared with that layer's largest gradient.
            layer = cancelled[name]
            scale = max(np.abs(tf64.gradients[v.path]).max() for v in layer.trainable_variables if v.path != name)
            print(f"NOTE: {name} feeds {tf64.model.layers[tf64.model.layers.index(layer) + 1].name} "
                  f"without an activation: its gradient is zero in exact arithmetic (TF float64 "
                  f"{np.abs(tf64.gradients[name]).max():.3g}), rounding noise in float32 (dtlab "
                  f"{np.abs(ours).max():.3g}, TF {np.abs(tf32.gradients[name]).max():.3g}); compared relative to "
                  f"the layer's largest gradient ({scale:.3g})")
            report(f"gradient {name}", ours, GRADIENT_TOLERANCE, scale)
        else:
            report(f"gradient {name}", ours, GRADIENT_TOLERANCE)
    for variable in tf32.model.non_trainable_variables:
        # Not trainable: dtlab's dump holds a gradient of zeros for them, if any.
        name = f"gradients/{variable.path}"
        if name in tensors:
            good = not np.any(tensors[name])
            ok &= good
            print(f"{'MATCH' if good else 'MISMATCH'}: gradient {variable.path} (not trainable) is zero: "
                  f"max |dtlab| {np.abs(tensors[name]).max():.3g}")
    print("RESULT:", "dtlab equals TensorFlow within float32 noise" if ok else "dtlab differs from TensorFlow")
    return 0 if ok else 1


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "write-cases":
        return write_cases(sys.argv[2])
    if len(sys.argv) == 3 and sys.argv[1] == "check-dump":
        return check_dump(sys.argv[2])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
