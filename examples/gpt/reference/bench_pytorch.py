#!/usr/bin/env python3
"""Times nanoGPT's training step in PyTorch with gpt_train's configuration flags, for side-by-side comparisons.

    python3 bench_pytorch.py --config char --device cpu --threads 2 --iters 10
    python3 bench_pytorch.py --config gpt2 --device cuda --amp bf16 --iters 30

Takes gpt_train's names for the model and batch (--config char|gpt2 and the overrides --n-layer --n-head --n-embd
--block-size --batch-size --dropout --bias, --data FILE or --synthetic-vocab N, --device, --threads, --amp,
--seed) and runs nanoGPT's step on random windows of the training split: forward and loss (under torch.autocast
for --amp), backward, gradient clipping at 1.0, AdamW with nanoGPT's parameter groups. The first --warmup-iters
steps are not timed. Ends with gpt_train's speed table (device, ms/iter, tokens/s, the last training loss), which
bench/compare_programs.py reads to run it beside gpt_train.
"""
import argparse
import sys
import time

import torch

from nanogpt import GPT, optimizer_groups

# gpt_train's presets (examples/gpt/options.cpp).
PRESETS = {
    "char": dict(n_layer=6, n_head=6, n_embd=384, block_size=256, batch_size=64, dropout=0.2, lr=1e-3, beta2=0.99,
                 synthetic_vocab=0),
    "gpt2": dict(n_layer=12, n_head=12, n_embd=768, block_size=1024, batch_size=16, dropout=0.0, lr=6e-4,
                 beta2=0.95, synthetic_vocab=50304),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="char", choices=sorted(PRESETS))
    for name in ("n-layer", "n-head", "n-embd", "block-size", "batch-size", "synthetic-vocab"):
        ap.add_argument("--" + name, type=int)
    ap.add_argument("--dropout", type=float)
    ap.add_argument("--bias", action="store_true")
    ap.add_argument("--data", help="UTF-8 text (default: examples/gpt/data/input.txt for char)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--amp", default="off", choices=["off", "bf16", "fp16"])
    ap.add_argument("--iters", type=int, default=10, help="timed iterations")
    ap.add_argument("--warmup-iters", type=int, default=2, help="untimed iterations first")
    ap.add_argument("--seed", type=int, default=1337)
    a = ap.parse_args()
    c = dict(PRESETS[a.config])
    for key in ("n_layer", "n_head", "n_embd", "block_size", "batch_size", "synthetic_vocab", "dropout"):
        if getattr(a, key) is not None:
            c[key] = getattr(a, key)
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    dev = torch.device(a.device)

    if c["synthetic_vocab"] > 0 and a.data is None:
        vocab = c["synthetic_vocab"]
        train = torch.randint(0, vocab, (1 << 20,), dtype=torch.long)
    else:
        path = a.data or __file__.rsplit("/", 2)[0] + "/data/input.txt"
        text = open(path, encoding="utf-8").read()
        chars = sorted(set(text))
        vocab = len(chars)
        index = {ch: i for i, ch in enumerate(chars)}
        tokens = torch.tensor([index[ch] for ch in text], dtype=torch.long)
        train = tokens[: int(0.9 * len(tokens))]
    cfg = dict(vocab_size=vocab, block_size=c["block_size"], n_layer=c["n_layer"], n_head=c["n_head"],
               n_embd=c["n_embd"], bias=a.bias, dropout=c["dropout"])
    model = GPT(cfg).to(dev).train()
    opt = torch.optim.AdamW(optimizer_groups(model, 0.1), lr=c["lr"], betas=(0.9, c["beta2"]))
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.amp)
    if amp_dtype is torch.float16 and dev.type == "cpu":
        sys.exit("bench_pytorch: --amp fp16 on the CPU is not supported by torch.autocast; use bf16 or off")
    scaler = torch.cuda.amp.GradScaler() if amp_dtype is torch.float16 else None
    B, T = c["batch_size"], c["block_size"]

    def step():
        ix = torch.randint(len(train) - T - 1, (B,))
        x = torch.stack([train[i:i + T] for i in ix]).to(dev)
        y = torch.stack([train[i + 1:i + 1 + T] for i in ix]).to(dev)
        with torch.autocast(device_type=dev.type, dtype=amp_dtype or torch.bfloat16, enabled=amp_dtype is not None):
            _, loss = model(x, y)
        if scaler:
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
        else:
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if scaler:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    for _ in range(a.warmup_iters):
        step()
    sync()
    start = time.perf_counter()
    for _ in range(a.iters):
        loss = step()
    sync()
    seconds = time.perf_counter() - start
    ms = 1e3 * seconds / a.iters
    print(f"PyTorch {torch.__version__}, {torch.get_num_threads()} threads, --amp {a.amp}")
    print(f"\n{'device':<8} {'ms/iter':>10} {'tokens/s':>12} {'loss':>10}")
    print(f"{'torch-' + dev.type:<8} {ms:10.2f} {B * T * a.iters / seconds:12.0f} {loss.item():10.4f}")

if __name__ == "__main__":
    main()
