#!/usr/bin/env python3
"""Writes grad_scaler_golden.json beside this script: what torch.amp.GradScaler does over a few steps, for
tests/test_grad_scaler.cpp to compare minidl's amp::GradScaler with.

Each case: GradScaler options, an optimizer (SGD with momentum, Adam, AdamW with amsgrad; the single-tensor
path, foreach=False), float32 parameters of a linear model y = x W^T + b with the mean squared error, and per step
a batch, whether unscale_ is called before step (then the gradients are clipped to a norm of 1.0), and
optionally a non-finite value written into one gradient element after backward. Recorded after each step:
the scale, and the parameters. Everything float32 on the CPU (torch.amp.GradScaler("cpu")).

Run where PyTorch is installed:  python3 tests/golden/gen_grad_scaler_golden.py
"""
import json
import math
import os

import torch

STEPS = 8


def number(v):
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def make_optimizer(kind, params):
    if kind == "SGD":
        return torch.optim.SGD(params, lr=0.05, momentum=0.9, foreach=False)
    if kind == "Adam":
        return torch.optim.Adam(params, lr=0.01, foreach=False)
    return torch.optim.AdamW(params, lr=0.01, weight_decay=0.1, amsgrad=True, foreach=False)


def case(name, kind, options, poison, unscale_steps, seed):
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(3, 5, generator=gen)
    b = torch.randn(3, generator=gen)
    batches = [(torch.randn(8, 5, generator=gen), torch.randn(8, 3, generator=gen)) for _ in range(STEPS)]
    out = {"name": name, "optimizer": kind, "options": options, "w": w.tolist(), "b": b.tolist(),
           "batches": [{"x": x.tolist(), "y": y.tolist()} for x, y in batches],
           "poison": {str(step): [which, number(value)] for step, (which, value) in poison.items()},
           "unscale_steps": unscale_steps, "scales": [], "w_after": [], "b_after": []}
    wp, bp = w.clone().requires_grad_(True), b.clone().requires_grad_(True)
    opt = make_optimizer(kind, [wp, bp])
    scaler = torch.amp.GradScaler("cpu", **options)
    for step, (x, y) in enumerate(batches):
        opt.zero_grad()
        loss = ((x @ wp.t() + bp - y) ** 2).mean()
        scaler.scale(loss).backward()
        if step in poison:
            which, value = poison[step]
            with torch.no_grad():
                [wp, bp][which].grad.view(-1)[0] = value
        if step in unscale_steps:
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_([wp, bp], 1.0)
        scaler.step(opt)
        scaler.update()
        out["scales"].append(scaler.get_scale())
        out["w_after"].append([[number(v) for v in row] for row in wp.detach().tolist()])
        out["b_after"].append([number(v) for v in bp.detach().tolist()])
    return out


def main():
    small = dict(init_scale=1024.0, growth_factor=2.0, backoff_factor=0.5, growth_interval=2)
    cases = [
        case("sgd_momentum", "SGD", small, {3: (0, float("inf"))}, [1, 5], 1),
        case("adam", "Adam", dict(small, growth_factor=4.0, backoff_factor=0.25, growth_interval=3),
             {2: (1, float("nan")), 6: (0, float("-inf"))}, [0, 2, 3], 2),
        case("adamw_amsgrad", "AdamW", dict(init_scale=65536.0, growth_factor=2.0, backoff_factor=0.5,
                                            growth_interval=2000), {0: (0, float("inf"))}, [4], 3),
    ]
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "grad_scaler_golden.json")
    with open(path, "w") as f:
        json.dump({"torch_version": torch.__version__, "cases": cases}, f)
    print(f"wrote {path} ({len(cases)} cases)")


if __name__ == "__main__":
    main()
