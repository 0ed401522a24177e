#!/usr/bin/env python3
"""Sums `ncu --csv --metrics gpu__time_duration.sum` output per kernel name: where one step's GPU time goes.

  ncu --launch-skip 1500 --launch-count 75 --metrics gpu__time_duration.sum --csv PROGRAM ARGS > ncu.csv
  python3 bench/ncu_summary.py ncu.csv
"""
import collections
import csv
import sys

rows = [r for r in csv.DictReader(line for line in open(sys.argv[1]) if line.startswith('"'))]
total = collections.Counter()
count = collections.Counter()
for r in rows:
    if r.get("Metric Name") != "gpu__time_duration.sum":
        continue
    value = float(r["Metric Value"].replace(",", ""))
    unit = r.get("Metric Unit", "")
    # ncu spells units either way depending on its version ("ns" or "nsecond"); an unknown one is an error,
    # not a silent factor of 1000.
    scales = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}
    if unit not in scales:
        sys.exit(f"ncu_summary: unknown time unit {unit!r} in row {r.get('ID', '?')}")
    scale = scales[unit]
    name = r["Kernel Name"][:90]
    total[name] += value * scale
    count[name] += 1
grand = sum(total.values())
print(f"{len(rows)} kernels, {grand:.1f} us in total")
for name, us in total.most_common(40):
    print(f"{us:9.1f} us {100 * us / grand:5.1f}%  x{count[name]:<3d} {name}")
