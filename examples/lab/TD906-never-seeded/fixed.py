"""A training script that seeds every random number generator it uses, first thing.

Python's `random`, NumPy and torch (CPU and every CUDA device) are seeded before the
model is built, so the initial weights, the shuffle order and the dropout masks are the
same in every run, and two runs end at the same loss.
"""

import random

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_loader(n: int = 1024) -> DataLoader:
    x = torch.linspace(-3, 3, n).unsqueeze(1)
    y = torch.sin(2 * x) + 0.1 * x**2
    return DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # seeds the CPU and every CUDA device


def main() -> None:
    seed_everything(0)
    model = nn.Sequential(nn.Linear(1, 64), nn.Tanh(), nn.Dropout(0.1), nn.Linear(64, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    criterion = nn.MSELoss()
    loader = make_loader()
    for _ in range(15):
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            optimizer.step()
    model.eval()
    x_all, y_all = loader.dataset.tensors
    with torch.no_grad():
        print(f"final loss {criterion(model(x_all), y_all).item():.5f}")


if __name__ == "__main__":
    main()
