#!/usr/bin/env python3
"""Checks minidl's GPT (examples/gpt) against nanoGPT's model in PyTorch, in float32.

    gpt_train --dump-reference DUMP [model flags, e.g. --n-layer 2 --n-embd 64 --block-size 32 --batch-size 4]
    python3 check_against_pytorch.py DUMP [--device cuda|cpu]

DUMP is a gpt_train checkpoint (the initial weights under nanoGPT's names, the configuration in its metadata);
DUMP.reference holds ten training batches, minidl's logits, loss and gradients of the first batch, and the losses
of ten AdamW iterations (dropout off). This script builds nanoGPT's GPT (karpathy/nanoGPT model.py: pre-LayerNorm
blocks, causal scaled_dot_product_attention, GELU MLP, head tied to the token embedding), loads DUMP into it with
load_state_dict (only the tied lm_head.weight may be missing), and compares, with TF32 off:
  - logits: every element within 1e-4 of the largest |logit|;
  - loss: within 1e-5 relative;
  - every parameter's gradient: within 1e-4 of its largest |element|;
  - the losses of ten iterations of nanoGPT's training loop (AdamW with weight decay for the >= 2-D parameters
    only, nanoGPT's warm-up and cosine learning rate, gradient clipping): within --steps-rtol relative.
Prints one line per check; exit status 0 when all pass, 1 otherwise, 2 for a missing or malformed file.
Needs only torch (examples/common/reference/safetensors_file.py reads the safetensors files).
"""
import argparse
import math
import os
import sys

import torch
import torch.nn as nn
from torch.nn import functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common", "reference"))
from safetensors_file import read_safetensors  # noqa: E402


# nanoGPT's model (karpathy/nanoGPT model.py), with PyTorch's attention.
class LayerNorm(nn.Module):
    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_attn = nn.Linear(c["n_embd"], 3 * c["n_embd"], bias=c["bias"])
        self.c_proj = nn.Linear(c["n_embd"], c["n_embd"], bias=c["bias"])
        self.resid_dropout = nn.Dropout(c["dropout"])
        self.n_head, self.n_embd, self.dropout = c["n_head"], c["n_embd"], c["dropout"]

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0, is_causal=True)
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C)))


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = nn.Linear(c["n_embd"], 4 * c["n_embd"], bias=c["bias"])
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * c["n_embd"], c["n_embd"], bias=c["bias"])
        self.dropout = nn.Dropout(c["dropout"])

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln_1 = LayerNorm(c["n_embd"], c["bias"])
        self.attn = CausalSelfAttention(c)
        self.ln_2 = LayerNorm(c["n_embd"], c["bias"])
        self.mlp = MLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(c["vocab_size"], c["n_embd"]),
            wpe=nn.Embedding(c["block_size"], c["n_embd"]),
            drop=nn.Dropout(c["dropout"]),
            h=nn.ModuleList([Block(c) for _ in range(c["n_layer"])]),
            ln_f=LayerNorm(c["n_embd"], c["bias"]),
        ))
        self.lm_head = nn.Linear(c["n_embd"], c["vocab_size"], bias=False)
        self.transformer.wte.weight = self.lm_head.weight

    def forward(self, idx, targets):
        pos = torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def get_lr(it, h):
    """nanoGPT train.py's learning rate."""
    if it < h["warmup"]:
        return h["lr"] * (it + 1) / (h["warmup"] + 1)
    if it > h["iters"] or h["iters"] <= h["warmup"]:
        return h["min_lr"]
    ratio = (it - h["warmup"]) / (h["iters"] - h["warmup"])
    return h["min_lr"] + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (h["lr"] - h["min_lr"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dump", help="the checkpoint written by gpt_train --dump-reference (DUMP.reference beside it)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--steps-rtol", type=float, default=1e-4,
                    help="relative tolerance of the ten training losses (default 1e-4)")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device(a.device)

    weights, meta = read_safetensors(a.dump)
    ref, rmeta = read_safetensors(a.dump + ".reference")
    c = {k: int(meta["gpt." + k]) for k in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd")}
    c["bias"] = meta["gpt.bias"] == "true"
    c["dropout"] = 0.0
    h = {k: float(rmeta["ref." + k]) for k in ("lr", "min_lr", "beta1", "beta2", "weight_decay", "grad_clip")}
    h.update({k: int(rmeta["ref." + k]) for k in ("warmup", "iters")})
    print(f"model {c}, minidl ran on {rmeta.get('ref.device', '?')}, PyTorch {torch.__version__} on {dev}")

    model = GPT(c)
    missing, unexpected = model.load_state_dict(weights, strict=False)
    if missing != ["lm_head.weight"] or unexpected:
        print(f"FAIL load: missing {missing} (only the tied lm_head.weight may be), unexpected {unexpected}")
        return 1
    model.to(dev).train()
    names = [n for n, _ in model.named_parameters()]
    if names != [k for k in weights]:
        print(f"note: parameter order differs from the file's: {names} vs {list(weights)}")

    ok = True

    def check(what, passed, detail):
        nonlocal ok
        ok = ok and passed
        print(f"{'ok  ' if passed else 'FAIL'} {what}: {detail}")

    x, y = ref["ref.x"].to(dev), ref["ref.y"].to(dev)
    logits, loss = model(x[0], y[0])
    loss.backward()
    scale = logits.abs().max().item()
    err = (logits.detach().cpu() - ref["ref.logits"]).abs().max().item()
    check("logits", err <= 1e-4 * scale, f"max error {err:.3e}, largest |logit| {scale:.3e}")
    rel = abs(loss.item() - ref["ref.loss"].item()) / abs(loss.item())
    check("loss", rel <= 1e-5, f"PyTorch {loss.item():.8f}, minidl {ref['ref.loss'].item():.8f}, relative {rel:.3e}")
    for name, p in model.named_parameters():
        g = p.grad.cpu()
        scale = g.abs().max().item()
        err = (g - ref["ref.grad." + name]).abs().max().item()
        check(f"grad {name}", err <= 1e-4 * scale, f"max error {err:.3e}, largest |element| {scale:.3e}")

    # nanoGPT's training loop from the same weights: configure_optimizers' groups, get_lr, clipping.
    model.load_state_dict(weights, strict=False)
    model.zero_grad(set_to_none=True)
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": h["weight_decay"]},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=h["lr"], betas=(h["beta1"], h["beta2"]))
    losses = []
    for it in range(x.size(0)):
        for g in opt.param_groups:
            g["lr"] = get_lr(it, h)
        _, loss = model(x[it], y[it])
        loss.backward()
        if h["grad_clip"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), h["grad_clip"])
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    theirs = ref["ref.losses"].tolist()
    for it, (p, m) in enumerate(zip(losses, theirs)):
        rel = abs(p - m) / abs(p)
        check(f"training loss {it}", rel <= a.steps_rtol, f"PyTorch {p:.8f}, minidl {m:.8f}, relative {rel:.3e}")
    print("PASS" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
