"""A training script that never seeds its random number generators.

The initial weights, the shuffle order and the dropout masks change from run to run, so
two runs of the same code end at different losses (run it twice) and a change that
"helped" by less than that spread cannot be told from noise.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_loader(n: int = 1024) -> DataLoader:
    x = torch.linspace(-3, 3, n).unsqueeze(1)
    y = torch.sin(2 * x) + 0.1 * x**2
    return DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)


def main() -> None:
    model = nn.Sequential(nn.Linear(1, 64), nn.Tanh(), nn.Dropout(0.1), nn.Linear(64, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    criterion = nn.MSELoss()
    loader = make_loader()
    for _ in range(15):  # expect: TD906
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            optimizer.step()
    model.eval()
    x_all, y_all = loader.dataset.tensors
    with torch.no_grad():
        print(f"final loss {criterion(model(x_all), y_all).item():.5f}")


if __name__ == "__main__":
    main()
