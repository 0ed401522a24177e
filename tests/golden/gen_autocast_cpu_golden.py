#!/usr/bin/env python3
"""Writes autocast_cpu_golden.json beside this script: PyTorch's CPU autocast to bfloat16, for tests/test_autocast.cpp.

1. "cnn": one training step of the example CNN (gen_autocast_golden.py's cnn model, parameters, inputs and storage:
   examples/mnist/net.cpp's layers without dropout, batch 4) under torch.autocast("cpu", dtype=torch.bfloat16), and
   in float32 without it: the dtype of every intermediate, the loss and every parameter gradient.
   "transformer" likewise where this PyTorch has scaled_dot_product_attention (2.0 on).
2. "cpu_policy": what this PyTorch's CPU autocast does to each op of minidl's policy table (src/autocast/policy.h),
   found by running the op, not read from a list: "lower" (float32 inputs come out bfloat16), "float32" (bfloat16
   inputs come out float32), "unchanged" (neither: the op runs in its inputs' dtypes, which for cat/stack is also
   what promotion to the widest input gives), "refused" (an error under autocast only), "absent" (no such op here),
   or "unknown: ..." (not lowered, but bfloat16 inputs fail with and without autocast, so float32 and unchanged
   cannot be told apart). test_autocast.cpp compares it with minidl's CPU column and lists the known differences.

Run with Debian's PyTorch (1.13, CPU):  /usr/bin/python3 tests/golden/gen_autocast_cpu_golden.py
"""
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_autocast_golden as g  # noqa: E402  (the models, their formulas and the storage format)


def policy_probes():
    """minidl's policy op name -> a function of a tensor factory (shape -> tensor of the probed dtype) running it."""
    labels = torch.tensor([1, 0, 3])

    def lstm(t):
        torch.manual_seed(0)
        return torch.nn.LSTM(4, 3, batch_first=True)(t(2, 5, 4))[0]

    probes = {
        "matmul": lambda t: torch.matmul(t(3, 4), t(4, 5)),
        "mm": lambda t: torch.mm(t(3, 4), t(4, 5)),
        "bmm": lambda t: torch.bmm(t(2, 3, 4), t(2, 4, 5)),
        "addmm": lambda t: torch.addmm(t(3, 5), t(3, 4), t(4, 5)),
        "baddbmm": lambda t: torch.baddbmm(t(2, 3, 5), t(2, 3, 4), t(2, 4, 5)),
        "mv": lambda t: torch.mv(t(3, 4), t(4)),
        "addmv": lambda t: torch.addmv(t(3), t(3, 4), t(4)),
        "dot": lambda t: torch.dot(t(4), t(4)),
        "einsum": lambda t: torch.einsum("ij,jk->ik", t(3, 4), t(4, 5)),
        "linear": lambda t: F.linear(t(3, 4), t(5, 4), t(5)),
        "linear_relu": lambda t: F.relu(F.linear(t(3, 4), t(5, 4), t(5))),
        "conv1d": lambda t: F.conv1d(t(1, 2, 8), t(3, 2, 3), t(3)),
        "conv2d": lambda t: F.conv2d(t(1, 2, 6, 6), t(3, 2, 3, 3), t(3)),
        "conv2d_relu": lambda t: F.relu(F.conv2d(t(1, 2, 6, 6), t(3, 2, 3, 3), t(3))),
        "conv_transpose1d": lambda t: F.conv_transpose1d(t(1, 2, 8), t(2, 3, 3), t(3)),
        "conv_transpose2d": lambda t: F.conv_transpose2d(t(1, 2, 6, 6), t(2, 3, 3, 3), t(3)),
        "rnn_cell": lambda t: torch.lstm_cell(t(2, 4), (t(2, 3), t(2, 3)), t(12, 4), t(12, 3), t(12), t(12))[0],
        "rnn_recurrence": lstm,
        "softplus": lambda t: F.softplus(t(4)),
        "softmax": lambda t: F.softmax(t(3, 4), 1),
        "log_softmax": lambda t: F.log_softmax(t(3, 4), 1),
        "layer_norm": lambda t: F.layer_norm(t(3, 4), (4,), t(4), t(4)),
        "group_norm": lambda t: F.group_norm(t(2, 4, 3), 2, t(4), t(4)),
        "interpolate": lambda t: F.interpolate(t(1, 1, 4), scale_factor=2.0, mode="linear"),
        "sum": lambda t: torch.sum(t(4)),
        "prod": lambda t: torch.prod(t(4)),
        "cumsum": lambda t: torch.cumsum(t(4), 0),
        "cumprod": lambda t: torch.cumprod(t(4), 0),
        "logsumexp": lambda t: torch.logsumexp(t(4), 0),
        "norm": lambda t: torch.norm(t(4)),
        "cross_entropy": lambda t: F.cross_entropy(t(3, 4), labels),
        "nll_loss": lambda t: F.nll_loss(t(3, 4), labels),
        "mse_loss": lambda t: F.mse_loss(t(4), t(4)),
        "l1_loss": lambda t: F.l1_loss(t(4), t(4)),
        "smooth_l1_loss": lambda t: F.smooth_l1_loss(t(4), t(4)),
        "huber_loss": lambda t: F.huber_loss(t(4), t(4)),
        "kl_div": lambda t: F.kl_div(t(4), t(4), reduction="batchmean"),
        "binary_cross_entropy_with_logits": lambda t: F.binary_cross_entropy_with_logits(t(4), t(4) * 0.5),
        "binary_cross_entropy": lambda t: F.binary_cross_entropy(t(4) * 0.5, t(4) * 0.5),
        "atan2": lambda t: torch.atan2(t(4), t(4)),
        "index_put": lambda t: t(5).index_put((torch.tensor([0, 2]),), t(2), accumulate=True),
        "scatter_add": lambda t: t(5).scatter_add(0, torch.tensor([0, 2]), t(2)),
        "cat": lambda t: torch.cat([t(2), t(3)]),
        "stack": lambda t: torch.stack([t(2), t(2)]),
    }
    for name in ("acos", "asin", "cosh", "sinh", "tan", "exp", "expm1", "log", "log2", "log10", "log1p", "reciprocal",
                 "rsqrt"):
        probes[name] = (lambda fn: lambda t: fn(t(4) * 0.5))(getattr(torch, name))
    probes["pow"] = lambda t: torch.pow(t(4), 2.0)
    if hasattr(F, "scaled_dot_product_attention"):
        probes["scaled_dot_product_attention"] = lambda t: F.scaled_dot_product_attention(t(1, 2, 3, 4), t(1, 2, 3, 4),
                                                                                          t(1, 2, 3, 4))
    if hasattr(F, "rms_norm"):
        probes["rms_norm"] = lambda t: F.rms_norm(t(3, 4), (4,), t(4))
    return probes


# minidl's policy rows without a probe above are ops this PyTorch lacks.
POLICY_OPS = ["matmul", "mm", "bmm", "addmm", "baddbmm", "mv", "addmv", "dot", "einsum", "linear", "linear_relu",
              "conv1d", "conv2d", "conv2d_relu", "conv_transpose1d", "conv_transpose2d",
              "scaled_dot_product_attention", "rnn_cell", "rnn_recurrence", "acos", "asin", "cosh", "sinh", "tan", "exp",
              "expm1", "log", "log2", "log10", "log1p", "reciprocal", "rsqrt", "pow", "softplus", "softmax",
              "log_softmax", "layer_norm", "rms_norm", "group_norm", "interpolate", "sum", "prod", "cumsum", "cumprod",
              "logsumexp", "norm", "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
              "kl_div", "binary_cross_entropy_with_logits", "binary_cross_entropy", "atan2", "index_put",
              "scatter_add", "cat", "stack"]


def output_dtype(probe, dtype, autocast):
    """The probe's output dtype with inputs in `dtype` (values in [0.5, 1.5)), or the error's first line."""
    torch.manual_seed(0)
    factory = lambda *shape: (torch.rand(*shape) + 0.5).to(dtype)  # noqa: E731
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast), torch.no_grad():
            return probe(factory).dtype
    except (RuntimeError, ValueError) as e:
        return "error: " + str(e).splitlines()[0]


def classify(probe):
    plain_f32 = output_dtype(probe, torch.float32, False)
    amp_f32 = output_dtype(probe, torch.float32, True)
    if isinstance(amp_f32, str):
        return "refused" if not isinstance(plain_f32, str) else "unknown: " + amp_f32
    if amp_f32 == torch.bfloat16:
        return "lower"
    plain_bf16 = output_dtype(probe, torch.bfloat16, False)
    amp_bf16 = output_dtype(probe, torch.bfloat16, True)
    # float32 also where bfloat16 inputs fail without autocast ("not implemented for 'BFloat16'"): the cast made it run.
    if amp_bf16 == torch.float32 and (plain_bf16 == torch.bfloat16 or isinstance(plain_bf16, str)):
        return "float32"
    if isinstance(plain_bf16, str):
        return "unknown: not lowered; bfloat16 inputs fail without autocast: " + plain_bf16
    return "unchanged"


def main():
    torch.manual_seed(0)
    probes = policy_probes()
    golden = {
        "generator": "tests/golden/gen_autocast_cpu_golden.py",
        "torch_version": torch.__version__,
        "cnn": g.run(g.cnn_params, g.cnn_inputs, g.cnn_step, device="cpu"),
        "cpu_policy": {op: classify(probes[op]) if op in probes else "absent" for op in POLICY_OPS},
    }
    if hasattr(F, "scaled_dot_product_attention"):
        golden["transformer"] = g.run(g.transformer_params, g.transformer_inputs, g.transformer_step, device="cpu")
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "autocast_cpu_golden.json")
    with open(path, "w") as f:
        json.dump(golden, f)
    print("wrote", path)
    for op, what in golden["cpu_policy"].items():
        print(f"  {op}: {what}")


if __name__ == "__main__":
    main()
