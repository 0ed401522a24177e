#!/usr/bin/env python3
"""Writes attention_golden.json beside this script: what PyTorch's scaled_dot_product_attention and
nn.MultiheadAttention compute, for tests/test_attention.cpp to compare minidl's with (float64, CPU).

sdpa: random query/key/value (and masks), the output and the gradients of query, key and value for a random output
gradient, through the math path (the one float64 takes); the cases cover no mask, is_causal with L < S, L > S and
L = S, bool and float masks broadcast over batch dims, a row with every key masked out (zeros since PyTorch 2.5's
_safe_softmax; minidl follows that), a scale, and unbatched inputs.
mha: the module's state_dict, inputs, masks and the output (and averaged or per-head weights) of forward in eval
mode; the output is the same with need_weights=False, which the test checks too.

Run where PyTorch is installed:  python3 tests/golden/gen_attention_golden.py
"""
import json
import math
import os

import torch
import torch.nn.attention
import torch.nn.functional as F

torch.manual_seed(2024)


def tensor(t):
    t = t.detach()
    values = t.reshape(-1).tolist()
    if t.dtype != torch.bool:
        values = [v if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")) for v in values]
    return {"shape": list(t.shape), "dtype": "bool" if t.dtype == torch.bool else "float64", "data": values}


def rand(*shape):
    return torch.rand(*shape, dtype=torch.float64) * 2 - 1


def bool_mask(*shape, keep=0.75):
    return torch.rand(*shape) < keep


def float_mask(*shape):
    m = rand(*shape)
    return m.masked_fill(torch.rand(*shape) < 0.2, float("-inf"))


def sdpa_case(name, q_shape, k_shape, v_shape, attn_mask=None, is_causal=False, scale=None):
    q, k, v = (rand(*s).requires_grad_(True) for s in (q_shape, k_shape, v_shape))
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=is_causal, scale=scale)
    grad = rand(*out.shape)
    out.backward(grad)
    return {
        "name": name, "query": tensor(q), "key": tensor(k), "value": tensor(v),
        "attn_mask": None if attn_mask is None else tensor(attn_mask), "is_causal": is_causal, "scale": scale,
        "out": tensor(out), "grad_out": tensor(grad), "grad_query": tensor(q.grad), "grad_key": tensor(k.grad),
        "grad_value": tensor(v.grad),
    }


def sdpa_cases():
    masked_row = bool_mask(2, 5, 6)
    masked_row[1, 2, :] = False
    return [
        sdpa_case("plain", (2, 5, 8), (2, 7, 8), (2, 7, 3)),
        sdpa_case("heads", (2, 3, 6, 8), (2, 3, 6, 8), (2, 3, 6, 8)),
        sdpa_case("causal", (2, 3, 6, 4), (2, 3, 6, 4), (2, 3, 6, 5), is_causal=True),
        sdpa_case("causal_L_lt_S", (3, 4, 4), (3, 9, 4), (3, 9, 4), is_causal=True),
        sdpa_case("causal_L_gt_S", (3, 9, 4), (3, 4, 4), (3, 4, 2), is_causal=True, scale=0.3),
        sdpa_case("bool_mask_broadcast", (2, 2, 5, 4), (2, 2, 6, 4), (2, 2, 6, 4), attn_mask=bool_mask(5, 6)),
        sdpa_case("float_mask", (2, 5, 4), (2, 6, 4), (2, 6, 4), attn_mask=float_mask(2, 1, 6)),
        sdpa_case("fully_masked_row", (2, 5, 4), (2, 6, 4), (2, 6, 4), attn_mask=masked_row),
        sdpa_case("broadcast_batch", (2, 3, 5, 4), (1, 3, 6, 4), (2, 1, 6, 4)),
        sdpa_case("unbatched", (5, 4), (6, 4), (6, 2), attn_mask=bool_mask(5, 6), scale=1.5),
    ]


def mha_case(seed, name, L, S, N, options, key_padding_mask=False, attn_mask=None, average_attn_weights=True):
    torch.manual_seed(seed)
    m = torch.nn.MultiheadAttention(**options, dtype=torch.float64).eval()
    with torch.no_grad():
        for p in m.parameters():  # nonzero biases, so that they take part
            p.copy_(rand(*p.shape))
    E = options["embed_dim"]
    kdim, vdim = options.get("kdim") or E, options.get("vdim") or E
    query, key, value = rand(L, N, E), rand(S, N, kdim), rand(S, N, vdim)
    kpm = None
    if key_padding_mask:
        kpm = bool_mask(N, S, keep=0.7).logical_not()
        kpm[:, 0] = False  # every query keeps key 0
    out, weights = m(query, key, value, key_padding_mask=kpm, need_weights=True, attn_mask=attn_mask,
                     average_attn_weights=average_attn_weights)
    full = {"kdim": kdim, "vdim": vdim, "bias": True, "add_bias_kv": False, "add_zero_attn": False}
    full.update(options)
    return {
        "name": name, "options": full, "state_dict": {k: tensor(v) for k, v in m.state_dict().items()},
        "query": tensor(query), "key": tensor(key), "value": tensor(value),
        "key_padding_mask": None if kpm is None else tensor(kpm),
        "attn_mask": None if attn_mask is None else tensor(attn_mask),
        "average_attn_weights": average_attn_weights, "out": tensor(out), "weights": tensor(weights),
    }


def mha_cases():
    causal = torch.triu(torch.ones(4, 4, dtype=torch.bool), diagonal=1)  # true: not allowed
    return [
        mha_case(1, "self", 4, 4, 2, dict(embed_dim=8, num_heads=2)),
        mha_case(2, "causal_padding", 4, 4, 3, dict(embed_dim=8, num_heads=4), key_padding_mask=True, attn_mask=causal),
        mha_case(3, "cross_kdim_vdim", 3, 5, 2, dict(embed_dim=6, num_heads=3, kdim=4, vdim=7),
                 attn_mask=rand(3, 5), average_attn_weights=False),
        mha_case(4, "bias_kv_zero_attn", 3, 4, 2, dict(embed_dim=8, num_heads=2, add_bias_kv=True, add_zero_attn=True),
                 key_padding_mask=True),
        mha_case(5, "no_bias_3d_mask", 3, 4, 2, dict(embed_dim=4, num_heads=2, bias=False), attn_mask=rand(4, 3, 4)),
    ]


def main():
    out = {
        "generator": "tests/golden/gen_attention_golden.py",
        "torch_version": torch.__version__,
        "sdpa": sdpa_cases(),
        "mha": mha_cases(),
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "attention_golden.json")
    with open(path, "w") as f:
        json.dump(out, f)
        f.write("\n")
    print(f"wrote {path}: {len(out['sdpa'])} sdpa cases, {len(out['mha'])} MultiheadAttention cases "
          f"(torch {torch.__version__})")


if __name__ == "__main__":
    main()
