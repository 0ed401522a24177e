#!/usr/bin/env python3
"""Writes normalization_golden.json beside this script: PyTorch's results for minidl's normalisation functionals
(layer_norm, rms_norm, group_norm, instance_norm, normalize), for tests/test_normalization.cpp to compare minidl's
with, element by element.

Each case holds the op, its arguments, its input tensors (dtype, shape, values; weight and bias null where absent),
PyTorch's output, a random upstream gradient and PyTorch's gradient of every input that has one. instance_norm
cases with running statistics also hold the statistics after the call. float32 and float64. Values are written
with repr (exact).

Run where PyTorch (>= 2.4, for rms_norm) is installed:  python3 tests/golden/gen_normalization_golden.py
"""
import json
import os

import torch
import torch.nn.functional as F

NAMES = {torch.float32: "float32", torch.float64: "float64"}


def encode(t):
    if t is None:
        return None
    t = t.detach()
    return {"dtype": NAMES[t.dtype], "shape": list(t.shape), "values": t.flatten().tolist()}


class Draw:
    """Seeded inputs: each case gets its own generator, so adding a case changes no other."""

    def __init__(self, seed):
        self.g = torch.Generator().manual_seed(seed)

    def uniform(self, shape, dtype, lo=-2.0, hi=2.0):
        return (torch.rand(shape, generator=self.g, dtype=torch.float64) * (hi - lo) + lo).to(dtype)


def run_case(seed, op, dtype, shape, args, weight_shape=None, bias_shape=None, running=None):
    d = Draw(seed)
    x = d.uniform(shape, dtype).requires_grad_(True)
    w = d.uniform(weight_shape, dtype, 0.5, 1.5).requires_grad_(True) if weight_shape is not None else None
    b = d.uniform(bias_shape, dtype).requires_grad_(True) if bias_shape is not None else None
    rm = rv = None
    if running is not None:
        rm = d.uniform([running], dtype, -0.5, 0.5)
        rv = d.uniform([running], dtype, 0.5, 1.5)
    inputs = {"input": encode(x), "weight": encode(w), "bias": encode(b),
              "running_mean": encode(rm), "running_var": encode(rv)}
    if op == "layer_norm":
        y = F.layer_norm(x, args["normalized_shape"], w, b, args["eps"])
    elif op == "rms_norm":
        y = F.rms_norm(x, args["normalized_shape"], w, args.get("eps"))
    elif op == "group_norm":
        y = F.group_norm(x, args["num_groups"], w, b, args["eps"])
    elif op == "instance_norm":
        y = F.instance_norm(x, rm, rv, w, b, use_input_stats=args["use_input_stats"], momentum=args["momentum"],
                            eps=args["eps"])
    elif op == "normalize":
        y = F.normalize(x, p=args["p"], dim=args["dim"], eps=args["eps"])
    else:
        raise ValueError(op)
    gy = d.uniform(list(y.shape), dtype)
    leaves = [t for t in (x, w, b) if t is not None]
    grads = torch.autograd.grad(y, leaves, gy)
    names = [n for n, t in (("input", x), ("weight", w), ("bias", b)) if t is not None]
    case = {"op": op, "dtype": NAMES[dtype], "args": args, "inputs": inputs, "output": encode(y),
            "grad_output": encode(gy), "grads": {n: encode(g) for n, g in zip(names, grads)}}
    if running is not None:
        case["running_mean_after"] = encode(rm)
        case["running_var_after"] = encode(rv)
    return case


def main():
    cases = []
    seed = 0
    for dtype in (torch.float32, torch.float64):
        specs = [
            ("layer_norm", [4, 6], {"normalized_shape": [6], "eps": 1e-5}, [6], [6], None),
            ("layer_norm", [2, 3, 4, 5], {"normalized_shape": [4, 5], "eps": 1e-5}, [4, 5], [4, 5], None),
            ("layer_norm", [3, 8], {"normalized_shape": [8], "eps": 1e-3}, None, None, None),
            ("layer_norm", [2, 2, 3, 4], {"normalized_shape": [2, 3, 4], "eps": 1e-5}, [2, 3, 4], None, None),
            ("layer_norm", [8, 768], {"normalized_shape": [768], "eps": 1e-5}, [768], [768], None),
            ("rms_norm", [4, 6], {"normalized_shape": [6], "eps": 1e-6}, [6], None, None),
            ("rms_norm", [2, 3, 4, 5], {"normalized_shape": [4, 5]}, [4, 5], None, None),
            ("rms_norm", [3, 8], {"normalized_shape": [8], "eps": 1e-5}, None, None, None),
            ("group_norm", [2, 6, 3, 4], {"num_groups": 3, "eps": 1e-5}, [6], [6], None),
            ("group_norm", [3, 4, 5], {"num_groups": 1, "eps": 1e-5}, [4], [4], None),
            ("group_norm", [2, 4, 7], {"num_groups": 4, "eps": 1e-5}, None, None, None),
            ("instance_norm", [2, 3, 4, 5], {"use_input_stats": True, "momentum": 0.1, "eps": 1e-5}, None, None, None),
            ("instance_norm", [2, 3, 6], {"use_input_stats": True, "momentum": 0.2, "eps": 1e-5}, [3], [3], 3),
            ("instance_norm", [2, 3, 4, 4], {"use_input_stats": False, "momentum": 0.1, "eps": 1e-5}, [3], [3], 3),
            ("normalize", [4, 5], {"p": 2.0, "dim": 1, "eps": 1e-12}, None, None, None),
            ("normalize", [3, 4, 5], {"p": 1.0, "dim": -1, "eps": 1e-12}, None, None, None),
            ("normalize", [3, 4, 5], {"p": 3.0, "dim": 0, "eps": 1e-12}, None, None, None),
        ]
        for op, shape, args, ws, bs, running in specs:
            cases.append(run_case(seed, op, dtype, shape, args, ws, bs, running))
            seed += 1
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "normalization_golden.json")
    with open(path, "w") as f:
        json.dump({"torch_version": torch.__version__, "cases": cases}, f)
    print(f"wrote {len(cases)} cases to {path}")


if __name__ == "__main__":
    main()
