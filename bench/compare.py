#!/usr/bin/env python3
"""Runs minidl's epoch benchmark and the PyTorch reference in one invocation and prints one table.

  python3 bench/compare.py --bench build/bench/bench_mnist_epoch --device cuda --modes eager,graph --batches 64,256
  python3 bench/compare.py --bench ... --device cpu --modes eager --batches 64 --threads 16 --train-limit 9600

Every option after the known ones is passed to both programs (--amp off,bf16,fp16 and --seed among them; a
configuration PyTorch cannot run, such as float16 autocast on the CPU of torch 1.13, shows nan on its side). Results also go to --out (CSV) if given.

--repeat N runs the two programs N times, alternating (minidl, PyTorch, minidl, ...), and reports for each
configuration the run with the median epoch time of each framework, with the fastest and slowest beside it,
and the median (and range) of the N ratios PyTorch / minidl of the runs made one after the other: when the
host's speed drifts, both runs of a pair see about the same conditions. On a shared host one run is not enough:
on the single-H200 host PyTorch's 2-thread CPU step took 45 ms in one run and 68 ms in the next (2026-11-30),
minidl's 37.5 and 50.5 ms in two calls.
"""
import argparse
import subprocess
import sys


def results(cmd):
    print("$ " + " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    sys.stdout.write(proc.stdout)
    if proc.returncode != 0:
        sys.exit(f"command failed with exit status {proc.returncode}: {' '.join(cmd)}")
    rows = []
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            rows.append(dict(kv.split("=", 1) for kv in line.split()[1:]))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True, help="path of bench_mnist_epoch")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--out", help="write the table as CSV here too")
    ap.add_argument("--repeat", type=int, default=1, help="alternating runs of each program (median reported)")
    a, rest = ap.parse_known_args()
    if a.repeat < 1:
        sys.exit(f"--repeat must be at least 1, found {a.repeat}")
    here = __file__.rsplit("/", 1)[0]
    key = lambda r: (r["device"].split(":")[0], r["mode"], r["batch"], r.get("tf32", "on"), r.get("amp", "off"))
    runs = {"minidl": {}, "torch": {}}  # framework -> config -> that config's rows over the runs
    order = []
    for _ in range(a.repeat):
        for name, cmd in (("minidl", [a.bench] + rest), ("torch", [a.python, f"{here}/torch_reference.py"] + rest)):
            for r in results(cmd):
                if name == "minidl" and key(r) not in order:
                    order.append(key(r))
                runs[name].setdefault(key(r), []).append(r)

    def median_run(rows):
        rows = sorted(rows, key=lambda r: float(r["epoch_s"]))
        return rows[(len(rows) - 1) // 2], f"{float(rows[0]['epoch_s']):.3f}-{float(rows[-1]['epoch_s']):.3f}"

    header = ["config", "minidl s", "PyTorch s", "PyTorch/minidl", "minidl step us", "graph nodes", "minidl MB",
              "PyTorch MB", "minidl step MB", "minidl acc", "PyTorch acc"]
    if a.repeat > 1:
        header += ["runs", "minidl s range", "PyTorch s range", "pairs PyTorch/minidl median (range)"]
    table = []
    for k in order:
        r, mine_range = median_run(runs["minidl"][k])
        t, torch_range = median_run(runs["torch"][k]) if k in runs["torch"] else ({}, "")
        ms, ts = float(r["epoch_s"]), float(t.get("epoch_s", "nan"))
        row = [f"{r['device']} {r['mode']} b{r['batch']} tf32 {r.get('tf32', 'on')} amp {r.get('amp', 'off')}",
               f"{ms:.3f}", f"{ts:.3f}",
               f"{ts / ms:.2f}x", r["step_us"], r.get("graph_nodes", ""), r.get("peak_mb", ""),
               t.get("peak_mb", ""), r.get("step_peak_mb", ""), r.get("test_acc", ""), t.get("test_acc", "")]
        if a.repeat > 1:
            pairs = sorted(float(t_run["epoch_s"]) / float(m_run["epoch_s"])
                           for m_run, t_run in zip(runs["minidl"][k], runs["torch"].get(k, [])))
            pair_text = f"{pairs[(len(pairs) - 1) // 2]:.2f}x ({pairs[0]:.2f}-{pairs[-1]:.2f})" if pairs else ""
            row += [str(a.repeat), mine_range, torch_range, pair_text]
        table.append(row)
    widths = [max(len(str(x)) for x in col) for col in zip(header, *table)]
    print()
    for row in [header] + table:
        print(" | ".join(str(x).ljust(w) for x, w in zip(row, widths)))
    if a.out:
        with open(a.out, "w") as f:
            for row in [header] + table:
                f.write(",".join(str(x) for x in row) + "\n")


if __name__ == "__main__":
    main()
