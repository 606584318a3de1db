"""A DCGAN-style loop: the discriminator steps on real and fake batches, then the
generator steps through the discriminator; fakes are detached for the discriminator."""

import torch
from torch import nn


def main():
    torch.manual_seed(0)
    generator = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 16), nn.Tanh())
    discriminator = nn.Sequential(nn.Linear(16, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
    opt_g = torch.optim.Adam(generator.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(discriminator.parameters(), lr=2e-4, betas=(0.5, 0.999))
    criterion = nn.BCEWithLogitsLoss()
    data = torch.tanh(torch.randn(640, 16) * 0.5 + 0.3)
    for step, real in enumerate(data.split(32)):
        ones, zeros = torch.ones(len(real), 1), torch.zeros(len(real), 1)
        discriminator.zero_grad()
        loss_real = criterion(discriminator(real), ones)
        loss_real.backward()
        fake = generator(torch.randn(len(real), 8))
        loss_fake = criterion(discriminator(fake.detach()), zeros)
        loss_fake.backward()
        opt_d.step()
        generator.zero_grad()
        loss_g = criterion(discriminator(fake), ones)
        loss_g.backward()
        opt_g.step()
        if step % 10 == 9:
            print(f"step {step}: d {(loss_real + loss_fake).item():.3f} g {loss_g.item():.3f}")


if __name__ == "__main__":
    main()
