#!/usr/bin/env python3
"""Checks one minidl ResNet training step (examples/resnet) against PyTorch's.

    resnet --dump-reference DUMP --device cpu --batch-size 8 [--width 64 --blocks 2,2,2,2] [--seed 1]
    /usr/bin/python3 examples/resnet/reference/check_against_pytorch.py DUMP [--device cpu|cuda]

DUMP is a resnet checkpoint (the initial weights, the model configuration in its metadata); DUMP.reference holds
the step's input (the augmented batch, as the network sees it) and labels, minidl's logits and loss, every
parameter's gradient and every parameter and buffer after SGD's update. This script builds the same model in
PyTorch (resnet_torch.py), loads DUMP into it with load_state_dict(strict=True) and runs the same step.

The reference is PyTorch in float64, and PyTorch's own float32 error against it is printed beside minidl's:
  - the logits and every gradient: every element within 1e-4 of the largest |element| of that tensor, or, where
    float32 itself is further off, no further from float64 than twice PyTorch's float32 error. A ReLU input
    within float32 rounding of 0 falls on either side of it in a float32 computation, and changes every gradient
    below it: at batch 32 each of ResNet-18's ReLUs has a few inputs within 1e-6 of 0 (in float64), and whether
    minidl's or PyTorch's float32 is further off there is chance; at batch 8 (the command above) there are few
    enough that every gradient of both lies within 3e-5 of float64 (examples/resnet/README.md);
  - the loss: within 1e-5 relative;
  - BatchNorm's running statistics after the step: within 1e-5 of the largest |element|;
  - SGD's update, PyTorch's SGD (Nesterov, weight decay) applied in float32 to minidl's gradients: every weight
    within 1e-6 of the largest.
Prints one line per check; exit status 0 when all pass, 1 otherwise, 2 for a missing or malformed file.
Needs only torch (examples/common/reference/safetensors_file.py reads the safetensors files).
"""
import argparse
import os
import sys

import torch

from resnet_torch import ResNet, config_from_metadata, make_optimizer, train_step

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common", "reference"))
from safetensors_file import read_safetensors  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dump", help="the checkpoint written by resnet --dump-reference (DUMP.reference beside it)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device(a.device)

    weights, meta = read_safetensors(a.dump)
    ref, rmeta = read_safetensors(a.dump + ".reference")
    c = config_from_metadata(meta)
    lr, momentum, weight_decay = (float(rmeta["ref." + k]) for k in ("lr", "momentum", "weight_decay"))
    after = {k[len("ref.after."):]: v for k, v in ref.items() if k.startswith("ref.after.")}
    x, y = ref["ref.x"], ref["ref.y"]
    print(f"model {c}, batch {x.shape[0]}, lr {lr:.6g}; minidl ran on {rmeta.get('ref.device', '?')}, "
          f"PyTorch {torch.__version__} on {dev}")

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

    runs = {}
    for dtype in (torch.float64, torch.float32):
        m = ResNet(**c)
        m.load_state_dict(weights, strict=True)
        m.to(device=dev, dtype=dtype).train()
        opt = make_optimizer(m, lr, momentum, weight_decay)
        logits, loss = train_step(m, opt, x.to(dev, dtype), y.to(dev))
        runs[dtype] = (m, logits, loss)
    (m64, logits64, loss64), (m32, logits32, _) = runs[torch.float64], runs[torch.float32]

    check_close("logits", ref["ref.logits"], logits64, 1e-4, logits32)
    rel = abs(ref["ref.loss"].item() - loss64.item()) / abs(loss64.item())
    check("loss", rel <= 1e-5, f"PyTorch (float64) {loss64.item():.8f}, minidl {ref['ref.loss'].item():.8f}, "
                               f"relative {rel:.3e}")
    p32 = dict(m32.named_parameters())
    for name, p in m64.named_parameters():
        check_close(f"grad {name}", ref["ref.grad." + name], p.grad, 1e-4, p32[name].grad)
    for name, t in m64.state_dict().items():
        if name.endswith(("running_mean", "running_var")):
            check_close(f"after the step: {name}", after[name], t, 1e-5)
        elif name.endswith("num_batches_tracked"):
            check(f"after the step: {name}", torch.equal(after[name].cpu(), t.cpu()), f"minidl {after[name].item()}")

    # SGD's update applied by PyTorch to minidl's gradients, in float32.
    m = ResNet(**c)
    m.load_state_dict(weights, strict=True)
    opt = make_optimizer(m, lr, momentum, weight_decay)
    for name, p in m.named_parameters():
        p.grad = ref["ref.grad." + name].clone()
    opt.step()
    for name, p in m.named_parameters():
        check_close(f"SGD's update of {name}", after[name], p, 1e-6)
    print("PASS" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
