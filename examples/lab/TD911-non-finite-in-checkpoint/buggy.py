"""Training diverges to NaN and the script saves the checkpoint anyway.

With unnormalised inputs (values in the hundreds) and lr=0.01, the first SGD step
overshoots, the loss overflows to inf by the third step and the weights turn NaN. The
script saves on a schedule without looking, so the "latest" checkpoint, the one every
resume and evaluation picks, holds NaN weights.
"""

import os
import tempfile

import torch
from torch import nn


def make_model() -> nn.Module:
    return nn.Sequential(nn.Linear(4, 16), nn.LeakyReLU(), nn.Linear(16, 1))


def save_checkpoint(path: str, steps: int = 20) -> None:
    torch.manual_seed(0)
    model = make_model()
    inputs = torch.rand(128, 4) * 500.0  # raw sensor readings, never normalised
    targets = inputs.sum(dim=1, keepdim=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    criterion = nn.MSELoss()
    for step in range(steps):
        optimizer.zero_grad()
        loss = criterion(model(inputs), targets)
        loss.backward()
        optimizer.step()
        if step % 10 == 9:
            torch.save(model.state_dict(), path)
    print(f"last loss {loss.item()}")


def main() -> None:
    save_checkpoint(os.path.join(tempfile.gettempdir(), "td911-latest.pt"))


if __name__ == "__main__":
    main()
