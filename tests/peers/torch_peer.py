#!/usr/bin/python3
"""PyTorch peer for dtlab: the same seed-cnn model, used as a reference, never a dependency.

  torch_peer.py check-dump STEP.safetensors   recompute a `dtlab train --dump-step` file's loss and
                                              gradients in float64 and compare (exit 1 on mismatch)
  torch_peer.py train --batch 64 --threads 2  time one epoch of Fashion-MNIST training (JSON on stdout)

Layouts: dtlab stores Keras layouts (NHWC activations, HWIO conv kernels, [in, out] dense kernels);
this script converts them to PyTorch's and flattens in NHWC order as Keras does.
Run it with the system Python (/usr/bin/python3), where Debian's python3-torch lives.
"""
import argparse
import gzip
import json
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

from safetensors_file import read_safetensors  # noqa: E402  (tests/peers, beside this script)
L2 = 1e-5
SEED_CNN = ["conv2d", "conv2d_1", "dense", "dense_1"]


def seed_cnn_loss(weights, images, labels):
    """The tutorial's loss on one device: compute_average_loss(CE, global batch) + L2 of every kernel."""
    x = images.permute(0, 3, 1, 2)  # NHWC -> NCHW
    for conv in ("conv2d", "conv2d_1"):
        k = weights[conv + "/kernel"].permute(3, 2, 0, 1)  # HWIO -> OIHW
        x = F.max_pool2d(F.relu(F.conv2d(x, k, weights[conv + "/bias"])), 2)
    x = x.permute(0, 2, 3, 1).reshape(x.shape[0], -1)  # Keras Flatten order (h, w, c)
    x = F.relu(x @ weights["dense/kernel"] + weights["dense/bias"])
    logits = x @ weights["dense_1/kernel"] + weights["dense_1/bias"]
    per_example = F.cross_entropy(logits, labels, reduction="none")
    data_loss = per_example.sum() / images.shape[0]
    reg = sum(L2 * (weights[n + "/kernel"] ** 2).sum() for n in SEED_CNN)
    return data_loss + reg


def check_dump(path):
    tensors, meta = read_safetensors(path)
    if meta.get("dtlab.model") != "seed-cnn":
        print(f"only seed-cnn dumps are supported, got {meta.get('dtlab.model')}", file=sys.stderr)
        return 2
    def gradients(dtype):
        weights = {k[len("weights/"):]: torch.tensor(v, dtype=dtype, requires_grad=True)
                   for k, v in tensors.items() if k.startswith("weights/")}
        images = torch.tensor(tensors["batch/images"], dtype=dtype)
        labels = torch.tensor(tensors["batch/labels"], dtype=torch.int64)
        loss = seed_cnn_loss(weights, images, labels)
        loss.backward()
        return loss.item(), {name: w.grad.numpy().astype(np.float64) for name, w in weights.items()}

    # float64 is the reference; PyTorch's own float32 error says how much float32 rounding to expect.
    loss64, ref = gradients(torch.float64)
    _, torch32 = gradients(torch.float32)
    ok = True
    print(f"{'gradient':18s} {'dtlab err':>10s} {'torch32 err':>12s}   (max |g - g64| / max |g64|)")
    for name, g64 in ref.items():
        scale = max(np.abs(g64).max(), 1e-30)
        ours = np.abs(tensors["gradients/" + name].astype(np.float64) - g64).max() / scale
        theirs = np.abs(torch32[name] - g64).max() / scale
        # Within 1e-5 of float64, or no worse than 8x PyTorch's own float32 rounding.
        good = ours < 1e-5 or ours <= 8 * theirs
        ok &= good
        print(f"{name:18s} {ours:10.2e} {theirs:12.2e}   {'ok' if good else 'TOO FAR'}")
    loss_rel = abs(float(tensors["loss"]) - loss64) / abs(loss64)
    ok &= loss_rel < 1e-5
    print(f"step {meta.get('dtlab.step')}: loss dtlab {float(tensors['loss']):.9g}, torch float64 {loss64:.9g} "
          f"(relative difference {loss_rel:.2e})")
    print("MATCH" if ok else "MISMATCH")
    return 0 if ok else 1


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def train(args):
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    d = args.data
    images = torch.tensor(read_idx(f"{d}/train-images-idx3-ubyte.gz"), dtype=torch.float32).div_(255.0).unsqueeze(1)
    labels = torch.tensor(read_idx(f"{d}/train-labels-idx1-ubyte.gz"), dtype=torch.int64)
    if args.model == "batch-norm-cnn":
        # scenarios/models/batch-norm-cnn.json: Keras's BatchNormalization defaults are
        # epsilon 1e-3 and momentum 0.99 (PyTorch's momentum is 1 - Keras's); no regularizer.
        model = torch.nn.Sequential(
            torch.nn.Conv2d(1, 8, 3), torch.nn.ReLU(), torch.nn.BatchNorm2d(8, eps=1e-3, momentum=0.01),
            torch.nn.MaxPool2d(2), torch.nn.Dropout(0.25), torch.nn.Flatten(), torch.nn.Linear(8 * 13 * 13, 32),
            torch.nn.BatchNorm1d(32, eps=1e-3, momentum=0.01), torch.nn.ReLU(), torch.nn.Linear(32, 10))
        l2 = 0.0
    else:
        model = torch.nn.Sequential(
            torch.nn.Conv2d(1, 32, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(32, 64, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Flatten(), torch.nn.Linear(1600, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
        l2 = L2
    model.train()
    device = torch.device(args.device)
    model = model.to(device)
    images, labels = images.to(device), labels.to(device)
    kernels = [m.weight for m in model if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
    n = images.shape[0] if args.steps <= 0 else min(images.shape[0], args.steps * args.batch)
    order = torch.randperm(images.shape[0])[:n].to(device)
    start = time.perf_counter()
    for begin in range(0, n, args.batch):
        idx = order[begin:begin + args.batch]
        x, y = images[idx], labels[idx]
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y, reduction="sum") / args.batch
        if l2:
            loss = loss + l2 * sum((k * k).sum() for k in kernels)
        loss.backward()
        optimizer.step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    print(json.dumps({"peer": f"pytorch {torch.__version__}", "model": args.model, "device": args.device,
                      "batch": args.batch,
                      "threads": args.threads,
                      "images": n, "seconds": seconds, "images_per_second": n / seconds,
                      "seconds_per_epoch": seconds * images.shape[0] / n}))
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check-dump", help="compare a --dump-step file with PyTorch in float64")
    c.add_argument("path")
    t = sub.add_parser("train", help="time training on Fashion-MNIST (seed-cnn, or --model batch-norm-cnn)")
    t.add_argument("--batch", type=int, default=64)
    t.add_argument("--threads", type=int, default=2)
    t.add_argument("--steps", type=int, default=0, help="stop after this many steps (0: one epoch)")
    t.add_argument("--seed", type=int, default=1)
    t.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    t.add_argument("--device", default="cpu", help="cpu, or cuda for the GPU (bench/gpu_throughput.sh)")
    t.add_argument("--model", default="seed-cnn", choices=["seed-cnn", "batch-norm-cnn"],
                   help="seed-cnn, or scenarios/models/batch-norm-cnn.json's BatchNormalization + Dropout model")
    args = parser.parse_args()
    return check_dump(args.path) if args.command == "check-dump" else train(args)


if __name__ == "__main__":
    sys.exit(main())
