"""Reads a safetensors file into torch tensors, for the examples' PyTorch references (torch alone: the
safetensors package is not needed). The format: a little-endian u64 header length, a JSON header naming each
tensor's dtype, shape and byte range (and an optional __metadata__ of strings), then the raw little-endian data.
"""
import json
import os
import struct
import sys

import torch

DTYPES = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64}


def read_safetensors(path):
    """({name: tensor}, metadata). A file that cannot be read, or a dtype other than F32, F64 and I64, ends the
    program with exit status 2 and one line naming the file."""
    prog = os.path.basename(sys.argv[0])
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as e:
        print(f"{prog}: cannot read {path}: {e.strerror}", file=sys.stderr)
        sys.exit(2)
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = blob[8 + n:]
    tensors = {}
    for name, h in header.items():
        begin, end = h["data_offsets"]
        if h["dtype"] not in DTYPES:
            print(f"{prog}: {path}: {name} has dtype {h['dtype']}", file=sys.stderr)
            sys.exit(2)
        t = torch.frombuffer(bytearray(data[begin:end]), dtype=DTYPES[h["dtype"]]) if end > begin else \
            torch.empty(0, dtype=DTYPES[h["dtype"]])
        tensors[name] = t.reshape(h["shape"]).clone()
    return tensors, meta
