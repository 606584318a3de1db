"""Compiles the model once, before the loop, and reuses the compiled module.

`torch.compile` returns a module that shares its parameters with the original, so the
optimizer built on `model.parameters()` keeps working and the compiled module stays an
`nn.Module` (train/eval, state_dict) for the whole run.
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
    compiled = torch.compile(model, backend="eager")
    for epoch in range(3):
        compiled.train()
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = criterion(compiled(xb), yb)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}, model is a {type(compiled).__name__}")


if __name__ == "__main__":
    main()
