"""A regression model whose noise augmentation draws from a fresh, unseeded numpy generator.

The script seeds torch, numpy and random at the top, but `GaussianNoise` creates
`np.random.default_rng()` on every call, seeded from the operating system's entropy:
no global seed reaches it, so two runs of the same seeded script train on different noise
and end with different models.
"""

import random

import numpy as np
import torch
from torch import nn

FEATURES = 8


class GaussianNoise(nn.Module):
    """Adds N(0, std) noise to the inputs while training."""

    def __init__(self, std: float) -> None:
        super().__init__()
        self.std = std

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return inputs
        rng = np.random.default_rng()
        noise = rng.normal(0.0, self.std, size=tuple(inputs.shape))
        return inputs + torch.from_numpy(noise).to(inputs.dtype)


def make_batch(size: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    inputs = torch.randn(size, FEATURES, generator=generator)
    targets = inputs.sum(dim=1, keepdim=True).sin()
    return inputs, targets


def seed_everything(seed: int) -> None:
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)


def make():
    seed_everything(0)
    model = nn.Sequential(GaussianNoise(0.1), nn.Linear(FEATURES, 32), nn.Tanh(), nn.Linear(32, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    return model, make_batch(), nn.MSELoss(), optimizer


def main() -> None:
    model, (inputs, targets), criterion, optimizer = make()
    for _step in range(50):
        optimizer.zero_grad()
        loss = criterion(model(inputs), targets)
        loss.backward()
        optimizer.step()
    print(f"final loss (differs from run to run): {loss.item():.8f}")


if __name__ == "__main__":
    main()
