#!/usr/bin/env python3
"""Writes dtype_golden.json beside this script: PyTorch's type promotion and dtype conversions, for
tests/test_dtype_golden.cpp to compare minidl's with, bitwise.

- promotion: torch.result_type for every pair of minidl's eight dtypes, the second operand a 1-d tensor or a
  0-d tensor, and for each dtype with a Python bool, int and float scalar.
- conversions: float32 values (edge cases and random bit patterns, no NaN) to bfloat16 and float16 (the bits),
  float64 values to bfloat16 and float16 (through PyTorch's own path), and float64 values to int64, int32,
  uint8 (negative values wrap) and bool.

Run where PyTorch is installed:  python3 tests/golden/gen_dtype_golden.py
"""
import json
import os
import struct

import torch

DTYPES = {
    "float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16, "float16": torch.float16,
    "int64": torch.int64, "int32": torch.int32, "uint8": torch.uint8, "bool": torch.bool,
}
NAMES = {v: k for k, v in DTYPES.items()}


def promotion():
    rows = []
    for a, ta in DTYPES.items():
        x = torch.zeros(2, dtype=ta)
        for b, tb in DTYPES.items():
            rows.append({"a": a, "b": b, "b_kind": "tensor", "result": NAMES[torch.result_type(x, torch.zeros(2, dtype=tb))]})
            rows.append({"a": a, "b": b, "b_kind": "zero_dim", "result": NAMES[torch.result_type(x, torch.zeros((), dtype=tb))]})
        for kind, s in (("bool", True), ("int", 3), ("float", 2.5)):
            rows.append({"a": a, "b": kind, "b_kind": "scalar", "result": NAMES[torch.result_type(x, s)]})
    return rows


def float32_inputs():
    edges = [0.0, -0.0, 1.0, -1.0, 1.5, 65504.0, 65519.99, 65520.0, 70000.0, 3.0e38, float("inf"), float("-inf"),
             2.0 ** -14, 2.0 ** -24, 2.0 ** -25, 2.0 ** -26, 1.0e-40, 1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11,
             1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, 3.140625, -0.1, 1.0e-5]
    bits = [struct.unpack("<I", struct.pack("<f", v))[0] for v in edges]
    g = torch.Generator().manual_seed(12)
    for u in torch.randint(0, 2 ** 32, (4000,), generator=g, dtype=torch.int64).tolist():
        if (u & 0x7F800000) == 0x7F800000 and (u & 0x7FFFFF) != 0:
            continue  # NaN payloads: minidl's host and device conversions agree with PyTorch's only up to NaN-ness
        bits.append(u)
    return bits


def conversions():
    bits = float32_inputs()
    f32 = torch.tensor(bits, dtype=torch.int64).to(torch.int32).view(torch.float32)
    out = {"float32_bits": bits}
    out["bfloat16_bits"] = [v & 0xFFFF for v in f32.to(torch.bfloat16).view(torch.int16).tolist()]
    out["float16_bits"] = [v & 0xFFFF for v in f32.to(torch.float16).view(torch.int16).tolist()]
    g = torch.Generator().manual_seed(13)
    f64 = torch.cat([torch.randn(500, generator=g, dtype=torch.float64) * 1000,
                     torch.tensor([1.0 + 2.0 ** -9 + 2.0 ** -40, 1.0 + 2.0 ** -12 + 2.0 ** -40, 65519.999999,
                                   -2.5, 300.75, -300.75, 255.5, 0.0], dtype=torch.float64)])
    out["float64"] = f64.tolist()
    out["float64_to_bfloat16_bits"] = [v & 0xFFFF for v in f64.to(torch.bfloat16).view(torch.int16).tolist()]
    out["float64_to_float16_bits"] = [v & 0xFFFF for v in f64.to(torch.float16).view(torch.int16).tolist()]
    out["float64_to_int64"] = f64.to(torch.int64).tolist()
    out["float64_to_int32"] = f64.to(torch.int32).tolist()
    out["float64_to_uint8"] = f64.to(torch.uint8).tolist()
    out["float64_to_bool"] = f64.to(torch.bool).tolist()
    return out


def main():
    golden = {"torch_version": torch.__version__, "promotion": promotion(), "conversions": conversions()}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dtype_golden.json")
    with open(path, "w") as f:
        json.dump(golden, f)
    print(f"wrote {path} (PyTorch {torch.__version__})")


if __name__ == "__main__":
    main()
