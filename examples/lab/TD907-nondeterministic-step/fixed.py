"""A regression model whose noise augmentation draws from torch's seeded generator.

`torch.randn_like` follows `torch.manual_seed`, so two runs of the seeded script draw the
same noise and end with the same model, bit for bit.
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
        return inputs + self.std * torch.randn_like(inputs)


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
    print(f"final loss (the same in every run): {loss.item():.8f}")


if __name__ == "__main__":
    main()
