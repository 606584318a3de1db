"""A structure-prediction trunk with Monte Carlo dropout that inference asks for per sample.

The recycling step applies `F.dropout` only under `if mc_dropout:`, a parameter that
defaults to False. Training never passes it; at inference the sampler turns it on for some
samples to diversify them, on purpose, in eval mode. The dropout runs only when a caller
asks for it, so it needs no `training=` flag.
"""

import random

import torch
import torch.nn.functional as F
from torch import nn


class Trunk(nn.Module):
    def __init__(self, width: int = 16, cycles: int = 3, mc_rate: float = 0.4) -> None:
        super().__init__()
        self.embed = nn.Linear(8, width)
        self.cycle = nn.Linear(width, width)
        self.head = nn.Linear(width, 1)
        self.cycles, self.mc_rate = cycles, mc_rate

    def forward(self, x: torch.Tensor, mc_dropout: bool = False) -> torch.Tensor:
        z0 = self.embed(x)
        z = torch.zeros_like(z0)
        for _ in range(self.cycles):
            if mc_dropout:
                z = z0 + F.dropout(self.cycle(torch.relu(z)), p=self.mc_rate)
            else:
                z = z0 + self.cycle(torch.relu(z))
        return self.head(z)


def main() -> None:
    torch.manual_seed(0)
    random.seed(0)
    model = Trunk()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    x = torch.randn(64, 8)
    y = x[:, :1] - x[:, 1:2]
    for _ in range(50):
        optimizer.zero_grad()
        F.mse_loss(model(x), y).backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        samples = [model(x, mc_dropout=random.random() < 0.5) for _ in range(4)]
    spread = torch.stack(samples).std(0).mean().item()
    print(f"mse {F.mse_loss(samples[0], y).item():.4f}, sample spread {spread:.4f}")


if __name__ == "__main__":
    main()
