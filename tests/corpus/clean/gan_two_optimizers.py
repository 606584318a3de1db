"""A small GAN on 2-D points: two networks, two optimizers, fake samples detached.

The discriminator is trained on `fake.detach()` so its loss does not backpropagate into
the generator; the generator is then trained through the discriminator, whose parameters
receive gradients that its own `zero_grad()` clears at its next step.
"""

import math

import torch
from torch import nn

LATENT = 8


def real_batch(generator, size=64):
    angle = torch.rand(size, generator=generator) * 2 * math.pi
    radius = 1.0 + 0.05 * torch.randn(size, generator=generator)
    return torch.stack([radius * torch.cos(angle), radius * torch.sin(angle)], dim=1)


def main():
    torch.manual_seed(0)
    data_rng = torch.Generator().manual_seed(6)
    generator_net = nn.Sequential(nn.Linear(LATENT, 32), nn.LeakyReLU(0.2), nn.Linear(32, 2))
    discriminator = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
    criterion = nn.BCEWithLogitsLoss()
    opt_g = torch.optim.Adam(generator_net.parameters(), lr=2e-3, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(discriminator.parameters(), lr=2e-3, betas=(0.5, 0.999))

    for step in range(150):
        real = real_batch(data_rng)
        noise = torch.randn(real.shape[0], LATENT)
        fake = generator_net(noise)
        ones = torch.ones(real.shape[0], 1)
        zeros = torch.zeros(real.shape[0], 1)

        opt_d.zero_grad()
        loss_d = criterion(discriminator(real), ones) + criterion(discriminator(fake.detach()), zeros)
        loss_d.backward()
        opt_d.step()

        opt_g.zero_grad()
        loss_g = criterion(discriminator(fake), ones)
        loss_g.backward()
        opt_g.step()

        if step % 50 == 0:
            print(f"step {step}: D {loss_d.item():.3f} G {loss_g.item():.3f}")


if __name__ == "__main__":
    main()
