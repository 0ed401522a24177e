#!/usr/bin/env python3
"""Writes upsample_pad_golden.json beside this script: PyTorch's results for minidl's F::pad (every mode),
F::interpolate (nearest, linear, bilinear with and without align_corners, size or scale_factor, with and without
recompute_scale_factor) and pixel_shuffle / pixel_unshuffle, for tests/test_upsample_pad.cpp to compare with element
by element.

Each case names the op and its parameters, and holds the input, PyTorch's output, a random gradient of the output
and PyTorch's gradient of the input. Inputs are multiples of 1/8. A tensor is {"dtype", "shape", "values" (flat,
row-major)}.

Run where PyTorch is installed:  python3 tests/golden/gen_upsample_pad_golden.py
"""
import json
import os

import torch
import torch.nn.functional as F

GEN = torch.Generator().manual_seed(42)
DTYPES = {"float32": torch.float32, "float64": torch.float64}
NAMES = {v: k for k, v in DTYPES.items()}


def make(shape, dtype):
    return (torch.randint(-16, 16, shape, generator=GEN).double() / 8).to(DTYPES[dtype])


def enc(t):
    t = t.detach()
    return {"dtype": NAMES[t.dtype], "shape": list(t.shape), "values": [float(v) for v in t.reshape(-1).tolist()]}


CASES = []


def case(op, params, x, fn):
    leaf = x.clone().requires_grad_(True)
    out = fn(leaf)
    r = torch.randn(out.shape, generator=GEN, dtype=torch.float64).to(out.dtype)
    (grad,) = torch.autograd.grad(out, [leaf], r)
    CASES.append({"op": op, "params": params, "input": enc(x), "output": enc(out), "grad_output": enc(r),
                  "grad": enc(grad)})


def pad(shape, sizes, mode, value, dtype):
    case("pad", {"pad": sizes, "mode": mode, "value": value}, make(shape, dtype),
         lambda x: F.pad(x, sizes, mode=mode, value=value) if mode == "constant" else F.pad(x, sizes, mode=mode))


def interpolate(shape, mode, dtype, size=None, scale_factor=None, align_corners=None, recompute=False):
    params = {"mode": mode, "size": size, "scale_factor": scale_factor, "align_corners": align_corners,
              "recompute_scale_factor": recompute}
    case("interpolate", params, make(shape, dtype),
         lambda x: F.interpolate(x, size=size, scale_factor=scale_factor, mode=mode, align_corners=align_corners,
                                 recompute_scale_factor=recompute or None))


def main():
    for dtype in ("float32", "float64"):
        for mode in ("constant", "reflect", "replicate", "circular"):
            pad((2, 3, 4, 5), [1, 2, 3, 0], mode, 0.5, dtype)
            pad((2, 3, 6), [2, 3], mode, 0.0, dtype)
        pad((2, 3, 4, 5), [-1, 2, 1, -2], "constant", -1.25, dtype)
        interpolate((2, 3, 4, 5), "nearest", dtype, scale_factor=[2.0, 2.0])
        interpolate((2, 3, 4, 5), "nearest", dtype, size=[7, 3])
        interpolate((1, 2, 5, 6), "nearest", dtype, scale_factor=[1.7, 0.6])
        interpolate((1, 2, 5, 6), "nearest", dtype, scale_factor=[1.7, 0.6], recompute=True)
        interpolate((2, 3, 7), "nearest", dtype, scale_factor=[2.5])
        interpolate((2, 3, 6), "linear", dtype, scale_factor=[2.0])
        interpolate((2, 3, 6), "linear", dtype, size=[13], align_corners=True)
        interpolate((2, 3, 9), "linear", dtype, size=[4], align_corners=False)
        interpolate((2, 3, 4, 5), "bilinear", dtype, scale_factor=[2.0, 2.0], align_corners=False)
        interpolate((2, 3, 4, 5), "bilinear", dtype, scale_factor=[2.0, 2.0], align_corners=True)
        interpolate((1, 2, 5, 4), "bilinear", dtype, size=[8, 11], align_corners=False)
        interpolate((1, 2, 5, 4), "bilinear", dtype, size=[8, 11], align_corners=True)
        interpolate((1, 2, 6, 7), "bilinear", dtype, scale_factor=[1.5, 0.5], align_corners=False)
        interpolate((1, 2, 6, 7), "bilinear", dtype, scale_factor=[1.3, 0.7], align_corners=False, recompute=True)
        interpolate((1, 2, 6, 7), "bilinear", dtype, size=[3, 1], align_corners=True)
        case("pixel_shuffle", {"factor": 2}, make((2, 8, 3, 4), dtype), lambda x: F.pixel_shuffle(x, 2))
        case("pixel_unshuffle", {"factor": 3}, make((2, 1, 6, 9), dtype), lambda x: F.pixel_unshuffle(x, 3))

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "upsample_pad_golden.json")
    with open(path, "w") as f:
        json.dump({"torch_version": torch.__version__, "cases": CASES}, f)
        f.write("\n")
    print(f"wrote {len(CASES)} cases to {path}")


if __name__ == "__main__":
    main()
