#!/usr/bin/env python3
"""Times the layer benchmarks of bench_ops_gpu (attention, lstm: forward and backward) beside the same
layers in PyTorch, in one invocation, and prints one table.

  python3 bench/compare_layers.py --bench build/bench/bench_ops_gpu [--repeat 2] [--out table.csv]

Each case is named in bench_ops_gpu (its shapes are fixed there); this script holds PyTorch's form of each. Both sides
time a CUDA graph of 20 forward-and-backward calls between two events and report the mean per call over the samples
(minidl: bench_ops_gpu's time_on_device), with TF32 off as minidl's cases; --repeat N alternates the two programs
and keeps each side's fastest run.
"""
import argparse
import csv
import json
import subprocess
import sys

from torch_graph_time import graph_time_us

CALLS, SAMPLES = 20, 50
FILTER = "^(attention|lstm)/"


def minidl_results(bench):
    cmd = [bench, f"--benchmark_filter={FILTER}", "--benchmark_format=json"]
    print("$ " + " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.exit(f"command failed with exit status {proc.returncode}: {' '.join(cmd)}")
    out = {}
    for b in json.loads(proc.stdout)["benchmarks"]:
        if b.get("error_occurred"):
            print(f"{b['name']}: {b.get('error_message')}")
            continue
        out[b["name"].split("/manual_time")[0].split("/iterations")[0]] = b["real_time"]
    return out


def torch_case(torch, name):
    """PyTorch's forward + backward of bench_ops_gpu's case `name`."""
    dev = "cuda"
    F = torch.nn.functional
    leaf = lambda *s: torch.randn(*s, device=dev, requires_grad=True)
    if name.startswith("attention/fwd_bwd"):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        B, H, T, d = 16, 12, 1024, 64
        q, k, v, g = leaf(B, H, T, d), leaf(B, H, T, d), leaf(B, H, T, d), torch.randn(B, H, T, d, device=dev)
        # fused:1 against PyTorch's own choice (its fused kernels), fused:0 against its composed math path.
        backends = [SDPBackend.MATH] if name.endswith("fused:0") else \
            [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION]

        def call():
            with sdpa_kernel(backends):
                F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(g)
        return call
    if name.startswith("lstm/fwd_bwd"):
        # cudnn:1 (minidl through cuDNN) and cudnn:0 (minidl's own kernels) both against PyTorch's cuDNN LSTM.
        T, B, I, Hd = 128, 64, 512, 512
        lstm = torch.nn.LSTM(I, Hd, num_layers=2, device=dev)
        x, g = leaf(T, B, I), torch.randn(T, B, Hd, device=dev)
        return lambda: lstm(x)[0].backward(g)
    return None


def torch_results(names):
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}", flush=True)
    out = {}
    for name in names:
        call = torch_case(torch, name)
        if call is None:
            print(f"compare_layers.py: no PyTorch form of case {name}")
            continue
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
            mine[k] = min(v, mine.get(k, v))
        for k, v in torch_results(list(mine)).items():
            theirs[k] = min(v, theirs.get(k, v))
    header = ["case", "minidl us", "PyTorch us", "PyTorch/minidl"]
    rows = [[k, f"{v:.1f}", f"{theirs[k]:.1f}" if k in theirs else "-",
             f"{theirs[k] / v:.2f}x" if k in theirs else "-"] for k, v in mine.items()]
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    for r in [header] + rows:
        print(" | ".join(str(c).ljust(w) for c, w in zip(r, widths)))
    if a.out:
        with open(a.out, "w", newline="") as f:
            csv.writer(f).writerows([header] + rows)


if __name__ == "__main__":
    main()
