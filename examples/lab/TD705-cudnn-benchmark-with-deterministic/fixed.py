"""Asks cuDNN for reproducible results and leaves its autotuner off.

With `cudnn.benchmark = False` cuDNN chooses convolution algorithms by fixed heuristics,
so the same seed picks the same deterministic algorithms in every run. (Speed-first runs
that do not need reproducibility do the opposite: benchmark on, deterministic off.)
"""

import random

import numpy as np
import torch
from torch import nn


def configure() -> None:
    """Seed everything and set cuDNN up, first thing in main()."""
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


def main() -> None:
    configure()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(16, 4),
    ).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
    images = torch.randn(256, 3, 16, 16)
    labels = torch.randint(0, 4, (256,))
    for epoch in range(3):
        for start in range(0, 256, 32):
            xb = images[start:start + 32].to(device)
            yb = labels[start:start + 32].to(device)
            optimizer.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
