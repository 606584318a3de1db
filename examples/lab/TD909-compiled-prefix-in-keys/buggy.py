"""Trains through torch.compile and saves the compiled wrapper's state_dict.

`torch.compile(model)` returns an `OptimizedModule` that holds the model as `_orig_mod`, and
its `state_dict()` names every weight `_orig_mod.<name>`. Loading the file into the plain
model fails with "Unexpected key(s) in state_dict: "_orig_mod.0.weight", ...", and with
`strict=False` nothing at all is loaded. (backend="eager" keeps the lab fast on CPUs; the
default inductor backend saves the same keys.)
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
    model = torch.compile(make_model(), backend="eager")
    train(model)
    torch.save(model.state_dict(), path)


def main() -> None:
    path = os.path.join(tempfile.gettempdir(), "td909-compiled.pt")
    save_checkpoint(path)
    result = make_model().load_state_dict(
        torch.load(path, map_location="cpu", weights_only=True), strict=False)
    print(f"strict=False loaded nothing: {len(result.missing_keys)} keys missing")


if __name__ == "__main__":
    main()
