#!/usr/bin/env python3
"""Runs gpt_train and nanoGPT in PyTorch (bench_pytorch.py) on the same configuration, alternating, and prints one
table of their training speed.

    python3 examples/gpt/reference/compare_speed.py --gpt-train build/examples/gpt/gpt_train --repeat 3 \\
        --python /usr/bin/python3 -- --config char --device cpu --threads 2 --iters 5

The flags after `--` are gpt_train's model, data and device flags (bench_pytorch.py takes the same names); --iters
is the number of timed iterations of each run. gpt_train trains --iters + 1 iterations (its first step, one-time
work, is reported apart and not in its ms/iter); PyTorch runs one untimed warm-up step first. With --repeat N the
table gives each framework's median run and the median (and range) of the N ratios PyTorch / minidl of runs made
one after the other, so that a drift in the host's speed touches both sides of a pair alike.
"""
import argparse
import os
import re
import subprocess
import sys


def run(cmd):
    print("$ " + " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        sys.stdout.write(proc.stdout)
        sys.exit(f"compare_speed: exit status {proc.returncode} from {' '.join(cmd)}")
    return proc.stdout


def minidl_ms(out):
    """ms/iter from gpt_train's closing table (device, ms/iter, tokens/s, val loss, speedup)."""
    rows = re.findall(r"^(?:cpu|cuda\S*)\s+([\d.]+)\s+\d+\s", out, re.M)
    if not rows:
        sys.exit("compare_speed: gpt_train printed no speed table:\n" + out)
    return float(rows[-1])


def pytorch_ms(out):
    m = re.search(r"^RESULT .*\bms_per_iter=([\d.]+)", out, re.M)
    if not m:
        sys.exit("compare_speed: bench_pytorch.py printed no RESULT line:\n" + out)
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpt-train", required=True, help="path of the gpt_train binary")
    ap.add_argument("--python", default=sys.executable, help="the Python that has torch")
    ap.add_argument("--repeat", type=int, default=1, help="alternating runs of each (median reported)")
    ap.add_argument("flags", nargs=argparse.REMAINDER, help="-- then gpt_train's flags, --iters N among them")
    a = ap.parse_args()
    flags = a.flags[1:] if a.flags[:1] == ["--"] else a.flags
    iters = 10
    if "--iters" in flags:
        i = flags.index("--iters")
        iters = int(flags[i + 1])
        flags = flags[:i] + flags[i + 2:]
    if a.repeat < 1 or iters < 1:
        sys.exit(f"compare_speed: --repeat and --iters must be at least 1, found {a.repeat} and {iters}")
    here = os.path.dirname(os.path.abspath(__file__))
    mine = [a.gpt_train, *flags, "--iters", str(iters + 1), "--eval-every", str(iters + 1), "--eval-iters", "1",
            "--warmup", "0", "--no-progress"]
    theirs = [a.python, os.path.join(here, "bench_pytorch.py"), *flags, "--iters", str(iters), "--warmup-iters", "1"]
    m_runs, t_runs = [], []
    for _ in range(a.repeat):
        m_runs.append(minidl_ms(run(mine)))
        t_runs.append(pytorch_ms(run(theirs)))
        print(f"minidl {m_runs[-1]:.2f} ms/iter, PyTorch {t_runs[-1]:.2f} ms/iter", flush=True)
    median = lambda v: sorted(v)[(len(v) - 1) // 2]
    pairs = sorted(t / m for m, t in zip(m_runs, t_runs))
    header = ["configuration", "minidl ms/iter", "PyTorch ms/iter", "PyTorch/minidl", "runs", "pairs median (range)"]
    row = [" ".join(flags), f"{median(m_runs):.2f} ({min(m_runs):.2f}-{max(m_runs):.2f})",
           f"{median(t_runs):.2f} ({min(t_runs):.2f}-{max(t_runs):.2f})", f"{median(t_runs) / median(m_runs):.2f}x",
           str(a.repeat), f"{median(pairs):.2f}x ({pairs[0]:.2f}-{pairs[-1]:.2f})"]
    widths = [max(len(h), len(r)) for h, r in zip(header, row)]
    print()
    for line in (header, row):
        print(" | ".join(x.ljust(w) for x, w in zip(line, widths)))


if __name__ == "__main__":
    main()
