"""nanoGPT's model (karpathy/nanoGPT model.py) and the pieces of its training loop that examples/gpt reproduces.

Shared by check_against_pytorch.py (correctness) and bench_pytorch.py (speed). The configuration is a dict with
nanoGPT's keys: vocab_size, block_size, n_layer, n_head, n_embd, bias, dropout.
"""
import math

import torch
import torch.nn as nn
from torch.nn import functional as F

HAS_SDPA = hasattr(F, "scaled_dot_product_attention")


class LayerNorm(nn.Module):
    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_attn = nn.Linear(c["n_embd"], 3 * c["n_embd"], bias=c["bias"])
        self.c_proj = nn.Linear(c["n_embd"], c["n_embd"], bias=c["bias"])
        self.resid_dropout = nn.Dropout(c["dropout"])
        self.n_head, self.n_embd, self.dropout = c["n_head"], c["n_embd"], c["dropout"]

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        p = self.dropout if self.training else 0.0
        if HAS_SDPA:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        else:  # PyTorch 1.x (Debian's torch 1.13): nanoGPT's own fallback, the T x T scores materialised
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            att = F.dropout(att.masked_fill(~causal, float("-inf")).softmax(-1), p, self.training)
            y = att @ v
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C)))


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = nn.Linear(c["n_embd"], 4 * c["n_embd"], bias=c["bias"])
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * c["n_embd"], c["n_embd"], bias=c["bias"])
        self.dropout = nn.Dropout(c["dropout"])

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln_1 = LayerNorm(c["n_embd"], c["bias"])
        self.attn = CausalSelfAttention(c)
        self.ln_2 = LayerNorm(c["n_embd"], c["bias"])
        self.mlp = MLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(c["vocab_size"], c["n_embd"]),
            wpe=nn.Embedding(c["block_size"], c["n_embd"]),
            drop=nn.Dropout(c["dropout"]),
            h=nn.ModuleList([Block(c) for _ in range(c["n_layer"])]),
            ln_f=LayerNorm(c["n_embd"], c["bias"]),
        ))
        self.lm_head = nn.Linear(c["n_embd"], c["vocab_size"], bias=False)
        self.transformer.wte.weight = self.lm_head.weight

    def forward(self, idx, targets):
        pos = torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def get_lr(it, h):
    """nanoGPT train.py's learning rate."""
    if it < h["warmup"]:
        return h["lr"] * (it + 1) / (h["warmup"] + 1)
    if it > h["iters"] or h["iters"] <= h["warmup"]:
        return h["min_lr"]
    ratio = (it - h["warmup"]) / (h["iters"] - h["warmup"])
    return h["min_lr"] + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (h["lr"] - h["min_lr"])


def optimizer_groups(model, weight_decay):
    """nanoGPT's configure_optimizers: weight decay for the parameters of two or more dims only."""
    params = [p for p in model.parameters() if p.requires_grad]
    return [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
