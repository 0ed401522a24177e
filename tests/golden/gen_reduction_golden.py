#!/usr/bin/env python3
"""Writes reduction_golden.json beside this script: PyTorch's results for minidl's reductions, scans, sorting and
whole-tensor comparisons, for tests/test_reductions.cpp to compare every element with.

Each case holds the op's name and arguments, its inputs (dtype, shape, values), PyTorch's outputs and, for a
floating input, the gradient of sum(output * grad_out) with respect to the input (grad_out is stored too).
Inputs come from Python's own seeded generator, rounded to a few decimals, so the file depends only on this
script; values that must not tie (for indices and gradients of max, sort, topk) are permutations of a grid.
Non-finite numbers are written as the strings "nan", "inf" and "-inf" (JSON has no literal for them).

Run where PyTorch is installed:  python3 tests/golden/gen_reduction_golden.py
"""
import json
import math
import os
import random

import torch

DTYPES = {
    "float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16, "float16": torch.float16,
    "int64": torch.int64, "int32": torch.int32, "uint8": torch.uint8, "bool": torch.bool,
}
NAMES = {v: k for k, v in DTYPES.items()}
rng = random.Random(20261201)


def number(v):
    if isinstance(v, bool):
        return v
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
    return v


def encode(t):
    t = t.detach()
    flat = t.reshape(-1)
    if t.dtype in (torch.bfloat16, torch.float16):
        flat = flat.to(torch.float64)
    return {"dtype": NAMES[t.dtype], "shape": list(t.shape), "values": [number(v) for v in flat.tolist()]}


def uniform(shape, lo=-2.0, hi=2.0):
    n = math.prod(shape)
    return [round(rng.uniform(lo, hi), 3) for _ in range(n)]


def distinct(shape):
    """A permutation of evenly spaced values: no ties, so maxima and orders are unambiguous."""
    n = math.prod(shape)
    vals = [round(-1.0 + 2.0 * (i + 0.5) / n, 6) for i in range(n)]
    rng.shuffle(vals)
    return vals


def make(values, shape, dtype):
    t = torch.tensor(values, dtype=torch.float64).reshape(shape)
    if DTYPES[dtype] == torch.bool:
        return t != 0
    return t.to(DTYPES[dtype])


CASES = []


def case(name, op, fn, inputs, args=None, grad=True):
    """fn maps the input tensors to one tensor or a tuple; the first output is the differentiated one."""
    xs = [x.clone().requires_grad_(grad and x.is_floating_point()) for x in inputs]
    out = fn(*xs)
    outs = out if isinstance(out, tuple) else (out,)
    outs = [o if isinstance(o, torch.Tensor) else torch.tensor(o) for o in outs]
    entry = {"name": name, "op": op, "args": args or {}, "inputs": [encode(x) for x in inputs],
             "outputs": [encode(o) for o in outs]}
    if xs[0].requires_grad and outs[0].requires_grad:
        g = torch.tensor(uniform(list(outs[0].shape), -1.0, 1.0), dtype=torch.float64).reshape(outs[0].shape)
        g = g.to(outs[0].dtype)
        (outs[0] * g).sum().backward()
        entry["grad_out"] = encode(g)
        entry["grad_in"] = encode(xs[0].grad)
    CASES.append(entry)


def main():
    x345 = make(uniform([3, 4, 5]), [3, 4, 5], "float64")
    for dims, keep in (([1], False), ([0, 2], True), ([-1], False), ([], False)):
        a = {"dim": dims, "keepdim": keep}
        d = dims if dims else list(range(3))
        case(f"sum{dims}{keep}", "sum", lambda x: x.sum(d, keep), [x345], a)
        case(f"mean{dims}{keep}", "mean", lambda x: x.mean(d, keep), [x345], a)
    for dt in ("float32", "bfloat16", "float16"):
        x = make(uniform([4, 33]), [4, 33], dt)
        case(f"sum_{dt}", "sum", lambda x: x.sum(1), [x], {"dim": [1], "keepdim": False})
        case(f"mean_{dt}", "mean", lambda x: x.mean(0), [x], {"dim": [0], "keepdim": False})
    for dt in ("int32", "uint8", "bool", "int64"):
        x = make([rng.randint(0, 5) for _ in range(24)], [4, 6], dt)
        case(f"sum_{dt}", "sum", lambda x: x.sum(1), [x], {"dim": [1], "keepdim": False})
        case(f"prod_{dt}", "prod", lambda x: x.prod(0), [x], {"dim": 0, "keepdim": False})
        case(f"cumsum_{dt}", "cumsum", lambda x: x.cumsum(1), [x], {"dim": 1})
    case("sum_dtype_float64", "sum", lambda x: x.sum(1, dtype=torch.float64), [make(uniform([3, 5]), [3, 5], "float32")],
         {"dim": [1], "keepdim": False, "dtype": "float64"})

    xp = make(uniform([3, 4], 0.5, 1.5), [3, 4], "float64")
    case("prod_dim1", "prod", lambda x: x.prod(1), [xp], {"dim": 1, "keepdim": False})
    case("prod_all", "prod", lambda x: x.prod(), [xp])
    zeros = uniform([4, 5], 0.5, 1.5)
    zeros[1], zeros[7], zeros[8], zeros[15] = 0.0, 0.0, 0.0, 0.0  # one zero in row 0, two in row 1, one in row 3
    xz = make(zeros, [4, 5], "float64")
    case("prod_zeros", "prod", lambda x: x.prod(1, keepdim=True), [xz], {"dim": 1, "keepdim": True})
    case("cumprod_zeros", "cumprod", lambda x: x.cumprod(1), [xz], {"dim": 1})
    case("cumprod_dim0", "cumprod", lambda x: x.cumprod(0), [xp], {"dim": 0})
    case("cumsum_dim0", "cumsum", lambda x: x.cumsum(0), [x345], {"dim": 0})
    case("cumsum_dim2", "cumsum", lambda x: x.cumsum(-1), [x345], {"dim": -1})

    for corr in (0, 1, 2):
        a = {"dim": [1], "correction": corr, "keepdim": False}
        case(f"var_c{corr}", "var", lambda x: torch.var(x, 1, correction=corr), [x345], a)
        case(f"std_c{corr}", "std", lambda x: torch.std(x, 1, correction=corr), [x345], a)
    case("var_dims", "var", lambda x: torch.var(x, [0, 2], correction=1, keepdim=True), [x345],
         {"dim": [0, 2], "correction": 1, "keepdim": True})
    case("std_all", "std", lambda x: torch.std(x), [x345], {"dim": [], "correction": 1, "keepdim": False})

    xd = make(distinct([3, 4, 5]), [3, 4, 5], "float64")
    for d in (0, 1, 2):
        case(f"max_dim{d}", "max_dim", lambda x: torch.max(x, d), [xd], {"dim": d, "keepdim": False})
        case(f"min_dim{d}", "min_dim", lambda x: torch.min(x, d, keepdim=True), [xd], {"dim": d, "keepdim": True})
        case(f"argmax{d}", "argmax", lambda x: torch.argmax(x, d), [xd], {"dim": d, "keepdim": False})
        case(f"argmin{d}", "argmin", lambda x: torch.argmin(x, d), [xd], {"dim": d, "keepdim": False})
    case("argmax_all", "argmax", lambda x: torch.argmax(x), [xd], {})
    case("max_all", "max", lambda x: x.max(), [xd])
    case("min_all", "min", lambda x: x.min(), [xd])
    ties = make([rng.choice([-1.0, 0.5, 2.0]) for _ in range(20)], [4, 5], "float64")
    case("amax_ties", "amax", lambda x: x.amax(1), [ties], {"dim": [1], "keepdim": False})
    case("amin_ties", "amin", lambda x: x.amin([0, 1]), [ties], {"dim": [0, 1], "keepdim": False})
    case("max_all_ties", "max", lambda x: x.max(), [ties])
    case("amax_dims", "amax", lambda x: x.amax([0, 2], keepdim=True), [xd], {"dim": [0, 2], "keepdim": True})
    nans = uniform([3, 4])
    nans[5] = float("nan")
    xn = make(nans, [3, 4], "float64")
    case("max_dim_nan", "max_dim", lambda x: torch.max(x, 1), [xn], {"dim": 1, "keepdim": False}, grad=False)
    case("amax_nan", "amax", lambda x: x.amax(0), [xn], {"dim": [0], "keepdim": False}, grad=False)
    for dt in ("int32", "uint8", "bool", "bfloat16", "float16"):
        x = make([float(rng.randint(0, 9)) for _ in range(12)], [3, 4], dt)
        case(f"max_dim_{dt}", "max_dim", lambda x: torch.max(x, 1), [x], {"dim": 1, "keepdim": False}, grad=False)

    xl = make(uniform([3, 6], -5, 5), [3, 6], "float64")
    case("logsumexp1", "logsumexp", lambda x: torch.logsumexp(x, 1), [xl], {"dim": [1], "keepdim": False})
    case("logsumexp_dims", "logsumexp", lambda x: torch.logsumexp(x, [0, 1], keepdim=True), [xl],
         {"dim": [0, 1], "keepdim": True})
    big = make([1000.0, 999.0, -1000.0, float("-inf"), float("-inf"), float("-inf")], [2, 3], "float64")
    case("logsumexp_extreme", "logsumexp", lambda x: torch.logsumexp(x, 1), [big], {"dim": [1], "keepdim": False},
         grad=False)
    case("logsumexp_float32", "logsumexp", lambda x: torch.logsumexp(x, 0), [xl.float()],
         {"dim": [0], "keepdim": False})

    xa = make([v if abs(v) > 0.2 else 0.7 for v in distinct([3, 5])], [3, 5], "float64")
    for p in (2, 1, 3, 0.5, 1.5, float("inf"), float("-inf"), 0):
        a = {"p": number(float(p)), "dim": [1], "keepdim": False}
        case(f"norm_p{p}", "norm", lambda x: torch.linalg.vector_norm(x, p, 1), [xa], a, grad=p != 0)
    case("norm_all", "norm", lambda x: torch.linalg.vector_norm(x), [xa], {"p": 2.0, "dim": [], "keepdim": False})
    case("norm_dims_keep", "norm", lambda x: torch.linalg.vector_norm(x, 2, [0, 1], True), [xa],
         {"p": 2.0, "dim": [0, 1], "keepdim": True})
    case("norm_float32", "norm", lambda x: torch.linalg.vector_norm(x, 2, 0), [xa.float()],
         {"p": 2.0, "dim": [0], "keepdim": False})

    for d, desc in ((1, False), (0, True), (2, True)):
        a = {"dim": d, "descending": desc}
        case(f"sort{d}{desc}", "sort", lambda x: torch.sort(x, d, desc), [xd], a)
        case(f"argsort{d}{desc}", "argsort", lambda x: torch.argsort(x, d, desc), [xd], a)
    stable = make([float(rng.randint(0, 3)) for _ in range(24)], [2, 12], "float64")
    case("sort_stable_ties", "sort", lambda x: torch.sort(x, stable=True, dim=1, descending=False), [stable],
         {"dim": 1, "descending": False}, grad=False)
    case("sort_stable_ties_desc", "sort", lambda x: torch.sort(x, stable=True, dim=1, descending=True), [stable],
         {"dim": 1, "descending": True}, grad=False)
    for dt in ("int64", "int32", "uint8", "float32", "bfloat16"):
        x = make(distinct([2, 7]) if dt in ("float32", "bfloat16") else [float(v) for v in rng.sample(range(100), 14)],
                 [2, 7], dt)
        case(f"sort_{dt}", "sort", lambda x: torch.sort(x, stable=True, dim=1), [x], {"dim": 1, "descending": False},
             grad=False)
        case(f"topk_{dt}", "topk", lambda x: torch.topk(x, 3, 1), [x],
             {"k": 3, "dim": 1, "largest": True, "sorted": True}, grad=False)
    for k, d, largest in ((3, 1, True), (2, 0, False), (5, 2, True), (1, -1, False)):
        a = {"k": k, "dim": d, "largest": largest, "sorted": True}
        case(f"topk{k}{d}{largest}", "topk", lambda x: torch.topk(x, k, d, largest), [xd], a)
    nanrow = make([1.0, float("nan"), 3.0, -2.0, float("nan"), 0.5], [1, 6], "float64")
    case("sort_nan", "sort", lambda x: torch.sort(x, stable=True, dim=1), [nanrow], {"dim": 1, "descending": False},
         grad=False)
    case("sort_nan_desc", "sort", lambda x: torch.sort(x, stable=True, dim=1, descending=True), [nanrow],
         {"dim": 1, "descending": True}, grad=False)
    case("topk_nan", "topk", lambda x: torch.topk(x, 3, 1), [nanrow], {"k": 3, "dim": 1, "largest": True,
                                                                       "sorted": True}, grad=False)

    for dt in ("float64", "int32", "uint8", "bool"):
        x = make([float(rng.random() < 0.4) * rng.randint(1, 3) for _ in range(20)], [4, 5], dt)
        for d in (0, 1):
            case(f"any{d}_{dt}", "any", lambda x: torch.any(x, d), [x], {"dim": d, "keepdim": False})
            case(f"all{d}_{dt}", "all", lambda x: torch.all(x, d, keepdim=True), [x], {"dim": d, "keepdim": True})
        case(f"any_all_{dt}", "any", lambda x: torch.any(x), [x], {})
        case(f"all_all_{dt}", "all", lambda x: torch.all(x), [x], {})

    a = make(uniform([3, 4]), [3, 4], "float64")
    b = a + 1e-9
    c = a.clone()
    c[1, 2] = c[1, 2] + 1e-3
    withnan = a.clone()
    withnan[0, 0] = float("nan")
    for name, (u, v), kw in (("close", (a, b), {}), ("far", (a, c), {}), ("loose", (a, c), {"rtol": 1e-2}),
                             ("nan", (withnan, withnan), {}), ("nan_equal", (withnan, withnan), {"equal_nan": True}),
                             ("broadcast", (a, a[1:2]), {})):
        case(f"allclose_{name}", "allclose", lambda u, v: torch.allclose(u, v, **kw), [u, v], kw, grad=False)
    for name, (u, v) in (("same", (a, a.clone())), ("differ", (a, c)), ("shape", (a, a.reshape(4, 3))),
                         ("nan", (withnan, withnan))):
        case(f"equal_{name}", "equal", lambda u, v: torch.equal(u, v), [u, v], grad=False)

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reduction_golden.json")
    with open(path, "w") as f:
        json.dump({"generator": "tests/golden/gen_reduction_golden.py", "torch_version": torch.__version__,
                   "cases": CASES}, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {len(CASES)} cases to {path}")


if __name__ == "__main__":
    main()
