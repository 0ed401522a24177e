"""PyTorch's test accuracy per epoch for the example's recipe, over several seeds: the yardstick of
mnist_train's accuracy (issue 4). Same model and data as torch_reference.py; SGD lr 0.05 momentum 0.9,
batch 64, a fresh permutation per epoch, eager mode, cuDNN TF32 as PyTorch's default.

Prints one line per seed, `ACC framework=torch seed=S drop_last=D e1 e2 ... eN`, the format
bench/accuracy_table.py reads beside mnist_train's --metrics files.
Usage: python3 bench/torch_accuracy.py --data DIR --seeds 0,1,2 --epochs 10 [--keep-last]
"""
import argparse

import torch
import torch.nn.functional as F

from torch_reference import Net, load_fashion_mnist


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--keep-last", action="store_true",
                    help="train on the final partial batch too (mnist_train does; PyTorch's reference drops it)")
    a = ap.parse_args()
    dev = torch.device(a.device)
    xtr, ytr, xte, yte = load_fashion_mnist(a.data, dev)
    n = xtr.shape[0]
    for seed in (int(s) for s in a.seeds.split(",")):
        torch.manual_seed(seed)
        model = Net().to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        accs = []
        for _ in range(a.epochs):
            model.train()
            perm = torch.randperm(n, device=dev)
            end = n if a.keep_last else n - n % a.batch
            for i in range(0, end, a.batch):
                idx = perm[i:i + a.batch]
                opt.zero_grad(set_to_none=True)
                F.cross_entropy(model(xtr[idx]), ytr[idx]).backward()
                opt.step()
            model.eval()
            with torch.no_grad():
                correct = sum((model(xte[i:i + 1000]).argmax(1) == yte[i:i + 1000]).sum().item()
                              for i in range(0, xte.shape[0], 1000))
            accs.append(correct / xte.shape[0])
        print(f"ACC framework=torch seed={seed} drop_last={int(not a.keep_last)} " +
              " ".join(f"{x:.4f}" for x in accs), flush=True)


if __name__ == "__main__":
    main()
