#!/usr/bin/env python3
"""Times char_lstm (minidl) and train_reference.py (PyTorch) side by side on the CPU: --repeat alternating runs of
each (minidl, PyTorch, minidl, ...) with the same model flags, and one table of their steady ms/iter (the first
step left out by both) with the median of the pairs' ratios, as bench/compare.py does for the MNIST CNN.

    /usr/bin/python3 compare_speed.py --char-lstm build/cpu/examples/char_lstm/char_lstm --threads 2 --iters 5 \
        --repeat 3 -- --embed 128 --hidden 512 --layers 2 --seq-len 128 --batch-size 64

The flags after -- go to both programs. Each run validates on one batch only (--eval-batches 1), outside the
timed steps. --torch-env VAR=VALUE (repeatable) sets environment variables of the PyTorch runs only, e.g.
OMP_WAIT_POLICY=passive.
"""
import argparse
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def ms_per_iter(cmd, env):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    if proc.returncode != 0:
        sys.stdout.write(proc.stdout)
        sys.exit(f"compare_speed.py: exit status {proc.returncode}: {' '.join(cmd)}")
    lines = proc.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["device", "ms/iter"])
    return float(lines[header + 1].split()[1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--char-lstm", required=True, help="the built char_lstm binary")
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=5, help="training iterations per run (the first is not timed)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--torch-env", action="append", default=[], metavar="VAR=VALUE")
    ap.add_argument("model_flags", nargs="*")
    a = ap.parse_args()
    common = ["--threads", str(a.threads), "--iters", str(a.iters), "--eval-every", str(a.iters), "--eval-batches",
              "1"] + a.model_flags
    minidl_cmd = [a.char_lstm, "--device", "cpu", "--no-progress", "--log-level", "warn"] + common
    torch_cmd = [a.python, os.path.join(HERE, "train_reference.py")] + common
    torch_env = dict(os.environ)
    torch_env.update(kv.split("=", 1) for kv in a.torch_env)
    ours, theirs = [], []
    for r in range(a.repeat):
        ours.append(ms_per_iter(minidl_cmd, dict(os.environ)))
        theirs.append(ms_per_iter(torch_cmd, torch_env))
        print(f"run {r + 1}: minidl {ours[-1]:.1f} ms/iter, PyTorch {theirs[-1]:.1f} ms/iter "
              f"(ratio {theirs[-1] / ours[-1]:.2f})", flush=True)
    ratios = [t / m for m, t in zip(ours, theirs)]
    env = " ".join(a.torch_env) or "default environment"
    print(f"\n{a.threads} threads, {a.iters - 1} timed steps per run, flags: {' '.join(a.model_flags) or '(defaults)'};"
          f" PyTorch with {env}")
    print(f"{'':8} {'median ms/iter':>15} {'min':>8} {'max':>8}")
    for name, v in (("minidl", ours), ("PyTorch", theirs)):
        print(f"{name:8} {statistics.median(v):15.1f} {min(v):8.1f} {max(v):8.1f}")
    print(f"PyTorch / minidl: median {statistics.median(ratios):.2f} (range {min(ratios):.2f}-{max(ratios):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
