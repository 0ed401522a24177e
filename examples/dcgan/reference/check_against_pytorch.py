#!/usr/bin/env python3
"""Checks one minidl DCGAN training step (examples/dcgan) against PyTorch's, in float32.

    dcgan --dump-reference DUMP [--device cpu|cuda] [--batch-size 128] [--seed 1]
    /usr/bin/python3 examples/dcgan/reference/check_against_pytorch.py DUMP [--device cpu|cuda]

DUMP is a dcgan checkpoint (the initial weights of both networks, the model configuration in its metadata);
DUMP.reference holds the step's real batch and latent vectors, minidl's five statistics, the discriminator's
gradients after its update, the generator's after its own, and every parameter and buffer after the step. This
script builds the same model in PyTorch (dcgan_torch.py), loads DUMP into it with load_state_dict(strict=True),
runs the tutorial's two updates on the same batch and latent vectors with TF32 off, and compares:
  - the statistics loss_D, loss_G, D(x), D(G(z)) before and after the update: within 1e-5 relative;
  - every gradient of the discriminator (after its update) and of the generator (after its own): every element
    within 1e-4 of the largest |element| of that gradient;
  - every parameter and buffer after the step: within 1e-5 of the largest |element| (Adam's first step moves each
    weight by about lr, so a wrong update shows at this scale).
Prints one line per check; exit status 0 when all pass, 1 otherwise, 2 for a missing or malformed file.
Needs only torch (the safetensors files are read here).
"""
import argparse
import json
import struct
import sys

import torch

from dcgan_torch import DCGAN, make_optimizers, update_discriminator, update_generator

DTYPES = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64}


def read_safetensors(path):
    """{name: tensor}, metadata: the format's u64 header length, JSON header, then the raw little-endian data."""
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as e:
        print(f"check_against_pytorch: cannot read {path}: {e.strerror}", file=sys.stderr)
        sys.exit(2)
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = blob[8 + n:]
    tensors = {}
    for name, h in header.items():
        begin, end = h["data_offsets"]
        if h["dtype"] not in DTYPES:
            print(f"check_against_pytorch: {path}: {name} has dtype {h['dtype']}", file=sys.stderr)
            sys.exit(2)
        t = torch.frombuffer(bytearray(data[begin:end]), dtype=DTYPES[h["dtype"]]) if end > begin else \
            torch.empty(0, dtype=DTYPES[h["dtype"]])
        tensors[name] = t.reshape(h["shape"]).clone()
    return tensors, meta


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dump", help="the checkpoint written by dcgan --dump-reference (DUMP.reference beside it)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device(a.device)

    weights, meta = read_safetensors(a.dump)
    ref, rmeta = read_safetensors(a.dump + ".reference")
    c = {k: int(meta["dcgan." + k]) for k in ("latent", "g_width", "d_width")}
    print(f"model {c}, minidl ran on {rmeta.get('ref.device', '?')}, PyTorch {torch.__version__} on {dev}")

    model = DCGAN(**c)
    model.load_state_dict(weights, strict=True)
    model.to(dev).train()
    opt_d, opt_g = make_optimizers(model, float(rmeta["ref.lr"]), float(rmeta["ref.beta1"]), float(rmeta["ref.beta2"]))

    ok = True

    def check(what, passed, detail):
        nonlocal ok
        ok = ok and passed
        print(f"{'ok  ' if passed else 'FAIL'} {what}: {detail}")

    def check_tensor(what, ours, theirs, rtol):
        ours = ours.detach().cpu()
        if ours.dtype != torch.float32:
            equal = torch.equal(ours, theirs)
            check(what, equal, "equal" if equal else f"PyTorch {ours.tolist()}, minidl {theirs.tolist()}")
            return
        scale = ours.abs().max().item()
        err = (ours - theirs).abs().max().item()
        check(what, err <= rtol * scale, f"max error {err:.3e}, largest |element| {scale:.3e}")

    real, noise = ref["ref.real"].to(dev), ref["ref.noise"].to(dev)
    fake, stats = update_discriminator(model, opt_d, real, noise)
    for name, p in model.named_parameters():
        if name.startswith("discriminator."):
            check_tensor(f"grad {name}", p.grad, ref["ref.grad_d." + name], 1e-4)
    stats.update(update_generator(model, opt_g, fake))
    for name, p in model.named_parameters():
        if name.startswith("generator."):
            check_tensor(f"grad {name}", p.grad, ref["ref.grad_g." + name], 1e-4)
    for key, value in stats.items():
        theirs = ref["ref." + key].item()
        rel = abs(value - theirs) / abs(value)
        check(key, rel <= 1e-5, f"PyTorch {value:.8f}, minidl {theirs:.8f}, relative {rel:.3e}")
    for name, t in model.state_dict().items():
        check_tensor(f"after the step: {name}", t, ref["ref.after." + name], 1e-5)
    print("PASS" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
