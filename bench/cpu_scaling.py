#!/usr/bin/env python3
"""How minidl's CPU epoch scales with threads, measured as alternating runs so that every round sees about the
same host conditions.

  python3 bench/cpu_scaling.py --bench build/bench/bench_mnist_epoch --threads 2,16 --cores 0-1,0-15 --repeat 5 \\
      --data data/fashion-mnist --train-limit 3200

Each round runs bench_mnist_epoch once per thread count (pinned with taskset to the matching --cores list, if
given) and takes each run's speedup over the round's first thread count. The table gives per thread count the
median step time with its range, and the median (and range) of those per-round speedups. On a shared host the
speed drifts by tens of percent over minutes (docs/BENCHMARKS.md, session 9: the same 2-thread step took 24 and
36 ms in two calls), so a speedup from medians taken minutes apart can say 4.5x in one call and 5.7x in the next.
Options it does not know are passed to bench_mnist_epoch (the defaults: --device cpu --modes eager --batches 64).
"""
import argparse
import statistics
import sys

from compare import results  # runs a command, echoes it and its output, returns its RESULT lines


def step_us(cmd):
    rows = results(cmd)
    if not rows:
        sys.exit(f"no RESULT line from: {' '.join(cmd)}")
    return float(rows[0]["step_us"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True, help="path of bench_mnist_epoch")
    ap.add_argument("--threads", required=True, help="comma-separated thread counts; the first is the baseline")
    ap.add_argument("--cores", help="comma-separated taskset core lists, one per thread count")
    ap.add_argument("--repeat", type=int, default=3, help="rounds (one run per thread count each)")
    a, rest = ap.parse_known_args()
    threads = [int(t) for t in a.threads.split(",")]
    cores = a.cores.split(",") if a.cores else [None] * len(threads)
    if len(cores) != len(threads):
        sys.exit(f"--cores names {len(cores)} core lists for {len(threads)} thread counts")
    if a.repeat < 1 or any(t < 1 for t in threads):
        sys.exit("--repeat and every thread count must be at least 1")
    for flag, value in (("--device", "cpu"), ("--modes", "eager"), ("--batches", "64")):
        if flag not in rest:
            rest += [flag, value]
    steps = {t: [] for t in threads}
    for _ in range(a.repeat):
        for t, c in zip(threads, cores):
            cmd = [a.bench, "--threads", str(t)] + rest
            steps[t].append(step_us((["taskset", "-c", c] if c else []) + cmd))
    base = threads[0]
    print()
    header = ["threads", "cores", "step ms median (range)", f"speedup over {base}, median of rounds (range)"]
    rows = []
    for t, c in zip(threads, cores):
        ms = [s / 1000 for s in steps[t]]
        ratios = [b / s for b, s in zip(steps[base], steps[t])]
        rows.append([str(t), c or "any", f"{statistics.median(ms):.2f} ({min(ms):.2f}-{max(ms):.2f})",
                     f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"])
    widths = [max(len(x) for x in col) for col in zip(header, *rows)]
    for row in [header] + rows:
        print(" | ".join(x.ljust(w) for x, w in zip(row, widths)))


if __name__ == "__main__":
    main()
