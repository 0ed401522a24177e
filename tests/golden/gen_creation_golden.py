#!/usr/bin/env python3
"""Writes creation_golden.json beside this script: PyTorch's deterministic creation ops, for
tests/test_creation_random.cpp to compare minidl's with, element by element.

- arange: start, end, step (ints or floats as written; JSON keeps 5 and 5.0 apart) with a dtype or none (the
  inferred dtype is recorded), including integral dtypes given fractional bounds (PyTorch truncates).
- linspace, logspace (several bases): steps 0, 1, 2, odd and even counts, ascending and descending, for every
  dtype but bool.
- full (dtype inferred from the value, or given), eye (square, wide, tall, empty), fill_diagonal_ (square, tall
  with and without wrap, 3-d cube).

Values are written as Python numbers: bfloat16 and float16 values through float (exact), integers as ints, bool
as 0 / 1. Random ops are not here: they are tested statistically, not against PyTorch's streams.

Run where PyTorch is installed:  python3 tests/golden/gen_creation_golden.py
"""
import json
import os

import torch

DTYPES = {
    "float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16, "float16": torch.float16,
    "int64": torch.int64, "int32": torch.int32, "uint8": torch.uint8, "bool": torch.bool,
}
NAMES = {v: k for k, v in DTYPES.items()}


def values(t):
    t = t.reshape(-1)
    if t.dtype == torch.bool:
        return [int(v) for v in t.tolist()]
    if t.dtype.is_floating_point:
        return [float(v) for v in t.to(torch.float64).tolist()]
    return [int(v) for v in t.tolist()]


def arange_cases():
    rows = []
    cases = [
        (0, 5, 1, None), (0.0, 5, 1, None), (1, 2, 0.25, None), (-3, 4, 2, None), (10, 0, -3, None),
        (0, 1, 0.1, "float32"), (0, 1, 0.1, "float64"), (-1.5, 2.5, 0.5, "bfloat16"), (-1.5, 2.5, 0.5, "float16"),
        (0.5, 5, 1.5, "int64"), (-3, 4, 1.7, "int32"), (-3.5, 4, 1.7, "int32"), (0, 250, 7, "uint8"),
        (5, 5, 1, "int64"), (0, 1, 0.3, "float32"), (2, -2.5, -0.5, "float32"), (0, 10, 3, "float64"),
    ]
    for start, end, step, dtype in cases:
        t = torch.arange(start, end, step, dtype=DTYPES[dtype]) if dtype else torch.arange(start, end, step)
        rows.append({"start": start, "end": end, "step": step, "dtype": dtype, "result_dtype": NAMES[t.dtype],
                     "values": values(t)})
    return rows


def spaced_cases(fn, with_base):
    rows = []
    bounds = [(0, 1), (-2.5, 3.75), (10, -10), (0.1, 0.7), (3, 3), (-7, 250)]
    bases = [10.0, 2.0, 0.5] if with_base else [None]
    for name, dtype in DTYPES.items():
        if dtype == torch.bool:
            continue
        for start, end in bounds:
            if dtype == torch.uint8 and (start < 0 or end < 0):
                continue
            for steps in (0, 1, 2, 5, 8, 101):
                for base in bases:
                    if with_base and dtype in (torch.uint8, torch.int32, torch.int64) and abs(end) > 3:
                        continue
                    if with_base and dtype in (torch.float16, torch.bfloat16) and max(abs(start), abs(end)) > 3:
                        continue
                    try:
                        t = fn(start, end, steps, base=base, dtype=dtype) if with_base else fn(start, end, steps,
                                                                                                  dtype=dtype)
                    except RuntimeError:  # a dtype this PyTorch version lacks the kernel for (logspace in float16)
                        continue
                    if t.is_floating_point() and not bool(torch.isfinite(t).all()):
                        continue  # JSON has no infinity; overflow is not what this checks
                    row = {"start": start, "end": end, "steps": steps, "dtype": name, "values": values(t)}
                    if with_base:
                        row["base"] = base
                    rows.append(row)
    return rows


def full_cases():
    rows = []
    for value, dtype in ((1.5, None), (7, None), (True, None), (-3, "int32"), (2.75, "float16"), (2.75, "bfloat16"),
                         (200, "uint8"), (0.5, "float64"), (1, "bool"), (-2.5, "int64")):
        t = torch.full((2, 3), value, dtype=DTYPES[dtype]) if dtype else torch.full((2, 3), value)
        rows.append({"shape": [2, 3], "value": value, "dtype": dtype, "result_dtype": NAMES[t.dtype],
                     "values": values(t)})
    return rows


def eye_cases():
    rows = []
    for n, m in ((3, None), (1, None), (0, None), (2, 5), (5, 2), (4, 0)):
        for name, dtype in DTYPES.items():
            try:
                t = torch.eye(n, dtype=dtype) if m is None else torch.eye(n, m, dtype=dtype)
            except RuntimeError:  # a dtype this PyTorch version lacks the kernel for (eye in bfloat16)
                continue
            rows.append({"n": n, "m": m, "dtype": name, "shape": list(t.shape), "values": values(t)})
    return rows


def fill_diagonal_cases():
    rows = []
    for shape, wrap in (([3, 3], False), ([7, 3], False), ([7, 3], True), ([8, 3], True), ([3, 5], True),
                        ([3, 3, 3], False), ([4, 4], True)):
        t = torch.arange(float(torch.Size(shape).numel())).reshape(shape)
        t.fill_diagonal_(-1.5, wrap=wrap)
        rows.append({"shape": shape, "value": -1.5, "wrap": wrap, "values": values(t)})
    return rows


def main():
    golden = {
        "torch_version": torch.__version__,
        "arange": arange_cases(),
        "linspace": spaced_cases(torch.linspace, False),
        "logspace": spaced_cases(torch.logspace, True),
        "full": full_cases(),
        "eye": eye_cases(),
        "fill_diagonal": fill_diagonal_cases(),
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "creation_golden.json")
    with open(path, "w") as f:
        json.dump(golden, f, indent=None, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
