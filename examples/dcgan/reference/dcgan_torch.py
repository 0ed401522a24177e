"""DCGAN for 32x32 grayscale images in PyTorch, the same model and training step as examples/dcgan (model.h,
trainer.h), for check_against_pytorch.py and time_step.py.

The layout is PyTorch's DCGAN tutorial's (netG / netD with a Sequential `main`, weights_init, the training loop's
two updates) with one stride-2 block fewer, for 32x32 instead of 64x64 images, and the discriminator ending in a
logit for binary_cross_entropy_with_logits instead of a Sigmoid for BCELoss.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Generator(nn.Module):
    def __init__(self, latent=100, width=64):
        super().__init__()
        w = width
        self.main = nn.Sequential(
            nn.ConvTranspose2d(latent, 4 * w, 4, 1, 0, bias=False), nn.BatchNorm2d(4 * w), nn.ReLU(True),  # 4x4
            nn.ConvTranspose2d(4 * w, 2 * w, 4, 2, 1, bias=False), nn.BatchNorm2d(2 * w), nn.ReLU(True),   # 8x8
            nn.ConvTranspose2d(2 * w, w, 4, 2, 1, bias=False), nn.BatchNorm2d(w), nn.ReLU(True),           # 16x16
            nn.ConvTranspose2d(w, 1, 4, 2, 1, bias=False), nn.Tanh())                                     # 32x32

    def forward(self, z):
        return self.main(z)


class Discriminator(nn.Module):
    def __init__(self, width=64):
        super().__init__()
        w = width
        self.main = nn.Sequential(
            nn.Conv2d(1, w, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),                            # 16
            nn.Conv2d(w, 2 * w, 4, 2, 1, bias=False), nn.BatchNorm2d(2 * w), nn.LeakyReLU(0.2, inplace=True),  # 8
            nn.Conv2d(2 * w, 4 * w, 4, 2, 1, bias=False), nn.BatchNorm2d(4 * w),
            nn.LeakyReLU(0.2, inplace=True),                                                                   # 4
            nn.Conv2d(4 * w, 1, 4, 1, 0, bias=False))                                                          # 1

    def forward(self, x):
        return self.main(x).view(-1)


class DCGAN(nn.Module):
    """Both networks under the names minidl's checkpoints use (generator.main.0.weight, ...)."""

    def __init__(self, latent=100, g_width=64, d_width=64):
        super().__init__()
        self.generator = Generator(latent, g_width)
        self.discriminator = Discriminator(d_width)


def weights_init(m):
    """The tutorial's weights_init: N(0, 0.02) convolutions, N(1, 0.02) BatchNorm scales, zero shifts."""
    name = m.__class__.__name__
    if name.find("Conv") != -1:
        nn.init.normal_(m.weight.data, 0.0, 0.02)
    elif name.find("BatchNorm") != -1:
        nn.init.normal_(m.weight.data, 1.0, 0.02)
        nn.init.constant_(m.bias.data, 0)


def update_discriminator(model, opt_d, real, noise):
    """The tutorial's step (1): returns G(noise) and the statistics (loss_D, D(x), D(G(z)) before the update)."""
    D, G = model.discriminator, model.generator
    opt_d.zero_grad()
    out_real = D(real)
    loss_real = F.binary_cross_entropy_with_logits(out_real, torch.ones_like(out_real))
    loss_real.backward()
    fake = G(noise)
    out_fake = D(fake.detach())
    loss_fake = F.binary_cross_entropy_with_logits(out_fake, torch.zeros_like(out_fake))
    loss_fake.backward()
    opt_d.step()
    return fake, {"loss_d": (loss_real + loss_fake).item(), "d_x": torch.sigmoid(out_real).mean().item(),
                  "d_g_z1": torch.sigmoid(out_fake).mean().item()}


def update_generator(model, opt_g, fake):
    """The tutorial's step (2): the generator's update through the discriminator, on the same G(z)."""
    opt_g.zero_grad()
    out = model.discriminator(fake)
    loss_g = F.binary_cross_entropy_with_logits(out, torch.ones_like(out))
    loss_g.backward()
    opt_g.step()
    return {"loss_g": loss_g.item(), "d_g_z2": torch.sigmoid(out).mean().item()}


def make_optimizers(model, lr=2e-4, beta1=0.5, beta2=0.999):
    return (torch.optim.Adam(model.discriminator.parameters(), lr=lr, betas=(beta1, beta2)),
            torch.optim.Adam(model.generator.parameters(), lr=lr, betas=(beta1, beta2)))
