#!/usr/bin/env python3
"""Writes conv_transpose_golden.json beside this script: PyTorch's results for minidl's transposed and 1-d
convolutions (conv_transpose2d, conv_transpose1d, conv1d), for tests/test_conv_transpose.cpp to compare with element
by element.

Each case names the op, its parameters, its inputs (input, weight, and bias where there is one), PyTorch's output, a
random gradient of the output and PyTorch's gradients of every input. Inputs are multiples of 1/8; outputs and
gradients are sums of products, compared within float32's or float64's rounding. A tensor is {"dtype", "shape",
"values" (flat, row-major)}.

Run where PyTorch is installed:  python3 tests/golden/gen_conv_transpose_golden.py
"""
import json
import os

import torch
import torch.nn.functional as F

GEN = torch.Generator().manual_seed(24)
DTYPES = {"float32": torch.float32, "float64": torch.float64}
NAMES = {v: k for k, v in DTYPES.items()}


def make(shape, dtype):
    return (torch.randint(-16, 16, shape, generator=GEN).double() / 8).to(DTYPES[dtype])


def enc(t):
    t = t.detach()
    return {"dtype": NAMES[t.dtype], "shape": list(t.shape), "values": [float(v) for v in t.reshape(-1).tolist()]}


CASES = []


def case(op, params, inputs, fn):
    leaves = [x.clone().requires_grad_(True) for x in inputs]
    out = fn(*leaves)
    r = torch.randn(out.shape, generator=GEN, dtype=torch.float64).to(out.dtype)
    grads = torch.autograd.grad(out, leaves, r)
    CASES.append({"op": op, "params": params, "inputs": [enc(x) for x in inputs], "output": enc(out),
                  "grad_output": enc(r), "grads": [enc(g) for g in grads]})


def conv_transpose2d(n, cin, cout, hw, kernel, stride, padding, output_padding, groups, dilation, bias, dtype):
    params = {"stride": stride, "padding": padding, "output_padding": output_padding, "groups": groups,
              "dilation": dilation}
    inputs = [make((n, cin) + hw, dtype), make((cin, cout // groups) + kernel, dtype)]
    if bias:
        inputs.append(make((cout,), dtype))
    case("conv_transpose2d", params, inputs,
         lambda x, w, *b: F.conv_transpose2d(x, w, b[0] if b else None, tuple(stride), tuple(padding),
                                             tuple(output_padding), groups, tuple(dilation)))


def main():
    for dtype in ("float32", "float64"):
        conv_transpose2d(2, 3, 2, (4, 5), (3, 3), [1, 1], [0, 0], [0, 0], 1, [1, 1], True, dtype)
        conv_transpose2d(1, 2, 3, (3, 4), (3, 3), [2, 2], [1, 1], [1, 1], 1, [1, 1], True, dtype)
        conv_transpose2d(2, 4, 6, (3, 3), (2, 3), [2, 3], [0, 1], [1, 2], 2, [1, 1], False, dtype)
        conv_transpose2d(2, 4, 4, (3, 4), (3, 3), [3, 2], [2, 1], [2, 1], 4, [1, 2], True, dtype)
        conv_transpose2d(1, 3, 2, (3, 3), (2, 2), [1, 1], [0, 0], [1, 1], 1, [2, 2], True, dtype)
        conv_transpose2d(3, 8, 8, (5, 5), (4, 4), [2, 2], [1, 1], [0, 0], 1, [1, 1], True, dtype)
        case("conv_transpose1d", {"stride": 2, "padding": 1, "output_padding": 1, "groups": 2, "dilation": 1},
             [make((2, 4, 5), dtype), make((4, 3, 3), dtype), make((6,), dtype)],
             lambda x, w, b: F.conv_transpose1d(x, w, b, 2, 1, 1, 2, 1))
        case("conv1d", {"stride": 2, "padding": 1, "dilation": 1, "groups": 2},
             [make((2, 4, 9), dtype), make((6, 2, 3), dtype), make((6,), dtype)],
             lambda x, w, b: F.conv1d(x, w, b, 2, 1, 1, 2))
        case("conv1d", {"stride": 1, "padding": 2, "dilation": 2, "groups": 1},
             [make((1, 3, 8), dtype), make((2, 3, 3), dtype)],
             lambda x, w: F.conv1d(x, w, None, 1, 2, 2, 1))

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conv_transpose_golden.json")
    with open(path, "w") as f:
        json.dump({"torch_version": torch.__version__, "cases": CASES}, f)
        f.write("\n")
    print(f"wrote {len(CASES)} cases to {path}")


if __name__ == "__main__":
    main()
