#!/usr/bin/env python3
"""Runs minidl's epoch benchmark and the PyTorch reference in one invocation and prints one table.

  python3 bench/compare.py --bench build/bench/bench_mnist_epoch --device cuda --modes eager,graph --batches 64,256
  python3 bench/compare.py --bench ... --device cpu --modes eager --batches 64 --threads 16 --train-limit 9600

Every option after the known ones is passed to both programs. Results also go to --out (CSV) if given.
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
    a, rest = ap.parse_known_args()
    here = __file__.rsplit("/", 1)[0]
    mine = results([a.bench] + rest)
    torch = results([a.python, f"{here}/torch_reference.py"] + rest)
    key = lambda r: (r["device"].split(":")[0], r["mode"], r["batch"], r.get("tf32", "on"))
    ref = {key(r): r for r in torch}
    header = ["config", "minidl s", "PyTorch s", "PyTorch/minidl", "minidl step us", "graph nodes", "minidl MB",
              "PyTorch MB", "minidl step MB", "minidl acc", "PyTorch acc"]
    table = []
    for r in mine:
        t = ref.get(key(r), {})
        ms, ts = float(r["epoch_s"]), float(t.get("epoch_s", "nan"))
        table.append([f"{r['device']} {r['mode']} b{r['batch']} tf32 {r.get('tf32', 'on')}", f"{ms:.3f}", f"{ts:.3f}",
                      f"{ts / ms:.2f}x", r["step_us"], r.get("graph_nodes", ""), r.get("peak_mb", ""),
                      t.get("peak_mb", ""), r.get("step_peak_mb", ""), r.get("test_acc", ""), t.get("test_acc", "")])
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
