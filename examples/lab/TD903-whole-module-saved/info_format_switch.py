"""A trainer whose `save()` offers both forms behind a switch, as a library would: the
weights (`save_state_dict=True`) or, by default, the whole pickled model for callers who
want a file they can use without the class's constructor arguments.

The whole-module branch is a choice the caller makes, written beside the state_dict one:
information, not a warning. The weights remain the form that survives refactors.
"""

import os
import tempfile

import torch
from torch import nn


class Trainer:
    def __init__(self) -> None:
        self.model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-2)

    def fit(self, steps: int = 20) -> float:
        loss = torch.zeros(())
        for _ in range(steps):
            x = torch.randn(32, 4)
            loss = nn.functional.mse_loss(self.model(x), x.sum(1, keepdim=True))
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
        return loss.item()

    def save(self, path: str, save_state_dict: bool = False) -> None:
        if save_state_dict:
            torch.save(self.model.state_dict(), path)
        else:
            torch.save(self.model, path)  # expect: TD903


if __name__ == "__main__":
    torch.manual_seed(0)
    trainer = Trainer()
    print(f"loss {trainer.fit():.4f}")
    folder = tempfile.mkdtemp()
    trainer.save(os.path.join(folder, "weights.pt"), save_state_dict=True)
    trainer.save(os.path.join(folder, "model.pt"))
    print(sorted(os.listdir(folder)))
