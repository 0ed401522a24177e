#!/usr/bin/env python3
"""Runs a minidl program and its PyTorch reference alternately and prints one table of their training speed.

    python3 bench/compare_programs.py --repeat 3 --pytorch-env OMP_WAIT_POLICY=passive \\
        --minidl "build/cpu/examples/char_lstm/char_lstm --device cpu --threads 2 --iters 4 --eval-every 4 \\
                  --eval-batches 1 --no-progress" \\
        --pytorch "/usr/bin/python3 examples/char_lstm/reference/train_reference.py --threads 2 --iters 4 \\
                   --eval-every 4 --eval-batches 1"

Both programs end with the speed table the examples print (a line `device ms/iter ...` or `device ms/step ...`,
then one row per device; the first row is read): gpt_train, char_lstm, resnet, dcgan and their references
(examples/<name>/reference) do, with the first step, one-time work, left out by both. --repeat N alternates the two N times (minidl, PyTorch, minidl, ...) and
reports each side's median and range and the median of the N ratios PyTorch / minidl of runs made one after the
other, so that a drift in the host's speed touches both sides of a pair alike. --pytorch-env VAR=VALUE sets an
environment variable of the PyTorch runs only: on a busy host PyTorch's OpenMP threads spin, and
OMP_WAIT_POLICY=passive keeps them from losing an order of magnitude there (2026-12-05, examples' READMEs).
"""
import argparse
import os
import shlex
import statistics
import subprocess
import sys


def ms_per_iter(cmd, env):
    """The first row's milliseconds per iteration of the speed table `cmd` prints."""
    print("$ " + " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    if proc.returncode != 0:
        sys.stdout.write(proc.stdout)
        sys.exit(f"compare_programs: exit status {proc.returncode} from {' '.join(cmd)}")
    lines = proc.stdout.splitlines()
    header = [i for i, line in enumerate(lines) if line.split()[:2] in (["device", "ms/iter"], ["device", "ms/step"])]
    if not header or header[-1] + 1 >= len(lines):
        sys.exit(f"compare_programs: no speed table (device ms/iter|ms/step ...) in the output of {' '.join(cmd)}:\n"
                 + proc.stdout)
    return float(lines[header[-1] + 1].split()[1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minidl", required=True, help="the minidl program's command line (one string)")
    ap.add_argument("--pytorch", required=True, help="the PyTorch reference's command line (one string)")
    ap.add_argument("--repeat", type=int, default=3, help="alternating runs of each (default 3)")
    ap.add_argument("--pytorch-env", action="append", default=[], metavar="VAR=VALUE")
    a = ap.parse_args()
    if a.repeat < 1:
        sys.exit(f"compare_programs: --repeat must be at least 1, found {a.repeat}")
    for kv in a.pytorch_env:
        if "=" not in kv:
            sys.exit(f"compare_programs: --pytorch-env takes VAR=VALUE, found {kv!r}")
    torch_env = dict(os.environ)
    torch_env.update(kv.split("=", 1) for kv in a.pytorch_env)
    mine, theirs = [], []
    for r in range(a.repeat):
        mine.append(ms_per_iter(shlex.split(a.minidl), dict(os.environ)))
        theirs.append(ms_per_iter(shlex.split(a.pytorch), torch_env))
        print(f"run {r + 1}: minidl {mine[-1]:.2f} ms/iter, PyTorch {theirs[-1]:.2f} ms/iter "
              f"(PyTorch / minidl {theirs[-1] / mine[-1]:.2f})", flush=True)
    ratios = [t / m for m, t in zip(mine, theirs)]
    print(f"\nPyTorch's environment: {' '.join(a.pytorch_env) or 'unchanged'}")
    print(f"{'':8} {'median ms/iter':>15} {'min':>10} {'max':>10}")
    for name, v in (("minidl", mine), ("PyTorch", theirs)):
        print(f"{name:8} {statistics.median(v):15.2f} {min(v):10.2f} {max(v):10.2f}")
    print(f"PyTorch / minidl: median of the pairs {statistics.median(ratios):.2f} "
          f"(range {min(ratios):.2f}-{max(ratios):.2f}, {a.repeat} pairs)")


if __name__ == "__main__":
    main()
