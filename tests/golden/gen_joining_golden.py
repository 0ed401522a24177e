#!/usr/bin/env python3
"""Writes joining_golden.json beside this script: PyTorch's results for minidl's joining family (cat, stack, split,
chunk, unbind, flip, roll, repeat, repeat_interleave, tril, triu, where, masked_fill), for tests/test_joining.cpp
to compare with element by element.

Each case names the op, its arguments, its input tensors and PyTorch's output (a list of tensors for the splitting
ops); differentiable cases also hold a random gradient of the output and PyTorch's gradients of the floating inputs.
Inputs are multiples of 1/8 (exact in every floating dtype), so the forward results are exact and compared exactly;
the gradients are sums of float64 or float32 values. A tensor is {"dtype", "shape", "values" (flat, row-major;
bools as 0/1)}.

Run where PyTorch is installed:  python3 tests/golden/gen_joining_golden.py
"""
import json
import os

import torch

DTYPES = {
    "float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16, "float16": torch.float16,
    "int64": torch.int64, "int32": torch.int32, "uint8": torch.uint8, "bool": torch.bool,
}
NAMES = {v: k for k, v in DTYPES.items()}
GEN = torch.Generator().manual_seed(23)


def make(shape, dtype):
    """Fresh values: multiples of 1/8 in [-6, 6) for floating dtypes, small integers otherwise, random bools."""
    dt = DTYPES[dtype]
    if dt == torch.bool:
        return torch.randint(0, 2, shape, generator=GEN).bool()
    if dt == torch.uint8:
        return torch.randint(0, 200, shape, generator=GEN).to(dt)
    if dt in (torch.int64, torch.int32):
        return torch.randint(-100, 100, shape, generator=GEN).to(dt)
    return (torch.randint(-48, 48, shape, generator=GEN).double() / 8).to(dt)


def enc(t):
    t = t.detach()
    values = t.to(torch.int64) if t.dtype == torch.bool else t
    flat = values.reshape(-1).tolist()
    if t.is_floating_point():
        flat = [float(v) for v in flat]
    return {"dtype": NAMES[t.dtype], "shape": list(t.shape), "values": flat}


CASES = []


def case(op, inputs, fn, params=None, grad=False):
    """Runs fn(*inputs) and records the case; with grad, also d(sum(out * r))/d(input) for the floating inputs."""
    leaves = [x.clone().requires_grad_(grad and x.is_floating_point()) for x in inputs]
    out = fn(*leaves)
    entry = {"op": op, "params": params or {}, "inputs": [enc(x) for x in inputs]}
    if isinstance(out, (list, tuple)):
        entry["outputs"] = [enc(o) for o in out]
    else:
        entry["output"] = enc(out)
    if grad:
        r = torch.randn(out.shape, generator=GEN, dtype=torch.float64).to(out.dtype)
        wrt = [x for x in leaves if x.requires_grad]
        grads = torch.autograd.grad(out, wrt, r, allow_unused=True)
        entry["grad_output"] = enc(r)
        it = iter(grads)
        entry["grads"] = [enc(next(it)) if x.requires_grad else None for x in leaves]
    CASES.append(entry)


def main():
    # cat: promotion across dtypes, the legacy empty 1-d tensor, negative dims, bool and uint8.
    case("cat", [make((2, 3), "float32"), make((2, 4), "float32")], lambda a, b: torch.cat([a, b], 1),
         {"dim": 1}, grad=True)
    case("cat", [make((2, 3), "float64"), make((1, 3), "float32"), make((3, 3), "float64")],
         lambda a, b, c: torch.cat([a, b, c], 0), {"dim": 0}, grad=True)
    case("cat", [make((2, 3), "int32"), make((1, 3), "int64")], lambda a, b: torch.cat([a, b]), {"dim": 0})
    case("cat", [make((2, 3), "float16"), make((0,), "float32"), make((2, 1), "bfloat16")],
         lambda a, b, c: torch.cat([a, b, c], -1), {"dim": -1})
    case("cat", [make((3,), "bool"), make((2,), "bool")], lambda a, b: torch.cat([a, b]), {"dim": 0})
    case("cat", [make((2, 2, 3), "uint8"), make((2, 1, 3), "bool")], lambda a, b: torch.cat([a, b], 1), {"dim": 1})
    case("cat", [make((2, 3), "bfloat16"), make((2, 5), "bfloat16")], lambda a, b: torch.cat([a, b], 1), {"dim": 1})
    # stack
    case("stack", [make((2, 3), "float64"), make((2, 3), "float64"), make((2, 3), "float64")],
         lambda a, b, c: torch.stack([a, b, c], 1), {"dim": 1}, grad=True)
    case("stack", [make((2, 3), "int64"), make((2, 3), "int32")], lambda a, b: torch.stack([a, b], -1), {"dim": -1})
    case("stack", [make((), "float16"), make((), "float16")], lambda a, b: torch.stack([a, b]), {"dim": 0})
    # split, chunk, unbind: lists of views
    case("split", [make((7, 3), "float32")], lambda a: a.split(3), {"split_size": 3, "dim": 0})
    case("split", [make((2, 6), "int64")], lambda a: a.split([1, 0, 5], 1), {"sizes": [1, 0, 5], "dim": 1})
    case("chunk", [make((7, 2), "bfloat16")], lambda a: a.chunk(3), {"chunks": 3, "dim": 0})
    case("chunk", [make((2, 6), "bool")], lambda a: a.chunk(4, -1), {"chunks": 4, "dim": -1})
    case("chunk", [make((0, 3), "float32")], lambda a: a.chunk(3), {"chunks": 3, "dim": 0})
    case("unbind", [make((3, 2, 2), "uint8")], lambda a: a.unbind(1), {"dim": 1})
    # flip, roll
    case("flip", [make((2, 3, 4), "float64")], lambda a: a.flip([0, 2]), {"dims": [0, 2]}, grad=True)
    case("flip", [make((3, 5), "int32")], lambda a: a.flip([-1]), {"dims": [-1]})
    case("flip", [make((4,), "bool")], lambda a: a.flip([0]), {"dims": [0]})
    case("roll", [make((3, 4), "float32")], lambda a: a.roll([1, -2], [0, 1]), {"shifts": [1, -2], "dims": [0, 1]},
         grad=True)
    case("roll", [make((3, 4), "uint8")], lambda a: a.roll(5), {"shifts": [5], "dims": []})
    case("roll", [make((2, 5), "float16")], lambda a: a.roll(-7, 1), {"shifts": [-7], "dims": [1]})
    # repeat, repeat_interleave
    case("repeat", [make((2, 3), "float64")], lambda a: a.repeat(2, 1, 3), {"repeats": [2, 1, 3]}, grad=True)
    case("repeat", [make((3,), "bool")], lambda a: a.repeat(2, 2), {"repeats": [2, 2]})
    case("repeat_interleave", [make((2, 3), "float64")], lambda a: a.repeat_interleave(2, 1),
         {"repeats": 2, "dim": 1}, grad=True)
    case("repeat_interleave", [make((2, 3), "int32")], lambda a: a.repeat_interleave(3), {"repeats": 3})
    case("repeat_interleave", [make((3, 2), "float32"), torch.tensor([1, 0, 2])],
         lambda a, r: a.repeat_interleave(r, 0), {"dim": 0}, grad=True)
    case("repeat_interleave", [make((2, 2), "bfloat16"), torch.tensor([2, 1, 0, 3])],
         lambda a, r: a.repeat_interleave(r), {})
    case("repeat_interleave", [torch.tensor([2, 0, 1, 3])], lambda r: torch.repeat_interleave(r), {})
    # tril, triu
    case("tril", [make((3, 4), "float64")], lambda a: a.tril(), {"diagonal": 0}, grad=True)
    case("tril", [make((2, 3, 3), "int32")], lambda a: a.tril(-1), {"diagonal": -1})
    case("triu", [make((4, 3), "float32")], lambda a: a.triu(1), {"diagonal": 1}, grad=True)
    case("triu", [make((2, 2, 4), "bool")], lambda a: a.triu(-1), {"diagonal": -1})
    case("triu", [make((3, 3), "float16")], lambda a: a.triu(5), {"diagonal": 5})
    # where: broadcasting, promotion, the Scalar forms
    case("where", [make((3, 1), "bool"), make((1, 4), "float32"), make((3, 4), "float64")],
         lambda c, a, b: torch.where(c, a, b), {}, grad=True)
    case("where", [make((2, 3), "bool"), make((2, 3), "bfloat16"), make((3,), "float16")],
         lambda c, a, b: torch.where(c, a, b), {})
    case("where", [make((2, 3), "bool"), make((2, 3), "int32"), make((), "int64")],
         lambda c, a, b: torch.where(c, a, b), {})
    case("where", [make((4,), "bool"), make((4,), "int64")], lambda c, a: torch.where(c, a, 2.5),
         {"other": 2.5})
    case("where", [make((4,), "bool"), make((2, 4), "float64")], lambda c, b: torch.where(c, -1.5, b),
         {"self": -1.5}, grad=True)
    case("where", [make((2, 3), "bool")], lambda c: torch.where(c, 1, 2), {"self": 1, "other": 2})
    # masked_fill: Scalar and 0-d Tensor values, broadcast mask and self
    case("masked_fill", [make((3, 4), "float32"), make((4,), "bool")], lambda x, m: x.masked_fill(m, -1.5),
         {"value": -1.5}, grad=True)
    case("masked_fill", [make((3, 4), "int64"), make((3, 4), "bool")], lambda x, m: x.masked_fill(m, 7),
         {"value": 7})
    case("masked_fill", [make((4,), "float16"), make((3, 1), "bool")], lambda x, m: x.masked_fill(m, 0.25),
         {"value": 0.25})
    case("masked_fill", [make((2, 3), "bool"), make((2, 3), "bool")], lambda x, m: x.masked_fill(m, True),
         {"value": True})
    case("masked_fill", [make((2, 3), "float64"), make((2, 3), "bool"), make((), "float64")],
         lambda x, m, v: x.masked_fill(m, v), {}, grad=True)

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "joining_golden.json")
    with open(path, "w") as f:
        json.dump({"torch_version": torch.__version__, "cases": CASES}, f)
        f.write("\n")
    print(f"wrote {len(CASES)} cases to {path}")


if __name__ == "__main__":
    main()
