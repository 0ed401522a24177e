#!/usr/bin/env python3
"""Golden values of the example MNIST CNN from PyTorch, for tests/test_golden_mnist.cpp.

How to run (anywhere PyTorch is installed; CPU is enough, nothing else is needed):

    python3 tests/golden/gen_mnist_golden.py            # writes tests/golden/mnist_cnn_golden.json
    python3 tests/golden/gen_mnist_golden.py -o FILE    # writes FILE instead

The output is deterministic: float64 on the CPU, weights, inputs and labels from a fixed integer generator
(splitmix64) that the C++ test reimplements bit for bit, so no weights or inputs are stored, only results.
Re-running it gives the same file up to the last bits of the values (BLAS summation order).

The model is examples/mnist's CNN without dropout (so results are deterministic):
    conv1 1->32 k3, ReLU, conv2 32->64 k3, ReLU, max_pool 2, flatten, fc1 9216->128, ReLU, fc2 128->10,
    loss = nll_loss(log_softmax(logits)) (= cross_entropy), mean over a batch of 4 inputs of 1x28x28.

Parameter k (in the order conv1.weight, conv1.bias, conv2.weight, conv2.bias, fc1.weight, fc1.bias,
fc2.weight, fc2.bias) holds, element by element in row-major order, bound * (2 * u - 1) with u the next uniform
of splitmix64 seeded with PARAM_SEED + k and bound = 1 / sqrt(fan_in of its layer) (PyTorch's default range).
Inputs are u in [0, 1) from seed INPUT_SEED; labels are next() % 10 from seed LABEL_SEED.

Stored: the logits, the loss, and for every parameter gradient a summary (sum, sum of |.|, sum of squares, and
the values at 20 fixed indices, also stored); the full gradients of the small tensors (conv1.*, fc2.*). Then
10 steps of SGD (lr 0.05, momentum 0.9) and, from the same initial weights, 10 steps of Adam (lr 1e-3) on the
same batch: the loss before each step, the loss after the last, and a summary of every final weight.
"""
import argparse
import json
import math
import os

import torch
import torch.nn.functional as F

MASK = (1 << 64) - 1
INPUT_SEED, LABEL_SEED, PARAM_SEED, INDEX_SEED = 1, 2, 1000, 3
BATCH, SAMPLES = 4, 20
FULL_GRADS = ("conv1.weight", "conv1.bias", "fc2.weight", "fc2.bias")


class SplitMix64:
    def __init__(self, seed):
        self.state = seed & MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def uniform(self):
        """[0, 1) with 53 random bits: exact in double on both sides."""
        return (self.next() >> 11) * (1.0 / 9007199254740992.0)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 32, 3)
        self.conv2 = torch.nn.Conv2d(32, 64, 3)
        self.fc1 = torch.nn.Linear(9216, 128)
        self.fc2 = torch.nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        return self.fc2(x)


FAN_IN = {"conv1": 1 * 3 * 3, "conv2": 32 * 3 * 3, "fc1": 9216, "fc2": 128}


def formula_net():
    net = Net().double()
    with torch.no_grad():
        for k, (name, p) in enumerate(net.named_parameters()):
            rng = SplitMix64(PARAM_SEED + k)
            bound = 1.0 / math.sqrt(FAN_IN[name.split(".")[0]])
            values = [bound * (2.0 * rng.uniform() - 1.0) for _ in range(p.numel())]
            p.copy_(torch.tensor(values, dtype=torch.float64).reshape(p.shape))
    return net


def batch():
    rng = SplitMix64(INPUT_SEED)
    x = torch.tensor([rng.uniform() for _ in range(BATCH * 28 * 28)], dtype=torch.float64).reshape(BATCH, 1, 28, 28)
    rng = SplitMix64(LABEL_SEED)
    y = torch.tensor([rng.next() % 10 for _ in range(BATCH)], dtype=torch.int64)
    return x, y


def sample_indices(numel):
    rng = SplitMix64(INDEX_SEED + numel)
    return [rng.next() % numel for _ in range(SAMPLES)]


def summary(t, full=False):
    flat = t.detach().reshape(-1)
    idx = sample_indices(flat.numel())
    out = {
        "shape": list(t.shape),
        "sum": flat.sum().item(),
        "abs_sum": flat.abs().sum().item(),
        "sum_sq": (flat * flat).sum().item(),
        "indices": idx,
        "values": [flat[i].item() for i in idx],
    }
    if full:
        out["full"] = flat.tolist()
    return out


def loss_of(net, x, y):
    return F.nll_loss(F.log_softmax(net(x), dim=1), y)


def train(make_optimizer, x, y, steps=10):
    net = formula_net()
    opt = make_optimizer(net.parameters())
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_of(net, x, y)
        losses.append(loss.item())
        loss.backward()
        opt.step()
    with torch.no_grad():
        final_loss = loss_of(net, x, y).item()
    return {
        "losses": losses,
        "final_loss": final_loss,
        "weights": {name: summary(p) for name, p in net.named_parameters()},
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-o", "--output", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                               "mnist_cnn_golden.json"))
    args = parser.parse_args()
    torch.use_deterministic_algorithms(True)

    x, y = batch()
    net = formula_net()
    logits = net(x)
    loss = F.nll_loss(F.log_softmax(logits, dim=1), y)
    loss.backward()

    sgd = train(lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9), x, y)
    sgd.update({"lr": 0.05, "momentum": 0.9, "steps": 10})
    adam = train(lambda ps: torch.optim.Adam(ps, lr=1e-3), x, y)
    adam.update({"lr": 1e-3, "steps": 10})

    golden = {
        "generator": "tests/golden/gen_mnist_golden.py",
        "torch_version": torch.__version__,
        "seeds": {"input": INPUT_SEED, "labels": LABEL_SEED, "param_base": PARAM_SEED, "indices_base": INDEX_SEED},
        "batch": BATCH,
        "input_sum": x.sum().item(),
        "labels": y.tolist(),
        "init": {name: summary(p) for name, p in net.named_parameters()},
        "logits": logits.detach().reshape(-1).tolist(),
        "loss": loss.item(),
        "grads": {name: summary(p.grad, name in FULL_GRADS) for name, p in net.named_parameters()},
        "sgd": sgd,
        "adam": adam,
    }
    with open(args.output, "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    print(f"wrote {args.output}: loss {loss.item():.6f}, SGD losses {sgd['losses'][0]:.4f} -> {sgd['final_loss']:.4f}, "
          f"Adam {adam['losses'][0]:.4f} -> {adam['final_loss']:.4f}")


if __name__ == "__main__":
    main()
