#!/usr/bin/env python3
"""Writes optim_golden.json beside this script: what PyTorch's optimizers and learning-rate schedulers compute,
for tests/test_optim.cpp to compare minidl's with (within 1e-10, float64).

For each optimizer configuration: random float64 parameters and ten steps of random gradients (some absent:
PyTorch skips those parameters, and their own step count starts at their first gradient), the options spelled
out in full, and the parameters after the ten steps of torch.optim's single-tensor path (foreach=False).
For each scheduler: its spec and the learning rate after construction and after each step.

Run where PyTorch is installed:  python3 tests/golden/gen_optim_golden.py
"""
import json
import os

import torch
from torch.optim import lr_scheduler

SHAPES = [[3, 4], [7], [2, 3, 2], [1]]
STEPS = 10
# (parameter, step) pairs without a gradient.
ABSENT = {(1, 0), (1, 1), (3, 5)}
# The options minidl knows; every one is written out, PyTorch's defaults included.
OPTION_KEYS = ["lr", "momentum", "dampening", "weight_decay", "nesterov", "betas", "eps", "amsgrad", "rho"]

OPTIMIZERS = [
    ("sgd", "SGD", dict(lr=0.1)),
    ("sgd_wd", "SGD", dict(lr=0.1, weight_decay=0.05)),
    ("sgd_momentum", "SGD", dict(lr=0.1, momentum=0.9)),
    ("sgd_momentum_dampening_wd", "SGD", dict(lr=0.05, momentum=0.8, dampening=0.2, weight_decay=0.01)),
    ("sgd_nesterov", "SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
    ("sgd_nesterov_wd", "SGD", dict(lr=0.05, momentum=0.7, nesterov=True, weight_decay=0.1)),
    ("adam", "Adam", dict(lr=0.01)),
    ("adam_wd", "Adam", dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)),
    ("adam_amsgrad", "Adam", dict(lr=0.01, amsgrad=True)),
    ("adam_amsgrad_wd_low_beta1", "Adam", dict(lr=0.02, betas=(0.3, 0.9), weight_decay=0.05, amsgrad=True)),
    ("adamw", "AdamW", dict(lr=0.01)),
    ("adamw_strong_wd", "AdamW", dict(lr=0.01, betas=(0.85, 0.995), eps=1e-7, weight_decay=0.5)),
    ("adamw_amsgrad", "AdamW", dict(lr=0.01, weight_decay=0.1, amsgrad=True)),
    ("adadelta", "Adadelta", dict()),
    ("adadelta_wd", "Adadelta", dict(lr=0.5, rho=0.8, eps=1e-5, weight_decay=0.1)),
]

SCHEDULERS = [
    ("step", 0.1, dict(type="StepLR", step_size=3, gamma=0.5), 12),
    ("cosine", 0.1, dict(type="CosineAnnealingLR", T_max=10, eta_min=0.001), 25),
    ("linear", 0.1, dict(type="LinearLR", start_factor=0.25, end_factor=1.0, total_iters=4), 8),
    ("linear_defaults", 0.05, dict(type="LinearLR", start_factor=1.0 / 3, end_factor=1.0, total_iters=5), 8),
    ("warmup_cosine", 0.1,
     dict(type="SequentialLR", milestones=[3],
          schedulers=[dict(type="LinearLR", start_factor=0.1, end_factor=1.0, total_iters=3),
                      dict(type="CosineAnnealingLR", T_max=8, eta_min=0.0)]), 15),
]


def uniform(shape, gen):
    return torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1


def flat(t):
    return t.detach().reshape(-1).tolist()


def optimizer_case(seed, name, cls_name, options):
    gen = torch.Generator().manual_seed(seed)
    init = [uniform(s, gen) for s in SHAPES]
    grads = [[None if (i, step) in ABSENT else uniform(s, gen) for i, s in enumerate(SHAPES)] for step in range(STEPS)]
    params = [p.clone().requires_grad_(True) for p in init]
    opt = getattr(torch.optim, cls_name)(params, foreach=False, **options)
    for step in range(STEPS):
        for p, g in zip(params, grads[step]):
            p.grad = None if g is None else g.clone()
        opt.step()
    full = {k: (list(v) if isinstance(v, tuple) else v) for k, v in opt.defaults.items() if k in OPTION_KEYS}
    return {
        "name": name,
        "optimizer": cls_name,
        "options": full,
        "shapes": SHAPES,
        "params": [flat(p) for p in init],
        "grads": [[None if g is None else flat(g) for g in step] for step in grads],
        "expected": [flat(p) for p in params],
    }


def build_scheduler(opt, spec):
    kind = spec["type"]
    if kind == "StepLR":
        return lr_scheduler.StepLR(opt, step_size=spec["step_size"], gamma=spec["gamma"])
    if kind == "CosineAnnealingLR":
        return lr_scheduler.CosineAnnealingLR(opt, T_max=spec["T_max"], eta_min=spec["eta_min"])
    if kind == "LinearLR":
        return lr_scheduler.LinearLR(opt, start_factor=spec["start_factor"], end_factor=spec["end_factor"],
                                     total_iters=spec["total_iters"])
    if kind == "SequentialLR":
        children = [build_scheduler(opt, child) for child in spec["schedulers"]]
        return lr_scheduler.SequentialLR(opt, children, milestones=spec["milestones"])
    raise ValueError(kind)


def scheduler_case(name, base_lr, spec, steps):
    p = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.SGD([p], lr=base_lr)
    sched = build_scheduler(opt, spec)
    lrs = [sched.get_last_lr()[0]]
    for _ in range(steps):
        opt.step()  # no gradient: only keeps PyTorch's call-order check quiet
        sched.step()
        lrs.append(sched.get_last_lr()[0])
    return {"name": name, "base_lr": base_lr, "spec": spec, "lrs": lrs}


def main():
    out = {
        "generator": "tests/golden/gen_optim_golden.py",
        "torch_version": torch.__version__,
        "optimizers": [optimizer_case(1000 + k, *case) for k, case in enumerate(OPTIMIZERS)],
        "schedulers": [scheduler_case(*case) for case in SCHEDULERS],
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "optim_golden.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"wrote {path}: {len(out['optimizers'])} optimizer cases, {len(out['schedulers'])} schedulers "
          f"(torch {torch.__version__})")


if __name__ == "__main__":
    main()
