#!/usr/bin/env python3
"""Checks one minidl DCGAN training step (examples/dcgan) against PyTorch's.

    dcgan --dump-reference DUMP [--device cpu|cuda] [--batch-size 128] [--seed 1]
    /usr/bin/python3 examples/dcgan/reference/check_against_pytorch.py DUMP [--device cpu|cuda]

DUMP is a dcgan checkpoint (the initial weights of both networks, the model configuration in its metadata);
DUMP.reference holds the step's real batch and latent vectors, minidl's five statistics, the discriminator's
gradients after its update, the generator's after its own, and every parameter and buffer between the two updates
and after the step. This script builds the same model in PyTorch (dcgan_torch.py), loads DUMP into it with
load_state_dict(strict=True) and runs the tutorial's two updates on the same batch and latent vectors.

The reference is PyTorch in float64, and PyTorch's own float32 error against it is printed beside minidl's.
Adam's first step moves every weight by lr times the sign of its gradient, so where a gradient is near zero the
two frameworks' weights after the discriminator's update may differ by 2 lr, which would then change every
gradient of the generator's update. So each update is checked from minidl's own state before it:
  - the discriminator's gradients (from the initial weights) and, from minidl's weights between the two updates,
    the generator's: every element within 1e-4 of the largest |element| of that gradient, or, where float32
    itself is further off, no further from float64 than twice PyTorch's float32 error. (At batch 128 a few of
    the generator's 3.7M ReLU inputs lie within float32 rounding of 0 and fall on the other side of it in
    float32 than in float64; each such element changes the gradients above it, by up to 1e-2 of the largest
    element, in any float32 implementation. With --batch-size 16 there are usually none.)
  - each Adam update, PyTorch's Adam applied to minidl's gradients: every weight within 1e-6 of the largest;
  - the statistics loss_D, D(x), D(G(z)) before the update, loss_G, D(G(z)) after: within 1e-5 relative;
  - BatchNorm's running statistics after the step: within 1e-5 of the largest |element|.
Prints one line per check; exit status 0 when all pass, 1 otherwise, 2 for a missing or malformed file.
Needs only torch (examples/common/reference/safetensors_file.py reads the safetensors files).
"""
import argparse
import os
import sys

import torch

from dcgan_torch import DCGAN, make_optimizers, update_discriminator, update_generator

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common", "reference"))
from safetensors_file import read_safetensors  # noqa: E402


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
    hyper = [float(rmeta["ref." + k]) for k in ("lr", "beta1", "beta2")]
    print(f"model {c}, minidl ran on {rmeta.get('ref.device', '?')}, PyTorch {torch.__version__} on {dev}")
    mid = {k[len("ref.mid."):]: v for k, v in ref.items() if k.startswith("ref.mid.")}
    after = {k[len("ref.after."):]: v for k, v in ref.items() if k.startswith("ref.after.")}
    buffer_names = {n for n, _ in DCGAN(**c).named_buffers()}
    g_buffers = {k: v for k, v in weights.items() if k in buffer_names and k.startswith("generator.")}

    ok = True

    def check(what, passed, detail):
        nonlocal ok
        ok = ok and passed
        print(f"{'ok  ' if passed else 'FAIL'} {what}: {detail}")

    def error(t, truth):
        return (t.detach().cpu().double() - truth.detach().cpu().double()).abs().max().item()

    def check_close(what, minidl, truth, rtol, torch32=None):
        """Within rtol of truth's largest |element|, or (with torch32) within twice PyTorch float32's error."""
        scale = truth.detach().abs().max().item()
        err = error(minidl, truth)
        if torch32 is None:
            check(what, err <= rtol * scale, f"minidl's error {err:.3e}, largest |element| {scale:.3e}")
            return
        err32 = error(torch32, truth)
        check(what, err <= max(rtol * scale, 2 * err32),
              f"minidl's error {err:.3e}, PyTorch float32's {err32:.3e}, largest |element| {scale:.3e}")

    def models(state):
        """The model in float64 (the reference) and float32 (PyTorch's own error), from `state`, with optimizers."""
        out = []
        for dtype in (torch.float64, torch.float32):
            m = DCGAN(**c)
            m.load_state_dict(state, strict=True)
            m.to(device=dev, dtype=dtype).train()
            out.append((m, *make_optimizers(m, *hyper), dtype))
        return out

    real, noise = ref["ref.real"].to(dev), ref["ref.noise"].to(dev)
    stats = {}

    # The discriminator's update from the initial weights.
    (m64, d64, _, t64), (m32, d32, _, t32) = models(weights)
    _, s64 = update_discriminator(m64, d64, real.to(t64), noise.to(t64))
    update_discriminator(m32, d32, real.to(t32), noise.to(t32))
    stats.update(s64)
    p32 = dict(m32.named_parameters())
    for name, p in m64.named_parameters():
        if name.startswith("discriminator."):
            check_close(f"grad {name}", ref["ref.grad_d." + name], p.grad, 1e-4, p32[name].grad)

    # The generator's update from minidl's state between the updates (its BatchNorm buffers as before G(z)).
    start = dict(mid)
    start.update(g_buffers)
    (m64, _, g64, t64), (m32, _, g32, t32) = models(start)
    s64 = update_generator(m64, g64, m64.generator(noise.to(t64)))
    update_generator(m32, g32, m32.generator(noise.to(t32)))
    stats.update(s64)
    p32 = dict(m32.named_parameters())
    for name, p in m64.named_parameters():
        if name.startswith("generator."):
            check_close(f"grad {name}", ref["ref.grad_g." + name], p.grad, 1e-4, p32[name].grad)
    for key, value in stats.items():
        theirs = ref["ref." + key].item()
        rel = abs(value - theirs) / abs(value)
        check(key, rel <= 1e-5, f"PyTorch (float64) {value:.8f}, minidl {theirs:.8f}, relative {rel:.3e}")
    for name, t in m64.state_dict().items():
        if name.endswith(("running_mean", "running_var")):
            check_close(f"after the step: {name}", after[name], t, 1e-5)
        elif name.endswith("num_batches_tracked"):
            check(f"after the step: {name}", torch.equal(after[name].cpu(), t.cpu()), f"minidl {after[name].item()}")

    # Each Adam update applied by PyTorch to minidl's gradients, in float32.
    for net, before, grads, result in (("discriminator", weights, "ref.grad_d.", mid),
                                       ("generator", mid, "ref.grad_g.", after)):
        m = DCGAN(**c)
        m.load_state_dict(before, strict=True)
        opt_d, opt_g = make_optimizers(m, *hyper)
        for name, p in m.named_parameters():
            if name.startswith(net + "."):
                p.grad = ref[grads + name].clone()
        (opt_d if net == "discriminator" else opt_g).step()
        for name, p in m.named_parameters():
            if name.startswith(net + "."):
                check_close(f"Adam's update of {name}", result[name], p, 1e-6)
    print("PASS" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
