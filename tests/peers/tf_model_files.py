"""TensorFlow (Keras 3) beside dtlab on models from files (docs/models.md).

  write-cases DIR   writes a crafted data set (DIR/data: 28x28 images whose values repeat, so
                    that pooling windows tie and padding matters) and one Keras model per layer
                    under test (DIR/<case>.json, written by model.to_json()).
  check-dump DUMP   rebuilds the dump's model with keras.models.model_from_json(dtlab.model_json),
                    sets dtlab's weights, and compares with what dtlab computed on the batch:
                    the logits (an inference pass), the loss and every parameter's gradient of
                    one device's step (compute_average_loss with the global batch plus the
                    layers' regularization losses). Prints MATCH or MISMATCH lines; exit 1 on a
                    mismatch.

Float32 noise only: TF's kernels sum in other orders (oneDNN, Eigen), so each value is compared
relative to the largest of its tensor. A final softmax is TF's: the loss is
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


def check_dump(path):
    tf, keras = keras_modules()
    tensors, meta = read_safetensors(path)
    if "dtlab.model_json" not in meta:
        print(f"{path}: not a dump of a model from a file (no dtlab.model_json)")
        return 2
    model = keras.models.model_from_json(meta["dtlab.model_json"])
    for layer in model.layers:
        names = [f"weights/{layer.name}/kernel", f"weights/{layer.name}/bias"]
        if names[0] in tensors:
            layer.set_weights([tensors[n] for n in names])
    images = tensors["batch/images"]
    images = images.reshape((images.shape[0],) + tuple(model.input_shape[1:]))
    labels = tensors["batch/labels"]
    global_batch = len(labels)
    last = model.layers[-1]
    softmax_output = last.__class__.__name__ == "Softmax" or getattr(last, "activation", None) is \
        keras.activations.softmax
    ok = True

    def report(what, error, tolerance):
        nonlocal ok
        good = error <= tolerance
        ok &= good
        print(f"{'MATCH' if good else 'MISMATCH'}: {what} relative difference {error:.3g} (tolerance {tolerance:g})")

    # Logits: the model without its final softmax, in inference.
    outputs = model(images, training=False)
    logits = outputs._keras_logits if softmax_output else outputs
    report("logits", relative(tensors["batch/logits"], logits.numpy()), LOGITS_TOLERANCE)
    # One device's step: compute_average_loss(per-example, global batch) + the regularization losses.
    loss_object = keras.losses.SparseCategoricalCrossentropy(from_logits=not softmax_output, reduction=None)
    with tf.GradientTape() as tape:
        per_example = loss_object(labels, model(images, training=True))
        loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
        if model.losses:
            loss += tf.nn.scale_regularization_loss(tf.add_n(model.losses))
    gradients = tape.gradient(loss, model.trainable_variables)
    report("loss", relative(tensors["loss"], loss.numpy()), LOSS_TOLERANCE)
    for variable, gradient in zip(model.trainable_variables, gradients):
        name = variable.path
        report(f"gradient {name}", relative(tensors[f"gradients/{name}"], gradient.numpy()), GRADIENT_TOLERANCE)
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
