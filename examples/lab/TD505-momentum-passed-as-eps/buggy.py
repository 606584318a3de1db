"""A small GAN ported from Keras, where `BatchNormalization(momentum=0.8)` is idiomatic.

Torch's BatchNorm takes `eps` after `num_features`, then `momentum`: every positional 0.8
below is an epsilon, so each layer divides by sqrt(var + 0.8) and keeps momentum 0.1.
Three ways code arranges it: a literal in a Sequential, a block-building helper, and a
config field named for the momentum.
"""

from dataclasses import dataclass

import torch
from torch import nn

LATENT, CHANNELS, SIZE = 16, 1, 8


@dataclass(frozen=True)
class Config:
    bn_momentum: float = 0.9
    hidden: int = 64


def block(in_features: int, out_features: int) -> list[nn.Module]:
    return [
        nn.Linear(in_features, out_features),
        nn.BatchNorm1d(out_features, 0.8),  # expect: TD505
        nn.LeakyReLU(0.2),
    ]


class Generator(nn.Module):
    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.fc = nn.Sequential(*block(LATENT, cfg.hidden), *block(cfg.hidden, 32 * 4 * 4))
        self.conv = nn.Sequential(
            nn.Upsample(scale_factor=2),
            nn.Conv2d(32, 16, 3, padding=1),
            nn.BatchNorm2d(16, 0.8),  # expect: TD505
            nn.ReLU(),
            nn.Conv2d(16, CHANNELS, 3, padding=1),
            nn.Tanh(),
        )

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.conv(self.fc(z).view(-1, 32, 4, 4))


class Discriminator(nn.Module):
    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.conv = nn.Conv2d(CHANNELS, 16, 3, stride=2, padding=1)
        self.norm = nn.BatchNorm2d(16, cfg.bn_momentum)  # expect: TD505
        self.head = nn.Linear(16 * 4 * 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = nn.functional.leaky_relu(self.norm(self.conv(x)), 0.2)
        return self.head(x.flatten(1))


def main() -> None:
    torch.manual_seed(0)
    cfg = Config()
    generator, discriminator = Generator(cfg), Discriminator(cfg)
    opt_g = torch.optim.Adam(generator.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(discriminator.parameters(), lr=2e-4, betas=(0.5, 0.999))
    criterion = nn.BCEWithLogitsLoss()
    real_images = torch.rand(256, CHANNELS, SIZE, SIZE) * 2 - 1
    for step in range(20):
        real = real_images[torch.randint(0, 256, (32,))]
        fake = generator(torch.randn(32, LATENT))
        opt_d.zero_grad()
        loss_d = criterion(discriminator(real), torch.ones(32, 1)) + criterion(
            discriminator(fake.detach()), torch.zeros(32, 1)
        )
        loss_d.backward()
        opt_d.step()
        opt_g.zero_grad()
        loss_g = criterion(discriminator(fake), torch.ones(32, 1))
        loss_g.backward()
        opt_g.step()
        if step % 5 == 0:
            print(f"step {step}: loss_d {loss_d.item():.3f} loss_g {loss_g.item():.3f}")


if __name__ == "__main__":
    main()
