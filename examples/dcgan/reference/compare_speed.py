#!/usr/bin/env python3
"""minidl's DCGAN step beside PyTorch's on this machine's CPU: alternating runs, one table.

    /usr/bin/python3 examples/dcgan/reference/compare_speed.py --dcgan build/cpu/examples/dcgan/dcgan \\
        --threads 2 --batch-size 128 --steps 20 --repeat 3

Each repeat runs minidl (`dcgan --synthetic --device cpu`, one epoch of --steps + 1 steps, a metrics row per step)
and then PyTorch (time_step.py, --warmup 1 untimed step and --steps timed ones), so that both see about the same
load on a shared host. A run's figure is the median milliseconds of its timed steps (minidl: every step after
the first, which holds one-time work); the table gives each framework's median run with the range of the runs,
and the median of the per-repeat ratios PyTorch / minidl (above 1: minidl faster).

PyTorch runs with OMP_WAIT_POLICY=PASSIVE and OPENBLAS_NUM_THREADS=1 unless --torch-default-env: on a shared,
oversubscribed host libgomp's spinning workers (and OpenBLAS's own threads beside them) cost Debian's torch 1.13
up to 7x (2026-12-05, 2-core VM at load 9: 32 s per step against 4.7 s passive, 4.0 s with one BLAS thread).
"""
import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile


def run(cmd, env=None):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    if proc.returncode != 0:
        sys.exit(f"command failed with exit status {proc.returncode}: {' '.join(cmd)}\n{proc.stdout}")
    return proc.stdout


def minidl_ms(a, metrics):
    run([a.dcgan, "--synthetic", "--device", "cpu", "--threads", str(a.threads), "--batch-size", str(a.batch_size),
         "--train-limit", str(a.batch_size * (a.steps + 1)), "--epochs", "1", "--log-every", "1", "--metrics",
         metrics, "--samples-dir", "", "--no-progress", "--log-level", "warn"])
    with open(metrics) as f:
        rows = list(csv.DictReader(f))
    return statistics.median(float(r["ms_per_step"]) for r in rows[1:])


def torch_ms(a):
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ)
    if not a.torch_default_env:
        env.update(OMP_WAIT_POLICY="PASSIVE", OPENBLAS_NUM_THREADS="1")
    out = run([a.python, os.path.join(here, "time_step.py"), "--threads", str(a.threads), "--batch-size",
               str(a.batch_size), "--steps", str(a.steps), "--warmup", "1"], env)
    line = next(l for l in out.splitlines() if l.startswith("RESULT "))
    return float(dict(kv.split("=", 1) for kv in line.split()[1:])["median_ms"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dcgan", required=True, help="path of the built dcgan program")
    ap.add_argument("--python", default="/usr/bin/python3", help="a Python with torch")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--torch-default-env", action="store_true",
                    help="run PyTorch without OMP_WAIT_POLICY=PASSIVE and OPENBLAS_NUM_THREADS=1")
    a = ap.parse_args()
    ours, theirs = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.repeat):
            ours.append(minidl_ms(a, os.path.join(tmp, f"m{i}.csv")))
            theirs.append(torch_ms(a))
            print(f"repeat {i + 1}: minidl {ours[-1]:.1f} ms/step, PyTorch {theirs[-1]:.1f} ms/step", flush=True)
    ratios = [t / m for m, t in zip(ours, theirs)]
    print(f"\nDCGAN step (one D and one G update), batch {a.batch_size}, {a.threads} CPU threads, {a.repeat} "
          f"alternating runs of {a.steps} timed steps")
    print(f"{'framework':<10} {'median ms/step':>15} {'range':>18}")
    for name, v in (("minidl", ours), ("PyTorch", theirs)):
        print(f"{name:<10} {statistics.median(v):>15.1f} {min(v):>8.1f} - {max(v):<8.1f}")
    print(f"PyTorch / minidl: {statistics.median(ratios):.2f}x (range {min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    main()
