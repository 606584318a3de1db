"""A vocoder-style GAN whose discriminator trains several times on each batch.

The discriminator's total is reset for every batch the loader loop yields and sums only
that batch's repeats, each already backpropagated; it is read once, as a number, after
the repeats. The generator's loss is turned into a number before it is added to the epoch total.
Nothing outlives the step, so memory stays flat however long the run.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

REPEATS = 3


def main() -> None:
    torch.manual_seed(0)
    audio = torch.randn(64, 16)
    noise = torch.randn(64, 8)
    loader = DataLoader(TensorDataset(noise, audio), batch_size=16, shuffle=True)
    generator = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 16))
    discriminator = nn.Sequential(nn.Linear(16, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
    optim_g = torch.optim.Adam(generator.parameters(), lr=1e-3)
    optim_d = torch.optim.Adam(discriminator.parameters(), lr=1e-3)
    repeats = REPEATS
    for epoch in range(2):
        running_g = 0.0
        for z, real in loader:
            optim_g.zero_grad()
            fake = generator(z)
            loss_g = ((discriminator(fake) - 1) ** 2).mean()
            loss_g.backward()
            optim_g.step()
            loss_g = loss_g.item()
            running_g += loss_g

            fake = fake.detach()
            loss_d_sum = 0.0
            for _ in range(repeats):
                optim_d.zero_grad()
                loss_d = ((discriminator(real) - 1) ** 2).mean() + (discriminator(fake) ** 2).mean()
                loss_d.backward()
                optim_d.step()
                loss_d_sum += loss_d
            print(f"epoch {epoch}: d {loss_d_sum.item() / repeats:.3f}")
        print(f"epoch {epoch}: g {running_g / len(loader):.3f}")


if __name__ == "__main__":
    main()
