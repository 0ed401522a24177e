#!/usr/bin/env python3
"""Writes autocast_golden.json beside this script: what PyTorch's CUDA autocast to bfloat16 computes for one
training step of a small transformer block and of the example CNN (examples/mnist/net.cpp's layers), for
tests/test_autocast.cpp to compare minidl's autocast with.

Both models are written with the functional ops minidl's C++ test uses, and their parameters and inputs come from a
formula both sides evaluate (formula() below; float64 sines rounded to float32), so nothing but results is stored:

transformer: x (2, 8, 32); h = layer_norm(x); qkv = linear(h); causal scaled_dot_product_attention over 4 heads;
    x2 = x + linear(att); m = linear(gelu(linear(layer_norm(x2)))) (hidden 128); y = x2 + m;
    loss = cross_entropy(linear(y) (16 classes), targets)
cnn: conv2d 1->32 k3 + ReLU, conv2d 32->64 k3 + ReLU, max_pool2d 2, flatten, linear 9216->128 + ReLU, linear 128->10,
    loss = cross_entropy, on a batch of 4 images of 1x28x28 (no dropout, so the step is deterministic)

Stored per model: the dtype of every intermediate under autocast; the loss and every parameter gradient under
autocast (torch.autocast("cuda", dtype=torch.bfloat16)) and in float32 without it (TF32 off), the latter giving the
test the size of bf16's own error. Small gradients are stored whole, large ones as a summary (sum, sum of |.|, sum of
squares, and 64 values at the indices (j * 104729) % numel).

Run on a machine with a CUDA GPU and PyTorch:  python3 tests/golden/gen_autocast_golden.py
"""
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

FULL_LIMIT = 4096  # gradients with more elements are stored as a summary
SAMPLES = 64


def formula(shape, k, scale=1.0, offset=0.0):
    """offset + scale * sin(0.37 * i + 1.3 * k + 0.5) for the row-major index i, in float64, then float32."""
    n = math.prod(shape)
    values = [offset + scale * math.sin(0.37 * i + 1.3 * k + 0.5) for i in range(n)]
    return torch.tensor(values, dtype=torch.float64).reshape(shape).to(torch.float32)


def dtype_name(t):
    return str(t.dtype).replace("torch.", "")


def stored(t):
    t = t.detach().double().cpu().reshape(-1)
    if t.numel() <= FULL_LIMIT:
        return {"data": t.tolist()}
    idx = [(j * 104729) % t.numel() for j in range(SAMPLES)]
    return {"sum": t.sum().item(), "abs_sum": t.abs().sum().item(), "sq_sum": (t * t).sum().item(),
            "indices": idx, "samples": t[idx].tolist()}


# ---- the transformer block ----------------------------------------------------------------------------------------
B, T, C, HEADS, HIDDEN, VOCAB = 2, 8, 32, 4, 128, 16


def transformer_params():
    s, s4 = 1 / math.sqrt(C), 1 / math.sqrt(HIDDEN)
    shapes = [("ln1.weight", (C,), 0.1, 1.0), ("ln1.bias", (C,), 0.1, 0.0), ("qkv.weight", (3 * C, C), s, 0.0),
              ("qkv.bias", (3 * C,), 0.02, 0.0), ("proj.weight", (C, C), s, 0.0), ("proj.bias", (C,), 0.02, 0.0),
              ("ln2.weight", (C,), 0.1, 1.0), ("ln2.bias", (C,), 0.1, 0.0), ("fc.weight", (HIDDEN, C), s, 0.0),
              ("fc.bias", (HIDDEN,), 0.02, 0.0), ("fc_proj.weight", (C, HIDDEN), s4, 0.0),
              ("fc_proj.bias", (C,), 0.02, 0.0), ("head.weight", (VOCAB, C), s, 0.0), ("head.bias", (VOCAB,), 0.02, 0.0)]
    return {name: formula(shape, k, scale, offset) for k, (name, shape, scale, offset) in enumerate(shapes)}


def transformer_inputs():
    x = formula((B, T, C), 100)
    targets = torch.tensor([(i * 5 + 3) % VOCAB for i in range(B * T)], dtype=torch.int64)
    return x, targets


def transformer_step(p, x, targets, dtypes):
    h = F.layer_norm(x, (C,), p["ln1.weight"], p["ln1.bias"])
    qkv = F.linear(h, p["qkv.weight"], p["qkv.bias"])
    q, k, v = (t.reshape(B, T, HEADS, C // HEADS).transpose(1, 2) for t in qkv.split(C, dim=-1))
    att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    att_out = F.linear(att.transpose(1, 2).reshape(B, T, C), p["proj.weight"], p["proj.bias"])
    x2 = x + att_out
    h2 = F.layer_norm(x2, (C,), p["ln2.weight"], p["ln2.bias"])
    fc = F.linear(h2, p["fc.weight"], p["fc.bias"])
    act = F.gelu(fc)
    mlp = F.linear(act, p["fc_proj.weight"], p["fc_proj.bias"])
    y = x2 + mlp
    logits = F.linear(y, p["head.weight"], p["head.bias"])
    loss = F.cross_entropy(logits.reshape(B * T, VOCAB), targets)
    for name, t in [("ln1", h), ("qkv", qkv), ("attention", att), ("attention_proj", att_out), ("residual1", x2),
                    ("ln2", h2), ("fc", fc), ("gelu", act), ("fc_proj", mlp), ("residual2", y), ("logits", logits),
                    ("loss", loss)]:
        dtypes[name] = dtype_name(t)
    return loss


# ---- the example CNN ----------------------------------------------------------------------------------------------
BATCH = 4


def cnn_params():
    shapes = [("conv1.weight", (32, 1, 3, 3), 9), ("conv1.bias", (32,), 9), ("conv2.weight", (64, 32, 3, 3), 288),
              ("conv2.bias", (64,), 288), ("fc1.weight", (128, 9216), 9216), ("fc1.bias", (128,), 9216),
              ("fc2.weight", (10, 128), 128), ("fc2.bias", (10,), 128)]
    return {name: formula(shape, 200 + k, 1 / math.sqrt(fan_in)) for k, (name, shape, fan_in) in enumerate(shapes)}


def cnn_inputs():
    x = formula((BATCH, 1, 28, 28), 300, 0.5, 0.5)
    labels = torch.tensor([(i * 3 + 1) % 10 for i in range(BATCH)], dtype=torch.int64)
    return x, labels


def cnn_step(p, x, labels, dtypes):
    c1 = F.relu(F.conv2d(x, p["conv1.weight"], p["conv1.bias"]))
    c2 = F.relu(F.conv2d(c1, p["conv2.weight"], p["conv2.bias"]))
    pooled = F.max_pool2d(c2, 2)
    f1 = F.relu(F.linear(pooled.flatten(1), p["fc1.weight"], p["fc1.bias"]))
    logits = F.linear(f1, p["fc2.weight"], p["fc2.bias"])
    loss = F.cross_entropy(logits, labels)
    for name, t in [("conv1", c1), ("conv2", c2), ("max_pool", pooled), ("fc1", f1), ("logits", logits),
                    ("loss", loss)]:
        dtypes[name] = dtype_name(t)
    return loss


def run(params_fn, inputs_fn, step, device="cuda"):
    result = {"dtypes": {}, "loss": {}, "grads": {}}
    grads = {}
    for mode in ("autocast", "float32"):
        params = {k: v.to(device).requires_grad_(True) for k, v in params_fn().items()}
        x, y = (t.to(device) for t in inputs_fn())
        dtypes = {}
        with torch.autocast(device, dtype=torch.bfloat16, enabled=mode == "autocast"):
            loss = step(params, x, y, dtypes)
        loss.backward()
        if mode == "autocast":
            result["dtypes"] = dtypes
        result["loss"][mode] = loss.item()
        grads[mode] = {k: v.grad for k, v in params.items()}
    for name in grads["autocast"]:
        g = grads["autocast"][name]
        assert g.dtype == torch.float32, name
        result["grads"][name] = {"shape": list(g.shape), "autocast": stored(g), "float32": stored(grads["float32"][name])}
    return result


def main():
    if not torch.cuda.is_available():
        sys.exit("gen_autocast_golden.py needs a CUDA GPU: the golden values are PyTorch's CUDA autocast")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    golden = {
        "torch_version": torch.__version__,
        "device": torch.cuda.get_device_name(),
        "transformer": run(transformer_params, transformer_inputs, transformer_step),
        "cnn": run(cnn_params, cnn_inputs, cnn_step),
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "autocast_golden.json")
    with open(path, "w") as f:
        json.dump(golden, f)
    print("wrote", path)


if __name__ == "__main__":
    main()
