"""Reads a safetensors file (a dtlab checkpoint or --dump-step file) into NumPy arrays.

Shared by the peers (torch_peer.py, tf_peer.py); they run under different Pythons,
so it needs NumPy only.
"""
import json
import struct

import numpy as np

DTYPES = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64, "U8": np.uint8}


def read_safetensors(path):
    """Returns ({name: array}, metadata dict)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        tensors[name] = np.frombuffer(body[begin:end], dtype=DTYPES[info["dtype"]]).reshape(info["shape"])
    return tensors, meta
