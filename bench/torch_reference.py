"""PyTorch side of minidl's comparison: the same CNN, data and measurement as bench_mnist_epoch.

Warm-up (5 steps; for `graph` also the capture), then one timed epoch of n // batch steps with the data
resident on the device and batches gathered by a random permutation; no evaluation inside the timing.
--amp bf16|fp16 trains as mnist_train --amp does: forward pass and loss under torch.autocast(device type,
bfloat16 or float16), backward and the update outside it, float16 through a GradScaler; the evaluation under the
same autocast. A configuration PyTorch cannot run prints a NOTE line instead of its RESULT: float16 autocast on the
CPU in torch 1.13 (a RuntimeError there: "AutocastCPU only support Bfloat16"), and fp16 with `graph` (GradScaler.step reads the
inf flag back to the host for SGD, which a CUDA-graph capture forbids).
Prints RESULT lines in bench_mnist_epoch's format. Needs PyTorch; run through bench/compare.py.
"""
import argparse
import contextlib
import gzip
import struct
import time
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def load_idx(path):
    raw = gzip.open(path, "rb").read() if path.endswith(".gz") else open(path, "rb").read()
    ndim = raw[3]
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load_fashion_mnist(data, dev):
    """Train images, train labels, test images, test labels on `dev`; images normalised as minidl's example does."""
    def tensor(name, images):
        arr = load_idx(f"{data}/{name}-{'images-idx3' if images else 'labels-idx1'}-ubyte.gz")
        if not images:
            return torch.tensor(arr, dtype=torch.int64, device=dev)
        return ((torch.tensor(arr, dtype=torch.float32) / 255 - 0.2860) / 0.3530).unsqueeze(1).to(dev)

    return tensor("train", True), tensor("train", False), tensor("t10k", True), tensor("t10k", False)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 32, 3), nn.Conv2d(32, 64, 3)
        self.fc1, self.fc2 = nn.Linear(9216, 128), nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv2(F.relu(self.conv1(x)))), 2)
        x = F.dropout(x, 0.25, self.training).flatten(1)
        x = F.dropout(F.relu(self.fc1(x)), 0.5, self.training)
        return self.fc2(x)


AMP_DTYPES = {"off": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def autocast(dev, dtype):
    """torch.autocast for `dev`'s type in `dtype`; a region with autocast off when dtype is None."""
    return torch.autocast(dev.type, dtype=dtype or torch.bfloat16, enabled=dtype is not None)


def unsupported(dev, mode, amp):
    """Why PyTorch cannot run this configuration, or None."""
    dtype = AMP_DTYPES[amp]
    if dtype is None:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # some versions turn an unsupported dtype off with a warning
            with autocast(dev, dtype):
                enabled = torch.is_autocast_cpu_enabled() if dev.type == "cpu" else torch.is_autocast_enabled()
    except RuntimeError as e:  # torch 1.13: "Currently, AutocastCPU only support Bfloat16 as the autocast_cpu_dtype"
        return f"torch {torch.__version__} has no {dtype} autocast on {dev.type}: {str(e).splitlines()[0]}"
    if not enabled:
        return f"torch {torch.__version__} has no {dtype} autocast on {dev.type} (it turns autocast off)"
    if amp == "fp16" and mode == "graph":
        return "PyTorch's GradScaler.step reads the inf flag back to the host for SGD: not capturable in a CUDA graph"
    return None


def grad_scaler(dev):
    """torch.amp.GradScaler for the device type where PyTorch has it (2.3 on), else the CUDA one."""
    if hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler(dev.type)
    return torch.cuda.amp.GradScaler()


def bench(dev, mode, batch, amp, seed, xtr, ytr, xte, yte):
    torch.manual_seed(seed)
    model = Net().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    dtype = AMP_DTYPES[amp]
    scaler = grad_scaler(dev) if amp == "fp16" else None
    n = xtr.shape[0]
    steps = n // batch

    def train_step(xb, yb):
        with autocast(dev, dtype):
            loss = F.cross_entropy(model(xb), yb)
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()

    def step(xb, yb):
        opt.zero_grad(set_to_none=True)
        train_step(xb, yb)

    model.train()
    perm = torch.randperm(n, device=dev)
    sx, sy = xtr[:batch].clone(), ytr[:batch].clone()
    side = torch.cuda.Stream() if dev.type == "cuda" else None
    if side is not None:
        side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side) if side is not None else contextlib.nullcontext():
        for _ in range(5):
            step(sx, sy)
    if side is not None:
        torch.cuda.current_stream().wait_stream(side)
    graph = None
    if mode == "graph":
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            train_step(sx, sy)
    if dev.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for i in range(steps):
        idx = perm[i * batch:(i + 1) * batch]
        if graph is not None:
            sx.copy_(xtr[idx])
            sy.copy_(ytr[idx])
            graph.replay()
        else:
            step(xtr[idx], ytr[idx])
    if dev.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    peak = torch.cuda.max_memory_allocated() / 2**20 if dev.type == "cuda" else 0.0
    model.eval()
    with torch.no_grad(), autocast(dev, dtype):
        correct = sum((model(xte[i:i + 1000]).argmax(1) == yte[i:i + 1000]).sum().item()
                      for i in range(0, xte.shape[0], 1000))
    return seconds, steps, peak, correct / xte.shape[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--modes", default="eager,graph")
    ap.add_argument("--batches", default="64,256")
    ap.add_argument("--tf32", default="on")
    ap.add_argument("--amp", default="off", help="comma-separated: off, bf16, fp16")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--train-limit", type=int, default=0)
    a = ap.parse_args()
    for amp in a.amp.split(","):
        if amp not in AMP_DTYPES:
            ap.error(f"--amp: \"{amp}\" is not off, bf16 or fp16")
    if a.threads:
        torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    xtr, ytr, xte, yte = load_fashion_mnist(a.data, dev)
    if a.train_limit:
        xtr, ytr = xtr[:a.train_limit], ytr[:a.train_limit]
    print(f"torch {torch.__version__} device {dev} threads {torch.get_num_threads()}", flush=True)
    for t in a.tf32.split(","):
        torch.backends.cudnn.allow_tf32 = t == "on"
        for amp in a.amp.split(","):
            for mode in a.modes.split(","):
                if mode == "graph" and dev.type != "cuda":
                    continue
                why = unsupported(dev, mode, amp)
                if why:
                    print(f"NOTE framework=torch device={a.device} mode={mode} amp={amp}: skipped: {why}", flush=True)
                    continue
                for b in a.batches.split(","):
                    s, steps, peak, acc = bench(dev, mode, int(b), amp, a.seed, xtr, ytr, xte, yte)
                    print(f"RESULT framework=torch device={a.device} mode={mode} batch={b} tf32={t} amp={amp} "
                          f"epoch_s={s:.3f} imgs_per_s={steps * int(b) / s:.0f} step_us={1e6 * s / steps:.1f} "
                          f"peak_mb={peak:.1f} test_acc={acc:.4f}", flush=True)


if __name__ == "__main__":
    main()
