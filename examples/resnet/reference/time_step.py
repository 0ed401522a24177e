#!/usr/bin/env python3
"""Times PyTorch's ResNet training step (resnet_torch.py; the work of one step of examples/resnet's Trainer:
random crop + flip on the device, forward, cross entropy, backward, SGD's update, OneCycleLR's step) on random
images, and prints the speed table resnet prints, so that bench/compare_programs.py can run the two side by side:

    /usr/bin/python3 bench/compare_programs.py --repeat 3 --pytorch-env OMP_WAIT_POLICY=passive \\
        --minidl "build/cpu/examples/resnet/resnet --synthetic --device cpu --threads 2 --batch-size 64 \\
                  --width 16 --train-limit 704 --test-limit 64 --epochs 1 --no-progress" \\
        --pytorch "/usr/bin/python3 examples/resnet/reference/time_step.py --device cpu --threads 2 \\
                   --batch-size 64 --width 16 --steps 10"

(--train-limit = batch size x (steps + 1): resnet leaves its first step, one-time work, out of ms/iter, as this
script leaves out --warmup steps.) The table: a header `device ms/iter images/s test acc speedup` and one row;
test acc is nan (no test set here).
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from resnet_torch import ResNet, make_optimizer, make_scheduler, train_step


def crop_flip(gray, padding=4):
    """examples/resnet/augment.cpp's crop_flip: gray (N, 1, 32, 32) padded, cropped at random offsets, mirrored at
    random, repeated to three channels, with two gathers on gray's device."""
    n, s = gray.shape[0], gray.shape[-1]
    dy = torch.randint(0, 2 * padding + 1, (n,)).to(gray.device)
    dx = torch.randint(0, 2 * padding + 1, (n,)).to(gray.device)
    flip = torch.randint(0, 2, (n,)).to(gray.device)
    padded = F.pad(gray, (padding,) * 4)
    along = torch.arange(s, device=gray.device).view(1, s)
    rows = (dy.view(n, 1) + along).view(n, 1, s, 1).expand(n, 1, s, s + 2 * padding)
    cropped = torch.gather(padded, 2, rows)
    cols = dx.view(n, 1) + along + flip.view(n, 1) * ((s - 1) - 2 * along)
    return torch.gather(cropped.expand(n, 3, s, s + 2 * padding), 3, cols.view(n, 1, 1, s).expand(n, 3, s, s))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--blocks", default="2,2,2,2")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    dev = torch.device(a.device)
    model = ResNet(a.width, tuple(int(b) for b in a.blocks.split(","))).to(dev).train()
    opt = make_optimizer(model, a.lr)
    sched = make_scheduler(opt, a.lr, a.warmup + a.steps)
    times = []
    for i in range(a.warmup + a.steps):
        gray = (torch.rand(a.batch_size, 1, 32, 32) * 2 - 1).to(dev)
        y = torch.randint(0, 10, (a.batch_size,)).to(dev)
        if dev.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        train_step(model, opt, crop_flip(gray), y)
        sched.step()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        if i >= a.warmup:
            times.append(1e3 * (time.perf_counter() - t0))
    ms = statistics.mean(times)  # resnet's ms/iter: the steady steps' total time over their number
    print(f"\n{'device':<8} {'ms/iter':>10} {'images/s':>10} {'test acc':>10} {'speedup':>10}")
    print(f"{str(dev):<8} {ms:10.2f} {1e3 * a.batch_size / ms:10.0f} {float('nan'):10.4f} {'':>10}")
    print(f"PyTorch {torch.__version__}, {a.threads} threads, batch {a.batch_size}, width {a.width}, blocks {a.blocks}, "
          f"{a.steps} timed steps after {a.warmup} warm-up step(s), median {statistics.median(times):.2f} ms")


if __name__ == "__main__":
    main()
