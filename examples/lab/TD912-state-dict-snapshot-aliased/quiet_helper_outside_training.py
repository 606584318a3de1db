"""A keeper of the best weights that is only consulted once training is over.

`BestKeeper.consider()` keeps `model.state_dict()` (a reference) when a score improves,
but it is only called from a loop that scores checkpoints already written to disk: no
optimizer step runs after a snapshot, so what it keeps is exactly what it scored.
"""

import os
import tempfile

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class BestKeeper:
    def __init__(self) -> None:
        self.best = float("inf")
        self.best_state: dict[str, torch.Tensor] = {}

    def consider(self, loss: float, model: nn.Module) -> None:
        if loss < self.best:
            self.best = loss
            self.best_state = model.state_dict()

    def restore(self, model: nn.Module) -> None:
        model.load_state_dict(self.best_state)


def main() -> None:
    torch.manual_seed(0)
    inputs = torch.randn(256, 6)
    targets = inputs.sum(dim=1, keepdim=True) + 0.1 * torch.randn(256, 1)
    loader = DataLoader(TensorDataset(inputs[:192], targets[:192]), batch_size=32, shuffle=True)
    model = nn.Linear(6, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    folder = tempfile.mkdtemp()
    for epoch in range(6):
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
        torch.save(model.state_dict(), os.path.join(folder, f"epoch{epoch}.pt"))

    keeper = BestKeeper()
    for epoch in range(6):
        candidate = nn.Linear(6, 1)
        candidate.load_state_dict(torch.load(os.path.join(folder, f"epoch{epoch}.pt"), weights_only=True))
        with torch.no_grad():
            keeper.consider(nn.functional.mse_loss(candidate(inputs[192:]), targets[192:]).item(), candidate)
    keeper.restore(model)
    print(f"best checkpoint loss {keeper.best:.4f}")


if __name__ == "__main__":
    main()
