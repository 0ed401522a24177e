#!/usr/bin/env python3
"""Writes math_golden.json beside this script: PyTorch's results for minidl's elementwise math functions, for
tests/test_math.cpp to compare minidl's with, element by element.

Each case holds an op name (the C++ test maps it to the minidl call), its scalar arguments, its input tensors
(dtype, shape, values) and PyTorch's output; for float32 and float64 cases of differentiable ops also a random
upstream gradient and the gradient of every input. Inputs are drawn where the op is smooth (no kink or pole
within reach of rounding), on a grid of quarters for the rounding ops (half-way cases included), and with NaN
and infinities for isnan / isinf / isfinite. bfloat16 and float16 results are PyTorch's float32 result rounded
to the dtype, as PyTorch computes them (in float32), so the file does not depend on which 16-bit CPU kernels a
PyTorch version has. Values are written with repr (exact); NaN and infinities as the strings "nan", "inf",
"-inf".

Run where PyTorch is installed:  python3 tests/golden/gen_math_golden.py
"""
import json
import math
import os

import torch

DTYPES = {
    "float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16, "float16": torch.float16,
    "int64": torch.int64, "int32": torch.int32, "uint8": torch.uint8, "bool": torch.bool,
}
NAMES = {v: k for k, v in DTYPES.items()}
FLOATS = ["float32", "float64", "bfloat16", "float16"]
REDUCED = {torch.bfloat16, torch.float16}


def number(v):
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return v
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def encode(t):
    t = t.detach()
    if t.dtype in REDUCED:
        values = t.to(torch.float64).flatten().tolist()
    else:
        values = t.flatten().tolist()
    return {"dtype": NAMES[t.dtype], "shape": list(t.shape), "values": [number(v) for v in values]}


class Draw:
    """Seeded inputs: each case gets its own generator, so adding a case changes no other."""

    def __init__(self, seed):
        self.g = torch.Generator().manual_seed(seed)

    def uniform(self, shape, lo, hi, dtype):
        x = torch.rand(shape, generator=self.g, dtype=torch.float64) * (hi - lo) + lo
        return x.to(dtype)

    def away(self, shape, lo, hi, dtype):
        """|x| in [lo, hi] with a random sign."""
        x = self.uniform(shape, lo, hi, torch.float64)
        s = torch.randint(0, 2, shape, generator=self.g) * 2 - 1
        return (x * s).to(dtype)

    def quarters(self, shape, dtype):
        return (torch.randint(-24, 25, shape, generator=self.g).to(torch.float64) / 4).to(dtype)

    def ints(self, shape, lo, hi, dtype):
        return torch.randint(lo, hi, shape, generator=self.g).to(dtype)

    def nonzero_ints(self, shape, lo, hi, dtype):
        x = torch.randint(lo, hi, shape, generator=self.g)
        return torch.where(x == 0, torch.ones_like(x), x).to(dtype)

    def specials(self, shape, dtype):
        x = self.uniform(shape, -3, 3, torch.float64).flatten()
        pick = torch.randint(0, 5, x.shape, generator=self.g)
        x[pick == 0] = float("nan")
        x[pick == 1] = float("inf")
        x[pick == 2] = float("-inf")
        return x.reshape(shape).to(dtype)


def run(fn, inputs):
    """PyTorch's result; 16-bit floating inputs are computed in float32 and rounded, as PyTorch does."""
    reduced = [t.dtype for t in inputs if t.dtype in REDUCED]
    if reduced:
        out = fn(*[t.float() if t.dtype in REDUCED else t for t in inputs])
        return out.to(reduced[0]) if out.is_floating_point() else out
    return fn(*inputs)


CASES = []


def stable_hash(s):
    """A seed from a name (Python's hash() of a string changes between runs)."""
    return sum((i + 1) * ord(ch) for i, ch in enumerate(s))


def case(name, op, fn, inputs, params=None, grad=True):
    out = run(fn, inputs)
    c = {"name": name, "op": op, "params": params or {}, "inputs": [encode(t) for t in inputs], "output": encode(out)}
    if grad and out.dtype in (torch.float32, torch.float64) and all(t.is_floating_point() for t in inputs):
        leaves = [t.detach().clone().requires_grad_(True) for t in inputs]
        y = fn(*leaves)
        g = Draw(len(CASES) + 1000).uniform(tuple(y.shape), -1, 1, y.dtype)
        grads = torch.autograd.grad(y, leaves, g, allow_unused=True)
        c["grad_output"] = encode(g)
        c["grads"] = [encode(gr) if gr is not None else encode(torch.zeros_like(t)) for gr, t in zip(grads, leaves)]
    CASES.append(c)


# (op, torch function, input domain): the floating functions.
UNARY_FLOAT = [
    ("sin", torch.sin, (-3, 3)), ("cos", torch.cos, (-3, 3)), ("tan", torch.tan, (-1.2, 1.2)),
    ("asin", torch.asin, (-0.95, 0.95)), ("acos", torch.acos, (-0.95, 0.95)), ("atan", torch.atan, (-4, 4)),
    ("sinh", torch.sinh, (-3, 3)), ("cosh", torch.cosh, (-3, 3)), ("erf", torch.erf, (-2.5, 2.5)),
    ("erfc", torch.erfc, (-2.5, 2.5)), ("exp2", torch.exp2, (-4, 4)), ("expm1", torch.expm1, (-3, 3)),
    ("log2", torch.log2, (0.1, 5)), ("log10", torch.log10, (0.1, 5)), ("log1p", torch.log1p, (-0.9, 4)),
    ("rsqrt", torch.rsqrt, (0.1, 5)), ("reciprocal", torch.reciprocal, None), ("exp", torch.exp, (-3, 3)),
    ("log", torch.log, (0.1, 5)), ("sqrt", torch.sqrt, (0.1, 5)), ("sigmoid", torch.sigmoid, (-6, 6)),
    ("tanh", torch.tanh, (-3, 3)), ("gelu", torch.nn.functional.gelu, (-3, 3)),
]


def unary_float_cases():
    for op, fn, dom in UNARY_FLOAT:
        for i, dt in enumerate(FLOATS):
            d = Draw(stable_hash(op) * 10 + i)
            shape = (3, 5) if dt != "float64" else (4, 3)
            x = d.away(shape, 0.2, 3, DTYPES[dt]) if dom is None else d.uniform(shape, dom[0], dom[1], DTYPES[dt])
            case(f"{op}_{dt}", op, fn, [x])
        if op not in ("gelu",):
            # Integral inputs give float32.
            d = Draw(stable_hash(op) + 7)
            lo, hi = (1, 5) if dom is None or dom[0] > 0 else (-2, 3)
            if op in ("asin", "acos"):
                lo, hi = -1, 2
            for dt in ("int64", "int32", "uint8"):
                if dt == "uint8" and lo < 0:
                    continue
                case(f"{op}_{dt}", op, fn, [d.ints((6,), lo, hi, DTYPES[dt])])


def keep_dtype_cases():
    for op, fn in (("floor", torch.floor), ("ceil", torch.ceil), ("round", torch.round), ("trunc", torch.trunc),
                   ("sign", torch.sign), ("abs", torch.abs), ("square", torch.square), ("neg", torch.neg)):
        for i, dt in enumerate(FLOATS):
            d = Draw(stable_hash(op) * 10 + i)
            x = d.quarters((4, 6), DTYPES[dt]) if op in ("floor", "ceil", "round", "trunc", "sign") else \
                d.uniform((4, 6), -3, 3, DTYPES[dt])
            case(f"{op}_{dt}", op, fn, [x], grad=op not in ("floor", "ceil", "round", "trunc", "sign"))
        for dt in ("int64", "int32", "uint8"):
            d = Draw(stable_hash(op) + 3)
            lo = 0 if dt == "uint8" else -9
            case(f"{op}_{dt}", op, fn, [d.ints((7,), lo, 10, DTYPES[dt])])
    d = Draw(11)
    b = d.ints((6,), 0, 2, torch.bool)
    case("sign_bool", "sign", torch.sign, [b])
    case("square_bool", "square", torch.square, [b])
    for dec in (2, 1, -1, -2):
        for i, dt in enumerate(("float32", "float64", "bfloat16")):
            d = Draw(50 + i * 7 + dec)
            x = d.uniform((3, 4), -400, 400, DTYPES[dt])
            case(f"round_decimals{dec}_{dt}", "round_decimals", lambda t, dec=dec: torch.round(t, decimals=dec), [x],
                 {"decimals": dec}, grad=False)


def tests_cases():
    for op, fn in (("isnan", torch.isnan), ("isinf", torch.isinf), ("isfinite", torch.isfinite)):
        for i, dt in enumerate(FLOATS):
            case(f"{op}_{dt}", op, fn, [Draw(70 + i).specials((4, 5), DTYPES[dt])])
        case(f"{op}_int64", op, fn, [Draw(80).ints((5,), -5, 5, torch.int64)])
        case(f"{op}_bool", op, fn, [Draw(81).ints((5,), 0, 2, torch.bool)])


def binary_cases():
    shapes = [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((3, 1), (1, 5))]
    for i, dt in enumerate(FLOATS):
        for j, (sa, sb) in enumerate(shapes):
            d = Draw(100 + 10 * i + j)
            case(f"atan2_{dt}_{j}", "atan2", torch.atan2,
                 [d.uniform(sa, -2, 2, DTYPES[dt]), d.away(sb, 0.3, 2, DTYPES[dt])])
            case(f"hypot_{dt}_{j}", "hypot", torch.hypot,
                 [d.away(sa, 0.2, 3, DTYPES[dt]), d.away(sb, 0.2, 3, DTYPES[dt])])
            case(f"fmod_{dt}_{j}", "fmod", torch.fmod,
                 [d.uniform(sa, -6, 6, DTYPES[dt]), d.away(sb, 0.7, 2.5, DTYPES[dt])])
            case(f"remainder_{dt}_{j}", "remainder", torch.remainder,
                 [d.uniform(sa, -6, 6, DTYPES[dt]), d.away(sb, 0.7, 2.5, DTYPES[dt])])
    d = Draw(140)
    case("atan2_int64", "atan2", torch.atan2,
         [d.ints((6,), -3, 4, torch.int64), d.nonzero_ints((6,), -3, 4, torch.int64)])
    for dt in ("int64", "int32"):
        x, y = d.ints((8,), -20, 21, DTYPES[dt]), d.nonzero_ints((8,), -6, 7, DTYPES[dt])
        case(f"fmod_{dt}", "fmod", torch.fmod, [x, y])
        case(f"remainder_{dt}", "remainder", torch.remainder, [x, y])
    case("fmod_uint8", "fmod", torch.fmod, [d.ints((8,), 0, 200, torch.uint8), d.ints((8,), 1, 9, torch.uint8)])
    for i, (dt, s) in enumerate((("float32", 1.5), ("float64", -2.25), ("int64", 3), ("int32", -4), ("int64", 2.5),
                                 ("float32", 0.3), ("bfloat16", 0.3), ("float16", -0.7))):
        x = d.uniform((3, 4), -7, 7, DTYPES[dt]) if dt.startswith("float") or dt.endswith("16") else \
            d.ints((3, 4), -20, 21, DTYPES[dt])
        # PyTorch casts the scalar to the tensor's floating dtype (0.3 is 0.30078125 in bfloat16).
        held = float(torch.tensor(s, dtype=x.dtype)) if x.is_floating_point() else s
        case(f"fmod_scalar_{i}", "fmod_scalar", lambda t, held=held: torch.fmod(t, held), [x], {"other": s})


def clamp_cases():
    for i, dt in enumerate(FLOATS):
        d = Draw(200 + i)
        x = d.uniform((4, 5), -3, 3, DTYPES[dt])
        for name, lo, hi in (("both", -1.0, 1.5), ("lower", -0.5, None), ("upper", None, 0.75), ("crossed", 1.0, -1.0)):
            case(f"clamp_{name}_{dt}", "clamp", lambda t, lo=lo, hi=hi: torch.clamp(t, lo, hi), [x],
                 {"min": lo, "max": hi})
        case(f"clamp_min_{dt}", "clamp_min", lambda t: torch.clamp_min(t, 0.25), [x], {"min": 0.25})
        case(f"clamp_max_{dt}", "clamp_max", lambda t: torch.clamp_max(t, -0.25), [x], {"max": -0.25})
        lo, hi = d.uniform((5,), -2, 0, DTYPES[dt]), d.uniform((4, 1), 0, 2, DTYPES[dt])
        case(f"clamp_tensor_{dt}", "clamp_tensor", lambda t, a, b: torch.clamp(t, a, b), [x, lo, hi])
        case(f"clamp_min_tensor_{dt}", "clamp_min_tensor", lambda t, a: torch.clamp_min(t, a), [x, lo])
        case(f"clamp_max_tensor_{dt}", "clamp_max_tensor", lambda t, b: torch.clamp_max(t, b), [x, hi])
        crossed_lo, crossed_hi = d.uniform((4, 5), -1, 1, DTYPES[dt]), d.uniform((4, 5), -1, 1, DTYPES[dt])
        case(f"clamp_tensor_mixed_{dt}", "clamp_tensor", lambda t, a, b: torch.clamp(t, a, b),
             [x, crossed_lo, crossed_hi])
    d = Draw(220)
    xi = d.ints((3, 5), -10, 11, torch.int64)
    case("clamp_int64", "clamp", lambda t: torch.clamp(t, -3, 4), [xi], {"min": -3, "max": 4})
    case("clamp_int64_float_bound", "clamp", lambda t: torch.clamp(t, min=0.5), [xi], {"min": 0.5, "max": None})
    case("clamp_int32", "clamp", lambda t: torch.clamp(t, max=2), [d.ints((7,), -10, 11, torch.int32)],
         {"min": None, "max": 2})
    case("clamp_uint8", "clamp", lambda t: torch.clamp(t, 10, 200), [d.ints((9,), 0, 256, torch.uint8)],
         {"min": 10, "max": 200})
    case("clamp_bool", "clamp", lambda t: torch.clamp(t, 0, 1), [d.ints((5,), 0, 2, torch.bool)], {"min": 0, "max": 1})
    case("clamp_tensor_int64", "clamp_tensor", lambda t, a, b: torch.clamp(t, a, b),
         [xi, d.ints((5,), -6, 0, torch.int64), d.ints((3, 1), 0, 6, torch.int64)])
    xn = torch.tensor([float("nan"), 1.0, -2.0, 0.5, float("inf"), float("-inf")])
    case("clamp_nan_input", "clamp", lambda t: torch.clamp(t, -1.0, 1.0), [xn], {"min": -1.0, "max": 1.0}, grad=False)


def lerp_cases():
    for i, dt in enumerate(FLOATS):
        d = Draw(300 + i)
        a, b = d.uniform((3, 4), -2, 2, DTYPES[dt]), d.uniform((3, 4), -2, 2, DTYPES[dt])
        for j, w in enumerate((0.3, 0.5, 0.8, -0.4, 1.7)):
            case(f"lerp_{dt}_{j}", "lerp", lambda s, e, w=w: torch.lerp(s, e, w), [a, b], {"weight": w})
        w = d.uniform((3, 4), -0.5, 1.5, DTYPES[dt])
        case(f"lerp_tensor_{dt}", "lerp_tensor", torch.lerp, [a, b, w])
        case(f"lerp_tensor_broadcast_{dt}", "lerp_tensor", torch.lerp,
             [d.uniform((2, 1, 4), -2, 2, DTYPES[dt]), d.uniform((3, 1), -2, 2, DTYPES[dt]),
              d.uniform((4,), -0.5, 1.5, DTYPES[dt])])


def main():
    unary_float_cases()
    keep_dtype_cases()
    tests_cases()
    binary_cases()
    clamp_cases()
    lerp_cases()
    names = [c["name"] for c in CASES]
    assert len(names) == len(set(names)), "case names must be unique"
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "math_golden.json")
    with open(path, "w") as f:
        json.dump({"generator": "tests/golden/gen_math_golden.py", "cases": CASES}, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {len(CASES)} cases to {path}")


if __name__ == "__main__":
    main()
