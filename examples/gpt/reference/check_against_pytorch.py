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
import os
import sys

import torch

from nanogpt import GPT, get_lr, optimizer_groups

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common", "reference"))
from safetensors_file import read_safetensors  # noqa: E402


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
    opt = torch.optim.AdamW(optimizer_groups(model, h["weight_decay"]), lr=h["lr"], betas=(h["beta1"], h["beta2"]))
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
