"""A GAN whose discriminator and generator updates live in two helper functions."""

import torch
from torch import nn
from torch.nn import functional as F


def discriminator_step(
    disc: nn.Module, gen: nn.Module, opt_d: torch.optim.Optimizer, real: torch.Tensor, latent: int
) -> float:
    opt_d.zero_grad()
    fake = gen(torch.randn(real.size(0), latent)).detach()
    real_loss = F.binary_cross_entropy_with_logits(disc(real), torch.ones(real.size(0), 1))
    fake_loss = F.binary_cross_entropy_with_logits(disc(fake), torch.zeros(real.size(0), 1))
    loss = real_loss + fake_loss
    loss.backward()
    opt_d.step()
    return loss.item()


def generator_step(
    disc: nn.Module, gen: nn.Module, opt_g: torch.optim.Optimizer, batch: int, latent: int
) -> float:
    opt_g.zero_grad()
    fake = gen(torch.randn(batch, latent))
    loss = F.binary_cross_entropy_with_logits(disc(fake), torch.ones(batch, 1))
    loss.backward()
    opt_g.step()
    return loss.item()


def main() -> None:
    torch.manual_seed(0)
    latent = 4
    gen = nn.Sequential(nn.Linear(latent, 32), nn.ReLU(), nn.Linear(32, 2))
    disc = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
    opt_g = torch.optim.Adam(gen.parameters(), lr=1e-3, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(disc.parameters(), lr=1e-3, betas=(0.5, 0.999))
    data = torch.utils.data.TensorDataset(torch.randn(256, 2) + 2.0)
    loader = torch.utils.data.DataLoader(data, batch_size=32, shuffle=True)
    for epoch in range(2):
        for (real,) in loader:
            d_loss = discriminator_step(disc, gen, opt_d, real, latent)
            g_loss = generator_step(disc, gen, opt_g, real.size(0), latent)
        print(f"epoch {epoch}: d {d_loss:.3f} g {g_loss:.3f}")


if __name__ == "__main__":
    main()
