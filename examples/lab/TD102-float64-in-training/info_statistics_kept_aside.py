"""float64 kept aside in a program that trains: a loss history and a reference batch.

Neither value is shown reaching the model, a loss or the optimizer (the history is written
from `.item()`, the reference leaves through a return nobody here calls): the file does
not prove that float64 enters training, so it is information, not a warning.
"""

import torch
from torch import nn


class Trainer:
    def __init__(self, steps: int = 50) -> None:
        self.model = nn.Linear(4, 1)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-2, eps=1e-8)
        self.history = torch.zeros(steps, dtype=torch.float64)  # expect: TD102

    def fit(self, x: torch.Tensor, y: torch.Tensor) -> float:
        for step in range(len(self.history)):
            loss = ((self.model(x) - y) ** 2).mean()
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            self.history[step] = loss.detach()
        return self.history[-1].item()


def make_reference(n: int) -> torch.Tensor:
    return torch.randn(n, 4, dtype=torch.float64)  # expect: TD102


def main() -> None:
    torch.manual_seed(0)
    x = torch.randn(64, 4)
    print(f"last loss {Trainer().fit(x, x.sum(dim=1, keepdim=True)):.4f}")


if __name__ == "__main__":
    main()
