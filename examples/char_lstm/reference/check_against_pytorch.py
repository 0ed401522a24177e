#!/usr/bin/env python3
"""Checks minidl's character LSTM (examples/char_lstm) against the same model in PyTorch, in float32.

    char_lstm --dump-reference DUMP [model flags, e.g. --embed 16 --hidden 32 --seq-len 20 --batch-size 4]
    /usr/bin/python3 check_against_pytorch.py DUMP [--device cuda|cpu]

DUMP is a char_lstm checkpoint (the initial weights under PyTorch's names, the configuration in its metadata);
DUMP.reference holds ten training batches, and for the first batch run from random initial states minidl's
logits, loss, final states and the gradients of every parameter and of the initial states, and the losses of ten
training iterations. This script builds the model of char_lstm.py, loads DUMP into it with load_state_dict
(strict: every name and shape must match), and compares, with TF32 off:
  - logits, final states h_n and c_n: every element within 1e-4 of the largest |element|;
  - loss: within 1e-5 relative;
  - every parameter's gradient and those of h_0 and c_0: within 1e-4 of the largest |element|;
  - the losses of ten training iterations (Adam, clip_grad_norm_, the state carried between the batches and
    detached; zeros at the start): within --steps-rtol relative.
Prints one line per check; exit status 0 when all pass, 1 otherwise, 2 for a missing or malformed file.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common", "reference"))
from safetensors_file import read_safetensors  # noqa: E402

from char_lstm import CharLSTM, loss_of, train_step, zero_state  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dump", help="the checkpoint written by char_lstm --dump-reference (DUMP.reference beside it)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--steps-rtol", type=float, default=1e-4,
                    help="relative tolerance of the ten training losses (default 1e-4)")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device(a.device)

    weights, meta = read_safetensors(a.dump)
    ref, rmeta = read_safetensors(a.dump + ".reference")
    c = {k: int(meta["char_lstm." + k]) for k in ("vocab_size", "embed", "hidden", "layers")}
    h = {k: float(rmeta["ref." + k]) for k in ("lr", "beta1", "beta2", "eps", "grad_clip")}
    print(f"model {c}, minidl ran on {rmeta.get('ref.device', '?')}, PyTorch {torch.__version__} on {dev}")

    model = CharLSTM(c["vocab_size"], c["embed"], c["hidden"], c["layers"])
    try:
        model.load_state_dict(weights, strict=True)
    except RuntimeError as e:
        print(f"FAIL load: {e}")
        return 1
    model.to(dev).train()
    names = [n for n, _ in model.named_parameters()]
    if names != list(weights):
        print(f"note: parameter order differs from the file's: {names} vs {list(weights)}")

    ok = True

    def check(what, passed, detail):
        nonlocal ok
        ok = ok and passed
        print(f"{'ok  ' if passed else 'FAIL'} {what}: {detail}")

    def close(what, ours, theirs, rel=1e-4):
        ours = ours.detach().cpu()
        scale = ours.abs().max().item()
        err = (ours - theirs).abs().max().item()
        check(what, err <= rel * scale, f"max error {err:.3e}, largest |element| {scale:.3e}")

    x, y = ref["ref.x"].to(dev), ref["ref.y"].to(dev)
    h0 = ref["ref.h0"].to(dev).requires_grad_(True)
    c0 = ref["ref.c0"].to(dev).requires_grad_(True)
    logits, (h_n, c_n) = model(x[0], (h0, c0))
    loss = loss_of(logits, y[0])
    loss.backward()
    close("logits", logits, ref["ref.logits"])
    close("h_n", h_n, ref["ref.h_n"])
    close("c_n", c_n, ref["ref.c_n"])
    rel = abs(loss.item() - ref["ref.loss"].item()) / abs(loss.item())
    check("loss", rel <= 1e-5, f"PyTorch {loss.item():.8f}, minidl {ref['ref.loss'].item():.8f}, relative {rel:.3e}")
    for name, p in model.named_parameters():
        close(f"grad {name}", p.grad, ref["ref.grad." + name])
    close("grad h0", h0.grad, ref["ref.grad.h0"])
    close("grad c0", c0.grad, ref["ref.grad.c0"])

    # char_lstm's training loop from the same weights: Adam, clipping, the state carried and detached.
    model.load_state_dict(weights)
    params = list(model.parameters())
    opt = torch.optim.Adam(params, lr=h["lr"], betas=(h["beta1"], h["beta2"]), eps=h["eps"])
    state = zero_state(model, x.size(2), dev)
    losses = []
    for it in range(x.size(0)):
        loss, state = train_step(model, opt, params, x[it], y[it], state, h["grad_clip"])
        losses.append(loss.item())
    for it, (p, m) in enumerate(zip(losses, ref["ref.losses"].tolist())):
        rel = abs(p - m) / abs(p)
        check(f"training loss {it}", rel <= a.steps_rtol, f"PyTorch {p:.8f}, minidl {m:.8f}, relative {rel:.3e}")
    print("PASS" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
