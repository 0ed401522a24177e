"""Summarises test accuracy over seeds: PyTorch's (ACC lines of torch_accuracy.py) beside minidl's (the CSV
files mnist_train --metrics writes). One row per framework/device: runs, accuracy after epoch 1 and after the
last epoch (min, mean, max), and how many runs reach a threshold at the end.
Usage: python3 bench/accuracy_table.py [--threshold 0.90] [--epochs 10] FILE...
(.csv: minidl metrics; other files: torch_accuracy.py logs)
"""
import argparse
import csv
import statistics
from collections import defaultdict


def runs_from(path):
    """Yields (label, [test accuracy per epoch]) for each run a file holds."""
    if path.endswith(".csv"):
        accs, device = [], "?"
        with open(path) as f:
            for row in csv.DictReader(f):
                if row["split"] == "test":
                    accs.append(float(row["accuracy"]))
                    device = row["device"]
        if accs:
            yield f"minidl {device}", accs
        return
    with open(path) as f:
        for line in f:
            if line.startswith("ACC "):
                fields = line.split()
                tags = dict(t.split("=", 1) for t in fields[1:] if "=" in t)
                yield f"{tags['framework']} drop_last={tags.get('drop_last', '?')}", [float(x) for x in fields[1:] if "=" not in x]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threshold", type=float, default=0.90)
    ap.add_argument("--epochs", type=int, default=0, help="count only runs of exactly this many epochs")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    groups = defaultdict(list)
    for path in a.files:
        for label, accs in runs_from(path):
            if not a.epochs or len(accs) == a.epochs:
                groups[label].append(accs)
    fmt = lambda xs: f"{min(xs):.4f} / {statistics.mean(xs):.4f} / {max(xs):.4f}"
    print(f"| runs of | n | epochs | epoch 1 min / mean / max | last epoch min / mean / max | last >= {a.threshold} |")
    print("|---|---|---|---|---|---|")
    for label, runs in sorted(groups.items()):
        first, last = [r[0] for r in runs], [r[-1] for r in runs]
        epochs = sorted({len(r) for r in runs})
        print(f"| {label} | {len(runs)} | {','.join(map(str, epochs))} | {fmt(first)} | {fmt(last)} | "
              f"{sum(x >= a.threshold for x in last)} |")


if __name__ == "__main__":
    main()
