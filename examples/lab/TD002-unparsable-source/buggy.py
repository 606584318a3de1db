"""A training script committed in the middle of a merge: the conflict markers are still in.

Python refuses the file (`SyntaxError` at the first marker), so the job dies at start-up,
and a linter that skipped it would report nothing for it at all.
"""

import torch
from torch import nn


def train(model: nn.Module, loader: list, optimizer: torch.optim.Optimizer) -> None:
<<<<<<< HEAD  # expect: TD002
    for x, y in loader:
=======
    for step, (x, y) in enumerate(loader):
>>>>>>> feature/logging
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()


def main() -> None:
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(64, 4)
    loader = [(x[i:i + 16], x[i:i + 16].sum(dim=1, keepdim=True)) for i in range(0, 64, 16)]
    for epoch in range(3):
        train(model, loader, optimizer)
    print(f"weights: {model.weight.data.tolist()}")


if __name__ == "__main__":
    main()
