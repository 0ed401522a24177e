#!/usr/bin/env python3
"""Writes nn_basics_golden.json beside this script: PyTorch's values and gradients for the everyday nn toolbox
(activations, embedding, the losses with their options), for tests/test_nn_basics.cpp to compare minidl's with,
element by element, on the CPU and the GPU.

Each case holds an op name (the C++ test maps it to the minidl call), its options ("params"), its input tensors
(dtype, shape, values; floating inputs are differentiated, integer ones are indices), PyTorch's output, a random
upstream gradient and the gradient of every floating input (null for index inputs). Inputs are drawn away from
each function's kinks. Values are written with repr (exact); NaN and infinities as "nan", "inf", "-inf".

Run where PyTorch is installed:  python3 tests/golden/gen_nn_basics_golden.py
"""
import json
import math
import os

import torch
import torch.nn.functional as F

NAMES = {torch.float32: "float32", torch.float64: "float64", torch.int64: "int64"}


def number(v):
    if isinstance(v, (bool, int)):
        return v
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def encode(t):
    t = t.detach()
    return {"dtype": NAMES[t.dtype], "shape": list(t.shape), "values": [number(v) for v in t.flatten().tolist()]}


class Draw:
    """Seeded inputs: each case gets its own generator, so adding a case changes no other."""

    def __init__(self, seed):
        self.g = torch.Generator().manual_seed(seed)

    def uniform(self, shape, lo, hi, dtype):
        return (torch.rand(shape, generator=self.g, dtype=torch.float64) * (hi - lo) + lo).to(dtype)

    def away(self, shape, kinks, lo, hi, dtype, gap=0.05):
        x = self.uniform(shape, lo, hi, torch.float64)
        for k in kinks:
            near = (x - k).abs() < gap
            x = torch.where(near, torch.where(x >= k, x + gap, x - gap), x)
        return x.to(dtype)

    def ints(self, shape, lo, hi):
        return torch.randint(lo, hi, shape, generator=self.g)


CASES = []


def case(name, op, params, inputs, fn, seed, fixed=()):
    """`fixed`: positions of floating inputs not differentiated: those PyTorch has no derivative for (the class and
    element weights of the losses, and binary_cross_entropy's target in older versions)."""
    d = Draw(seed + 1000)
    xs = [x.clone().requires_grad_(x.is_floating_point() and i not in fixed) for i, x in enumerate(inputs)]
    out = fn(*xs)
    g = d.uniform(out.shape, -1, 1, out.dtype)
    floats = [x for x in xs if x.requires_grad]
    grads = torch.autograd.grad(out, floats, g, allow_unused=True) if floats else []
    it = iter(grads)
    enc = []
    for x in xs:
        if x.requires_grad:
            gr = next(it)
            enc.append(encode(gr if gr is not None else torch.zeros_like(x)))
        else:
            enc.append(None)
    CASES.append({"name": name, "op": op, "params": params, "inputs": [encode(x) for x in xs],
                  "output": encode(out), "grad_output": encode(g), "grads": enc})


def main():
    seed = 0
    for dt in (torch.float32, torch.float64):
        dn = NAMES[dt]
        acts = [
            ("silu", {}, [], lambda x: F.silu(x)),
            ("softplus", {"beta": 1.0, "threshold": 20.0}, [], lambda x: F.softplus(x)),
            ("softplus", {"beta": 2.0, "threshold": 3.0}, [1.5], lambda x: F.softplus(x, beta=2.0, threshold=3.0)),
            ("elu", {"alpha": 1.0}, [0.0], lambda x: F.elu(x)),
            ("elu", {"alpha": 0.5}, [0.0], lambda x: F.elu(x, alpha=0.5)),
            ("mish", {}, [], lambda x: F.mish(x)),
            ("hardswish", {}, [-3.0, 3.0], lambda x: F.hardswish(x)),
            ("gelu", {"approximate": "none"}, [], lambda x: F.gelu(x)),
            ("gelu", {"approximate": "tanh"}, [], lambda x: F.gelu(x, approximate="tanh")),
            ("logsigmoid", {}, [], lambda x: F.logsigmoid(x)),
        ]
        for op, params, kinks, fn in acts:
            seed += 1
            d = Draw(seed)
            case(f"{op} {params} {dn}", op, params, [d.away((5, 7), kinks, -5, 5, dt)], fn, seed)
        seed += 1
        d = Draw(seed)
        case(f"softmax2d {dn}", "softmax2d", {}, [d.uniform((2, 3, 2, 4), -3, 3, dt)], lambda x: F.softmax(x, -3), seed)

        for pad in (None, 2, -1):
            seed += 1
            d = Draw(seed)
            w = d.uniform((6, 4), -1, 1, dt)
            ix = d.ints((3, 5), 0, 6)
            case(f"embedding padding_idx={pad} {dn}", "embedding", {"padding_idx": pad}, [w, ix],
                 lambda w, i, pad=pad: F.embedding(i, w, padding_idx=pad), seed)

        for red in ("none", "mean", "sum"):
            seed += 1
            d = Draw(seed)
            p, y, w = d.uniform((4, 5), 0.05, 0.95, dt), d.uniform((4, 5), 0, 1, dt), d.uniform((5,), 0.5, 2, dt)
            case(f"bce {red} {dn}", "binary_cross_entropy", {"reduction": red}, [p, y],
                 lambda p, y, red=red: F.binary_cross_entropy(p, y, reduction=red), seed, fixed=(1,))
            case(f"bce weight {red} {dn}", "binary_cross_entropy", {"reduction": red}, [p, y, w],
                 lambda p, y, w, red=red: F.binary_cross_entropy(p, y, weight=w, reduction=red), seed, fixed=(1, 2))
            z, pw = d.uniform((4, 5), -6, 6, dt), d.uniform((5,), 0.5, 3, dt)
            case(f"bce_with_logits {red} {dn}", "binary_cross_entropy_with_logits", {"reduction": red}, [z, y, w, pw],
                 lambda z, y, w, pw, red=red: F.binary_cross_entropy_with_logits(z, y, weight=w, pos_weight=pw,
                                                                                 reduction=red), seed, fixed=(2, 3))
            a = d.uniform((4, 5), -2, 2, dt)
            b = d.uniform((4, 5), -2, 2, dt)
            case(f"l1 {red} {dn}", "l1_loss", {"reduction": red}, [a, b],
                 lambda a, b, red=red: F.l1_loss(a, b, reduction=red), seed)
            for beta in (0.0, 0.5):
                case(f"smooth_l1 beta={beta} {red} {dn}", "smooth_l1_loss", {"reduction": red, "beta": beta}, [a, b],
                     lambda a, b, red=red, beta=beta: F.smooth_l1_loss(a, b, reduction=red, beta=beta), seed)
            for delta in (0.5, 1.5):
                case(f"huber delta={delta} {red} {dn}", "huber_loss", {"reduction": red, "delta": delta}, [a, b],
                     lambda a, b, red=red, delta=delta: F.huber_loss(a, b, reduction=red, delta=delta), seed)
            lp = torch.log_softmax(d.uniform((4, 5), -2, 2, dt), 1)
            q = torch.softmax(d.uniform((4, 5), -2, 2, dt), 1)
            for log_target in (False, True):
                tq = q.log() if log_target else q
                case(f"kl_div log_target={log_target} {red} {dn}", "kl_div", {"reduction": red, "log_target": log_target},
                     [lp, tq], lambda i, t, red=red, lt=log_target: F.kl_div(i, t, reduction=red, log_target=lt), seed)
            for ignore, eps, weighted in ((-100, 0.0, False), (2, 0.0, True), (1, 0.2, True), (-100, 0.3, False)):
                logits = d.uniform((6, 5), -3, 3, dt)
                t = d.ints((6,), 0, 5)
                cw = d.uniform((5,), 0.5, 2, dt)
                ins = [logits, t, cw] if weighted else [logits, t]
                case(f"cross_entropy ignore={ignore} eps={eps} weighted={weighted} {red} {dn}", "cross_entropy",
                     {"reduction": red, "ignore_index": ignore, "label_smoothing": eps}, ins,
                     lambda x, t, w=None, red=red, ignore=ignore, eps=eps: F.cross_entropy(
                         x, t, weight=w, ignore_index=ignore, label_smoothing=eps, reduction=red), seed, fixed=(2,))
            for eps in (0.0, 0.15):
                logits = d.uniform((2, 4, 3), -3, 3, dt)
                probs = torch.softmax(d.uniform((2, 4, 3), -2, 2, dt), 1)
                cw = d.uniform((4,), 0.5, 2, dt)
                case(f"cross_entropy probabilities eps={eps} {red} {dn}", "cross_entropy",
                     {"reduction": red, "ignore_index": -100, "label_smoothing": eps}, [logits, probs, cw],
                     lambda x, t, w, red=red, eps=eps: F.cross_entropy(x, t, weight=w, label_smoothing=eps,
                                                                       reduction=red), seed, fixed=(2,))
        seed += 1
        d = Draw(seed)
        lp = torch.log_softmax(d.uniform((4, 5), -2, 2, dt), 1)
        q = torch.softmax(d.uniform((4, 5), -2, 2, dt), 1)
        case(f"kl_div batchmean {dn}", "kl_div", {"reduction": "batchmean", "log_target": False}, [lp, q],
             lambda i, t: F.kl_div(i, t, reduction="batchmean"), seed)

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nn_basics_golden.json")
    with open(path, "w") as f:
        json.dump({"torch_version": torch.__version__, "cases": CASES}, f)
    print(f"wrote {len(CASES)} cases to {path}")


if __name__ == "__main__":
    main()
