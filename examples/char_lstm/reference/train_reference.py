#!/usr/bin/env python3
"""Trains examples/char_lstm's model in PyTorch with char_lstm's hyperparameters and data streams, for the
comparison of validation loss per character at the same step count and of speed.

    /usr/bin/python3 train_reference.py --threads 2 --iters 300 --eval-every 100 --metrics torch.csv [model flags]

Takes char_lstm's flags of the same names and defaults (--embed 128 --hidden 512 --layers 2 --seq-len 128
--batch-size 64 --lr 2e-3 --grad-clip 5 --eval-every 100 --eval-batches 0 --seed 1337), validates at iteration 0,
every --eval-every iterations and at the end, and writes the same CSV as char_lstm --metrics
(iter,split,loss,ms_per_iter,tokens_per_s,elapsed_s). --init CHECKPOINT starts from a char_lstm checkpoint's
weights (e.g. the one of char_lstm --dump-reference) instead of PyTorch's own draws. Its last lines are the table
char_lstm prints (device, ms/iter of the steps after the first, tokens/s, last val loss).
"""
import argparse
import os
import sys
import time


def threads_flag():
    """--threads N's value as given, before argparse runs (None when absent)."""
    for i, arg in enumerate(sys.argv):
        if arg == "--threads" and i + 1 < len(sys.argv):
            return sys.argv[i + 1]
        if arg.startswith("--threads="):
            return arg.split("=", 1)[1]
    return None


# Debian's torch calls BLAS through the generic interface (OpenBLAS underneath), whose own thread pool
# torch.set_num_threads does not size: OpenBLAS reads OPENBLAS_NUM_THREADS when it loads, so --threads must be in
# the environment before torch is imported, or the GEMMs run on every core besides the --threads ones.
if threads_flag() is not None:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", threads_flag())

import torch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common", "reference"))
from safetensors_file import read_safetensors  # noqa: E402

from char_lstm import DEFAULT_DATA, CharLSTM, Streams, evaluate, read_splits, train_step, zero_state  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=DEFAULT_DATA)
    ap.add_argument("--embed", type=int, default=128)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--iters", type=int)
    ap.add_argument("--epochs", type=int)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--grad-clip", type=float, default=5.0)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--eval-batches", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--threads", type=int, help="torch.set_num_threads (default: PyTorch's)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--metrics", help="CSV as char_lstm --metrics")
    ap.add_argument("--init", help="start from this char_lstm checkpoint's weights")
    a = ap.parse_args()
    if a.iters is not None and a.epochs is not None:
        sys.exit("train_reference.py: --iters and --epochs exclude each other")
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device(a.device)
    torch.manual_seed(a.seed)

    chars, train_tokens, val_tokens = read_splits(a.data)
    train = Streams(train_tokens, a.batch_size, a.seq_len, "the training split")
    val = Streams(val_tokens, a.batch_size, a.seq_len, "the validation split")
    iters = a.iters if a.iters is not None else (a.epochs if a.epochs is not None else 10) * train.batches
    model = CharLSTM(len(chars), a.embed, a.hidden, a.layers)
    if a.init:
        weights, _ = read_safetensors(a.init)
        model.load_state_dict(weights, strict=True)
    model.to(dev).train()
    params = list(model.parameters())
    opt = torch.optim.Adam(params, lr=a.lr)
    print(f"PyTorch {torch.__version__}, {torch.get_num_threads()} threads, {dev}: vocabulary {len(chars)}, "
          f"{sum(p.numel() for p in params) / 1e6:.2f}M parameters, {train.batches} batches per epoch, "
          f"{iters} iterations", flush=True)

    metrics = open(a.metrics, "w") if a.metrics else None
    if metrics:
        metrics.write("iter,split,loss,ms_per_iter,tokens_per_s,elapsed_s\n")
    tokens = a.batch_size * a.seq_len
    it, train_seconds, steady_seconds, steady_steps, last_val = 0, 0.0, 0.0, 0, float("nan")
    state = None
    while True:
        if it % a.eval_every == 0 or it >= iters:
            last_val = evaluate(model, val, a.eval_batches, dev)
            print(f"iter {it}: val loss {last_val:.4f} per character ({train_seconds:.1f} s of training)", flush=True)
            if metrics:
                metrics.write(f"{it},val,{last_val:.6g},,,{train_seconds:.6g}\n")
                metrics.flush()
        if it >= iters:
            break
        end = min(iters, (it // a.eval_every + 1) * a.eval_every)
        first, loss_sum, t0 = it, torch.zeros(()), time.perf_counter()
        while it < end:
            if it % train.batches == 0:
                state = zero_state(model, a.batch_size, dev)
            x, y = train.batch(it % train.batches)
            t_step = time.perf_counter()
            loss, state = train_step(model, opt, params, x.to(dev), y.to(dev), state, a.grad_clip)
            loss_sum += loss.cpu()
            if it > 0:  # as char_lstm's steady time: the first step is one-time work
                steady_seconds += time.perf_counter() - t_step
                steady_steps += 1
            it += 1
        seconds = time.perf_counter() - t0
        train_seconds += seconds
        ms = 1e3 * seconds / (it - first)
        mean = loss_sum.item() / (it - first)
        print(f"iters {first}-{it}: loss {mean:.4f}, {ms:.2f} ms/iter, {tokens * 1e3 / ms:.0f} characters/s",
              flush=True)
        if metrics:
            metrics.write(f"{it},train,{mean:.6g},{ms:.6g},{tokens * 1e3 / ms:.8g},{train_seconds:.6g}\n")
            metrics.flush()
    if steady_steps:
        ms = 1e3 * steady_seconds / steady_steps
        print(f"\n{'device':<8} {'ms/iter':>10} {'tokens/s':>12} {'val loss':>10}")
        print(f"{'torch-' + dev.type:<8} {ms:10.2f} {tokens * 1e3 / ms:12.0f} {last_val:10.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
