#!/usr/bin/env python3
"""Writes layers_lowp_golden.json beside this script: PyTorch's bfloat16 / float16 results for the layer ops of
tests/test_layers_lowp.cpp (the same case names, shapes and arguments), for its golden test to compare minidl's with,
element by element.

Each case holds its name, the 16-bit dtype, the inputs (16-bit activations and weights; float32 where the case keeps
mixed-precision parameters), the int64 targets or indices where the op takes some, PyTorch's output, a random
upstream gradient and PyTorch's gradient of every input. Computed on CUDA where there is one (TF32 off), else the
CPU. Values are written with repr (exact).

Run where PyTorch is installed:  python3 tests/golden/gen_layers_lowp_golden.py
"""
import json
import math
import os

import torch
import torch.nn.functional as F

NAMES = {torch.float32: "float32", torch.float64: "float64", torch.bfloat16: "bfloat16", torch.float16: "float16",
         torch.int64: "int64"}


def number(v):
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


def encode(t):
    t = t.detach().cpu()
    values = t.flatten().tolist() if t.dtype == torch.int64 else t.to(torch.float64).flatten().tolist()
    return {"dtype": NAMES[t.dtype], "shape": list(t.shape), "values": [number(v) for v in values]}


def bn_f32(t):
    o = {"dtype": t[1].dtype, "device": t[0].device}
    return F.batch_norm(t[0], torch.zeros(4, **o), torch.ones(4, **o), t[1], t[2], training=True)


# name: (input shapes, which inputs stay float32, op(inputs, index), index maker or None)
CASES = {
    "conv2d": ([[3, 3, 7, 6], [4, 3, 3, 3], [4]], [], lambda t, i: F.conv2d(t[0], t[1], t[2], 1, 1), None),
    "conv2d_relu (stride 2)": ([[3, 4, 8, 8], [5, 4, 3, 3], [5]], [],
                               lambda t, i: F.relu(F.conv2d(t[0], t[1], t[2], 2, 1)), None),
    "conv_transpose2d": ([[3, 4, 5, 5], [4, 3, 3, 3], [3]], [],
                         lambda t, i: F.conv_transpose2d(t[0], t[1], t[2], 2, 1), None),
    "conv1d": ([[3, 3, 9], [4, 3, 3], [4]], [], lambda t, i: F.conv1d(t[0], t[1], t[2], 1, 1), None),
    "max_pool2d": ([[3, 3, 8, 6]], [], lambda t, i: F.max_pool2d(t[0], 2), None),
    "max_pool2d (overlapping, padded)": ([[3, 2, 7, 7]], [], lambda t, i: F.max_pool2d(t[0], 3, 2, 1), None),
    "avg_pool2d": ([[3, 3, 6, 6]], [], lambda t, i: F.avg_pool2d(t[0], 3, 2, 1), None),
    "adaptive_avg_pool2d (global)": ([[3, 4, 5, 5]], [], lambda t, i: F.adaptive_avg_pool2d(t[0], 1), None),
    "softmax": ([[3, 7]], [], lambda t, i: F.softmax(t[0], 1), None),
    "log_softmax (strided dim)": ([[4, 3, 5]], [], lambda t, i: F.log_softmax(t[0], 0), None),
    "layer_norm (float32 weight, bias)": ([[3, 3, 16], [16], [16]], [1, 2],
                                          lambda t, i: F.layer_norm(t[0], [16], t[1], t[2]), None),
    "layer_norm (16-bit weight, bias)": ([[3, 16], [16], [16]], [],
                                         lambda t, i: F.layer_norm(t[0], [16], t[1], t[2]), None),
    "rms_norm": ([[3, 12], [12]], [1], lambda t, i: F.rms_norm(t[0], [12], t[1]), None),
    "group_norm": ([[3, 6, 3, 3], [6], [6]], [1, 2], lambda t, i: F.group_norm(t[0], 3, t[1], t[2]), None),
    "batch_norm (training, float32 affine)": ([[5, 4, 3, 3], [4], [4]], [1, 2], lambda t, i: bn_f32(t), None),
    "batch_norm (training, 16-bit affine)": ([[6, 3], [3], [3]], [],
                                             lambda t, i: F.batch_norm(t[0], None, None, t[1], t[2], training=True),
                                             None),
    "cross_entropy": ([[6, 5]], [], lambda t, i: F.cross_entropy(t[0], i), (5, [6])),
    "cross_entropy (sum, label smoothing)": ([[6, 5]], [],
                                             lambda t, i: F.cross_entropy(t[0], i, reduction="sum",
                                                                          label_smoothing=0.1), (5, [6])),
    "nll_loss (per sample)": ([[6, 5]], [], lambda t, i: F.nll_loss(t[0], i, reduction="none"), (5, [6])),
    "embedding": ([[7, 5]], [], lambda t, i: F.embedding(i, t[0]), (7, [3, 4])),
}


def main():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    cases = []
    seed = 0
    for dtype in (torch.bfloat16, torch.float16):
        for name, (shapes, float32_inputs, op, index_spec) in CASES.items():
            g = torch.Generator().manual_seed(seed)
            seed += 1
            inputs = []
            for k, shape in enumerate(shapes):
                d = torch.float32 if k in float32_inputs else dtype
                x = (torch.rand(shape, generator=g, dtype=torch.float64) * 2 - 1).to(d)
                inputs.append(x.to(device).requires_grad_(True))
            index = None
            if index_spec is not None:
                index = torch.randint(0, index_spec[0], index_spec[1], generator=g).to(device)
            y = op(inputs, index)
            gy = (torch.rand(list(y.shape), generator=g, dtype=torch.float64) * 2 - 1).to(y.dtype).to(device)
            grads = torch.autograd.grad(y, inputs, gy)
            cases.append({"name": name, "dtype": NAMES[dtype], "inputs": [encode(x) for x in inputs],
                          "index": encode(index) if index is not None else None, "output": encode(y),
                          "grad_output": encode(gy), "grads": [encode(gr) for gr in grads]})
    out = {"generator": "gen_layers_lowp_golden.py", "torch": torch.__version__, "device": device, "cases": cases}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "layers_lowp_golden.json")
    with open(path, "w") as f:
        json.dump(out, f)
    print(f"wrote {len(cases)} cases to {path}")


if __name__ == "__main__":
    main()
