#!/usr/bin/env python3
"""Interop check: PyTorch reads a minidl checkpoint of the MNIST example CNN and reproduces minidl's logits.

Usage: torch_logits.py CHECKPOINT IO_FILE [--device cpu|cuda] [--tol 1e-4]

CHECKPOINT is a file written by minidl::io::save() for examples/mnist's Net (conv1.weight, conv1.bias,
conv2.weight, conv2.bias, fc1.weight, fc1.bias, fc2.weight, fc2.bias). IO_FILE is a safetensors file with
"input" (N x 1 x 28 x 28, float32) and "logits" (N x 10, float32: minidl's Net::forward in eval mode), e.g. from
    minidl::io::save_state_dict({{"input", x}, {"logits", net->forward(x)}}, path);
Both are read with safetensors.torch.load_file, the same CNN is built in PyTorch (eval mode: dropout off),
and the max abs difference of the logits is printed. Exit status: 0 within tolerance, 1 beyond it,
2 for files that do not match what is described above.
"""
import argparse
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import load_file

EXPECTED_NAMES = ["conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias",
                  "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]


class Net(nn.Module):
    """examples/mnist/net.cpp: conv 3x3, ReLU, conv 3x3, ReLU, max-pool 2, dropout, flatten, fc, ReLU,
    dropout, fc -> logits (no log_softmax: minidl's forward() returns logits). Sizes come from the checkpoint."""

    def __init__(self, state):
        super().__init__()
        c1, c2, f1, f2 = (state[n].shape for n in ("conv1.weight", "conv2.weight", "fc1.weight", "fc2.weight"))
        self.conv1 = nn.Conv2d(c1[1], c1[0], tuple(c1[2:]))
        self.conv2 = nn.Conv2d(c2[1], c2[0], tuple(c2[2:]))
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(f1[1], f1[0])
        self.fc2 = nn.Linear(f2[1], f2[0])

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = torch.flatten(self.dropout1(x), 1)
        x = F.relu(self.fc1(x))
        return self.fc2(self.dropout2(x))


def fail(message):
    print(f"torch_logits: {message}", file=sys.stderr)
    sys.exit(2)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint")
    parser.add_argument("io_file")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--tol", type=float, default=1e-4)
    args = parser.parse_args()

    # TF32 would change float32 results at the 1e-3 level; the comparison needs full float32 precision.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    state = load_file(args.checkpoint)
    if sorted(state) != sorted(EXPECTED_NAMES):
        fail(f"{args.checkpoint}: expected tensors {EXPECTED_NAMES}, found {sorted(state)}")
    for name, t in state.items():
        if t.dtype != torch.float32:
            fail(f"{args.checkpoint}: tensor '{name}': expected float32, found {t.dtype}")
    io = load_file(args.io_file)
    for name in ("input", "logits"):
        if name not in io:
            fail(f"{args.io_file}: expected a tensor '{name}', found {sorted(io)}")
    x, expected = io["input"].float(), io["logits"].float()

    model = Net(state)
    model.load_state_dict(state, strict=True)  # checks every shape
    model.to(args.device).eval()
    with torch.no_grad():
        logits = model(x.to(args.device)).cpu()
    if logits.shape != expected.shape:
        fail(f"{args.io_file}: 'logits' has shape {list(expected.shape)}, PyTorch computed {list(logits.shape)}")

    diff = (logits - expected).abs().max().item()
    print(f"max abs difference of {expected.numel()} logits ({expected.shape[0]} images): {diff:.3e} "
          f"(tolerance {args.tol:g})")
    if not diff <= args.tol:  # also fails on NaN
        print("FAIL: PyTorch does not reproduce minidl's logits", file=sys.stderr)
        sys.exit(1)
    print("OK")


if __name__ == "__main__":
    main()
