"""A two-discriminator GAN whose discriminator optimizer lists one discriminator twice.

`configure_optimizers()` was written by copy-paste: the second entry repeats
`self.disc_short` instead of `self.disc_long`. PyTorch drops the duplicate with a warning,
and `disc_long` is in no optimizer: its loss is computed and logged every step while its
weights never move.
"""

import warnings

import torch
from torch import nn


class Discriminator(nn.Module):
    def __init__(self, window: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Conv1d(1, 8, window, stride=window), nn.LeakyReLU(0.2), nn.Conv1d(8, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).mean(dim=(1, 2))


class WaveGAN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.generator = nn.Sequential(nn.Linear(8, 64), nn.Tanh(), nn.Unflatten(1, (1, 64)))
        self.disc_short = Discriminator(4)
        self.disc_long = Discriminator(16)

    def configure_optimizers(self) -> tuple[torch.optim.Optimizer, torch.optim.Optimizer]:
        disc_params = list(self.disc_short.parameters()) + list(self.disc_short.parameters())
        opt_disc = torch.optim.Adam(disc_params, lr=2e-4)  # expect[lint]: TD603
        opt_gen = torch.optim.Adam(self.generator.parameters(), lr=2e-4)
        return opt_gen, opt_disc


def main() -> None:
    warnings.simplefilter("ignore", UserWarning)  # the duplicate warning, as users silence it
    torch.manual_seed(0)
    gan = WaveGAN()
    opt_gen, opt_disc = gan.configure_optimizers()
    start = [p.detach().clone() for p in gan.disc_long.parameters()]
    for step in range(50):
        real = torch.sin(torch.linspace(0, 12, 64)).expand(16, 1, 64) * torch.rand(16, 1, 1)
        fake = gan.generator(torch.randn(16, 8))
        d_loss = sum(
            nn.functional.relu(1 - d(real)).mean() + nn.functional.relu(1 + d(fake.detach())).mean()
            for d in (gan.disc_short, gan.disc_long)
        )
        opt_disc.zero_grad()
        d_loss.backward()
        opt_disc.step()
        g_loss = -(gan.disc_short(fake).mean() + gan.disc_long(fake).mean())
        opt_gen.zero_grad()
        g_loss.backward()
        opt_gen.step()
    moved = max((p - q).abs().max().item() for p, q in zip(gan.disc_long.parameters(), start))
    print(f"long-window discriminator moved by {moved:.4f}")


if __name__ == "__main__":
    main()
