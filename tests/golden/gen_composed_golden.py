#!/usr/bin/env python3
"""Writes composed_golden.json: PyTorch's results and gradients of the ops minidl composes from others (diagonal,
diag, trace, movedim, tensor_split, hstack, vstack, dstack, tile, nansum, var_mean, std_mean, argwhere), for
tests/test_composed_ops.cpp. Inputs are float64 values rounded to 4 decimals (written out, so minidl reads the same
numbers); each case's gradient is d(sum(outputs * weights))/d(input) for weights 1, 2, 3, ... over the outputs'
elements in order.

    python3 tests/golden/gen_composed_golden.py     (any PyTorch >= 1.13)
"""
import json
import os

import torch

torch.manual_seed(0)


def rnd(*shape):
    return (torch.rand(*shape, dtype=torch.float64) * 4 - 2).round(decimals=4)


def numbers(t):
    """The values as JSON takes them: NaN as the string "nan" (golden_file.h's golden_number reads it back)."""
    return [v if v == v else "nan" for v in t.detach().double().flatten().tolist()]


def case(name, inputs, fn, args):
    leaves = [t.clone().requires_grad_(t.is_floating_point()) for t in inputs]
    outs = fn(*leaves)
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    total = 0
    k = 1.0
    for o in outs:
        if o.is_floating_point() and o.numel():
            w = torch.arange(k, k + o.numel(), dtype=torch.float64).reshape(o.shape)
            total = total + (o * w).sum()
        k += o.numel()
    grads = [None] * len(leaves)
    if torch.is_tensor(total) and total.requires_grad:
        grads = torch.autograd.grad(total, [l for l in leaves if l.requires_grad], allow_unused=True)
    return {
        "name": name, "args": args,
        "inputs": [{"shape": list(t.shape), "values": numbers(t)} for t in inputs],
        "outputs": [{"shape": list(o.shape), "dtype": str(o.dtype).replace("torch.", ""),
                     "values": numbers(o)} for o in outs],
        "grads": [None if g is None else numbers(g) for g in grads],
    }


nan_input = rnd(3, 4)
nan_input[0, 1] = float("nan")
nan_input[2, 3] = float("nan")
cases = [
    case("diagonal", [rnd(4, 5)], lambda x: x.diagonal(), {}),
    case("diagonal offset 2", [rnd(4, 5)], lambda x: x.diagonal(2), {"offset": 2}),
    case("diagonal offset -1 dims 2 0", [rnd(3, 2, 4)], lambda x: x.diagonal(-1, 2, 0),
         {"offset": -1, "dim1": 2, "dim2": 0}),
    case("diag of a vector", [rnd(3)], lambda x: torch.diag(x), {}),
    case("diag of a vector, offset -2", [rnd(3)], lambda x: torch.diag(x, -2), {"offset": -2}),
    case("diag of a matrix, offset 1", [rnd(3, 4)], lambda x: torch.diag(x, 1), {"offset": 1}),
    case("trace", [rnd(3, 4)], lambda x: torch.trace(x), {}),
    case("movedim", [rnd(2, 3, 4, 5)], lambda x: torch.movedim(x, [0, 3], [2, 0]),
         {"source": [0, 3], "destination": [2, 0]}),
    case("tensor_split sections", [rnd(7, 3)], lambda x: torch.tensor_split(x, 3), {"sections": 3}),
    case("tensor_split indices", [rnd(2, 8)], lambda x: torch.tensor_split(x, [2, -3, 20], dim=1),
         {"indices": [2, -3, 20], "dim": 1}),
    case("hstack", [rnd(2, 3), rnd(2, 1)], lambda a, b: torch.hstack([a, b]), {}),
    case("hstack 1-d", [rnd(3), rnd(2)], lambda a, b: torch.hstack([a, b]), {}),
    case("vstack", [rnd(3), rnd(2, 3)], lambda a, b: torch.vstack([a, b]), {}),
    case("dstack", [rnd(3), rnd(1, 3, 2)], lambda a, b: torch.dstack([a, b]), {}),
    case("tile", [rnd(2, 3)], lambda x: torch.tile(x, [2]), {"dims": [2]}),
    case("tile more dims", [rnd(2, 3)], lambda x: torch.tile(x, [2, 1, 2]), {"dims": [2, 1, 2]}),
    case("nansum", [nan_input], lambda x: torch.nansum(x), {}),
    case("nansum dim 1", [nan_input], lambda x: torch.nansum(x, 1, keepdim=True), {"dim": [1], "keepdim": True}),
    case("var_mean", [rnd(3, 5)], lambda x: torch.var_mean(x, 1), {"dim": [1]}),
    case("var_mean correction 0 keepdim", [rnd(3, 5)], lambda x: torch.var_mean(x, [0], unbiased=False, keepdim=True),
         {"dim": [0], "unbiased": False, "keepdim": True}),
    case("std_mean", [rnd(4, 3)], lambda x: torch.std_mean(x, 0), {"dim": [0]}),
    case("argwhere", [(rnd(3, 4) > 0).double()], lambda x: torch.argwhere(x), {}),
]
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "composed_golden.json")
with open(out, "w") as f:
    json.dump({"torch": torch.__version__, "cases": cases}, f, allow_nan=False)
print(f"wrote {len(cases)} cases to {out}")
