"""A classifier whose optimizer.zero_grad() sits between backward() and step().

Refactoring moved `optimizer.zero_grad()` below `loss.backward()`: every step now sees
cleared gradients, and the loss stays where it started.
"""

import torch
from torch import nn


def make_data(n: int = 512, classes: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    centers = torch.randn(classes, 16) * 3
    y = torch.randint(0, classes, (n,))
    x = centers[y] + torch.randn(n, 16)
    return x, y


def main() -> None:
    torch.manual_seed(0)
    x, y = make_data()
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(5):
        for start in range(0, len(x), 64):
            xb, yb = x[start:start + 64], y[start:start + 64]
            loss = criterion(model(xb), yb)
            loss.backward()
            optimizer.zero_grad()  # expect: TD203
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
