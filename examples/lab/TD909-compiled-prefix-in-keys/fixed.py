"""Trains through torch.compile and saves the original module's state_dict.

The compiled wrapper shares its parameters with the model it wraps, so saving the plain
model's `state_dict()` stores the trained weights under the keys the plain model expects.
"""

import os
import tempfile

import torch
from torch import nn


def make_model() -> nn.Module:
    return nn.Sequential(nn.Linear(6, 24), nn.Tanh(), nn.Linear(24, 1))


def train(model: nn.Module, steps: int = 20) -> None:
    inputs = torch.randn(128, 6)
    targets = torch.sin(inputs[:, :1])
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    criterion = nn.MSELoss()
    for _ in range(steps):
        optimizer.zero_grad()
        loss = criterion(model(inputs), targets)
        loss.backward()
        optimizer.step()


def save_checkpoint(path: str) -> None:
    torch.manual_seed(0)
    model = make_model()
    compiled = torch.compile(model, backend="eager")
    train(compiled)
    torch.save(model.state_dict(), path)


def main() -> None:
    path = os.path.join(tempfile.gettempdir(), "td909-compiled-fixed.pt")
    save_checkpoint(path)
    model = make_model()
    model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    print("loaded into the plain model with strict=True")


if __name__ == "__main__":
    main()
