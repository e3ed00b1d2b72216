#!/usr/bin/env python3
"""Regenerates tests/bad_inputs/files/: small crafted data sets and checkpoints,
each broken in one way. The files are committed; rerun this only to change them
(python3 tests/bad_inputs/make_corpus.py). Deterministic."""
import gzip, json, os, shutil, struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "files")


def idx_images(count, rows=28, cols=28, magic=0x00000803, fill=7):
    header = struct.pack(">IIII", magic, count, rows, cols)
    return header + bytes((i * 31 + fill) % 256 for i in range(count * rows * cols))


def idx_labels(count, magic=0x00000801, label=lambda i: i % 10):
    return struct.pack(">II", magic, count) + bytes(label(i) for i in range(count))


def write(dataset, name, data, compress=True):
    path = os.path.join(OUT, dataset, name + (".gz" if compress else ""))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        # mtime=0: the same bytes on every run.
        f.write(gzip.compress(data, mtime=0) if compress else data)


def dataset(name, train_images=None, train_labels=None, test_images=None, test_labels=None, skip=()):
    files = {
        "train-images-idx3-ubyte": train_images if train_images is not None else idx_images(20),
        "train-labels-idx1-ubyte": train_labels if train_labels is not None else idx_labels(20),
        "t10k-images-idx3-ubyte": test_images if test_images is not None else idx_images(10),
        "t10k-labels-idx1-ubyte": test_labels if test_labels is not None else idx_labels(10),
    }
    for base, data in files.items():
        if base in skip:
            continue
        if isinstance(data, tuple):  # (bytes, compress?)
            write(name, base, data[0], compress=data[1])
        else:
            write(name, base, data)


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    dataset("valid")
    dataset("truncated_images", train_images=idx_images(20)[:5000])
    dataset("wrong_image_magic", train_images=idx_images(20, magic=0x00000801))
    dataset("wrong_label_magic", test_labels=idx_labels(10, magic=0x00000803))
    dataset("float_images", train_images=idx_images(20, magic=0x00000D03))
    dataset("label_count_mismatch", train_labels=idx_labels(19))
    dataset("label_out_of_range", train_labels=idx_labels(20, label=lambda i: 12 if i == 5 else i % 10))
    dataset("test_shape_differs", test_images=idx_images(10, rows=27, cols=27))
    dataset("tiny_images", train_images=idx_images(20, rows=2, cols=2), test_images=idx_images(10, rows=2, cols=2))
    dataset("missing_test_labels", skip=("t10k-labels-idx1-ubyte",))
    dataset("not_gzip", train_images=(b"this is not a gzip stream at all" * 4, False))
    dataset("empty_labels", train_labels=b"")
    dataset("header_only", train_images=struct.pack(">IIII", 0x00000803, 20, 28, 28))
    dataset("zero_images", train_images=idx_images(0), train_labels=idx_labels(0))
    dataset("huge_count", train_images=struct.pack(">IIII", 0x00000803, 0x7FFFFFFF, 28, 28) + b"\0" * 64)
    with open(os.path.join(OUT, "not_gzip", "train-images-idx3-ubyte.gz"), "wb") as f:
        f.write(b"this is not a gzip stream at all" * 4)
    corrupt = gzip.compress(idx_images(20), mtime=0)
    write("corrupt_gzip", "train-images-idx3-ubyte", b"", compress=False)
    dataset("corrupt_gzip")
    with open(os.path.join(OUT, "corrupt_gzip", "train-images-idx3-ubyte.gz"), "wb") as f:
        f.write(corrupt[: len(corrupt) // 2])

    # Checkpoint directories (the pointer file is TensorFlow's text format; docs/checkpoints.md).
    ck = os.path.join(OUT, "checkpoints")
    os.makedirs(os.path.join(ck, "pointer_garbage"), exist_ok=True)
    with open(os.path.join(ck, "pointer_garbage", "checkpoint"), "w") as f:
        f.write("model_checkpoint_path ckpt-1 with no quotes\n")
    os.makedirs(os.path.join(ck, "pointer_to_missing"), exist_ok=True)
    with open(os.path.join(ck, "pointer_to_missing", "checkpoint"), "w") as f:
        f.write('model_checkpoint_path: "ckpt-7.safetensors"\nall_model_checkpoint_paths: "ckpt-7.safetensors"\n')
    os.makedirs(os.path.join(ck, "not_safetensors"), exist_ok=True)
    with open(os.path.join(ck, "not_safetensors", "checkpoint"), "w") as f:
        f.write('model_checkpoint_path: "ckpt-1.safetensors"\nall_model_checkpoint_paths: "ckpt-1.safetensors"\n')
    with open(os.path.join(ck, "not_safetensors", "ckpt-1.safetensors"), "wb") as f:
        f.write(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all}")
    os.makedirs(os.path.join(ck, "header_too_long"), exist_ok=True)
    with open(os.path.join(ck, "header_too_long", "checkpoint"), "w") as f:
        f.write('model_checkpoint_path: "ckpt-1.safetensors"\nall_model_checkpoint_paths: "ckpt-1.safetensors"\n')
    with open(os.path.join(ck, "header_too_long", "ckpt-1.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", 1 << 40) + b"{}")
    os.makedirs(os.path.join(ck, "empty_file"), exist_ok=True)
    with open(os.path.join(ck, "empty_file", "checkpoint"), "w") as f:
        f.write('model_checkpoint_path: "ckpt-1.safetensors"\nall_model_checkpoint_paths: "ckpt-1.safetensors"\n')
    open(os.path.join(ck, "empty_file", "ckpt-1.safetensors"), "wb").close()
    models()


def model_file(name, layers, model_class="Sequential", text=None):
    """A Keras model.to_json() text (Keras 3's layout, fields left at their defaults)."""
    path = os.path.join(OUT, "models", name + ".json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if text is None:
        text = json.dumps({"module": "keras", "class_name": model_class,
                           "config": {"name": "sequential", "layers": layers}}, indent=1)
    with open(path, "w") as f:
        f.write(text)


def layer(class_name, name, **config):
    return {"module": "keras.layers", "class_name": class_name, "config": dict(name=name, **config)}


def models():
    """Model files dtlab refuses (docs/models.md); the data set is valid (28x28x1, 10 classes)."""
    inp = layer("InputLayer", "input_layer", batch_shape=[None, 28, 28, 1])
    flat, out = layer("Flatten", "flatten"), layer("Dense", "dense", units=10)
    conv = lambda **c: layer("Conv2D", "conv2d", **dict(dict(filters=4, kernel_size=[3, 3]), **c))
    model_file("deep_nesting", None, text="[" * 100000)
    model_file("not_json", None, text='{"class_name": "Sequential", "config": {"layers": [')
    model_file("functional", [inp, flat, out], model_class="Functional")
    model_file("unknown_layer", [inp, layer("LSTM", "lstm", units=8), out])
    model_file("batch_normalization", [inp, conv(), layer("BatchNormalization", "batch_normalization", renorm=True),
                                       flat, out])
    model_file("l1_regularizer", [inp, flat, layer("Dense", "dense", units=10, kernel_regularizer={
        "module": "keras.regularizers", "class_name": "L1", "config": {"l1": 0.01}})])
    model_file("dilated", [inp, conv(dilation_rate=[2, 2]), flat, out])
    model_file("grouped", [inp, conv(groups=2), flat, out])
    model_file("channels_first", [inp, conv(data_format="channels_first"), flat, out])
    model_file("no_input", [flat, out])
    model_file("huge_filters", [inp, conv(filters=1 << 40), flat, out])
    model_file("huge_activations", [inp, conv(filters=1 << 24, kernel_size=[1, 1]), flat, out])
    model_file("huge_parameters", [inp, flat, layer("Dense", "wide", units=1 << 24), out])
    model_file("path_name", [inp, layer("Flatten", "../../x"), out])
    model_file("duplicate_names", [inp, layer("Flatten", "dense"), out])
    model_file("wrong_input", [layer("InputLayer", "input_layer", batch_shape=[None, 32, 32, 1]), flat, out])
    model_file("image_output", [inp, conv()])
    model_file("too_many_layers", [inp] + [layer("ReLU", "re_lu_%d" % i) for i in range(300)] + [flat, out])
    model_file("dropout_rate", [inp, flat, layer("Dropout", "dropout", rate=2.0), out])
    model_file("strided", [inp, conv(strides=[2, 2]), flat, out])


if __name__ == "__main__":
    main()
