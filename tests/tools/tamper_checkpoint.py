#!/usr/bin/env python3
"""Rewrites a dtlab checkpoint the way a hostile or buggy writer could, for the
hardening tests (tests/cli/hostile_checkpoints.sh).

  tamper_checkpoint.py FILE set NAME=VALUE...   scalar tensors get new values; the
                                                CRCs are recomputed, so the file
                                                is intact and only its numbers lie
  tamper_checkpoint.py FILE deep-header DEPTH   a tensor description gains an
                                                "extra" key nested DEPTH lists deep

Standard library only (it runs under any python3).
"""
import json
import struct
import sys
import zlib

FORMATS = {"F32": "<f", "I64": "<q"}


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + n]), bytearray(data[8 + n:])


def write(path, header, body):
    meta = header.setdefault("__metadata__", {})
    meta["dtlab.crc32"] = "%08x" % zlib.crc32(bytes(body))
    meta.pop("dtlab.header_crc32", None)
    # The header CRC covers the header as nlohmann::json dumps it: keys sorted, no spaces.
    canonical = json.dumps(header, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    meta["dtlab.header_crc32"] = "%08x" % zlib.crc32(canonical.encode())
    text = json.dumps(header, separators=(",", ":")).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + bytes(body))


def main(argv):
    path, action, args = argv[1], argv[2], argv[3:]
    header, body = read(path)
    if action == "set":
        for assignment in args:
            name, value = assignment.split("=", 1)
            info = header[name]
            begin, end = info["data_offsets"]
            fmt = FORMATS[info["dtype"]]
            number = float(value) if info["dtype"] == "F32" else int(value) if value.lstrip("-").isdigit() else int(float(value))
            body[begin:end] = struct.pack(fmt, number)
        write(path, header, body)
    elif action == "deep-header":
        depth = int(args[0])
        name = next(k for k in header if k != "__metadata__")
        text = json.dumps(header, separators=(",", ":"))
        marker = '"%s":{' % name
        nested = '"extra":' + "[" * depth + "]" * depth + ","
        text = text.replace(marker, marker + nested, 1).encode()
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text + bytes(body))
    else:
        sys.exit("unknown action " + action)


if __name__ == "__main__":
    main(sys.argv)
