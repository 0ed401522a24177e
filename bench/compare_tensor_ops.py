#!/usr/bin/env python3
"""Times the memory-bound tensor ops of bench_ops_gpu (the benchmarks named tensor_ops/<op>/<shape>) beside the
same ops in PyTorch, in one invocation, and prints one table: time per call, achieved bandwidth, that bandwidth
as a share of the device-to-device copy's (tensor_ops/copy, measured in the same run) and PyTorch's time.

  python3 bench/compare_tensor_ops.py --bench build/bench/bench_ops_gpu [--repeat 2] [--out table.csv]

The cases (ops and shapes) are defined once, in bench_ops_gpu; this script reads them from its output and builds
the same inputs for PyTorch from the case's name. Both sides time a CUDA graph of 20 calls between two events,
100 samples, and report the mean per call. --repeat N alternates the two programs N times and keeps each
side's fastest run of every case.
"""
import argparse
import csv
import json
import subprocess
import sys

from torch_graph_time import graph_time_us

CALLS, SAMPLES = 20, 100


def minidl_results(bench):
    cmd = [bench, "--benchmark_filter=^tensor_ops/", "--benchmark_format=json"]
    print("$ " + " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.exit(f"command failed with exit status {proc.returncode}: {' '.join(cmd)}")
    out = {}
    for b in json.loads(proc.stdout)["benchmarks"]:
        if b.get("error_occurred"):
            print(f"{b['name']}: {b.get('error_message')}")
            continue
        name = b["name"].split("/manual_time")[0].split("/iterations")[0]
        out[name] = {"us": b["real_time"], "bytes": b["bytes"] * b["real_time"] * 1e-6}
    return out


def torch_case(torch, op, shape):
    """The PyTorch call of case `op` at `shape`, with inputs drawn as bench_ops_gpu draws them."""
    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(0)
    randn = lambda *s: torch.randn(*s, device=dev, generator=g)
    rows_of = lambda n, hi: torch.randint(0, hi, (n,), device=dev, generator=g)
    if op == "copy":
        x, y = randn(*shape), torch.empty(shape, device=dev)
        return lambda: y.copy_(x)
    if op in ("cat_dim0", "cat_dim1"):
        a, b = randn(*shape), randn(*shape)
        d = 0 if op == "cat_dim0" else 1
        return lambda: torch.cat([a, b], d)
    if op == "index_rows":
        x = randn(*shape)
        i = rows_of(shape[0], shape[0])
        return lambda: x[i]
    if op == "gather_last":
        x = randn(*shape)
        i = torch.randint(0, shape[-1], shape, device=dev, generator=g)
        return lambda: torch.gather(x, -1, i)
    if op == "scatter_add_last":
        out, src = randn(*shape), randn(*shape)
        i = torch.randint(0, shape[-1], shape, device=dev, generator=g)
        return lambda: out.scatter_add_(-1, i, src)
    if op == "where":
        c, a, b = randn(*shape) > 0, randn(*shape), randn(*shape)
        return lambda: torch.where(c, a, b)
    if op == "masked_fill":
        x, m = randn(*shape), randn(*shape) > 0
        return lambda: x.masked_fill(m, 0.0)
    if op == "sum_last":
        x = randn(*shape)
        return lambda: x.sum(-1)
    if op == "sum_middle":
        x = randn(*shape)
        return lambda: x.sum(1)
    if op == "cumsum_last":
        x = randn(*shape)
        return lambda: torch.cumsum(x, -1)
    if op.startswith("topk"):
        x = randn(*shape)
        k = int(op[len("topk"):])
        return lambda: torch.topk(x, k, -1)
    if op in ("layer_norm", "layer_norm_fwd_bwd"):
        x, w, b = randn(*shape), randn(shape[-1]), randn(shape[-1])
        if op == "layer_norm":
            return lambda: torch.nn.functional.layer_norm(x, shape[-1:], w, b)
        gy = randn(*shape)
        for t in (x, w, b):
            t.requires_grad_(True)
        return lambda: torch.autograd.grad(torch.nn.functional.layer_norm(x, shape[-1:], w, b), (x, w, b), gy)
    raise SystemExit(f"compare_tensor_ops.py: no PyTorch form of case {op}")


def torch_results(names):
    import torch

    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}", flush=True)
    out = {}
    for name in names:
        _, op, dims = name.split("/")
        call = torch_case(torch, op, [int(s) for s in dims.split("x")])
        out[name] = graph_time_us(torch, call, CALLS, SAMPLES)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True, help="path of bench_ops_gpu")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--out", help="write the table as CSV here too")
    a = ap.parse_args()
    if a.repeat < 1:
        sys.exit(f"--repeat must be at least 1, found {a.repeat}")
    mine, theirs = {}, {}
    for _ in range(a.repeat):
        for k, v in minidl_results(a.bench).items():
            if k not in mine or v["us"] < mine[k]["us"]:
                mine[k] = v
        for k, v in torch_results(list(mine)).items():
            theirs[k] = min(v, theirs.get(k, v))
    copy = [v for k, v in mine.items() if k.startswith("tensor_ops/copy/")]
    if not copy:
        sys.exit("compare_tensor_ops.py: bench_ops_gpu ran no tensor_ops/copy case")
    copy_bw = copy[0]["bytes"] / copy[0]["us"] * 1e-3  # GB/s
    header = ["op", "shape", "minidl us", "GB/s", "% of copy", "PyTorch us", "PyTorch/minidl"]
    rows = []
    for k, v in mine.items():
        _, op, dims = k.split("/")
        bw = v["bytes"] / v["us"] * 1e-3
        rows.append([op, dims, f"{v['us']:.1f}", f"{bw:.0f}", f"{100 * bw / copy_bw:.0f}%", f"{theirs[k]:.1f}",
                     f"{theirs[k] / v['us']:.2f}x"])
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    for r in [header] + rows:
        print(" | ".join(str(c).ljust(w) for c, w in zip(r, widths)))
    if a.out:
        with open(a.out, "w", newline="") as f:
            csv.writer(f).writerows([header] + rows)


if __name__ == "__main__":
    main()
