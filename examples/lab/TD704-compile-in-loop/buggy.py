"""Compiles the model again at the start of every epoch.

The second `torch.compile` wraps the already compiled model: dynamo traces it once more,
and on torch 2.13 the result is a plain function, no longer an `nn.Module`, so
`model.train()`, `model.eval()` and `model.state_dict()` fail from then on. (The eager
backend keeps this lab fast on a CPU; the default inductor backend behaves the same.)
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_loader() -> DataLoader:
    x = torch.randn(512, 16)
    y = (x[:, 0] > 0).long()
    return DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)


def main() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    loader = make_loader()
    model.train()
    for epoch in range(3):
        model = torch.compile(model, backend="eager")  # expect: TD704
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}, model is a {type(model).__name__}")


if __name__ == "__main__":
    main()
