"""PyTorch side of minidl's comparison: the same CNN, data and measurement as bench_mnist_epoch.

Warm-up (5 steps; for `graph` also the capture), then one timed epoch of n // batch steps with the data
resident on the device and batches gathered by a random permutation; no evaluation inside the timing.
Prints RESULT lines in bench_mnist_epoch's format. Needs PyTorch; run through bench/compare.py.
"""
import argparse
import contextlib
import gzip
import struct
import time

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


def bench(dev, mode, batch, xtr, ytr, xte, yte):
    torch.manual_seed(0)
    model = Net().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    n = xtr.shape[0]
    steps = n // batch

    def step(xb, yb):
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(xb), yb).backward()
        opt.step()

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
            F.cross_entropy(model(sx), sy).backward()
            opt.step()
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
    with torch.no_grad():
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
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--train-limit", type=int, default=0)
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    xtr, ytr, xte, yte = load_fashion_mnist(a.data, dev)
    if a.train_limit:
        xtr, ytr = xtr[:a.train_limit], ytr[:a.train_limit]
    print(f"torch {torch.__version__} device {dev} threads {torch.get_num_threads()}", flush=True)
    for t in a.tf32.split(","):
        torch.backends.cudnn.allow_tf32 = t == "on"
        for mode in a.modes.split(","):
            if mode == "graph" and dev.type != "cuda":
                continue
            for b in a.batches.split(","):
                s, steps, peak, acc = bench(dev, mode, int(b), xtr, ytr, xte, yte)
                print(f"RESULT framework=torch device={a.device} mode={mode} batch={b} tf32={t} epoch_s={s:.3f} "
                      f"imgs_per_s={steps * int(b) / s:.0f} step_us={1e6 * s / steps:.1f} peak_mb={peak:.1f} "
                      f"test_acc={acc:.4f}", flush=True)


if __name__ == "__main__":
    main()
