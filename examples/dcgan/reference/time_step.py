#!/usr/bin/env python3
"""Times PyTorch's DCGAN training step (dcgan_torch.py: one discriminator and one generator update, as
examples/dcgan's Trainer::step) on random images, for the speed comparison with minidl (compare_speed.py).

    /usr/bin/python3 examples/dcgan/reference/time_step.py --threads 2 --batch-size 128 --steps 20

Runs --warmup untimed steps, then --steps timed ones, each timed on its own, and prints one line
`RESULT framework=torch threads=T batch=B steps=S median_ms=... mean_ms=... min_ms=...`.
"""
import argparse
import statistics
import time

import torch

from dcgan_torch import DCGAN, make_optimizers, update_discriminator, update_generator, weights_init


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--latent", type=int, default=100)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    model = DCGAN(latent=a.latent)
    model.apply(weights_init)
    model.train()
    opt_d, opt_g = make_optimizers(model)
    times = []
    for i in range(a.warmup + a.steps):
        real = torch.rand(a.batch_size, 1, 32, 32) * 2 - 1
        noise = torch.randn(a.batch_size, a.latent, 1, 1)
        t0 = time.perf_counter()
        fake, _ = update_discriminator(model, opt_d, real, noise)
        update_generator(model, opt_g, fake)
        if i >= a.warmup:
            times.append(1e3 * (time.perf_counter() - t0))
    print(f"RESULT framework=torch threads={a.threads} batch={a.batch_size} steps={a.steps} "
          f"median_ms={statistics.median(times):.2f} mean_ms={statistics.mean(times):.2f} min_ms={min(times):.2f}",
          flush=True)


if __name__ == "__main__":
    main()
