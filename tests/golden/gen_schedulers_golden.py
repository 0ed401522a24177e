#!/usr/bin/env python3
"""Writes schedulers_golden.json beside this script: the learning rates (and, for OneCycleLR, the momenta) that
PyTorch's schedulers set in every parameter group, for tests/test_schedulers.cpp to compare minidl's with
(within 1e-12, float64).

Each case: an optimizer (SGD with momentum, or Adam) over one parameter group per base learning rate, a
scheduler spec, and per epoch the lr of every group (after construction, then after each step); for
ReduceLROnPlateau, the metric fed to each step and the lrs after it.

Run where PyTorch is installed:  python3 tests/golden/gen_schedulers_golden.py
"""
import json
import os

import torch
from torch.optim import lr_scheduler


def make_optimizer(kind, base_lrs, momentum):
    groups = [{"params": [torch.zeros(2, dtype=torch.float64, requires_grad=True)], "lr": lr} for lr in base_lrs]
    if kind == "SGD":
        return torch.optim.SGD(groups, lr=base_lrs[0], momentum=momentum)
    return torch.optim.Adam(groups, lr=base_lrs[0], betas=(0.9, 0.999))


def build(opt, spec):
    kind = spec["type"]
    if kind == "OneCycleLR":
        return lr_scheduler.OneCycleLR(opt, max_lr=spec["max_lr"], total_steps=spec["total_steps"],
                                       pct_start=spec["pct_start"], anneal_strategy=spec["anneal_strategy"],
                                       cycle_momentum=spec["cycle_momentum"], base_momentum=spec["base_momentum"],
                                       max_momentum=spec["max_momentum"], div_factor=spec["div_factor"],
                                       final_div_factor=spec["final_div_factor"], three_phase=spec["three_phase"])
    if kind == "LinearLR":
        return lr_scheduler.LinearLR(opt, start_factor=spec["start_factor"], end_factor=spec["end_factor"],
                                     total_iters=spec["total_iters"])
    if kind == "SequentialLR":
        w, d = spec["warmup"], spec["decay"]
        warmup = lr_scheduler.LinearLR(opt, start_factor=w["start_factor"], end_factor=w["end_factor"],
                                       total_iters=w["total_iters"])
        decay = lr_scheduler.CosineAnnealingLR(opt, T_max=d["T_max"], eta_min=d["eta_min"])
        return lr_scheduler.SequentialLR(opt, [warmup, decay], milestones=spec["milestones"])
    raise ValueError(kind)


def momenta(opt):
    return [g["momentum"] if "momentum" in g else g["betas"][0] for g in opt.param_groups]


def case(name, optimizer, base_lrs, spec, steps, momentum=0.9):
    # OneCycleLR: up to epoch total_steps - 1, the last rate an optimizer step uses (the step past it
    # extrapolates, below 0 with linear annealing, where minidl sets 0).
    opt = make_optimizer(optimizer, base_lrs, momentum)
    out = {"name": name, "optimizer": optimizer, "base_lrs": base_lrs, "momentum": momentum, "spec": spec}
    if spec["type"] == "ReduceLROnPlateau":
        sched = lr_scheduler.ReduceLROnPlateau(opt, mode=spec["mode"], factor=spec["factor"],
                                               patience=spec["patience"], threshold=spec["threshold"],
                                               threshold_mode=spec["threshold_mode"], cooldown=spec["cooldown"],
                                               min_lr=spec["min_lr"], eps=spec["eps"])
        gen = torch.Generator().manual_seed(len(name))
        # A noisy plateau: improvements early, then small changes around a level.
        metrics = [float(2.0 / (1 + e) + 0.05 * torch.rand((), generator=gen, dtype=torch.float64)) for e in
                   range(steps)]
        lrs = []
        for m in metrics:
            opt.step()
            sched.step(m)
            lrs.append([g["lr"] for g in opt.param_groups])
        out.update(metrics=metrics, lrs=lrs)
        return out
    sched = build(opt, spec)
    lrs = [[g["lr"] for g in opt.param_groups]]
    moms = [momenta(opt)]
    for _ in range(steps):
        opt.step()  # no gradient: only keeps PyTorch's call-order check quiet
        sched.step()
        lrs.append([g["lr"] for g in opt.param_groups])
        moms.append(momenta(opt))
    out["lrs"] = lrs
    if spec["type"] == "OneCycleLR" and spec["cycle_momentum"]:
        out["momenta"] = moms
    return out


def one_cycle(max_lr, total_steps, pct_start=0.3, anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85,
              max_momentum=0.95, div_factor=25.0, final_div_factor=1e4, three_phase=False):
    return {"type": "OneCycleLR", "max_lr": max_lr, "total_steps": total_steps, "pct_start": pct_start,
            "anneal_strategy": anneal_strategy, "cycle_momentum": cycle_momentum, "base_momentum": base_momentum,
            "max_momentum": max_momentum, "div_factor": div_factor, "final_div_factor": final_div_factor,
            "three_phase": three_phase}


def plateau(mode="min", factor=0.1, patience=10, threshold=1e-4, threshold_mode="rel", cooldown=0, min_lr=None,
            eps=1e-8, groups=1):
    return {"type": "ReduceLROnPlateau", "mode": mode, "factor": factor, "patience": patience,
            "threshold": threshold, "threshold_mode": threshold_mode, "cooldown": cooldown,
            "min_lr": min_lr if min_lr is not None else [0.0] * groups, "eps": eps}


CASES = [
    ("onecycle_cos_sgd", "SGD", [0.1], one_cycle([1.0], 100), 99),
    ("onecycle_linear_two_groups", "SGD", [0.1, 0.2], one_cycle([1.0, 0.3], 37, pct_start=0.25,
                                                                anneal_strategy="linear"), 36),
    ("onecycle_three_phase_adam", "Adam", [1e-3], one_cycle([0.01], 50, three_phase=True, div_factor=10.0,
                                                            final_div_factor=100.0), 49),
    ("onecycle_no_momentum", "SGD", [0.1], one_cycle([0.5], 23, pct_start=0.5, cycle_momentum=False), 22),
    ("onecycle_odd_pct", "Adam", [1e-3, 2e-3], one_cycle([0.02, 0.04], 17, pct_start=0.37, base_momentum=0.8,
                                                         max_momentum=0.9), 16),
    ("linear_two_groups", "SGD", [0.1, 0.05], {"type": "LinearLR", "start_factor": 0.2, "end_factor": 0.9,
                                               "total_iters": 7}, 12),
    ("sequential_two_groups", "SGD", [0.1, 0.3],
     {"type": "SequentialLR", "warmup": {"start_factor": 0.1, "end_factor": 1.0, "total_iters": 4},
      "decay": {"T_max": 9, "eta_min": 0.001}, "milestones": [4]}, 20),
    ("plateau_min_rel", "SGD", [0.1], plateau(patience=2, factor=0.5), 30),
    ("plateau_max_abs_cooldown", "SGD", [0.1, 0.4], plateau(mode="max", patience=1, threshold=0.01,
                                                             threshold_mode="abs", cooldown=2, min_lr=[0.0, 0.05],
                                                             groups=2), 30),
    ("plateau_min_abs_floor", "Adam", [0.01], plateau(patience=0, threshold=0.02, threshold_mode="abs",
                                                      factor=0.3, min_lr=[1e-4]), 30),
]


def main():
    out = {
        "generator": "tests/golden/gen_schedulers_golden.py",
        "torch_version": torch.__version__,
        "cases": [case(*c) for c in CASES],
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schedulers_golden.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"wrote {path}: {len(out['cases'])} cases (torch {torch.__version__})")


if __name__ == "__main__":
    main()
