#!/usr/bin/env python3
"""Times PyTorch's DCGAN training step (dcgan_torch.py: one discriminator and one generator update, as
examples/dcgan's Trainer::step) on random images, for the speed comparison with minidl:

    python3 bench/compare_programs.py --repeat 3 --pytorch-env OMP_WAIT_POLICY=passive \
        --pytorch-env OPENBLAS_NUM_THREADS=1 \
        --minidl "build/cpu/examples/dcgan/dcgan --synthetic --device cpu --threads 2 --batch-size 128 --epochs 1 \
                  --train-limit 768 --samples-dir '' --no-progress" \
        --pytorch "/usr/bin/python3 examples/dcgan/reference/time_step.py --threads 2 --batch-size 128 --steps 5"

(--train-limit = batch size x (steps + 1): dcgan leaves its first step, one-time work, out of ms/step, as this
script leaves out its --warmup steps.) Runs --warmup untimed steps, then --steps timed ones, each timed on its own,
and ends with dcgan's speed table: a header `device ms/step images/s loss_D loss_G speedup` and one row, ms/step
the timed steps' mean (dcgan's: the steady steps' total time over their number). On a shared, oversubscribed
host libgomp's spinning workers and OpenBLAS's own threads beside them cost Debian's torch 1.13 up to 7x
(2026-12-05, 2-core VM at load 9: 32 s per step against 4.7 s with OMP_WAIT_POLICY=passive, 4.0 s with one BLAS
thread as well): hence the two --pytorch-env settings above.
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
    ms = statistics.mean(times)
    print(f"\n{'device':<8} {'ms/step':>10} {'images/s':>10} {'loss_D':>10} {'loss_G':>10} {'speedup':>10}")
    print(f"{'cpu':<8} {ms:10.2f} {1e3 * a.batch_size / ms:10.0f} {float('nan'):10.4f} {float('nan'):10.4f} {'':>10}")
    print(f"PyTorch {torch.__version__}, {a.threads} threads, batch {a.batch_size}, {a.steps} timed steps after "
          f"{a.warmup} warm-up step(s), median {statistics.median(times):.2f} ms, fastest {min(times):.2f} ms",
          flush=True)


if __name__ == "__main__":
    main()
