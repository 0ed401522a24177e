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

--ceiling PATH (bench/cpu_ceiling) also runs, in every round after each epoch run and on the same cores, the
in-cache GEMM and the register FMAs on every thread at once with no synchronisation, and prints their speedups
beside the step's: what the machine itself gives at these thread counts in that round, and the step's speedup
as a fraction of the GEMM's.
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


def ceiling_totals(cmd):
    return {r["kernel"]: float(r["total"]) for r in results(cmd)}


def median_range(xs, fmt):
    return f"{fmt.format(statistics.median(xs))} ({fmt.format(min(xs))}-{fmt.format(max(xs))})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True, help="path of bench_mnist_epoch")
    ap.add_argument("--threads", required=True, help="comma-separated thread counts; the first is the baseline")
    ap.add_argument("--cores", help="comma-separated taskset core lists, one per thread count")
    ap.add_argument("--repeat", type=int, default=3, help="rounds (one run per thread count each)")
    ap.add_argument("--ceiling", help="path of cpu_ceiling: run it beside every epoch run (see above)")
    ap.add_argument("--ceiling-seconds", default="0.5", help="how long cpu_ceiling runs each kernel")
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
    kernels = ("gemm", "fma")
    ceiling = {t: {k: [] for k in kernels} for t in threads}  # kernel -> total rate per round
    for _ in range(a.repeat):
        for t, c in zip(threads, cores):
            pin = ["taskset", "-c", c] if c else []
            steps[t].append(step_us(pin + [a.bench, "--threads", str(t)] + rest))
            if a.ceiling:
                totals = ceiling_totals(pin + [a.ceiling, "--threads", str(t), "--seconds", a.ceiling_seconds,
                                               "--kernels", ",".join(kernels)])
                for k in kernels:
                    ceiling[t][k].append(totals[k])
    base = threads[0]
    print()
    header = ["threads", "cores", "step ms median (range)", f"speedup over {base}, median of rounds (range)"]
    if a.ceiling:
        header += [f"{k} speedup (range)" for k in kernels] + ["step / gemm speedup (range)"]
    rows = []
    for t, c in zip(threads, cores):
        ms = [s / 1000 for s in steps[t]]
        ratios = [b / s for b, s in zip(steps[base], steps[t])]
        row = [str(t), c or "any", median_range(ms, "{:.2f}"), median_range(ratios, "{:.2f}x")]
        if a.ceiling:
            gains = {k: [x / b for x, b in zip(ceiling[t][k], ceiling[base][k])] for k in kernels}
            row += [median_range(gains[k], "{:.2f}x") for k in kernels]
            row.append(median_range([r / g for r, g in zip(ratios, gains["gemm"])], "{:.2f}"))
        rows.append(row)
    widths = [max(len(x) for x in col) for col in zip(header, *rows)]
    for row in [header] + rows:
        print(" | ".join(x.ljust(w) for x, w in zip(row, widths)))


if __name__ == "__main__":
    main()
