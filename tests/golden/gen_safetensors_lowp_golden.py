#!/usr/bin/env python3
"""BF16 and F16 safetensors files between PyTorch and minidl (tests/test_safetensors_lowp.cpp), both ways.

Write (no argument): lowp_torch.safetensors beside this script, written by PyTorch (safetensors.torch.save_file,
or this script's own writer where the safetensors package is missing; the file's metadata says which). It holds
float32 values ("f32_source": random values over float16's and bfloat16's whole ranges, subnormals, signed
zeros, infinities, NaN, halfway cases) and PyTorch's conversions of them ("bf16", "f16"), a matrix and its
transpose in each dtype, 0-d and empty tensors, and bit patterns spread over all 65536 ("bf16_bits", "f16_bits").
minidl's test reads the file and checks every element bitwise against its own conversions of "f32_source".

Check (--check FILE): FILE is the file minidl's test SafetensorsLowp.WritesAFileTorchLoads writes where
MINIDL_LOWP_SAFETENSORS_OUT points. PyTorch loads it and the script checks every element bitwise: all 65536 bit
patterns of each dtype, minidl's conversions of "f32_source" against PyTorch's, a transposed view written in
row-major order, 0-d and empty tensors.

Run where PyTorch is installed:
  python3 tests/golden/gen_safetensors_lowp_golden.py
  MINIDL_LOWP_SAFETENSORS_OUT=/tmp/lowp.safetensors build/tests/test_safetensors_lowp
  python3 tests/golden/gen_safetensors_lowp_golden.py --check /tmp/lowp.safetensors
"""
import json
import os
import struct
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "lowp_torch.safetensors")
DTYPES = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32, "F64": torch.float64,
          "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "U8": torch.uint8, "BOOL": torch.bool}
NAMES = {v: k for k, v in DTYPES.items()}


def have_safetensors():
    try:
        import safetensors.torch  # noqa: F401
        return True
    except ImportError:
        return False


def load(path):
    """The file's tensors by name: through safetensors.torch where installed, else parsed here (json + struct)."""
    if have_safetensors():
        from safetensors.torch import load_file
        return load_file(path)
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        raw = bytearray(data[base + begin:base + end])
        dtype = DTYPES[entry["dtype"]]
        t = torch.frombuffer(raw, dtype=dtype) if raw else torch.empty(0, dtype=dtype)
        out[name] = t.reshape(entry["shape"])
    return out


def save(tensors, path, metadata):
    """safetensors.torch.save_file where installed, else the format written here (json + struct)."""
    if have_safetensors():
        from safetensors.torch import save_file
        save_file(tensors, path, metadata=metadata)
        return
    header, chunks, offset = {"__metadata__": metadata}, [], 0
    for name, t in tensors.items():
        raw = t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def bits(t):
    """The 16-bit patterns of a bf16 / f16 tensor as int32 in [0, 65536)."""
    return t.contiguous().view(torch.int16).to(torch.int32) & 0xFFFF


def same_bits(a, b, what):
    """a and b (one 16-bit dtype) agree bitwise, NaN with any payload matching NaN."""
    assert a.dtype == b.dtype and a.shape == b.shape, \
        f"{what}: {a.dtype} {tuple(a.shape)} vs {b.dtype} {tuple(b.shape)}"
    nan = torch.isnan(a.float())
    assert torch.equal(nan, torch.isnan(b.float())), f"{what}: NaN positions differ"
    diff = (bits(a) != bits(b)) & ~nan
    assert not diff.any(), f"{what}: {int(diff.sum())} elements differ, first at {int(diff.nonzero()[0][0])}"


def sources():
    gen = torch.Generator().manual_seed(20261204)
    specials = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1.0, -1.0,
                             65504.0, 65519.99, 65520.0, -65520.0, 6.103515625e-05, 5.960464477539063e-08,
                             2.98e-08, 2.9802322387695312e-08, 1e-45, 1.17549435e-38, 3.3895313892515355e+38,
                             3.4028234663852886e+38, 1.00390625, 1.001953125, 1.0009765625, 0.1, -0.3333333],
                            dtype=torch.float32)
    exponents = torch.randint(-30, 30, (200,), generator=gen).float()
    spread = torch.randn(200, generator=gen) * torch.pow(2.0, exponents)
    wide = torch.randn(100, generator=gen) * torch.pow(2.0, torch.randint(-130, 128, (100,), generator=gen).float())
    return torch.cat([specials, spread, wide.float()])


def write():
    f32 = sources()
    gen = torch.Generator().manual_seed(7)
    m = torch.randn(3, 5, generator=gen)
    pattern = torch.arange(0, 65536, 251, dtype=torch.int32)
    pattern16 = torch.where(pattern >= 32768, pattern - 65536, pattern).to(torch.int16)
    tensors = {
        "f32_source": f32,
        "bf16": f32.to(torch.bfloat16),
        "f16": f32.to(torch.float16),
        "bf16_matrix": m.to(torch.bfloat16),
        "bf16_matrix_t": m.t().contiguous().to(torch.bfloat16),
        "f16_matrix": m.to(torch.float16),
        "f16_matrix_t": m.t().contiguous().to(torch.float16),
        "bf16_scalar": torch.tensor(-2.5, dtype=torch.bfloat16),
        "f16_scalar": torch.tensor(0.333, dtype=torch.float16),
        "bf16_empty": torch.empty(2, 0, dtype=torch.bfloat16),
        "f16_empty": torch.empty(0, 4, dtype=torch.float16),
        "bf16_bits": pattern16.view(torch.bfloat16).clone(),  # save_file refuses tensors sharing memory
        "f16_bits": pattern16.view(torch.float16).clone(),
        "matrix_f32": m,
    }
    writer = "safetensors.torch.save_file" if have_safetensors() else "own writer (json + struct)"
    metadata = {"generator": "tests/golden/gen_safetensors_lowp_golden.py", "torch": torch.__version__,
                "writer": writer}
    save(tensors, OUT + ".tmp", metadata)
    os.replace(OUT + ".tmp", OUT)
    back = load(OUT)  # the file reads back as written
    for name, t in tensors.items():
        assert back[name].dtype == t.dtype and back[name].shape == t.shape, name
        assert torch.equal(back[name].reshape(-1).view(torch.uint8), t.reshape(-1).view(torch.uint8)), name
    print(f"wrote {OUT} ({writer}, torch {torch.__version__})")


def check(path):
    t = load(path)
    expected = {"f32_source": ((-1,), torch.float32), "bf16": ((-1,), torch.bfloat16), "f16": ((-1,), torch.float16),
                "bf16_bits": ((65536,), torch.bfloat16), "f16_bits": ((65536,), torch.float16),
                "bf16_t": ((5, 3), torch.bfloat16), "f16_t": ((5, 3), torch.float16),
                "t_source": ((5, 3), torch.float32), "bf16_scalar": ((), torch.bfloat16),
                "f16_scalar": ((), torch.float16), "bf16_empty": ((0, 3), torch.bfloat16),
                "f16_empty": ((2, 0), torch.float16)}
    assert set(t) == set(expected), f"tensors {sorted(t)}, expected {sorted(expected)}"
    for name, (shape, dtype) in expected.items():
        assert t[name].dtype == dtype, f"{name}: dtype {t[name].dtype}, expected {dtype}"
        if shape != (-1,):
            assert tuple(t[name].shape) == shape, f"{name}: shape {tuple(t[name].shape)}, expected {shape}"
    everything = torch.arange(65536, dtype=torch.int32)
    assert torch.equal(bits(t["bf16_bits"]), everything), "bf16_bits: not the 65536 patterns in order"
    assert torch.equal(bits(t["f16_bits"]), everything), "f16_bits: not the 65536 patterns in order"
    src = t["f32_source"]
    same_bits(t["bf16"], src.to(torch.bfloat16), "bf16 (minidl's conversion of f32_source)")
    same_bits(t["f16"], src.to(torch.float16), "f16 (minidl's conversion of f32_source)")
    same_bits(t["bf16_t"], t["t_source"].to(torch.bfloat16), "bf16_t (a transposed view, row-major in the file)")
    same_bits(t["f16_t"], t["t_source"].to(torch.float16), "f16_t")
    assert t["bf16_scalar"].item() == -2.5 and t["f16_scalar"].item() == 0.5, "the 0-d tensors"
    print(f"{path}: {len(t)} tensors, every element as PyTorch expects")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        check(sys.argv[2])
    elif len(sys.argv) == 1:
        write()
    else:
        sys.exit(__doc__)
