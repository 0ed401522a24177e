#!/usr/bin/env python3
"""Writes indexing_golden.json beside this script: PyTorch's results for minidl's indexing ops, for
tests/test_indexing.cpp to compare with element by element.

Each case holds the op, its inputs (dtype, shape, values; index tensors likewise), the output and, for float64
inputs, the gradients of sum(out * gout) with respect to every differentiable input (gout stored too). Ops:
x.index(...) with integers, slices, None, Ellipsis, bools, index tensors (adjacent and not, broadcast) and masks;
index_put_ (with and without accumulate); gather, scatter (tensor and value), scatter_add, index_add (alpha),
index_select, masked_select, nonzero, take_along_dim. Index tensors marked int32 are int32 in the C++ test (PyTorch
is given them as int64, which every version accepts). Scatters without accumulate never repeat a target, where
PyTorch leaves the winner unspecified.

Run where PyTorch is installed:  python3 tests/golden/gen_indexing_golden.py
"""
import json
import os

import torch

G = torch.Generator().manual_seed(23)
NAMES = {torch.float32: "float32", torch.float64: "float64", torch.bfloat16: "bfloat16", torch.float16: "float16",
         torch.int64: "int64", torch.int32: "int32", torch.uint8: "uint8", torch.bool: "bool"}


def rand(shape, dtype):
    if dtype == torch.bool:
        return torch.rand(shape, generator=G) < 0.5
    if dtype in (torch.int64, torch.int32):
        return torch.randint(-50, 50, shape, generator=G).to(dtype)
    if dtype == torch.uint8:
        return torch.randint(0, 200, shape, generator=G).to(dtype)
    return (torch.rand(shape, generator=G, dtype=torch.float64) * 2 - 1).to(dtype)


def idx(shape, high, low=0):
    return torch.randint(low, high, shape, generator=G)


def enc(t, dtype_name=None):
    t = t.detach()
    return {"dtype": dtype_name or NAMES[t.dtype], "shape": list(t.shape),
            "data": t.reshape(-1).to(torch.float64).tolist() if t.is_floating_point() else
            t.reshape(-1).to(torch.int64).tolist()}


def finish(case, out, diff_inputs):
    """Stores out and, for float64 differentiable inputs, the gradients of sum(out * gout)."""
    case["out"] = enc(out)
    if diff_inputs and out.dtype == torch.float64 and out.numel() > 0:
        gout = rand(out.shape, torch.float64)
        grads = torch.autograd.grad((out * gout).sum(), [t for _, t in diff_inputs], allow_unused=True)
        case["gout"] = enc(gout)
        case["grads"] = {name: enc(g) if g is not None else None for (name, _), g in zip(diff_inputs, grads)}
    return case


def leaf(t):
    return t.clone().requires_grad_(t.dtype == torch.float64)


# ---- x.index(...) -------------------------------------------------------------------------------------------
def spec_to_torch(spec):
    out = []
    for e in spec:
        if "int" in e:
            out.append(e["int"])
        elif "slice" in e:
            out.append(slice(*e["slice"]))
        elif "none" in e:
            out.append(None)
        elif "ellipsis" in e:
            out.append(Ellipsis)
        elif "bool" in e:
            out.append(e["bool"])
        else:
            out.append(e["t"])
    return tuple(out)


def index_specs():
    m45 = torch.rand(4, 5, generator=G) < 0.5
    m5 = torch.rand(5, generator=G) < 0.5
    return [
        [{"int": 1}],
        [{"int": -1}, {"slice": [None, None, 2]}],
        [{"slice": [1, None, 2]}],
        [{"slice": [-3, -1, None]}, {"int": 2}],
        [{"none": True}, {"ellipsis": True}, {"int": 2}],
        [{"ellipsis": True}, {"slice": [None, None, 3]}],
        [{"bool": True}],
        [{"bool": False}],
        [{"t": idx((3,), 4), "dtype": "int64"}],
        [{"t": torch.tensor([0, -1, 2, -4]), "dtype": "int64"}],
        [{"slice": [None, None, None]}, {"t": idx((2, 2), 5), "dtype": "int64"}],
        [{"t": idx((2,), 4), "dtype": "int64"}, {"slice": [None, None, None]}, {"t": idx((2,), 6), "dtype": "int64"}],
        [{"t": idx((3,), 4), "dtype": "int32"}, {"t": idx((3,), 5), "dtype": "int64"}],
        [{"slice": [None, None, None]}, {"t": idx((1,), 5), "dtype": "int64"}, {"t": idx((2, 1), 6), "dtype": "int64"}],
        [{"t": idx((2, 3), 4), "dtype": "int64"}, {"int": 1}],
        [{"int": 1}, {"slice": [None, None, None]}, {"t": idx((2,), 6), "dtype": "int64"}],
        [{"none": True}, {"t": idx((2,), 4), "dtype": "int64"}, {"none": True}],
        [{"t": m45, "dtype": "bool"}],
        [{"slice": [None, None, None]}, {"t": m5, "dtype": "bool"}],
        [{"t": m45.to(torch.uint8), "dtype": "uint8"}],
        [{"slice": [1, 4, None]}, {"t": m5, "dtype": "bool"}, {"int": -2}],
        [{"ellipsis": True}, {"t": idx((4,), 6), "dtype": "int64"}],
        [{"t": torch.tensor(True), "dtype": "bool"}],
        [{"t": idx((0,), 4), "dtype": "int64"}],
    ]


def enc_spec(spec):
    out = []
    for e in spec:
        if "t" in e:
            out.append({"tensor": enc(e["t"], e["dtype"])})
        else:
            out.append(e)
    return out


def index_cases():
    cases = []
    for dtype in (torch.float64, torch.float32, torch.bfloat16, torch.int64, torch.bool):
        for spec in index_specs():
            x = leaf(rand((4, 5, 6), dtype))
            out = x[spec_to_torch(spec)]
            case = {"op": "index", "x": enc(x), "indices": enc_spec(spec)}
            cases.append(finish(case, out, [("x", x)]))
    return cases


def index_put_cases():
    cases = []
    for dtype in (torch.float64, torch.float32, torch.float16, torch.int32, torch.uint8, torch.bool):
        x = rand((4, 5), dtype)
        # Distinct targets without accumulate; repeats with it.
        for spec, vshape, accumulate in (
                ([torch.tensor([0, 2, 3]), torch.tensor([1, 4, 0])], (3,), False),
                ([torch.tensor([1, -1])], (2, 5), False),
                ([None, torch.tensor([4, 0])], (1, 2), False),
                ([torch.tensor([0, 0, 3, 0])], (4, 5), True),
                ([torch.tensor([[1, 1], [2, 1]]), torch.tensor([[0, 0], [3, 0]])], (2, 2), True),
                ([torch.rand(4, 5, generator=G) < 0.5], (), False)):
            xl, v = leaf(x), leaf(rand(vshape, dtype))
            if any(t is None for t in spec):  # Python's index_put_ takes no None: x[:, i] = v is the same
                out = xl.clone()
                out[tuple(slice(None) if t is None else t for t in spec)] = v
            else:
                out = xl.clone().index_put_(tuple(spec), v, accumulate=accumulate)
            case = {"op": "index_put", "x": enc(x), "values": enc(v), "accumulate": accumulate,
                    "list": [None if t is None else enc(t) for t in spec]}
            cases.append(finish(case, out, [("x", xl), ("values", v)]))
    return cases


def gather_cases():
    cases = []
    for dtype in (torch.float64, torch.float32, torch.bfloat16, torch.int64, torch.uint8, torch.bool):
        x = rand((3, 4, 5), dtype)
        for dim, ishape in ((0, (5, 4, 3)), (1, (2, 6, 5)), (2, (3, 2, 7)), (-1, (1, 4, 2))):
            xl = leaf(x)
            index = idx(ishape, x.shape[dim])
            out = torch.gather(xl, dim, index)
            cases.append(finish({"op": "gather", "x": enc(x), "dim": dim, "index": enc(index)}, out, [("x", xl)]))
    return cases


def distinct_index(ishape, dim, size):
    """An index of ishape whose values along dim are distinct (a permutation's prefix per line)."""
    lines = torch.stack([torch.randperm(size, generator=G)[:ishape[dim]]
                         for _ in range(int(torch.tensor(ishape).prod()) // ishape[dim])])
    moved = list(ishape[:dim]) + list(ishape[dim + 1:]) + [ishape[dim]]
    return lines.reshape(moved).movedim(-1, dim).contiguous()


def scatter_cases():
    cases = []
    for dtype in (torch.float64, torch.float32, torch.float16, torch.int64, torch.int32, torch.bool):
        x = rand((4, 5), dtype)
        for dim, ishape, sshape in ((0, (3, 5), (3, 5)), (1, (4, 2), (4, 3)), (0, (2, 3), (3, 4)), (-1, (3, 4), (4, 5))):
            index = distinct_index(ishape, dim % 2, x.shape[dim])
            xl, src = leaf(x), leaf(rand(sshape, dtype))
            out = torch.scatter(xl, dim, index, src)
            # PyTorch's gradient of a src larger than index has index's shape (an error): only x's then.
            diff = [("x", xl), ("src", src)] if ishape == sshape else [("x", xl)]
            cases.append(finish({"op": "scatter", "x": enc(x), "dim": dim, "index": enc(index), "src": enc(src)}, out,
                                diff))
            xl = leaf(x)
            value = True if dtype == torch.bool else (3 if not dtype.is_floating_point else -1.5)
            out = torch.scatter(xl, dim, index, value)
            cases.append(finish({"op": "scatter_value", "x": enc(x), "dim": dim, "index": enc(index),
                                 "value": float(value)}, out, [("x", xl)]))
            rep = idx(ishape, x.shape[dim])
            xl, src = leaf(x), leaf(rand(sshape, dtype))
            out = torch.scatter_add(xl, dim, rep, src)
            diff = [("x", xl), ("src", src)] if ishape == sshape else [("x", xl)]
            cases.append(finish({"op": "scatter_add", "x": enc(x), "dim": dim, "index": enc(rep), "src": enc(src)},
                                out, diff))
    return cases


def index_add_select_cases():
    cases = []
    for dtype in (torch.float64, torch.float32, torch.bfloat16, torch.int64, torch.uint8, torch.bool):
        x = rand((3, 4, 5), dtype)
        for dim, k in ((0, 5), (1, 3), (2, 7), (-2, 1)):
            index = idx((k,), x.shape[dim])
            xl = leaf(x)
            out = torch.index_select(xl, dim, index)
            cases.append(finish({"op": "index_select", "x": enc(x), "dim": dim, "index": enc(index, "int32" if k == 3 else None)},
                                out, [("x", xl)]))
            sshape = list(x.shape)
            sshape[dim] = k
            xl, src = leaf(x), leaf(rand(tuple(sshape), dtype))
            alpha = 2 if dtype in (torch.float64, torch.int64) else 1
            out = torch.index_add(xl, dim, index, src, alpha=alpha)
            cases.append(finish({"op": "index_add", "x": enc(x), "dim": dim, "index": enc(index), "src": enc(src),
                                 "alpha": alpha}, out, [("x", xl), ("src", src)]))
    return cases


def select_cases():
    cases = []
    for dtype in (torch.float64, torch.float32, torch.float16, torch.int32, torch.bool):
        for xshape, mshape in (((4, 5), (4, 5)), ((3, 4), (4,)), ((4, 1), (2, 4, 3)), ((), ())):
            x = leaf(rand(xshape, dtype))
            mask = torch.rand(mshape, generator=G) < 0.5
            out = torch.masked_select(x, mask)
            cases.append(finish({"op": "masked_select", "x": enc(x), "mask": enc(mask)}, out, [("x", x)]))
        for shape in ((4, 5), (3, 2, 4), (7,), ()):
            x = rand(shape, dtype)
            x = torch.where(torch.rand(shape, generator=G) < 0.4, torch.zeros((), dtype=dtype), x)
            cases.append({"op": "nonzero", "x": enc(x), "out": enc(torch.nonzero(x))})
        x = rand((3, 4, 5), dtype)
        for dim, ishape in ((0, (2, 4, 5)), (1, (3, 6, 1)), (2, (1, 1, 3)), (None, (7,))):
            index = idx(ishape, x.numel() if dim is None else x.shape[dim])
            xl = leaf(x)
            out = torch.take_along_dim(xl, index, dim)
            cases.append(finish({"op": "take_along_dim", "x": enc(x), "dim": dim, "index": enc(index)}, out,
                                [("x", xl)]))
    return cases


def main():
    cases = index_cases() + index_put_cases() + gather_cases() + scatter_cases() + index_add_select_cases() + \
        select_cases()
    golden = {"torch_version": torch.__version__, "cases": cases}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "indexing_golden.json")
    with open(path, "w") as f:
        json.dump(golden, f)
    print(f"wrote {path} ({len(cases)} cases, PyTorch {torch.__version__})")


if __name__ == "__main__":
    main()
