#!/usr/bin/env python3
"""Writes rnn_golden.json beside this script: what PyTorch's recurrent layers compute, for tests/test_rnn.cpp
(RnnGolden) to compare minidl's with (within 1e-10, float64).

For each case: the module and its options, every parameter by its PyTorch name (random, float64), the input and
initial states (absent where the case passes none), the outputs (output, h_n, c_n; for the cells output is h' and
c_n is LSTMCell's c'), random upstream gradients of each output, and the gradients of
sum(output * grad_output) + sum(h_n * grad_h_n) + sum(c_n * grad_c_n) with respect to the input, the initial
states and every parameter. Tensors are {"shape": [...], "data": [flat row-major values]}.

Run where PyTorch is installed:  python3 tests/golden/gen_rnn_golden.py
"""
import json
import os

import torch

SEQ = [
    # name, module, options, (T, B) or None for unbatched (T,), with initial states
    ("lstm_2layer_bidir_batch_first_states", "LSTM",
     dict(input_size=3, hidden_size=4, num_layers=2, bias=True, batch_first=True, bidirectional=True), (5, 2), True),
    ("lstm_1layer", "LSTM",
     dict(input_size=4, hidden_size=3, num_layers=1, bias=True, batch_first=False, bidirectional=False), (4, 3), False),
    ("lstm_no_bias_unbatched", "LSTM",
     dict(input_size=3, hidden_size=5, num_layers=2, bias=False, batch_first=False, bidirectional=True), (3, None),
     True),
    ("gru_2layer_bidir_batch_first_states", "GRU",
     dict(input_size=3, hidden_size=4, num_layers=2, bias=True, batch_first=True, bidirectional=True), (5, 2), True),
    ("gru_1layer", "GRU",
     dict(input_size=5, hidden_size=3, num_layers=1, bias=True, batch_first=False, bidirectional=False), (6, 2), False),
    ("rnn_tanh_2layer_bidir_states", "RNN",
     dict(input_size=3, hidden_size=4, num_layers=2, nonlinearity="tanh", bias=True, batch_first=False,
          bidirectional=True), (4, 3), True),
    ("rnn_relu_batch_first", "RNN",
     dict(input_size=3, hidden_size=4, num_layers=2, nonlinearity="relu", bias=True, batch_first=True,
          bidirectional=False), (5, 2), False),
]

CELLS = [
    ("lstm_cell_states", "LSTMCell", dict(input_size=3, hidden_size=4, bias=True), 3, True),
    ("lstm_cell_unbatched", "LSTMCell", dict(input_size=3, hidden_size=4, bias=False), None, False),
    ("gru_cell_states", "GRUCell", dict(input_size=3, hidden_size=4, bias=True), 3, True),
    ("gru_cell", "GRUCell", dict(input_size=4, hidden_size=3, bias=True), 2, False),
    ("rnn_cell_tanh_states", "RNNCell", dict(input_size=3, hidden_size=4, bias=True, nonlinearity="tanh"), 3, True),
    ("rnn_cell_relu", "RNNCell", dict(input_size=3, hidden_size=4, bias=True, nonlinearity="relu"), 2, True),
]


def tensor_json(t):
    t = t.detach().to(torch.float64)
    return {"shape": list(t.shape), "data": t.reshape(-1).tolist()}


def randomise(module, gen):
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.rand(p.shape, generator=gen, dtype=torch.float64) * 1.2 - 0.6)


def uniform(shape, gen, requires_grad=True):
    return (torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1).requires_grad_(requires_grad)


def finish(case, module, x, h0, c0, outs):
    """outs: (output, h_n or None, c_n or None). Adds outputs, upstream gradients and all gradients to case."""
    gen = torch.Generator().manual_seed(len(case["name"]) * 7919)
    loss = 0
    for key, t in zip(["output", "h_n", "c_n"], outs):
        if t is None:
            continue
        g = uniform(t.shape, gen, False)
        case[key] = tensor_json(t)
        case["grad_" + key] = tensor_json(g)
        loss = loss + (t * g).sum()
    loss.backward()
    case["grad_input"] = tensor_json(x.grad)
    if h0 is not None:
        case["grad_h0"] = tensor_json(h0.grad)
    if c0 is not None:
        case["grad_c0"] = tensor_json(c0.grad)
    case["params"] = {n: tensor_json(p) for n, p in module.named_parameters()}
    case["grad_params"] = {n: tensor_json(p.grad) for n, p in module.named_parameters()}
    return case


def seq_case(seed, name, module_name, options, sizes, states):
    gen = torch.Generator().manual_seed(seed)
    module = getattr(torch.nn, module_name)(**options).to(torch.float64)
    randomise(module, gen)
    T, B = sizes
    d = 2 if options["bidirectional"] else 1
    if B is None:
        x = uniform((T, options["input_size"]), gen)
        state_shape = (options["num_layers"] * d, options["hidden_size"])
    else:
        x = uniform((B, T, options["input_size"]) if options["batch_first"] else (T, B, options["input_size"]), gen)
        state_shape = (options["num_layers"] * d, B, options["hidden_size"])
    h0 = uniform(state_shape, gen) if states else None
    c0 = uniform(state_shape, gen) if states and module_name == "LSTM" else None
    case = {"name": name, "module": module_name, "options": options, "input": tensor_json(x)}
    if h0 is not None:
        case["h0"] = tensor_json(h0)
    if c0 is not None:
        case["c0"] = tensor_json(c0)
    if module_name == "LSTM":
        out, (h_n, c_n) = module(x, (h0, c0)) if states else module(x)
    else:
        out, h_n = module(x, h0) if states else module(x)
        c_n = None
    return finish(case, module, x, h0, c0, (out, h_n, c_n))


def cell_case(seed, name, module_name, options, batch, states):
    gen = torch.Generator().manual_seed(seed)
    module = getattr(torch.nn, module_name)(**options).to(torch.float64)
    randomise(module, gen)
    x = uniform((options["input_size"],) if batch is None else (batch, options["input_size"]), gen)
    state_shape = (options["hidden_size"],) if batch is None else (batch, options["hidden_size"])
    h0 = uniform(state_shape, gen) if states else None
    c0 = uniform(state_shape, gen) if states and module_name == "LSTMCell" else None
    case = {"name": name, "module": module_name, "options": options, "input": tensor_json(x)}
    if h0 is not None:
        case["h0"] = tensor_json(h0)
    if c0 is not None:
        case["c0"] = tensor_json(c0)
    if module_name == "LSTMCell":
        h, c = module(x, (h0, c0)) if states else module(x)
        outs = (h, None, c)
    else:
        outs = (module(x, h0) if states else module(x), None, None)
    return finish(case, module, x, h0, c0, outs)


def main():
    cases = [seq_case(100 + i, *spec) for i, spec in enumerate(SEQ)]
    cases += [cell_case(200 + i, *spec) for i, spec in enumerate(CELLS)]
    out = {"generator": "tests/golden/gen_rnn_golden.py", "torch_version": torch.__version__, "cases": cases}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rnn_golden.json")
    with open(path, "w") as f:
        json.dump(out, f)
    print(f"wrote {len(cases)} cases to {path}")


if __name__ == "__main__":
    main()
