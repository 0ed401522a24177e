#!/usr/bin/env python3
"""Writes linalg_golden.json beside this script: PyTorch's results for tests/test_linalg.cpp and
tests/test_tensor_access.cpp to compare minidl's with, element by element.

- products: matmul (1-D and N-D operands, broadcast batch dims, transposed views), mm, bmm, mv, dot, outer, addmm,
  baddbmm, addmv and einsum equations, in float64 and float32 (and int64 where PyTorch's CPU takes it). Each case
  holds its inputs (as stored: an input marked "t" is used as its last-two-dims transpose), the gradient flowing
  into the output, the output, and the gradient of every floating input.
- lowp_products (tests/test_matmul_lowp.cpp): the same family and linear in bfloat16 and float16, on PyTorch's
  CPU, each with "k", the longest reduction of its forward and backward products (the test's tolerance scales
  with it).
- printing: the text PyTorch lays out for a tensor's values (torch._tensor_str._tensor_str at indent 0, which is
  str(tensor) without the "tensor(" prefix and its indent), for small, large (summarised), integral, scientific
  and non-finite values. Bools are written true/false, as minidl prints them.

Inputs come from a fixed integer sequence (multiples of 1/64 in [-2, 2), exact in every dtype used), not from
PyTorch's generator, so every PyTorch version writes the same inputs.

Run where PyTorch is installed:  python3 tests/golden/gen_linalg_golden.py
"""
import json
import math
import os

import torch

DTYPES = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64, "bfloat16": torch.bfloat16,
          "float16": torch.float16, "int32": torch.int32, "uint8": torch.uint8, "bool": torch.bool}


class Values:
    """A deterministic sequence: a 31-bit LCG mapped to multiples of 1/64 in [-2, 2) (integers in [-4, 4] for
    integral dtypes)."""

    def __init__(self, seed):
        self.state = seed

    def next_int(self):
        self.state = (1103515245 * self.state + 12345) % (2 ** 31)
        return self.state >> 8

    def tensor(self, shape, dtype):
        n = math.prod(shape)
        if dtype.is_floating_point:
            vals = [(self.next_int() % 256 - 128) / 64.0 for _ in range(n)]
        else:
            vals = [self.next_int() % 9 - 4 for _ in range(n)]
        return torch.tensor(vals, dtype=dtype).reshape(shape)


def encode(t):
    vals = t.detach().reshape(-1).tolist()
    if t.dtype.is_floating_point:
        vals = [v if math.isfinite(v) else repr(v) for v in vals]
    elif t.dtype == torch.bool:
        vals = [int(v) for v in vals]
    return {"shape": list(t.shape), "values": vals}


def product_case(gen, op, dtype, shapes, fn, layouts=None, **extra):
    """Inputs of `shapes` (as stored), transposed where layouts says "t", fed to fn; output and gradients."""
    layouts = layouts or ["" for _ in shapes]
    leaves = [gen.tensor(s, DTYPES[dtype]) for s in shapes]
    floating = DTYPES[dtype].is_floating_point
    if floating:
        for t in leaves:
            t.requires_grad_(True)
    used = [t.mT if lay == "t" else t for t, lay in zip(leaves, layouts)]
    out = fn(*used)
    case = {"op": op, "dtype": dtype, "inputs": [encode(t) for t in leaves], "layouts": layouts,
            "output": encode(out), **extra}
    if floating:
        g = gen.tensor(list(out.shape), DTYPES[dtype])
        out.backward(g)
        case["grad_output"] = encode(g)
        case["grads"] = [encode(t.grad) for t in leaves]
    return case


def products():
    gen = Values(2024)
    cases = []
    matmul_shapes = [
        ([3], [3]), ([3], [3, 4]), ([2, 3], [3]), ([2, 3], [3, 4]), ([2, 2, 3], [3, 4]), ([3], [2, 3, 4]),
        ([2, 2, 3], [3]), ([4, 3], [2, 3, 5]), ([2, 1, 3, 4], [5, 4, 2]), ([3, 1, 2, 3], [1, 4, 3, 2]),
        ([2, 3, 4], [2, 4, 5]), ([1, 2, 3], [4, 3, 2]), ([2, 0, 3], [3, 4]), ([2, 3, 0], [0, 4]),
    ]
    for dtype in ("float64", "float32"):
        for sa, sb in matmul_shapes:
            cases.append(product_case(gen, "matmul", dtype, [sa, sb], torch.matmul))
        # Transposed views (stored as their transposes' blocks).
        cases.append(product_case(gen, "matmul", dtype, [[3, 2], [4, 3]], torch.matmul, ["t", "t"]))
        cases.append(product_case(gen, "matmul", dtype, [[2, 4, 3], [4, 5]], torch.matmul, ["t", ""]))
        cases.append(product_case(gen, "matmul", dtype, [[2, 3, 4], [1, 5, 4]], torch.matmul, ["", "t"]))
        cases.append(product_case(gen, "mm", dtype, [[3, 4], [4, 2]], torch.mm))
        cases.append(product_case(gen, "bmm", dtype, [[2, 3, 4], [2, 4, 5]], torch.bmm))
        cases.append(product_case(gen, "mv", dtype, [[3, 4], [4]], torch.mv))
        cases.append(product_case(gen, "dot", dtype, [[5], [5]], torch.dot))
        cases.append(product_case(gen, "outer", dtype, [[3], [4]], torch.outer))
        cases.append(product_case(gen, "addmm", dtype, [[3], [2, 4], [4, 3]],
                                  lambda i, a, b: torch.addmm(i, a, b, beta=0.5, alpha=2.0), beta=0.5, alpha=2.0))
        cases.append(product_case(gen, "addmm", dtype, [[2, 3], [2, 4], [4, 3]], torch.addmm, beta=1.0, alpha=1.0))
        cases.append(product_case(gen, "baddbmm", dtype, [[1, 3, 1], [2, 3, 4], [2, 4, 2]],
                                  lambda i, a, b: torch.baddbmm(i, a, b, beta=-1.5, alpha=0.25), beta=-1.5,
                                  alpha=0.25))
        cases.append(product_case(gen, "addmv", dtype, [[1], [3, 4], [4]],
                                  lambda i, a, b: torch.addmv(i, a, b, beta=2.0, alpha=-1.0), beta=2.0, alpha=-1.0))
    for sa, sb in (([2, 3], [3, 4]), ([3], [3]), ([2, 2, 3], [3]), ([2, 1, 3, 4], [5, 4, 2])):
        cases.append(product_case(gen, "matmul", "int64", [sa, sb], torch.matmul))
    cases.append(product_case(gen, "addmm", "int64", [[3], [2, 4], [4, 3]],
                              lambda i, a, b: torch.addmm(i, a, b, beta=2, alpha=3), beta=2, alpha=3))

    einsums = [
        ("ij,jk->ik", [[2, 3], [3, 4]]), ("ij,jk", [[2, 3], [3, 4]]), ("bij,bjk->bik", [[2, 3, 4], [2, 4, 5]]),
        ("bhqd,bhkd->bhqk", [[2, 3, 4, 5], [2, 3, 6, 5]]), ("ii->i", [[4, 4]]), ("ii", [[4, 4]]),
        ("ij->ji", [[2, 3]]), ("ji", [[2, 3]]), ("ij->", [[2, 3]]), ("ij->j", [[2, 3]]), ("i,i->", [[5], [5]]),
        ("i,j->ij", [[3], [4]]), ("...ij,...jk->...ik", [[2, 2, 3], [3, 4]]), ("...ij,...jk", [[5, 2, 3], [1, 3, 4]]),
        ("ij,ij->ij", [[2, 3], [2, 3]]), ("ij,ij->", [[2, 3], [2, 3]]), ("ab,bc,cd->ad", [[2, 3], [3, 4], [4, 2]]),
        ("bn,anm,bm->ba", [[2, 3], [4, 3, 5], [2, 5]]), ("iij->j", [[3, 3, 2]]), ("...ii->...i", [[2, 3, 3]]),
        ("ijk,ikl->jl", [[2, 3, 4], [2, 4, 5]]), ("bi,bj->bij", [[2, 3], [2, 4]]), ("ij,kj->ik", [[1, 3], [4, 3]]),
        ("Ab,bC->AC", [[2, 3], [3, 2]]), ("i...,i...->...", [[3, 2, 2], [3, 1, 2]]), ("ij,jk->", [[2, 3], [3, 4]]),
    ]
    for dtype in ("float64", "float32"):
        for eq, shapes in einsums:
            cases.append(product_case(gen, "einsum", dtype, shapes, lambda *t, eq=eq: torch.einsum(eq, *t),
                                      equation=eq))
    for eq, shapes in (("ij,jk->ik", [[2, 3], [3, 4]]), ("ii", [[3, 3]]), ("i,j->ij", [[2], [3]])):
        cases.append(product_case(gen, "einsum", "int64", shapes, lambda *t, eq=eq: torch.einsum(eq, *t),
                                  equation=eq))
    return cases


def lowp_products():
    gen = Values(2025)
    cases = []

    def add(op, dtype, shapes, fn, k, layouts=None, **extra):
        cases.append(product_case(gen, op, dtype, shapes, fn, layouts, k=k, **extra))

    for dtype in ("bfloat16", "float16"):
        add("matmul", dtype, [[5, 7], [7, 6]], torch.matmul, 7)
        add("matmul", dtype, [[9], [9]], torch.matmul, 9)
        add("matmul", dtype, [[2, 1, 3, 4], [5, 4, 2]], torch.matmul, 10)
        add("matmul", dtype, [[3, 5, 8], [8, 4]], torch.matmul, 15)
        add("matmul", dtype, [[2, 4, 3], [4, 5]], torch.matmul, 8, ["t", ""])
        add("mm", dtype, [[6, 33], [17, 33]], torch.mm, 33, ["", "t"])
        add("bmm", dtype, [[3, 4, 9], [3, 9, 5]], torch.bmm, 9)
        add("mv", dtype, [[7, 12], [12]], torch.mv, 12)
        add("dot", dtype, [[40], [40]], torch.dot, 40)
        add("outer", dtype, [[5], [6]], torch.outer, 1)
        add("addmm", dtype, [[3], [2, 9], [9, 3]], lambda i, a, b: torch.addmm(i, a, b, beta=0.5, alpha=-2.0), 9,
            beta=0.5, alpha=-2.0)
        add("baddbmm", dtype, [[1, 3, 1], [2, 3, 8], [2, 8, 2]],
            lambda i, a, b: torch.baddbmm(i, a, b, beta=-1.5, alpha=0.25), 8, beta=-1.5, alpha=0.25)
        add("addmv", dtype, [[1], [3, 10], [10]], lambda i, a, b: torch.addmv(i, a, b, beta=2.0, alpha=-1.0), 10,
            beta=2.0, alpha=-1.0)
        add("linear", dtype, [[4, 3, 10], [6, 10], [6]], torch.nn.functional.linear, 12)
        add("linear", dtype, [[37, 50], [21, 50], [21]], torch.nn.functional.linear, 50)
    return cases


def printing():
    cases = []

    def add(name, t):
        text = torch._tensor_str._tensor_str(t, 0).replace("True", "true").replace("False", "false")
        cases.append({"name": name, "dtype": {v: k for k, v in DTYPES.items()}[t.dtype], "input": encode(t),
                      "text": text})

    gen = Values(7)
    add("float32 matrix", gen.tensor([2, 3], torch.float32))
    add("float64 3-d", gen.tensor([2, 3, 4], torch.float64))
    add("integral floats", torch.tensor([[1.0, -2.0, 30.0], [4.0, 0.0, 6.0]]))
    add("zeros", torch.zeros(2, 2))
    add("scientific", torch.tensor([1.0e-5, 2.5, 300.0, -4.0e9]))
    add("scientific integers", torch.tensor([1.0, 5000.0, -2.0]))
    add("small", torch.tensor([1.0e-5, 2.0e-5], dtype=torch.float64))
    add("non-finite", torch.tensor([float("nan"), 1.5, float("inf"), -float("inf"), -2.25]))
    add("non-finite integral", torch.tensor([float("nan"), 1.0, float("-inf")]))
    add("int64", torch.tensor([[-3, 12, 7], [100, 0, -45]]))
    add("int64 large", torch.tensor([2 ** 62 + 1, -5]))
    add("uint8", torch.tensor([0, 7, 255], dtype=torch.uint8))
    add("bool", torch.tensor([[True, False], [False, True]]))
    add("bfloat16", torch.tensor([0.1, -1.5, 3.0]).to(torch.bfloat16))
    add("float16", torch.tensor([0.1, -1.5, 300.0]).to(torch.float16))
    add("0-d", torch.tensor(3.25))
    add("0-d int", torch.tensor(-7))
    add("long row", gen.tensor([30], torch.float32))
    add("summarised row", torch.arange(2000, dtype=torch.float32) / 8)
    add("summarised matrix", torch.arange(60 * 40, dtype=torch.int64).reshape(60, 40))
    add("summarised 3-d", (torch.arange(10 * 11 * 12, dtype=torch.float64) / 3).reshape(10, 11, 12))
    add("summarised short dims", torch.arange(2 * 1001, dtype=torch.int64).reshape(2, 1001))
    add("4-d", gen.tensor([2, 2, 2, 2], torch.float32))
    return cases


def main():
    golden = {"torch_version": torch.__version__, "products": products(), "lowp_products": lowp_products(),
              "printing": printing()}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "linalg_golden.json")
    with open(path, "w") as f:
        json.dump(golden, f)
    print(f"wrote {path} (PyTorch {torch.__version__}, {len(golden['products'])} products, "
          f"{len(golden['lowp_products'])} bfloat16/float16 products, {len(golden['printing'])} printing cases)")


if __name__ == "__main__":
    main()
